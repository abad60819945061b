"""Each defence of the grader, shown to matter: with it a hostile notebook gains nothing; without it (taken out
for the test) the same notebook gains what it was after.

- the seed drawn per submission: observations forged from a run of the probes at home do not match it;
- a test cell's outputs read as they were when it finished: a later cell that rewrites them gains nothing;
- the kernel's environment built from an allow-list: nothing of the instructor's shell reaches it;
- rich outputs shown as text in feedback: a notebook's HTML and SVG never reach the feedback page as markup;
- one control group per kernel: the kernel's children together stay under the kernel's memory limit;
- the probes' source hidden from kernels: a notebook cannot print it into its outputs;
- the kernel's allow-list of folders: no other copy of the reference on the machine is in its sight;
- the kernel's allow-list of libraries: torch (as a module and as source text), scikit-learn's MLP and the base
  interpreter's site-packages are out of its sight, numpy and scikit-learn's data sets are not.
The answer key's removal is shown on a course chapter in test_answer_key.py.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from nbgrader.preprocessors import Execute

from autograder import config, probes, synthetic
from autograder.judging import answer_key, cgroups, feedback, forkserver, libraries, sandbox, verdicts

pytestmark = pytest.mark.slow

# A blank notebook that answers each test cell with the observations of the probes run on the answers at home
# (the learning seed, or any seed it picks): 15 lines, and no implementation.
FORGES = """
import autograder.probes as probes
from IPython.display import display
def forged(grade_id, seed=None):
    run = probes.run_probe(grade_id, probes.Reference(probes.yours_of("90_toy")), probes.LEARNING_SEED)
    display({probes.MIME: {"grade_id": grade_id, "observed": [c.observed for c in run.checks]}}, raw=True)
probes.run_tests = forged
def add(a, b):
    raise NotImplementedError
def scale(x, factor):
    raise NotImplementedError
"""


def _grade(course, tmp_path, student: str, cells: dict[str, str]):
    notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), cells)
    synthetic.write(notebook, tmp_path / f"{student}.ipynb")
    course.submit(student, "90_toy", tmp_path / f"{student}.ipynb")
    return course.grade(students=[student]).outcome(student, "90_toy")


def test_observations_forged_on_another_seed_earn_nothing(toy_course, tmp_path, monkeypatch):
    assert _grade(toy_course, tmp_path, "forger", {"add": FORGES}).score == 0
    # Without a seed of its own per submission (the learning seed for everyone), the forgery is full marks.
    monkeypatch.setattr(verdicts.secrets, "randbits", lambda bits: probes.LEARNING_SEED)
    assert _grade(toy_course, tmp_path, "forger-again", {"add": FORGES}).score == 5


# The learner's `add`, called by test_add's probe, notes the grader's seed, shows a placeholder and hides what the
# probe shows next; the cell after it fills the placeholder in with the observations an oracle (here numpy, the toy
# chapter's answer) gives on that seed.
REWRITES_ITS_REPORT = """
import sys
import IPython.display
import autograder.probes as probes
shown, seen = IPython.display.display, {}
def add(a, b):
    if not seen:
        frame = sys._getframe()
        while frame.f_code.co_name != "run_probe":
            frame = frame.f_back
        seen["seed"] = frame.f_locals["seed"]
        shown({"text/plain": "..."}, raw=True, display_id="placeholder")
        IPython.display.display = lambda *args, **kwargs: None
        get_ipython().events.register("post_run_cell", lambda result: setattr(IPython.display, "display", shown))
    return 0
"""
FILLS_IT_IN = """
from IPython.display import update_display
run = probes.run_probe("test_add", probes.Reference(probes.yours_of("90_toy")), seen["seed"])
update_display({probes.MIME: {"grade_id": "test_add", "observed": [c.observed for c in run.checks]}}, raw=True,
               display_id="placeholder")
def scale(x, factor):
    return np.asarray(x) * factor
"""


def test_a_report_beside_an_error_does_not_count():
    """A test cell whose probe did not return (an error escaped it) fails, whatever report it shows."""
    runs = verdicts.expected("90_toy", 7)
    report = {"output_type": "display_data", "data": {probes.MIME: {
        "grade_id": "test_add", "observed": [check.observed for check in runs["test_add"].checks]}}}
    error = {"output_type": "error", "ename": "SystemExit", "evalue": "", "traceback": []}
    assert verdicts.judge("test_add", [report], runs) is None
    assert "did not run to the end (SystemExit" in verdicts.judge("test_add", [report, error], runs)


# Prints whether a variable of the grader's shell reached the kernel: in its environment, or in its memory (a kernel
# is a fork of its forkserver, whose environment stays at the top of the stack).
PRINTS_ITS_ENVIRONMENT = """
import ctypes, os
stack = next(line.split()[0] for line in open("/proc/self/maps") if line.rstrip().endswith("[stack]"))
start, end = (int(address, 16) for address in stack.split("-"))
print("TOKEN", {token!r} in str(dict(os.environ)), {token!r}.encode() in ctypes.string_at(start, end - start))
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""
TOKEN = f"lms-{os.urandom(8).hex()}"


def _keeps_the_live_outputs(self, **kwargs):
    """`ConfinedExecute.on_cell_executed` without the defence: the grader reads a cell's outputs as the notebook
    left them."""
    Execute.on_cell_executed(self, **kwargs)
    sandbox.finished[kwargs["cell_index"]] = kwargs["cell"].outputs


@pytest.fixture(scope="module")
def routes_out(tmp_path_factory, short_limits, make_toy_course):
    """Two notebooks, each after one way out of its test cells or its kernel (its report rewritten by a later cell;
    the instructor's token), graded in one run with every defence, then in one run without the two that close them:
    (course, {student: outcome})."""
    tmp_path = tmp_path_factory.mktemp("routes")
    course = make_toy_course(tmp_path / "grading")
    notebooks = {"rewrites": {"add": REWRITES_ITS_REPORT, "scale": FILLS_IT_IN},
                 "environment": {"add": PRINTS_ITS_ENVIRONMENT.format(token=TOKEN)}}

    def graded(suffix):
        for student, cells in notebooks.items():
            notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), cells)
            synthetic.write(notebook, tmp_path / f"{student}.ipynb")
            course.submit(student + suffix, "90_toy", tmp_path / f"{student}.ipynb")
        report = course.grade(students=[student + suffix for student in notebooks])
        return {outcome.student: outcome for outcome in report.outcomes}

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INSTRUCTOR_TOKEN", TOKEN)  # the grading workers fork from this process
        outcomes = graded("")
        patch.setattr(sandbox.ConfinedExecute, "on_cell_executed", _keeps_the_live_outputs)
        patch.setattr(forkserver, "inherited", dict)  # the grader's whole environment, to servers and kernels
        outcomes.update(graded("-again"))
    return course, outcomes


def test_a_test_cells_outputs_count_as_they_were_when_it_finished(routes_out):
    _, outcomes = routes_out
    assert outcomes["rewrites"].score == 3  # test_scale's 3 points, honestly earned
    # Without the outputs kept as they were: the grader reads the test cell's outputs as the later cell left them.
    assert outcomes["rewrites-again"].score == 5


def test_nothing_of_the_instructors_shell_reaches_a_kernel(routes_out):
    course, outcomes = routes_out

    def seen(student):
        assert outcomes[student].score == 5
        graded = nbformat.read(course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
        text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
        return text.split("TOKEN ")[1].split()[:2]

    assert seen("environment") == ["False", "False"]
    # Without the allow-list (the grader's whole environment passed on, to the forkserver and to each kernel):
    assert seen("environment-again") == ["True", "True"]


# (its markup is put together as it runs: the page shows the cell's source, escaped, and must not show it raw)
SHOWS_MARKUP = """
from IPython.display import HTML, SVG, display
tag, handler = "scr" + "ipt", "on" + "error"
display(HTML(f'<{tag}>window.pwned = 1</{tag}><img src=x {handler}="alert(1)">'))
display(SVG(f'<svg xmlns="http://www.w3.org/2000/svg"><{tag}>alert(2)</{tag}></svg>'))
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""


def test_feedback_shows_a_notebooks_markup_as_text(toy_course, tmp_path, monkeypatch):
    def page(student):
        _grade(toy_course, tmp_path, student, {"add": SHOWS_MARKUP})
        toy_course.generate_feedback(students=[student])
        return toy_course.feedback_path(student, "90_toy").read_text()

    shown = page("marks")
    assert "<script>window.pwned" not in shown and 'onerror="alert(1)"' not in shown and "alert(2)</script>" not in shown
    assert "HTML object" in shown or "IPython.core.display" in shown or "output, not shown" in shown
    monkeypatch.setattr(feedback.OutputsAsText, "preprocess_cell", lambda self, cell, resources, index: (cell, resources))
    assert "<script>window.pwned" in page("marks-again")


# Three children, each under the per-process address-space limit, together over the kernel's memory limit.
HOGS = """
import subprocess, sys
child = "import time; hog = bytearray({size}); hog[::4096] = b'x' * len(hog[::4096]); print('held', flush=True); time.sleep(3)"
children = [subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE) for _ in range(3)]
held = sum(process.communicate()[0].count(b"held") and process.returncode == 0 for process in children)
print(f"children that held their memory to the end: {{held}}")
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="control groups are made by a grader running as root")
def test_a_kernels_children_share_its_memory_limit(toy_course, tmp_path, monkeypatch):
    trial = cgroups.Group.for_slot(99, 2**30, 64)
    if trial is None:
        pytest.skip("this machine gives root no memory and pids control groups")
    trial.close()
    monkeypatch.setattr(sandbox, "MEMORY_LIMIT_MB", 600)
    cells = {"add": HOGS.format(size=250 * 2**20)}

    def held(student):
        _grade(toy_course, tmp_path, student, cells)
        graded = nbformat.read(toy_course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
        text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
        return int(text.split("children that held their memory to the end: ")[1].split()[0])

    assert held("hogs") < 3
    monkeypatch.setattr(cgroups.Group, "for_slot", classmethod(lambda cls, *args: None))
    assert held("hogs-again") == 3


# Print the hidden probes' text, encoded, into the notebook's own output (which the feedback shows).
PRINTS_PROBES = """
import base64, inspect
import autograder.probes.c90_toy as probe_module
try:
    text = inspect.getsource(probe_module)
except (OSError, TypeError) as error:
    text = f"no source: {type(error).__name__}"
print("PROBES", base64.b64encode(text.encode()).decode())
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not sandbox.namespaces_available(),
                    reason="kernels see only their own view of the files when grading runs as root with namespaces")
def test_a_notebook_cannot_copy_the_probes_text_into_its_outputs(toy_course, tmp_path, monkeypatch):
    import base64

    def printed(student):
        _grade(toy_course, tmp_path, student, {"add": PRINTS_PROBES})
        graded = nbformat.read(toy_course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
        text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
        return base64.b64decode(text.split("PROBES ")[1].split()[0]).decode()

    assert printed("copies") == "no source: OSError"
    # Without the probes' folder among the kernel's hidden folders, the text is there to take.
    real = sandbox.repository_secrets
    monkeypatch.setattr(sandbox, "repository_secrets",
                        lambda: [path for path in real() if path.name != "probes"])
    assert "def add(yours, draw, check)" in printed("copies-again")


# Read the reference's `Module` from copies elsewhere on the machine, as a notebook would to call the answer key.
READS_COPIES = """
import pathlib
for copy in {copies!r}:
    try:
        text = pathlib.Path(copy, "nn", "modules", "module.py").read_text()
        print("COPY", copy, "read" if "def named_modules" in text else "other text")
    except OSError as error:
        print("COPY", copy, type(error).__name__)
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""


@pytest.fixture
def copies_of_the_reference():
    """World-readable copies of the reference where other installs keep theirs: a JupyterHub's under /opt, a
    clone under /srv and one next to the repository (another worktree), and another chapter's stripped copy
    (which holds this chapter's answers) in the grader's cache."""
    places = [Path(tempfile.mkdtemp(prefix="modulecraft-copy-", dir=base))
              for base in ("/opt", "/srv", config.REPO_ROOT.parent) if Path(base).is_dir()]
    for place in places:
        place.chmod(0o755)
        shutil.copytree(answer_key.REFERENCE, place / "modulecraft")
    yield [str(place / "modulecraft") for place in places] + [str(answer_key.build("05_traversal") / "modulecraft")]
    for place in places:
        shutil.rmtree(place)


@pytest.mark.skipif(os.geteuid() != 0 or not sandbox.namespaces_available(),
                    reason="kernels see only their own view of the files when grading runs as root with namespaces")
def test_a_kernel_sees_no_other_copy_of_the_reference(toy_course, tmp_path, monkeypatch, copies_of_the_reference):
    def outcomes(student):
        assert _grade(toy_course, tmp_path, student, {"add": READS_COPIES.format(copies=copies_of_the_reference)}
                      ).score == 5
        graded = nbformat.read(toy_course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
        text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
        return dict(line.split()[1:] for line in text.splitlines() if line.startswith("COPY "))

    seen = outcomes("reads-copies")
    assert seen.keys() == set(copies_of_the_reference)
    assert set(seen.values()) <= {"FileNotFoundError", "PermissionError"}, seen
    # Without the allow-list (every top-level folder seen whole, as the system's are), each copy is there to read.
    monkeypatch.setattr(sandbox, "SYSTEM", frozenset(entry.name for entry in Path("/").iterdir()))
    assert outcomes("reads-copies-again") == dict.fromkeys(copies_of_the_reference, "read")


# What a learner who read the repository reaches for first: torch (installed by `make test` into the venv that
# grades), its module.py read as text, scikit-learn's MLP optimizers, the base interpreter's site-packages. Found,
# not imported: importing torch takes seconds, over a toy cell's time limit on a loaded machine (test_oracles.py
# imports and uses it).
REACHES_ORACLES = """
import importlib.util, pathlib, site
def tried(what, attempt):
    try:
        attempt()
        print("ORACLE", what, "reached")
    except Exception as error:
        print("ORACLE", what, type(error).__name__)
def found(module):
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(module)
site_packages = pathlib.Path(site.getsitepackages()[0])
tried("import-torch", lambda: found("torch"))
tried("torch-source", lambda: (site_packages / "torch" / "nn" / "modules" / "module.py").read_text())
tried("torchgen-formulas", lambda: (site_packages / "torchgen" / "packaged" / "autograd" / "derivatives.yaml").read_text())
tried("sklearn-adam", lambda: (site_packages / "sklearn" / "neural_network" / "_stochastic_optimizers.py").read_text())
tried("base-site-packages", lambda: list(pathlib.Path({base!r}).iterdir()))
tried("numpy", lambda: found("numpy"))
tried("sklearn-digits", lambda: (site_packages / "sklearn" / "datasets" / "_base.py").read_text())
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""
ORACLES = ("import-torch", "torch-source", "torchgen-formulas", "sklearn-adam", "base-site-packages")


@pytest.mark.skipif(os.geteuid() != 0 or not sandbox.namespaces_available(),
                    reason="kernels see only their own view of the files when grading runs as root with namespaces")
@pytest.mark.skipif(not libraries.base_site_packages() or importlib.util.find_spec("torch") is None,
                    reason="needs torch in the venv (the test extra) and a venv over a base interpreter")
def test_a_kernel_sees_no_library_that_holds_the_mechanisms(toy_course, tmp_path, monkeypatch):
    cell = REACHES_ORACLES.format(base=str(libraries.base_site_packages()[0]))

    def outcomes(student):
        assert _grade(toy_course, tmp_path, student, {"add": cell}).score == 5
        graded = nbformat.read(toy_course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
        text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
        return dict(line.split()[1:] for line in text.splitlines() if line.startswith("ORACLE "))

    seen = outcomes("reaches-oracles")
    assert {what: seen[what] for what in ("numpy", "sklearn-digits")} == dict.fromkeys(("numpy", "sklearn-digits"),
                                                                                     "reached")
    assert {what: seen[what] for what in ORACLES} == {
        "import-torch": "ModuleNotFoundError", "torch-source": "FileNotFoundError",
        "torchgen-formulas": "FileNotFoundError", "sklearn-adam": "FileNotFoundError",
        "base-site-packages": "PermissionError"}, seen
    # Without the forkserver's view of the libraries (the venv's site-packages whole), every one is there to take.
    monkeypatch.setattr(libraries, "mounts", lambda: [])
    assert outcomes("reaches-oracles-again") == dict.fromkeys([*ORACLES, "numpy", "sklearn-digits"], "reached")
