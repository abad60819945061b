"""Self-check for learners: grade a copy of your own notebook against the hidden tests, no server needed.

In a notebook, the chapter's last cell runs `check_my_work()`; in a terminal, `python -m autograder check
<notebook.ipynb>`. Both grade a copy (the learner's notebook is never modified) in a private grading folder
cached under `~/.cache/modulecraft/selfcheck`, built from the course's source chapters, and print the score
of every graded test cell with its feedback.

The self-check grades through the same pipeline as the class: the kernel's modulecraft without the chapter's
answer key, the probes' observations judged outside the kernel on a fresh seed.

A learner presses it often, so `check_my_work` has the grading done by a check server of the learner's own
(`serve`), started by the first check and reused by the next ones: it has imported the grader and keeps its
forkservers (each has imported what kernels need) warm. The learner's kernel asks it to prepare the notebook's
chapter as it starts (`load_ipython_extension`, loaded by the learner's JupyterLab): the chapter's release and its
forkserver are ready long before the first check. It ends with the learner's Jupyter server, after
SERVER_IDLE seconds without a check, or when the grader's code changed. It listens on an abstract Unix socket
named after this user, interpreter and course, and answers only its own user. The command line grades in its own
process, as before (it leaves nothing running). Without root there is no slot user, namespace (network, private folders) or tmpfs quota:
only the resource limits (memory, file size, open files, CPU time) confine the kernel.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path

from . import config as course_config
from .filelock import exclusive

LEARNER = "learner"
SERVER_IDLE = int(os.environ.get("MODULECRAFT_SELFCHECK_IDLE", 600))  # seconds without a check before it ends
SERVER_START = 120  # seconds a client waits for a new server to listen (it imports the grader first)


def check_my_work(chapter: str | None = None) -> None:
    """Grade the notebook this kernel belongs to (as last saved) and print the score per exercise."""
    if os.environ.get(course_config.GRADING_ENV_VAR):
        print("check_my_work: skipped while grading")
        return
    notebook = find_my_notebook(chapter)
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    line = (display({"text/plain": "Checking your notebook ..."}, raw=True, display_id=True)
            if InteractiveShell.initialized() else None)  # a progress line, in a kernel

    def progress(text: str) -> None:
        if line is not None:
            line.update({"text/plain": text}, raw=True)
    # In the check server: the grader runs its own event loop and kernel, which cannot nest in this one.
    code, report = ask_server(notebook, chapter, progress)
    progress("")
    print(report, end="", file=sys.stdout if code in (0, 1) else sys.stderr)


def load_ipython_extension(ipython) -> None:
    """In a learner's kernel as it starts (JupyterLab's kernels load this extension, see
    `workspace.jupyter_environment`): the check server prepares this notebook's chapter in the background, so
    that the learner's first check waits no longer than the next ones."""
    if os.environ.get(course_config.GRADING_ENV_VAR):
        return
    try:
        notebook = find_my_notebook()
    except FileNotFoundError:  # not a chapter's notebook
        return
    threading.Thread(target=ask_server, args=(notebook, None), kwargs={"prepare": True}, daemon=True).start()


def ask_server(notebook: Path, chapter: str | None, progress=None, prepare: bool = False) -> tuple[int, str]:
    """Have this learner's check server grade `notebook` (or, with `prepare`, only get its chapter ready to check),
    starting one when none runs (or it was stale), calling `progress(text)` as it works: (0 when every test cell
    passes, 1 when some fail, 2 when the check failed; the report)."""
    request = json.dumps({"notebook": str(Path(notebook).resolve()), "chapter": chapter,
                          "prepare": prepare}).encode() + b"\n"
    for _ in range(2):
        try:
            with _connect(start=True) as connection:
                connection.sendall(request)
                for line in connection.makefile("rb"):
                    message = json.loads(line)
                    if "progress" in message and progress is not None:
                        progress(message["progress"])
                    elif "report" in message:
                        return message["code"], message["report"]
        except ConnectionResetError:
            pass
        except ConnectionRefusedError:  # no server listened within SERVER_START seconds
            break
        # no report: the server found the grader's code changed and ended; the next one starts with the new code
    return 2, (f"The self-check's server did not answer. In a terminal, `python -m autograder check {notebook}` "
               "checks without it and says what goes wrong.\n")


def stop_server() -> None:
    """End this learner's check server, if one runs (tests; the server ends by itself when idle)."""
    try:
        with _connect(start=False) as connection:
            connection.sendall(b'{"stop": true}\n')
            connection.recv(1)
    except ConnectionError:
        pass


def _server_name() -> str:
    """The abstract socket of the check server for this user, interpreter, repository and configuration (the
    MODULECRAFT_* variables a server started now would read: course source, cache, limits)."""
    settings = sorted((key, value) for key, value in os.environ.items() if key.startswith("MODULECRAFT_"))
    key = json.dumps([os.getuid(), sys.executable, str(course_config.REPO_ROOT), settings])
    return "\0modulecraft-selfcheck-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def _connect(start: bool) -> socket.socket:
    """A connection to the check server (started first when `start` and none listens), checked to be this user's."""
    deadline = time.monotonic() + SERVER_START
    started = False
    while True:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(_server_name())
            if _peer_uid(connection) != os.getuid():
                raise ConnectionRefusedError("the self-check's socket is held by another user")
            return connection
        except ConnectionRefusedError:
            connection.close()
            if not start or time.monotonic() > deadline:
                raise
        if not started:
            subprocess.Popen([sys.executable, "-m", "autograder", "check", "--serve"], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started = True
        time.sleep(0.05)


def _peer_uid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(credentials[4:8], sys.byteorder)


def serve() -> None:
    """The check server: one check at a time, each on its own connection, until the Jupyter server of the kernel
    that started it ends (JPY_PARENT_PID), SERVER_IDLE seconds pass without a check, a client asks it to stop, or
    the grader's code changed (it answers that client with no report)."""
    from .workers import grader_version

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(_server_name())
        jupyter = [os.pidfd_open(int(os.environ["JPY_PARENT_PID"]))] if os.environ.get("JPY_PARENT_PID") else []
    except (OSError, ValueError):  # another client started one at the same time (it serves), or Jupyter has ended
        return
    listener.listen(8)
    version = grader_version()
    prepared: list[str] = []  # chapters whose forkservers are warm here, the most recently checked last
    while True:
        ready, _, _ = select.select([listener, *jupyter], [], [], SERVER_IDLE)
        if listener not in ready:
            return
        connection, _ = listener.accept()
        with connection:
            if _peer_uid(connection) != os.getuid():
                continue
            connection.settimeout(None)
            try:
                request = json.loads(connection.makefile("rb").readline() or b"{}")
            except ValueError:
                continue
            if request.get("stop") or grader_version() != version:
                listener.close()  # before the client hears the end: its next connection starts a new server
                return
            if "notebook" in request:
                try:
                    _answer(connection, request, prepared)
                except ConnectionError:  # the client went away (its check was interrupted): the server goes on
                    pass


def _answer(connection: socket.socket, request: dict, prepared: list[str]) -> None:
    """Check the request's notebook, telling the client what it does, then the report (or prepare its chapter,
    unless one of the chapters checked last, whose forkservers this process keeps, is that one)."""
    def send(message: dict) -> None:
        connection.sendall(json.dumps(message).encode() + b"\n")

    chapter = request.get("chapter") or Path(request["notebook"]).stem
    try:
        if request.get("prepare"):
            if chapter not in prepared:
                prepare_chapter(chapter)
            send({"code": 0, "report": ""})
        else:
            result = check_notebook(request["notebook"], chapter, progress=lambda text: send({"progress": text}))
            send({"code": 0 if result.passed else 1, "report": result.render() + "\n"})
        from .judging.sandbox import SERVERS_KEPT
        prepared[:] = [*(c for c in prepared if c != chapter), chapter][-SERVERS_KEPT:]
    except (FileNotFoundError, ValueError, LookupError) as error:  # said for the learner
        send({"code": 2, "report": f"error: {error}\n"})
    except ConnectionError:  # the client went away
        raise
    except Exception:  # noqa: BLE001 - the learner sees why, and the server goes on
        send({"code": 2, "report": traceback.format_exc()})


def find_my_notebook(chapter: str | None = None) -> Path:
    """The notebook of this kernel: Jupyter's JPY_SESSION_NAME, else `<chapter>.ipynb` in the current folder."""
    session = os.environ.get("JPY_SESSION_NAME")
    candidates = []
    if session:
        candidates += [Path(session), Path.cwd() / Path(session).name]
    name = chapter or Path.cwd().name
    candidates.append(Path.cwd() / f"{name}.ipynb")
    for candidate in candidates:
        if candidate.suffix == ".ipynb" and candidate.is_file():
            return candidate.resolve()
    raise FileNotFoundError(
        f"check_my_work could not find your notebook (looked for {', '.join(map(str, candidates))}); "
        "pass the chapter, e.g. check_my_work('01_init_and_call'), or run "
        "`python -m autograder check <notebook.ipynb>` in a terminal")


@dataclasses.dataclass
class TestResult:
    grade_id: str
    score: float
    max_score: float
    feedback: str
    passed: bool  # no failure, whatever the points (a 0-point prediction fails too)


@dataclasses.dataclass
class CheckResult:
    notebook: Path
    chapter: str
    tests: list[TestResult]
    problems: list[str]  # why the grade would need a person's look in class (tampering, crash, ...)
    notes: list[str] = dataclasses.field(default_factory=list)  # what went wrong but was graded (limits hit)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.tests) and not self.problems

    def render(self) -> str:
        saved = datetime.fromtimestamp(self.notebook.stat().st_mtime).strftime("%H:%M:%S")
        width = max([len(t.grade_id) for t in self.tests] + [10])
        lines = [f"Checked {self.notebook.name} as saved at {saved} (save first if you changed it since)."]
        for test in self.tests:
            head = f"  {test.grade_id:<{width}}  {test.score:g}/{test.max_score:g}  "
            first, *rest = test.feedback.splitlines() or [""]
            lines += [head + first, *(" " * len(head) + line for line in rest)]
        lines += [f"  ! {problem}" for problem in self.problems]
        lines += [f"  - {note}" for note in self.notes]
        failed = sum(not t.passed for t in self.tests)
        if failed:  # 0-point predictions included: the total alone would not show them
            lines.append(f"{failed} of {len(self.tests)} test cells fail: each says why above.")
        lines.append(f"Total: {self.score:g}/{self.max_score:g}")
        return "\n".join(lines)


def check_notebook(notebook, chapter: str | None = None, source=None, progress=None) -> CheckResult:
    """Grade a copy of `notebook` as chapter `chapter` (default: its file name) against the hidden tests, telling
    `progress(text)` what it does."""
    from .judging import sandbox
    from .course import Course
    from .grading import grade_submission

    notebook = Path(notebook).resolve()
    chapter = chapter or notebook.stem
    source = Path(source or course_config.COURSE_SOURCE).resolve()
    cache = cache_folder(source)
    sandbox.prepare(workers=1)
    with exclusive(cache / ".lock"):
        root = _released(chapter, source, cache, progress)
        if progress:
            progress(f"Checking {notebook.name}: starting a kernel ...")
        course = Course(root, source=source)
        course.submit(LEARNER, chapter, notebook)
        if progress:
            sandbox.on_cell = lambda index, count: progress(f"Checking {notebook.name}: running cell {index + 1} "
                                                            f"of {count} ...")
        try:
            outcome = grade_submission(str(course.root), course.course_id, LEARNER, chapter, hold=False)
        finally:
            sandbox.on_cell = None
        tests = _test_results(course, chapter) if outcome.max_score or not outcome.needs_review else []
    return CheckResult(notebook, chapter, tests, outcome.needs_review, outcome.notes)


def prepare_chapter(chapter: str, source=None) -> None:
    """Do ahead what a chapter's first check does beyond the next ones: release the chapter into the cache (once per
    version of the chapter) and check its blank release once, which starts the chapter's forkserver in this
    process."""
    source = Path(source or course_config.COURSE_SOURCE).resolve()
    cache = cache_folder(source)
    with exclusive(cache / ".lock"):
        root = _released(chapter, source, cache)
    check_notebook(root / "release" / chapter / f"{chapter}.ipynb", chapter, source)


def _released(chapter: str, source: Path, cache: Path, progress=None) -> Path:
    """The grading folder of the chapter's current version in `cache`, where it is released (under the cache's
    lock); the folders of its older versions are removed."""
    from .course import Course

    source_notebook = source / chapter / f"{chapter}.ipynb"
    if not source_notebook.is_file():
        raise FileNotFoundError(f"no chapter {chapter!r} in {source}: name the chapter with --chapter "
                                f"(one of {sorted(p.name for p in source.iterdir() if p.is_dir())})")
    root = cache / f"{chapter}-{_sha256(source_notebook)[:16]}"  # a new grading folder per chapter version
    if not (root / "release" / chapter).is_dir():
        if progress:
            progress(f"Preparing the self-check of {chapter} (once per version of the chapter) ...")
        for stale in cache.glob(f"{chapter}-*"):
            shutil.rmtree(stale)
        Course(root, source=source).release([chapter])
    return root


def _test_results(course, chapter: str) -> list[TestResult]:
    """One result per graded test cell, in notebook order, with the error the cell ended on."""
    from .judging.feedback import error_line

    scores = course.scores(LEARNER, chapter)
    graded = course.root / "autograded" / LEARNER / chapter / f"{chapter}.ipynb"
    cells = json.loads(graded.read_text())["cells"] if graded.exists() else []
    feedback, order = {}, []
    for cell in cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id not in scores:
            continue
        order.append(grade_id)
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            feedback[grade_id] = error_line(errors[0]["ename"], errors[0]["evalue"])
    order += [grade_id for grade_id in scores if grade_id not in order]
    results = []
    for grade_id in order:
        score, max_score = scores[grade_id]
        passed = grade_id not in feedback and score == max_score
        results.append(TestResult(grade_id, score, max_score,
                                  "ok" if passed else feedback.get(grade_id, "not run"), passed))
    return results


def cache_folder(source: Path) -> Path:
    """Where the self-check keeps its grading folders for one course source, private to this user."""
    base = Path(os.environ.get("MODULECRAFT_SELFCHECK_CACHE") or Path.home() / ".cache" / "modulecraft" / "selfcheck")
    folder = base / hashlib.sha256(str(source).encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
