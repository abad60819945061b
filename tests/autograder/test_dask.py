"""Grading on Dask: the same scores as the local pool, and every submission graded exactly once even when a
worker is killed in the middle of a notebook."""
import dataclasses
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder import dask_grading, grading, synthetic
from autograder.cli import main
from autograder.config import REPO_ROOT
from autograder.grading import load_outcome
from autograder.workers import SCRATCH_ENV_VAR, CourseBundle

pytestmark = pytest.mark.slow

WRONG_ADD = "def add(a, b):\n    return np.asarray(a) - np.asarray(b)"
SCALE_IN_PLACE = "def scale(x, factor):\n    x = np.asarray(x)\n    x *= factor\n    return x"
SLOW_ADD = "import time\ntime.sleep(1)\ndef add(a, b):\n    return np.asarray(a) + np.asarray(b)"


def without_a_test(notebook, student: str):
    """ed's notebook without its cell `test_add`: a changed structure, which a person must look at."""
    if student == "ed":
        notebook.cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_add"]
    return notebook


def hand_in_class(course, scratch: Path) -> dict:
    """Submissions of both toy chapters, of every kind the grader tells apart; their expected totals."""
    kinds = {
        ("ada", "90_toy"): ("solved", {}, 5.0),
        ("bo", "90_toy"): ("solved", {"add": WRONG_ADD}, 3.0),
        ("cy", "90_toy"): ("solved", {"scale": SCALE_IN_PLACE}, 2.0),
        ("di", "90_toy"): ("blank", {}, 0.0),
        ("ed", "90_toy"): ("solved", {}, 0.0),  # its test cell deleted (`without_a_test`): held for review
        ("ada", "91_other"): ("solved", {}, 1.0),
        ("bo", "91_other"): ("blank", {}, 0.0),
    }
    for (student, chapter), (start, cells, _) in kinds.items():
        notebook = without_a_test(synthetic.with_cells(getattr(synthetic, start)(course, chapter), cells), student)
        synthetic.write(notebook, scratch / "hand-in.ipynb")
        course.submit(student, chapter, scratch / "hand-in.ipynb")
    return {job: total for job, (_, _, total) in kinds.items()}


def gradebook_rows(course) -> dict:
    with sqlite3.connect(course.root / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return {
            "submissions": db.execute("SELECT COUNT(*) FROM submitted_assignment").fetchone()[0],
            "notebooks": db.execute("SELECT COUNT(*) FROM submitted_notebook").fetchone()[0],
            "grades": db.execute("SELECT COUNT(*) FROM grade").fetchone()[0],
            "students": db.execute("SELECT COUNT(*) FROM student").fetchone()[0],
        }


def test_a_local_cluster_grades_exactly_like_the_local_pool(make_toy_course, short_limits, tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "QUEUED_PER_WORKER", 1)  # both send the rest of the class as results come in
    monkeypatch.setattr(dask_grading, "IN_FLIGHT", 2)
    local, dask = make_toy_course(tmp_path / "local"), make_toy_course(tmp_path / "dask")
    expected = hand_in_class(local, tmp_path)
    hand_in_class(dask, tmp_path)

    local.grade(workers=2)
    assert main(["grade", "--root", str(dask.root), "--cluster", "local", "--workers", "2"]) == 0

    for student, chapter in expected:
        mine, theirs = load_outcome(local.root, student, chapter), load_outcome(dask.root, student, chapter)
        assert theirs.score == expected[(student, chapter)]
        assert (mine.score, mine.max_score, mine.needs_review, mine.notes, mine.submission_sha256) == \
               (theirs.score, theirs.max_score, theirs.needs_review, theirs.notes, theirs.submission_sha256)
        assert local.scores(student, chapter) == dask.scores(student, chapter)
    assert load_outcome(dask.root, "ed", "90_toy").needs_review  # the tampered one is held on the cluster too
    assert gradebook_rows(local) == gradebook_rows(dask)


def test_a_task_that_fails_on_every_try_is_reported_and_the_others_are_graded(make_toy_course, short_limits,
                                                                             tmp_path):
    course = make_toy_course(tmp_path / "grading")
    hand_in_class(course, tmp_path)
    bundle = CourseBundle.of(course.root, course.source, course.course_id)
    good = grading.submission_task(course.root, "ada", "90_toy", bundle)
    stale = dataclasses.replace(grading.submission_task(course.root, "bo", "90_toy", bundle), bundle_sha256="0" * 64)
    results = dict((task.student, result) for task, result in
                   dask_grading.grade("local", bundle, iter([stale, good]), workers=1))
    assert isinstance(results["bo"], RuntimeError) and "not prepared for this course" in str(results["bo"])
    assert results["ada"].outcome.needs_review == [] and results["ada"].autograded


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def processes():
    """Start processes in their own process groups; every group is killed at the end, even on failure."""
    started = []

    def start(command, **kwargs):
        process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, **{"cwd": REPO_ROOT, **kwargs})
        started.append(process)
        return process

    yield start
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)


def wait_for_workers(address: str, count: int, timeout: float = 120) -> None:
    from distributed import Client
    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(count, timeout=timeout)


def busy_scratch(scratch: Path) -> bool:
    """Whether the worker with this scratch folder is grading a submission right now."""
    return any(scratch.glob("modulecraft-worker-*/submitted/*/*/*.ipynb"))


def test_a_worker_killed_mid_notebook_leaves_every_submission_graded_exactly_once(make_toy_course, short_limits,
                                                                                 tmp_path, processes):
    course = make_toy_course(tmp_path / "grading")
    expected = {}
    for n in range(6):  # every notebook takes over a second: the kill lands in the middle of one
        notebook = synthetic.with_cells(synthetic.solved(course, "90_toy"), {"add": SLOW_ADD})
        if n % 2:
            notebook = synthetic.with_cells(notebook, {"scale": SCALE_IN_PLACE})
        synthetic.write(notebook, tmp_path / "hand-in.ipynb")
        course.submit(f"s{n}", "90_toy", tmp_path / "hand-in.ipynb")
        expected[(f"s{n}", "90_toy")] = 2.0 if n % 2 else 5.0

    address = f"tcp://127.0.0.1:{free_port()}"
    dask = [sys.executable, "-m", "distributed.cli.dask_worker"]
    processes([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
               "--port", address.rsplit(":", 1)[1], "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
               "--preload", "autograder.dask_preload"])
    workers, scratch = {}, {}
    for name in ("wa", "wb"):  # separate folders, as separate machines would have
        scratch[name] = tmp_path / name / "scratch"
        env = dict(os.environ, **{SCRATCH_ENV_VAR: str(scratch[name])})
        workers[name] = processes([*dask, address, "--name", name, "--nthreads", "1", "--host", "127.0.0.1",
                                   "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
                                   "--local-directory", str(tmp_path / name),
                                   "--preload", "autograder.dask_preload"], env=env)
    wait_for_workers(address, 2)

    killed = []

    def kill_the_first_busy_worker():
        deadline = time.monotonic() + 300
        while not killed and time.monotonic() < deadline:
            for name, folder in scratch.items():
                if busy_scratch(folder):
                    os.killpg(workers[name].pid, signal.SIGKILL)
                    killed.append(name)
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_first_busy_worker, daemon=True)
    killer.start()
    imported = []
    report = course.grade(scheduler=address, progress=lambda done, total, o: imported.append((o.student, o.chapter)))
    killer.join(timeout=5)

    assert killed, "no worker was seen busy"
    assert workers[killed[0]].poll() is not None
    assert not report.failed
    assert sorted(imported) == sorted(expected)  # each result imported once
    assert {(o.student, o.chapter): o.score for o in report.outcomes} == expected
    assert gradebook_rows(course) == {"submissions": 6, "notebooks": 6, "grades": 12, "students": 6}
    for student, chapter in expected:
        assert (course.root / "reports" / student / f"{chapter}.json").exists()
        assert (course.root / "autograded" / student / chapter / f"{chapter}.ipynb").exists()

    # The course's hidden tests: gone from the survivor's disk with the run, from the killed one's when a worker
    # starts there again.
    [survivor] = set(scratch) - set(killed)
    assert list(scratch[survivor].glob("modulecraft-worker-*")) == []
    [left_behind] = scratch[killed[0]].glob("modulecraft-worker-*")
    assert (left_behind / "source" / "90_toy" / "90_toy.ipynb").exists()
    env = dict(os.environ, **{SCRATCH_ENV_VAR: str(scratch[killed[0]])})
    processes([*dask, address, "--name", "again", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
               "--dashboard-address", "127.0.0.1:0",
               "--local-directory", str(tmp_path / "again"), "--preload", "autograder.dask_preload"], env=env)
    wait_for_workers(address, 2)
    assert not left_behind.exists()


def test_a_regrade_keeps_nbgrader_s_rule_for_grades_a_person_gave(make_toy_course, short_limits, tmp_path):
    """The coordinator replays nbgrader's SaveAutoGrades against the real gradebook: a cell a person graded
    before is marked for review again on a regrade, as stock autograde does (a worker's scratch gradebook,
    which never saw the person's grade, would not)."""
    course = make_toy_course(tmp_path / "grading")
    synthetic.write(synthetic.solved(course, "90_toy"), tmp_path / "ada.ipynb")
    course.submit("ada", "90_toy", tmp_path / "ada.ipynb")
    course.grade()
    with course.gradebook() as gb:
        grade = gb.find_grade("test_add", "90_toy", "90_toy", "ada")
        grade.manual_score, grade.needs_manual_grade = 1.0, False
        gb.db.commit()
    course.grade(force=True)
    with course.gradebook() as gb:
        flags = {g.name: (g.needs_manual_grade, g.manual_score, g.auto_score)
                 for g in gb.find_submission_notebook("90_toy", "90_toy", "ada").grades}
    assert flags == {"test_add": (True, 1.0, 2.0), "test_scale": (False, None, 3.0)}


# -- the deployment snippets of course/INSTRUCTORS.md, built without a cluster -----------------------------------
def instructors_snippet(heading: str, language: str = "python") -> str:
    """The first block in `language` after `heading` in the instructor's guide: the test runs what the guide shows."""
    text = (REPO_ROOT / "course" / "INSTRUCTORS.md").read_text()
    start = text.index(f"```{language}\n", text.index(heading)) + len(f"```{language}\n")
    return text[start:text.index("```", start)]


class CourseThatRecords:
    """Stands in for `Course` in the snippets: records the grading run instead of grading."""

    runs: list[tuple[str, dict]] = []

    def __init__(self, root):
        self.root = root

    def grade(self, **options):
        self.runs.append((self.root, options))
        return grading.GradingReport([])


def test_the_slurm_snippet_starts_one_thread_workers_with_the_checkouts_python_on_one_interface_with_tls(
        monkeypatch, tmp_path):
    jobqueue = pytest.importorskip("dask_jobqueue", reason="the test extra installs dask-jobqueue")
    scripts = []

    class SLURMClusterWithoutSlurm(jobqueue.SLURMCluster):
        def scale(self, jobs):  # the job script is read, not submitted
            scripts.extend([self.job_script()] * jobs)

    monkeypatch.setattr(jobqueue, "SLURMCluster", SLURMClusterWithoutSlurm)
    monkeypatch.setattr("autograder.course.Course", CourseThatRecords)
    monkeypatch.setattr(CourseThatRecords, "runs", [])
    snippet = instructors_snippet("**Slurm**")
    assert 'interface="ib0"' in snippet
    shared = tmp_path / "dask"  # the guide's shared folder for the run's TLS key, and this machine's loopback
    shared.mkdir(mode=0o700)
    exec(snippet.replace('"ib0"', '"lo"').replace("/path/to/modulecraft/.grading/dask", str(shared)), {})

    [(root, options)] = CourseThatRecords.runs
    assert root == ".grading" and len(scripts) == 40
    cluster = options["scheduler"]  # the cluster object: the coordinator's client gets its TLS settings
    assert cluster.scheduler_address.startswith("tls://127.0.0.1:") and cluster.security.require_encryption
    lines = scripts[0].splitlines()
    assert "#SBATCH --cpus-per-task=1" in lines
    worker = next(line.split() for line in lines if "dask_worker" in line)
    assert lines.index("cd /path/to/modulecraft") < lines.index(" ".join(worker))
    assert worker[:4] == [".venv/bin/python", "-m", "distributed.cli.dask_worker", cluster.scheduler_address]
    assert worker[worker.index("--interface") + 1] == "lo" and worker[worker.index("--protocol") + 1] == "tls://"
    assert Path(worker[worker.index("--tls-key") + 1]).parent == shared
    assert worker.count("--nthreads") == 1 and worker[worker.index("--nthreads") + 1] == "1"
    assert worker[worker.index("--local-directory") + 1] == "$TMPDIR"
    assert worker[worker.index("--preload") + 1] == "autograder.dask_preload"  # no HTTP server
    help_text = subprocess.run([sys.executable, "-m", "distributed.cli.dask_worker", "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "--nthreads" in help_text and "--local-directory" in help_text


def test_a_local_cluster_listens_on_loopback_only_and_serves_no_http():
    """Dask starts an HTTP server in the scheduler (port 8787 by default) and each worker even without a
    dashboard: none is left, so nothing is served and no port is fought over."""
    import psutil
    with dask_grading.connect("local", workers=1) as client:
        [(worker, info)] = client.scheduler_info()["workers"].items()
        ours = [psutil.Process(), *psutil.Process().children(recursive=True)]
        sockets = [(c.laddr.ip, c.laddr.port) for p in ours for c in p.net_connections("inet")
                   if c.status == psutil.CONN_LISTEN]
        dask_ports = [int(address.rsplit(":", 1)[1]) for address in (client.scheduler.address, worker, info["nanny"])]
    assert {ip for ip, _ in sockets} == {"127.0.0.1"}
    assert sorted(port for _, port in sockets) == sorted(dask_ports)


def test_a_cluster_object_brings_its_tls_settings(make_toy_course, short_limits, tmp_path):
    """As the Slurm snippet does: `grade(scheduler=cluster)` with a cluster whose TLS key was made for the run."""
    from distributed import LocalCluster
    course = make_toy_course(tmp_path / "grading")
    synthetic.write(synthetic.solved(course, "90_toy"), tmp_path / "in.ipynb")
    course.submit("ada", "90_toy", tmp_path / "in.ipynb")
    with LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1", security=True,
                      dashboard_address="127.0.0.1:0", scheduler_kwargs={"preload": [dask_grading.PRELOAD]},
                      preload=[dask_grading.PRELOAD]) as cluster:
        assert cluster.scheduler_address.startswith("tls://")
        report = course.grade(scheduler=cluster)
    assert not report.failed and [o.score for o in report.outcomes] == [5.0]
