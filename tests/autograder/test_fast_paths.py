"""What the grader does differently from stock nbgrader (tuning, forked kernels, the grading switch given to
kernels only) must not change what a submission sees or how it is judged."""
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import nbformat
import nbgrader.nbgraderformat.common as nbgrader_metadata
import pytest
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from traitlets.config.loader import PyFileConfigLoader

from autograder import config, probes, synthetic, tuning
from autograder.course import Course
from autograder.judging import sandbox, verdicts
from tests.autograder.conftest import TOY_CHAPTERS

VALID = {"grade": True, "grade_id": "test_add", "locked": True, "points": 2, "schema_version": 3,
         "solution": False, "task": False}
INVALID = [
    dict(VALID, points="two"),                  # wrong type
    {k: v for k, v in VALID.items() if k != "grade_id"},  # a required key missing
    dict(VALID, grade="yes"),
]


def nbgrader_verdict(metadata: dict) -> str | None:
    """What nbgrader's metadata check says of a cell with this metadata (None: valid)."""
    cell = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": copy.deepcopy(metadata)})
    try:
        MetadataValidator().validate_nb(nbformat.v4.new_notebook(cells=[cell]))
    except ValidationError as error:
        return str(error)
    return None


@pytest.mark.parametrize("metadata", [VALID, *INVALID])
def test_metadata_validation_gives_the_stock_verdict(metadata, monkeypatch):
    with monkeypatch.context() as stock:
        stock.setattr(nbgrader_metadata, "jsonschema", jsonschema)
        expected = nbgrader_verdict(metadata)
    tuning.apply()
    assert nbgrader_verdict(VALID) is None  # remembered as valid: by its content, which `metadata` shares in part
    assert nbgrader_verdict(metadata) == nbgrader_verdict(metadata) == expected
    assert (expected is None) == (metadata is VALID)


def test_the_gradebook_s_engine_and_table_check_are_made_once_per_database(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # alembic
    tuning.apply()
    first, other = (f"sqlite:///{tmp_path / name}" for name in ("first.db", "other.db"))
    with Gradebook(first, "course") as gb:  # the first open creates the tables, as stock nbgrader's does
        gb.add_assignment("ps1")
    with Gradebook(first, "course") as again, Gradebook(other, "course") as elsewhere:
        assert again.engine is Gradebook(first, "course").engine and elsewhere.engine is not again.engine
        assert [a.name for a in again.assignments] == ["ps1"] and elsewhere.assignments == []


def tampered(course):
    """The toy chapter as a learner could hand it in after editing what is locked: a test cell's code, another's
    points, a locked cell's type, a grade id the chapter does not have."""
    notebook = synthetic.solved(course, "90_toy")
    cells = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in notebook.cells}
    cells["test_add"].source = "pass  # every check removed"
    cells["test_scale"].metadata.nbgrader["points"] = 30
    cells["imports"].cell_type = "markdown"
    cells["add"].metadata.nbgrader["grade_id"] = "not_in_the_chapter"
    return notebook


def test_cells_fetched_once_are_overwritten_as_stock_nbgrader_overwrites_them(toy_course):
    from nbgrader.preprocessors import OverwriteCells
    resources = {"nbgrader": {"notebook": "90_toy", "assignment": "90_toy",
                              "db_url": f"sqlite:///{toy_course.root / 'gradebook.db'}"}}
    stock, ours = (preprocessor().preprocess(tampered(toy_course), copy.deepcopy(resources))[0]
                   for preprocessor in (OverwriteCells, tuning.OverwriteCellsFetchedOnce))
    assert ours == stock
    restored = {cell.metadata.nbgrader.get("grade_id"): cell for cell in ours.cells if "nbgrader" in cell.metadata}
    assert 'run_tests("test_add")' in restored["test_add"].source  # the source's, hidden tests' markers included
    assert restored["test_scale"].metadata.nbgrader["points"] == 3
    assert restored["imports"].cell_type == "code" and "not_in_the_chapter" not in restored


def test_the_reference_s_probes_run_as_far_as_the_verdict_needs(monkeypatch):
    """The reference's side of a probe runs when a verdict needs it, up to the first check the learner's disagrees
    with: a capstone whose test cells ended in an error costs none of its 34 probes, a blank one (every check: "not
    written") one check a probe; a correct one every check, the verdicts those of the probes run whole, in order."""
    seed, checks_run = 20261204, []
    stock_check = probes.Run.check
    monkeypatch.setattr(probes.Run, "check", lambda run, *args, **kwargs: checks_run.append(run.grade_id) or
                        stock_check(run, *args, **kwargs))
    runs = verdicts.expected("13_capstone", seed)
    error = [{"output_type": "error", "ename": "NotImplementedError", "evalue": "", "traceback": []}]
    assert all("did not run to the end" in verdicts.judge(grade_id, error, runs) for grade_id in runs)
    assert checks_run == [] and len(runs) == 34

    def report(grade_id, observed):
        return [{"output_type": "display_data", "data": {probes.MIME: {"grade_id": grade_id, "observed": observed}}}]

    reference = probes.Reference(probes.yours_of("13_capstone"))
    whole = {grade_id: probes.run_probe(grade_id, reference, seed) for grade_id in runs}
    checks_run.clear()
    blank = {grade_id: verdicts.judge(grade_id, report(grade_id, [{"missing": "x"}] * len(whole[grade_id].checks)),
                                      verdicts.expected("13_capstone", seed)) for grade_id in runs}
    assert all(why is not None for why in blank.values()) and len(checks_run) == len(runs)
    checks_run.clear()
    for grade_id in reversed(list(runs)):
        observed = [check.observed for check in whole[grade_id].checks]
        assert verdicts.judge(grade_id, report(grade_id, observed), runs) is None
    assert len(checks_run) == sum(len(run.checks) for run in whole.values())


COURSE_CHAPTERS = sorted(path.name for path in config.COURSE_SOURCE.iterdir()
                         if (path / f"{path.name}.ipynb").is_file())


@pytest.mark.parametrize("chapter", COURSE_CHAPTERS)
def test_a_probe_stopped_early_gives_the_whole_runs_first_checks_and_leaves_nothing_behind(chapter):
    """The grader's reference serves every submission a worker grades: a probe stopped at any of its checks has
    given exactly the whole run's checks up to there, and the whole runs made after every such stop are the same as
    before them (no hook, mode or seed of an interrupted probe lingers)."""
    import modulecraft
    from modulecraft.nn.modules import module as registry

    def observed(run):
        return repr([(check.what, check.observed) for check in run.checks])

    def lingering():  # what a probe may change for all modules: global hooks, grad mode
        return ({name: len(table) for name, table in vars(registry).items()
                 if name.startswith("_global_") and isinstance(table, dict)}, modulecraft.is_grad_enabled())

    before = lingering()
    reference = probes.Reference(probes.yours_of(chapter))
    for seed in (1, 20261204):
        whole = {grade_id: probes.run_probe(grade_id, reference, seed) for grade_id in probes.grade_ids(chapter)}
        for grade_id, run in whole.items():
            for stop in range(len(run.checks)):
                part = probes.run_probe(grade_id, reference, seed, until=lambda index, check: index == stop)
                assert observed(part) == observed(probes.Run(grade_id, run.checks[:stop + 1])), (grade_id, stop)
                assert lingering() == before, (grade_id, stop)
        again = {grade_id: probes.run_probe(grade_id, reference, seed) for grade_id in whole}
        assert {g: observed(r) for g, r in again.items()} == {g: observed(r) for g, r in whole.items()}


def test_grades_and_comments_are_recorded_as_stock_nbgrader_records_them(toy_course, monkeypatch):
    """The coordinator's `SaveAutoGrades` finds each cell's grade and comment among the submitted notebook's rows,
    fetched once; stock nbgrader's asks the gradebook for each (six joins a cell). Same rows, same scores and
    comments (a test cell that failed, a solution left as released, a manual grade kept for review), and a number of
    queries that does not grow with the notebook's cells."""
    import sqlalchemy.engine
    import sqlalchemy.event
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    from autograder import grading, workers
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # alembic
    notebook = synthetic.solved(toy_course, "90_toy")
    cells = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in notebook.cells}
    cells["test_add"].outputs = [nbformat.v4.new_output("error", ename="TestFailed", evalue="", traceback=[])]
    cells["add"].source = synthetic.blank(toy_course, "90_toy").cells[notebook.cells.index(cells["add"])].source
    graded = {cell.metadata.nbgrader["grade_id"] for cell in notebook.cells if "nbgrader" in cell.metadata
              and (cell.metadata.nbgrader.get("grade") or cell.metadata.nbgrader.get("solution"))}
    resources = {"nbgrader": {"notebook": "90_toy", "assignment": "90_toy", "student": "learner"}}
    recorded, queries = {}, []
    for who in ("stock", "ours"):
        database = toy_course.root / f"{who}.db"
        shutil.copyfile(toy_course.root / "gradebook.db", database)
        with Gradebook(f"sqlite:///{database}", toy_course.course_id) as gb:
            gb.update_or_create_student("learner")
            gb.update_or_create_submission("90_toy", "learner")
            gb.find_grade("test_scale", "90_toy", "90_toy", "learner").manual_score = 1.0
            gb.db.commit()
            def count(_connection, _cursor, statement, *_args):
                if statement.lstrip().upper().startswith("SELECT"):
                    queries.append(who)

            sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", count)
            try:
                if who == "stock":  # it opens the gradebook itself
                    SaveAutoGrades().preprocess(copy.deepcopy(notebook), dict(resources, nbgrader={
                        **resources["nbgrader"], "db_url": f"sqlite:///{database}"}))
                else:
                    api = workers.nbgrader_api(toy_course.root, toy_course.course_id)
                    grading._SaveAutoGradesInto(gb, config=api.config).preprocess(copy.deepcopy(notebook), resources)
                    gb.db.commit()
            finally:
                sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", count)
            gb.db.expire_all()
            submitted = gb.find_submission_notebook("90_toy", "90_toy", "learner")
            recorded[who] = ({(g.name, g.auto_score, g.manual_score, g.needs_manual_grade) for g in submitted.grades},
                             {(c.name, c.auto_comment) for c in submitted.comments})
    assert recorded["ours"] == recorded["stock"]
    grades, comments = recorded["ours"]
    assert ("test_add", 0.0, None, False) in grades and ("test_scale", 3.0, 1.0, True) in grades
    assert ("add", "No response.") in comments
    assert queries.count("ours") < len(graded) <= queries.count("stock")


READS_ITS_FILE = """def add(a, b):
    return np.asarray(a) + np.asarray(b)
print("data:", open("data.txt").read())"""


def test_one_conversion_grades_as_stock_s_two(tmp_path, short_limits, monkeypatch):
    """Stock autograde sanitizes, writes, reads back and grades; ours runs the same steps in one conversion. The
    autograded notebooks and the outcomes are the same: of a submission whose test cell and points were edited
    (the sanitizing steps give them back), of one nbgrader refuses, and of one reading a chapter's file, which the
    kernel finds as the chapter's copy, not the copy the learner handed in next to the notebook."""
    source = tmp_path / "source"
    shutil.copytree(TOY_CHAPTERS / "90_toy", source / "90_toy")
    (source / "90_toy" / "data.txt").write_text("the chapter's")
    graded = {}
    for way, convert in (("stock", tuning._stock_convert), ("ours", tuning._convert_in_one_pass)):
        course = Course(tmp_path / way, source=source)
        course.release(["90_toy"])
        edited = synthetic.solved(course, "90_toy")
        cells = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in edited.cells}
        cells["test_add"].source = "pass  # every check removed"
        cells["test_scale"].metadata.nbgrader["points"] = 30
        submissions = {"edited": edited, "refused": tampered(course),
                       "reads": synthetic.with_cells(synthetic.solved(course, "90_toy"), {"add": READS_ITS_FILE})}
        for student, notebook in submissions.items():
            synthetic.write(notebook, tmp_path / "submission.ipynb")
            course.submit(student, "90_toy", tmp_path / "submission.ipynb")
        course.submission_path("reads", "90_toy").with_name("data.txt").write_text("the learner's")
        monkeypatch.setattr(tuning, "_convert_in_one_pass", convert)  # what `tuning.apply` installs in workers
        report = course.grade(workers=1)
        graded[way] = {student: _outcome_and_files(report.outcome(student, "90_toy"), course.root / "autograded" / student)
                       for student in submissions}
    assert graded["ours"] == graded["stock"]
    assert graded["ours"]["edited"][:2] == (0.0, ["the nbgrader metadata of test cell 'test_scale' was changed"])
    assert graded["ours"]["refused"][0] == 0.0 and graded["ours"]["reads"][:2] == (5.0, [])
    assert "data: the chapter's" in str(graded["ours"]["reads"][2]["90_toy/90_toy.ipynb"])


def _outcome_and_files(outcome, autograded):
    """What grading a submission left: its score, what needs review, the autograded files (without the cells' run
    times)."""
    files = {}
    for path in autograded.rglob("*"):
        if path.suffix == ".ipynb":
            files[str(path.relative_to(autograded))] = notebook = nbformat.read(path, 4)
            for cell in notebook.cells:
                cell.metadata.pop("execution", None)
        elif path.is_file():
            files[str(path.relative_to(autograded))] = path.read_text()
    return outcome.score, outcome.needs_review, files


SHOWS_KERNEL = """def add(a, b):
    return np.asarray(a) + np.asarray(b)
import os, random, socket, sys
print("debugger loaded:", "pydevd" in sys.modules)
print("random:", random.random(), np.random.rand())
print("user:", os.getuid())
print("pid 1:", open("/proc/1/cmdline", "rb").read().split(b"\\0")[1:3])
print("dumpable:", os.stat("/proc/self/status").st_uid == os.getuid())  # else /proc/self belongs to root
print("networks:", sorted(name for _, name in socket.if_nameindex()))
import ctypes
print("ctypes:", ctypes.CDLL(None).getpid() == os.getpid())"""


@pytest.mark.slow
def test_forked_kernels_start_like_fresh_ones(toy_course, tmp_path):
    """Two kernels forked from one server: no debugger, own random seeds, a working FFI
    (ctypes, which scikit-learn and scipy load); when grading runs as root and the machine allows
    namespaces, not root, not dumpable (the processes a kernel starts cannot read its memory), only the loopback
    network, in the PID namespace of the server (PID 1: when it ends, every kernel ends)."""
    notebook = synthetic.with_cells(synthetic.solved(toy_course, "90_toy"), {"add": SHOWS_KERNEL})
    synthetic.write(notebook, tmp_path / "shows.ipynb")
    for student in ("one", "two"):
        toy_course.submit(student, "90_toy", tmp_path / "shows.ipynb")
    report = toy_course.grade(workers=1)
    printed = {}
    for student in ("one", "two"):
        assert (report.outcome(student, "90_toy").score, report.outcome(student, "90_toy").needs_review) == (5.0, [])
        graded = nbformat.read(toy_course.root / "autograded" / student / "90_toy" / "90_toy.ipynb", 4)
        printed[student] = dict(line.split(": ", 1) for c in graded.cells for o in c.get("outputs", [])
                                for line in o.get("text", "").splitlines() if ": " in line)
    assert printed["one"]["debugger loaded"] == printed["two"]["debugger loaded"] == "False"
    assert printed["one"]["random"] != printed["two"]["random"]
    assert printed["one"]["ctypes"] == "True"
    if os.geteuid() == 0 and sandbox.namespaces_available():
        assert printed["one"]["user"] != "0" and printed["one"]["dumpable"] == "False"
        assert printed["one"]["networks"] == "['lo']"
        assert printed["one"]["pid 1"] == "[b'-m', b'autograder.judging.forkserver']"


ASKS_FOR_A_KERNEL = """def add(a, b):
    return np.asarray(a) + np.asarray(b)
import json, socket
names = [line.split()[-1][1:] for line in open("/proc/net/unix") if "@modulecraft-forkserver-" in line]
request = {"limits": {}, "user": None, "mounts": [], "args": [], "cwd": "/", "env": {}}
for name in names:
    keeper = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    keeper.connect("\\0" + name)
    try:
        socket.send_fds(keeper, [json.dumps(request).encode()], [0, 1, 2])
        print("answer:", keeper.recv(16))
    except OSError as error:
        print("answer:", type(error).__name__)
print("servers seen:", len(names))"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="kernels run as another user only when grading runs as root")
def test_a_kernel_cannot_ask_the_forkserver_for_an_unconfined_kernel(toy_course, tmp_path):
    """The server's socket is an abstract socket, which belongs to a network namespace: a kernel in its own
    does not see it. Without namespaces it is listed in /proc/net/unix, but the server only answers its own
    user: a kernel asking for an unconfined kernel is hung up on."""
    notebook = synthetic.with_cells(synthetic.solved(toy_course, "90_toy"), {"add": ASKS_FOR_A_KERNEL})
    synthetic.write(notebook, tmp_path / "asks.ipynb")
    toy_course.submit("asks", "90_toy", tmp_path / "asks.ipynb")
    assert toy_course.grade().outcome("asks", "90_toy").score == 5.0
    graded = nbformat.read(toy_course.root / "autograded" / "asks" / "90_toy" / "90_toy.ipynb", 4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    if sandbox.namespaces_available():
        assert "servers seen: 0" in printed
        return
    answers = [line for line in printed.splitlines() if line.startswith("answer:")]
    assert answers and all(answer in ("answer: b''", "answer: ConnectionResetError", "answer: BrokenPipeError")
                           for answer in answers), printed


@pytest.mark.slow
def test_stock_nbgrader_in_a_grading_folder_keeps_the_self_check_quiet_without_touching_its_environment(
        toy_course, tmp_path, monkeypatch):
    """The generated nbgrader_config.py gives nbgrader's kernels the grading switch, and only them."""
    monkeypatch.delenv(config.GRADING_ENV_VAR, raising=False)
    PyFileConfigLoader("nbgrader_config.py", path=str(toy_course.root)).load_config()
    assert config.GRADING_ENV_VAR not in os.environ  # loading the configuration changed nothing here
    synthetic.write(synthetic.solved(toy_course, "90_toy"), tmp_path / "solved.ipynb")
    toy_course.submit("stock", "90_toy", tmp_path / "solved.ipynb")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["nbgrader", "autograde", "90_toy", "--student", "stock"], cwd=toy_course.root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    graded = nbformat.read(toy_course.root / "autograded" / "stock" / "90_toy" / "90_toy.ipynb", 4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    assert "check_my_work: skipped while grading" in printed
    assert toy_course.scores("stock", "90_toy") == {"test_add": (2.0, 2.0), "test_scale": (3.0, 3.0)}


# A kernel's stdout as the fork server leaves it, driven by hand: what reaches the IOPub socket, in order, after a
# flush with nothing written, with text written, and while the IOPub thread is itself flushing.
FLUSHES = """import zmq
from ipykernel.iostream import IOPubThread, OutStream
from jupyter_client.session import Session
from autograder.judging.forkserver import _flush_only_what_was_written
_flush_only_what_was_written()
context = zmq.Context()
pub, sub = context.socket(zmq.PUB), context.socket(zmq.SUB)
pub.bind("inproc://iopub")
sub.connect("inproc://iopub")
sub.setsockopt(zmq.SUBSCRIBE, b"")
thread = IOPubThread(pub)
thread.start()
stream = OutStream(Session(), thread, "stdout", watchfd=False)
scheduled = []
schedule = thread.schedule
thread.schedule = lambda f: (scheduled.append(f), schedule(f))
stream.flush()
print("wake-ups for nothing written:", len(scheduled))
stream._sending = True
stream.flush()
print("wake-ups while the IOPub thread flushes:", len(scheduled) > 0)
stream._sending = False
for text in ("first", "second"):
    stream.write(text)
    stream.flush()
    thread.send_multipart([b"idle"])  # what the kernel sends once a cell's reply is out
received = [sub.recv_multipart()[-1] for _ in range(4)]
print("order:", [part if part == b"idle" else b"first" if b"first" in part else b"second" for part in received])"""


def test_streams_flush_only_what_was_written_and_before_the_cell_ends(tmp_path):
    done = subprocess.run([sys.executable, "-c", FLUSHES], capture_output=True, text=True, timeout=60,
                          cwd=config.REPO_ROOT)
    assert done.stdout.splitlines() == ["wake-ups for nothing written: 0",
                                        "wake-ups while the IOPub thread flushes: True",
                                        "order: [b'first', b'idle', b'second', b'idle']"], done.stdout + done.stderr
