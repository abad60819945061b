"""One submission's crash never costs another: kernels that die, are killed or time out free their slot and
leave nothing behind, a shortage of slots makes grading wait, a new student's chapters graded at once do not race
to create the student, and no IPC object of one kernel outlives it or reaches the next."""
import contextlib
import ctypes
import ctypes.util
import fcntl
import grp
import os
import pwd
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder import synthetic
from autograder.judging import forkserver, sandbox

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="slots (users, tmpfs folders) exist only as root")]

GOOD_ADD = "def add(a, b):\n    return np.asarray(a) + np.asarray(b)"
# Names of this run's own: other grading runs on the machine (another test session) write and start the same.
MARK = f"{os.getpid()}{os.urandom(4).hex()}"
BALLAST, SLEEP = f"ballast-{MARK}", f"sleep 300.{int(MARK, 16) % 10**9:09d}"
DIES_AFTER_WRITING = (f"import os\nwith open({BALLAST!r}, 'wb') as f:\n    f.write(b'x' * 50 * 2**20)\n"
                      f"os.system('{SLEEP} &')\nos._exit(0)")


def kernel_processes_running(command: str) -> list[str]:
    """Processes of the slot users (what kernels start) running `command`: the machine's others are not ours."""
    slot_users = {p.pw_uid for p in pwd.getpwall() if p.pw_name.startswith(sandbox.USER_PREFIX)}
    found = []
    for entry in os.scandir("/proc"):
        try:
            if (entry.name.isdigit() and entry.stat().st_uid in slot_users
                    and Path(entry.path, "cmdline").read_bytes().split(b"\0")[:2] == command.encode().split()):
                found.append(entry.name)
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def crashed_class(tmp_path_factory, short_limits, make_toy_course):
    """Six notebooks that write 50 MB, start a background process and kill their kernel, then two honest
    ones, graded by two workers with only two slots on the machine."""
    tmp_path = tmp_path_factory.mktemp("slots")
    course = make_toy_course(tmp_path / "grading")
    students = [f"crasher{n}" for n in range(6)] + ["honest0", "honest1"]
    for student in students:
        solution = DIES_AFTER_WRITING if student.startswith("crasher") else GOOD_ADD
        notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), {"add": solution})
        synthetic.write(notebook, tmp_path / f"{student}.ipynb")
        course.submit(student, "90_toy", tmp_path / f"{student}.ipynb")
    mounted = tmp_path / "kernel-folders-mounted"
    mount_tmpfs = sandbox._mount_tmpfs

    def mount_and_note(folder, options):  # this class's kernel folders (another run's may be left over meanwhile)
        mount_tmpfs(folder, options)
        with open(mounted, "a") as notes:
            notes.write(f"{folder}\n")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sandbox, "MAX_SLOTS", 2)  # the workers fork from this process
        patch.setattr(sandbox, "_mount_tmpfs", mount_and_note)
        report = course.grade(workers=2)
    report.kernel_folders = mounted.read_text().split()
    return course, report


def test_honest_submissions_are_unaffected_by_crashed_kernels(crashed_class):
    course, report = crashed_class
    for student in ("honest0", "honest1"):
        outcome = report.outcome(student, "90_toy")
        assert (outcome.score, outcome.max_score, outcome.needs_review) == (5, 5, []), outcome


def test_a_kernel_that_exits_is_held_for_review_with_the_reason(crashed_class):
    course, report = crashed_class
    for n in range(6):
        outcome = report.outcome(f"crasher{n}", "90_toy")
        assert outcome.score == 0 and outcome.status == "needs review", outcome
        assert any("kernel exited" in reason for reason in outcome.needs_review), outcome


def test_nothing_a_kernel_wrote_or_started_survives_it(crashed_class):
    # Slots are shared with whatever else grades on this machine: look for what these kernels made.
    # (os.walk, not rglob: other runs' folders come and go while it walks)
    _, report = crashed_class
    assert len(report.kernel_folders) >= 8  # a folder per kernel: each notebook had one (a crashed one, two)
    assert [folder for folder, _, files in os.walk(sandbox.STATE_DIR) if BALLAST in files] == []
    assert [folder for folder in kernel_folders_mounted()
            if folder in report.kernel_folders and _left_over(folder)] == []
    assert kernel_processes_running(SLEEP) == []


def kernel_folders_mounted() -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.startswith("modulecraft-kernel")]


def _left_over(folder: str) -> bool:
    """Whether the kernel folder mounted at `folder` outlived its grader: its slot is free and, once the slot is
    ours, still mounted (a live grader unmounts its folder, then frees the slot: maybe after we read mounts)."""
    slot = Path(folder).name.split("-")[0].removeprefix("slot")
    with open(sandbox.STATE_DIR / f"slot-{slot}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return folder in kernel_folders_mounted()  # while we hold the slot, nobody mounts in it


def test_a_new_students_chapters_graded_at_once_are_clean(crashed_class, tmp_path, capfd):
    course, _ = crashed_class
    for chapter in ("90_toy", "91_other"):
        synthetic.write(synthetic.solved(course, chapter), tmp_path / f"{chapter}.ipynb")
        course.submit("newcomer", chapter, tmp_path / f"{chapter}.ipynb")
    report = course.grade("newcomer", workers=2)
    assert [o.status for o in report.outcomes] == ["graded", "graded"]
    assert "IntegrityError" not in capfd.readouterr().err


def test_a_slot_shortage_leaves_the_submission_ungraded_never_scored(crashed_class, tmp_path):
    course, _ = crashed_class
    synthetic.write(synthetic.solved(course, "90_toy"), tmp_path / "late.ipynb")
    course.submit("late", "90_toy", tmp_path / "late.ipynb")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sandbox, "MAX_SLOTS", 0)  # every slot taken...
        patch.setattr(sandbox, "SLOT_WAIT_MARGIN", -10**6)  # ...and no patience left
        report = course.grade("late", workers=1)
    assert [(student, chapter) for student, chapter, _ in report.failed] == [("late", "90_toy")]
    assert "grading slots stayed busy" in report.failed[0][2]
    assert report.outcomes == []
    with pytest.raises(LookupError):
        course.scores("late", "90_toy")


# A SysV shared-memory segment and a POSIX message queue anyone may open, and a key in the kernel's user keyring and
# in its session keyring, left behind by one submission and looked for by the next. (ctypes: the kernel sees the C
# library as any program does.)
SEGMENT_KEY = 0x4D430000 | int(MARK[-4:], 16)
QUEUE, KEY = f"/modulecraft-test-{MARK}", f"modulecraft-test-{MARK}"
SYS_ADD_KEY, SYS_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_SEARCH = 1, 7, 10
SESSION_KEYRING, USER_KEYRING = -3, -4
OPENS = """
import ctypes, ctypes.util, os
libc, librt = ctypes.CDLL(None, use_errno=True), ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
print("IPC", libc.shmget({key}, {size}, {flags}) >= 0, librt.mq_open({queue!r}.encode(), {mode}, 0o666, None) >= 0)
print("KEYS", *(({keys})(ring) >= 0 for ring in ({user}, {session})))
def add(a, b):
    return np.asarray(a) + np.asarray(b)
"""
IPC_CREAT = 0o1000
KEYS = dict(key=SEGMENT_KEY, queue=QUEUE, user=USER_KEYRING, session=SESSION_KEYRING)
LEAVES = OPENS.format(size=2**20, flags=IPC_CREAT | 0o666, mode=os.O_CREAT | os.O_RDWR, **KEYS,
                      keys=f"lambda ring: libc.syscall({SYS_ADD_KEY}, b'user', {KEY.encode()!r}, b'left', 4, ring)")
FINDS = OPENS.format(size=0, flags=0, mode=os.O_RDONLY, **KEYS,
                     keys=f"lambda ring: libc.syscall({SYS_KEYCTL}, {KEYCTL_SEARCH}, ring, b'user', {KEY.encode()!r}, 0)")
_libc, _librt = ctypes.CDLL(None, use_errno=True), ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)


def ipc_left_on_the_machine() -> list[str]:
    """Which of the two IPC objects exist on the machine (its IPC namespace), each removed once seen."""
    left = []
    segment = _libc.shmget(SEGMENT_KEY, 0, 0)
    if segment >= 0:
        left.append("segment")
        _libc.shmctl(segment, 0, None)  # IPC_RMID
    if _librt.mq_unlink(QUEUE.encode()) == 0:
        left.append("queue")
    return left


@contextlib.contextmanager
def _slot_of_our_own():
    """The user of a slot past the grading runs' (MAX_SLOTS and up), held with its slot's lock meanwhile: two test
    runs on one machine (two suites side by side) each get their own."""
    slot = sandbox.MAX_SLOTS
    while True:
        with open(sandbox._state_dir() / f"slot-{slot}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                slot += 1
                continue
            yield sandbox.slot_user(slot)
            return


@pytest.fixture
def a_slot_user_of_our_own():
    with _slot_of_our_own() as user:
        yield user


def test_a_slot_user_is_removed_only_while_its_slot_is_free():
    """What the suite does with the slot users it made (tests/conftest.py): another grading run's are kept."""
    with _slot_of_our_own() as user:
        assert sandbox.remove_slot_users([user.pw_name]) == [user.pw_name]  # its slot is held: kept
        assert user.pw_name in sandbox.slot_users()
    assert sandbox.remove_slot_users([user.pw_name]) == []
    assert user.pw_name not in sandbox.slot_users()
    with pytest.raises(KeyError):
        grp.getgrnam(user.pw_name)  # its group too


def test_a_slot_user_made_beside_a_left_group_is_removed_with_that_group():
    """A group of the user's name already there (an earlier user's): useradd --user-group refuses it, and userdel
    keeps a group useradd did not make."""
    with _slot_of_our_own() as user:
        subprocess.run(["userdel", user.pw_name], check=True)
        subprocess.run(["groupadd", "--system", user.pw_name], check=True)  # what an earlier user left
        user = sandbox.slot_user(int(user.pw_name.removeprefix(sandbox.USER_PREFIX)))
    assert sandbox.remove_slot_users([user.pw_name]) == []
    with pytest.raises(KeyError):
        grp.getgrnam(user.pw_name)


def test_no_ipc_object_or_key_of_a_kernel_outlives_it(toy_course, tmp_path, monkeypatch, request):
    if not sandbox.namespaces_available():
        pytest.skip("kernels get an IPC namespace of their own only where root may make namespaces")
    # The grader's own session keyring, as a login would give it (the workers, their servers and kernels inherit it)
    assert _libc.syscall(SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, f"{KEY}-grader".encode()) >= 0
    # Both submissions graded by the same slot user, one no other grading run on the machine takes (they take slots
    # 0 .. MAX_SLOTS - 1), nor another test run (`a_slot_user_of_our_own`): another run's kernel on it in between
    # would empty the keyrings the second one looks in.
    private = request.getfixturevalue("a_slot_user_of_our_own")
    monkeypatch.setattr(sandbox, "slot_user", lambda slot: private)
    monkeypatch.setattr(sandbox, "MAX_SLOTS", 1)

    def seen(suffix):
        for student, solution in (("a-leaves", LEAVES), ("b-finds", FINDS)):  # graded in this order
            notebook = synthetic.with_cells(synthetic.solved(toy_course, "90_toy"), {"add": solution})
            synthetic.write(notebook, tmp_path / f"{student}.ipynb")
            toy_course.submit(student + suffix, "90_toy", tmp_path / f"{student}.ipynb")
        toy_course.grade([f"a-leaves{suffix}", f"b-finds{suffix}"], workers=1)
        printed = {}
        for student in ("a-leaves", "b-finds"):
            graded = nbformat.read(toy_course.root / "autograded" / (student + suffix) / "90_toy" / "90_toy.ipynb", 4)
            text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
            printed[student] = text.split("IPC ")[1].split()[:2] + text.split("KEYS ")[1].split()[:2]
        return printed, ipc_left_on_the_machine()

    try:
        assert seen("") == ({"a-leaves": ["True"] * 4, "b-finds": ["False"] * 4}, [])
        # Without an IPC namespace and keyrings per kernel, the next submission finds all four, and the segment and
        # the queue stay on the machine.
        real = forkserver.Server.kernel_command
        monkeypatch.setattr(forkserver.Server, "kernel_command",
                            lambda self, spec, cmd: real(self, dict(spec, isolated=False), cmd))
        assert seen("-again") == ({"a-leaves": ["True"] * 4, "b-finds": ["True"] * 4}, ["segment", "queue"])
    finally:
        ipc_left_on_the_machine()
        _libc.syscall(SYS_KEYCTL, KEYCTL_CLEAR, SESSION_KEYRING)
