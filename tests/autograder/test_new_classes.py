"""How the guard finds the classes a notebook made (always-equal ones, an FFI's types): among the objects the
garbage collector tracks, which `install()` leaves holding only what is made after it (it freezes the rest), and
among the direct subclasses of `object` and `type` (a C extension's own types are never tracked). A notebook
that freezes its objects too (`gc.freeze()`) takes the guard's marker class along: the guard then walks every
class alive. Each part is taken out in a kernel of its own (before `install()`), where the class goes unseen."""
import pytest

from autograder import guard
from test_ffi_free import INSTALL, VERIFY, run_kernel

ALWAYS_EQUAL = "class Anything:\n    def __eq__(self, other):\n        return True\n"
ONLY_TRACKED_OBJECTS = ("import autograder.guard as g\n"
                        "g._Checks.classes_now = lambda self, tracked: g._classes_among(tracked)\n")
FOUND = f"{guard.MARK} nonce tampered: class 'Anything' compares equal to anything"


@pytest.mark.parametrize("made", ["made", "frozen"])
def test_a_class_made_after_install_is_found_even_if_frozen(tmp_path, made):
    cells = [INSTALL, ALWAYS_EQUAL + ("import gc\ngc.freeze()" if made == "frozen" else ""), VERIFY]
    _, _, verify = run_kernel(tmp_path, cells)
    assert verify[1][0].startswith(FOUND), verify


def test_without_the_marker_a_frozen_class_is_unseen(tmp_path):
    _, _, verify = run_kernel(tmp_path, [ONLY_TRACKED_OBJECTS + INSTALL, ALWAYS_EQUAL + "import gc\ngc.freeze()",
                                         VERIFY])
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify
    _, _, verify = run_kernel(tmp_path, [ONLY_TRACKED_OBJECTS + INSTALL, ALWAYS_EQUAL, VERIFY])
    assert verify[1][0].startswith(FOUND), verify  # (not frozen: found among the tracked objects)


def test_classes_made_before_install_are_not_new(tmp_path):
    """install() froze them with everything else: not searched again, not reported (the course's own cells)."""
    _, _, verify = run_kernel(tmp_path, [ALWAYS_EQUAL, INSTALL, VERIFY])
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify


SNEAKY = """class MetaMeta(type):
    def __hash__(cls):
        raise RuntimeError("hashed by the guard")
    def __eq__(cls, other):
        raise RuntimeError("compared by the guard")
    def __subclasscheck__(cls, other):
        raise RuntimeError("asked by the guard")
class Meta(type, metaclass=MetaMeta):
    def __hash__(cls):
        raise RuntimeError("hashed by the guard")
    def __eq__(cls, other):
        raise RuntimeError("compared by the guard")
class Sneaky(metaclass=Meta):
    @property
    def __class__(self):
        raise RuntimeError("asked by the guard")
sneaky = Sneaky()"""


def test_the_search_runs_no_code_of_the_notebook(tmp_path):
    """Only types are read and type's own subclass check called: `isinstance` would ask `sneaky` for its
    `__class__`, a set of classes or of their types would hash them with their metaclass's `__hash__` (code run
    by the guard: its key is dropped)."""
    _, _, verify = run_kernel(tmp_path, [INSTALL, SNEAKY, VERIFY])
    assert verify[1][0].startswith(f"{guard.MARK} nonce ok "), verify
