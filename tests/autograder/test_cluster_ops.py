"""A shared department cluster, as an instructor meets it: real `dask scheduler` and `dask worker` processes on
127.0.0.1, started with the commands of course/INSTRUCTORS.md; a worker without the project and one of another
grader version beside them; two courses graded at once; schedulers that are not there."""
import dataclasses
import http.server
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from distributed import Client

from autograder import dask_grading, synthetic
from autograder.config import REPO_ROOT
from autograder.course import Course
from autograder.grading import load_outcome
from autograder.workers import SCRATCH_PREFIX, CourseBundle, grader_version

from test_dask import WRONG_ADD, free_port, instructors_snippet, processes, wait_for_workers  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


def guide_command(which: str, replace: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(environment, arguments) of the guide's `dask <which>` command in its first cluster block, with the
    texts of `replace` replaced (ports and folders of this test)."""
    text = (REPO_ROOT / "course" / "INSTRUCTORS.md").read_text()
    start = text.index("```bash\n", text.index("### Grading on several machines (Dask)")) + len("```bash\n")
    line = next(line for line in text[start:text.index("```", start)].replace("\\\n", " ").splitlines()
                if f"bin/dask {which}" in line)
    for old, new in replace.items():
        line = line.replace(old, new)
    words = shlex.split(line, comments=True)
    program = next(i for i, word in enumerate(words) if word.endswith("bin/dask"))
    env = dict(os.environ, **dict(word.split("=", 1) for word in words[:program]))
    return env, [str(Path(sys.executable).parent / "dask"), *words[program + 1:]]


def listening(process: psutil.Process) -> list[tuple[str, int]]:
    """The addresses the process and its children listen on."""
    found = []
    for each in [process, *process.children(recursive=True)]:
        found += [(c.laddr.ip, c.laddr.port) for c in each.net_connections("inet") if c.status == psutil.CONN_LISTEN]
    return found


def hand_in(course, folder: Path, students: list[str], cells=None):
    for student in students:
        synthetic.write(synthetic.with_cells(synthetic.solved(course, "90_toy"), cells or {}), folder / "in.ipynb")
        course.submit(student, "90_toy", folder / "in.ipynb")


def grade_command(course, address: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", "--root", str(course.root), "--scheduler", address]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, make_toy_course):
    """The guide's scheduler and one of its workers, on loopback and free ports."""
    folder = tmp_path_factory.mktemp("cluster")
    started = []
    port = free_port()
    replace = {"8786": str(port), "/scratch/modulecraft": str(folder / "scratch"), "/scratch/dask": str(folder / "dask"),
               "--nworkers 2": "--nworkers 1"}

    def start(command, **kwargs):
        process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, cwd=REPO_ROOT, **kwargs)
        started.append(process)
        return process

    env, command = guide_command("scheduler", replace)
    scheduler = start(command, env=env)
    env, command = guide_command("worker", replace)
    worker = start(command, env=env)
    address = f"tcp://127.0.0.1:{port}"
    wait_for_workers(address, 1)
    yield dataclasses.make_dataclass("Cluster", ["address", "scheduler", "worker", "scratch", "folder"])(
        address, scheduler, worker, folder / "scratch", folder)
    for process in started:
        os.killpg(process.pid, 9)
        process.wait(timeout=30)


def test_the_guide_s_processes_listen_on_loopback_only_and_serve_no_http(cluster):
    scheduler = listening(psutil.Process(cluster.scheduler.pid))
    assert scheduler == [("127.0.0.1", int(cluster.address.rsplit(":", 1)[1]))]  # no HTTP server
    worker = listening(psutil.Process(cluster.worker.pid))
    assert {ip for ip, _ in worker} == {"127.0.0.1"}
    assert len(worker) == 2  # the nanny's and the worker's Dask ports, no HTTP server
    with Client(cluster.address) as client:
        [(address, info)] = client.scheduler_info()["workers"].items()
    assert sorted(port for _, port in worker) == sorted(int(a.rsplit(":", 1)[1]) for a in (address, info["nanny"]))


def bare_python(folder: Path) -> Path:
    """A Python that has Dask (this virtualenv's site-packages on its path) but not the project."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next(folder.glob("lib/python*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    (site / "dask.pth").write_text(f"{ours}\n")  # a path only: the project's editable finder is not run
    return folder / "bin" / "python"


def old_checkout(folder: Path) -> Path:
    """The grader's package as a checkout one commit behind would have it: a file changed."""
    shutil.copytree(REPO_ROOT / "autograder", folder / "autograder")
    with open(folder / "autograder" / "workers.py", "a") as stream:
        stream.write("\n# an older grader\n")
    return folder


def test_workers_that_cannot_grade_are_named_left_out_and_the_course_leaves_the_cluster(cluster, processes,
                                                                                      make_toy_course, tmp_path):
    bare = bare_python(tmp_path / "bare")
    processes([str(bare), "-m", "distributed.cli.dask_worker", cluster.address, "--name", "no-project",
               "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"],
              cwd=tmp_path)
    processes([sys.executable, "-m", "distributed.cli.dask_worker", cluster.address, "--name", "behind",
               "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"],
              env=dict(os.environ, PYTHONPATH=str(old_checkout(tmp_path / "old"))), cwd=tmp_path)
    wait_for_workers(cluster.address, 3)
    course = make_toy_course(tmp_path / "grading")
    hand_in(course, tmp_path, ["ada", "bo", "cy"])

    for run in ("first", "second"):  # the cluster still works after the bad workers were left out
        graded = subprocess.run([*grade_command(course, cluster.address), "--force"], capture_output=True,
                                text=True, timeout=600)
        assert graded.returncode == 0, graded.stderr
        said = graded.stderr
        assert re.search(r"left out worker no-project \(tcp://127.0.0.1:\d+\): ModuleNotFoundError: "
                         r"No module named 'autograder'", said), said
        assert re.search(r"left out worker behind \(tcp://127.0.0.1:\d+\): RuntimeError: grader version "
                         rf"\S+ here, the coordinator's is {re.escape(grader_version())}", said), said
        assert "grading on 1 worker(s)" in said
    for student in ("ada", "bo", "cy"):
        outcome = load_outcome(course.root, student, "90_toy")
        assert (outcome.score, outcome.grader_version) == (5.0, grader_version())

    with Client(cluster.address) as client:  # nothing of the course stays on the scheduler
        plugins = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins))
    assert [name for name in plugins if name.startswith("modulecraft")] == []
    assert list(cluster.scratch.glob(f"{SCRATCH_PREFIX}*")) == []  # nor on the worker's disk


def test_two_courses_graded_at_once_on_one_cluster_each_get_their_scores(cluster, make_toy_course, tmp_path):
    courses = {"a": make_toy_course(tmp_path / "a"), "b": make_toy_course(tmp_path / "b")}
    hand_in(courses["a"], tmp_path, [f"a{n}" for n in range(3)])
    hand_in(courses["b"], tmp_path, [f"b{n}" for n in range(3)], {"add": WRONG_ADD})
    runs = {name: subprocess.Popen(grade_command(course, cluster.address), stderr=subprocess.PIPE, text=True)
            for name, course in courses.items()}
    for name, run in runs.items():
        assert run.wait(timeout=600) == 0, run.stderr.read()
        assert "not graded" not in run.stderr.read()
    assert {n: load_outcome(courses["a"].root, f"a{n}", "90_toy").score for n in range(3)} == {0: 5, 1: 5, 2: 5}
    assert {n: load_outcome(courses["b"].root, f"b{n}", "90_toy").score for n in range(3)} == {0: 3, 1: 3, 2: 3}


def test_the_course_fingerprint_is_what_grades_not_the_gradebook_s_bytes(make_toy_course, tmp_path):
    one = make_toy_course(tmp_path / "one")
    two = Course(tmp_path / "two", source=one.source)  # released on its own (a copy would have the same bytes)
    two.release()
    first = CourseBundle.of(one.root, one.source, one.course_id)
    second = dataclasses.replace(CourseBundle.of(two.root, two.source, two.course_id), private=first.private)
    assert first.gradebook != second.gradebook  # its own random row ids
    assert first.sha256 == second.sha256
    assert dataclasses.replace(first, cell_timeout=first.cell_timeout + 1).sha256 != first.sha256
    with tempfile.TemporaryDirectory() as folder:  # a test cell worth more points: another course
        copy = Path(folder) / "gradebook.db"
        copy.write_bytes(first.gradebook)
        with sqlite3.connect(copy) as db:
            db.execute("UPDATE grade_cells SET max_score = max_score + 1")
        assert dataclasses.replace(first, gradebook=copy.read_bytes()).sha256 != first.sha256


class Silent(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_every_scheduler_problem_is_one_line_within_a_bounded_time(cluster, make_toy_course, tmp_path):
    from distributed import LocalCluster
    course = make_toy_course(tmp_path / "grading")
    hand_in(course, tmp_path, ["ada"])
    dashboard = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Silent)  # an HTTP server, as the dashboard
    threading.Thread(target=dashboard.serve_forever, daemon=True).start()
    with Client(cluster.address) as client:
        [(worker, info)] = client.scheduler_info()["workers"].items()
    with LocalCluster(n_workers=0, host="127.0.0.1", security=True, dashboard_address="127.0.0.1:0") as tls:
        addresses = {"http": f"tcp://127.0.0.1:{dashboard.server_address[1]}",
                     "nobody": f"tcp://127.0.0.1:{free_port()}", "tls": f"tls://127.0.0.1:{free_port()}",
                     "worker": worker, "nanny": info["nanny"], "tcp to tls": tls.scheduler_address.replace("tls", "tcp")}
        runs = {name: subprocess.Popen(grade_command(course, address), stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True) for name, address in addresses.items()}
        errors = {}
        for name, run in runs.items():
            _, stderr = run.communicate(timeout=4 * dask_grading.CONNECT_TIMEOUT)  # the bound: killed past it
            lines = [line for line in stderr.splitlines() if not line.startswith("[grading] ")]
            assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), stderr
            errors[name] = lines[0]
    dashboard.shutdown()
    dashboard.server_close()
    assert "accepts connections but is not a Dask scheduler: an HTTP server answers there" in errors["http"]
    assert "no Dask scheduler answered at" in errors["nobody"] and "within 20 s" in errors["nobody"]
    assert "has no Dask TLS settings" in errors["tls"] and "DASK_DISTRIBUTED__COMM__TLS__CA_FILE" in errors["tls"]
    assert errors["worker"] == f"error: {worker} is a Dask worker, not the scheduler: its scheduler is {cluster.address}"
    assert errors["nanny"].startswith(f"error: {info['nanny']} is a Dask nanny, not the scheduler")
    assert f"it speaks TLS: use {tls.scheduler_address}" in errors["tcp to tls"]
    assert not (course.root / "reports").exists()


def test_the_guide_s_tls_cluster_grades(make_toy_course, tmp_path):
    """The guide's TLS block run as it is (in bash, on loopback and a free port): certificates made with openssl,
    scheduler and worker with them, the coordinator with Dask's security settings and a tls:// address."""
    course = make_toy_course(tmp_path / "grading")
    hand_in(course, tmp_path, ["ada"])
    text = (REPO_ROOT / "course" / "INSTRUCTORS.md").read_text()
    start = text.index("```bash\n", text.index("Across machines on a network you do not control")) + len("```bash\n")
    script = text[start:text.index("```", start)].replace("\\\n", " ")
    port = str(free_port())
    script = (script.replace("10.0.0.5", "127.0.0.1").replace("10.0.0.7", "127.0.0.1").replace("8786", port)
              .replace("--nworkers 4", "--nworkers 1")
              .replace("autograder grade --scheduler", f"autograder grade --root {course.root} --scheduler"))
    script = "\n".join(line + " &" if line.startswith(".venv/bin/dask") else line for line in script.splitlines())
    (tmp_path / ".venv").symlink_to(sys.prefix)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with open(tmp_path / "said", "w") as output:  # a file: the background processes keep what they inherit
        shell = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                                 start_new_session=True, stdout=output, stderr=output)
        try:
            shell.wait(timeout=600)
        finally:
            os.killpg(shell.pid, 9)  # the scheduler and the worker it started
    said = (tmp_path / "said").read_text()
    assert shell.returncode == 0, said
    assert "grading on 1 worker(s)" in said and "1/1" in said
    assert load_outcome(course.root, "ada", "90_toy").score == 5


def test_the_kubernetes_pods_commands_grade_over_tls(make_toy_course, tmp_path, monkeypatch, processes):
    """No Kubernetes cluster here: the guide's resource is written as the guide writes it, and what its pods run (the
    scheduler's and the workers' commands, the Secret's certificates made as the guide's TLS block makes them) runs
    as processes on loopback; the coordinator's lines of the guide's kubectl block grade a class through them."""
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("dask_kubernetes.operator", reason="the test extra installs dask-kubernetes")
    certificates = tmp_path / "certificates"
    certificates.mkdir()
    openssl = [line for line in instructors_snippet("Across machines on a network you do not control", "bash")
               .splitlines() if line.startswith("openssl")]
    subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(openssl)], cwd=certificates, check=True,
                   capture_output=True)
    monkeypatch.chdir(tmp_path)
    exec(instructors_snippet("**Kubernetes**"), {})
    spec = yaml.safe_load((tmp_path / "modulecraft-grading.yaml").read_text())

    assert (spec["apiVersion"], spec["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    assert "httpGet" not in str(spec) and "http-dashboard" not in str(spec)  # nothing asks the closed HTTP server
    assert spec["spec"]["worker"]["replicas"] == 20
    pods = {role: spec["spec"][role]["spec"] for role in ("scheduler", "worker")}
    for pod in pods.values():
        [container], [volume] = pod["containers"], pod["volumes"]
        [mount] = container["volumeMounts"]
        assert volume["secret"]["secretName"] == "modulecraft-dask-tls" and mount["name"] == volume["name"]
        assert mount["readOnly"] and container["args"][container["args"].index("--preload") + 1] == \
            "autograder.dask_preload"
    assert pods["worker"]["containers"][0]["resources"]["limits"]["cpu"] == "1"

    port = free_port()

    def on_this_machine(container) -> list[str]:
        """The pod's command with the Secret's folder, the scheduler's service and port of this test, on loopback."""
        folder = container["volumeMounts"][0]["mountPath"]
        words = [word.replace(folder, str(certificates)).replace("modulecraft-grading-scheduler:8786",
                                                                 f"127.0.0.1:{port}")
                 .replace("$(DASK_WORKER_NAME)", "pod-0") for word in container["args"]]
        if "--port" in words:
            words[words.index("--port") + 1] = str(port)
        assert words[0] == "dask"
        return [str(Path(sys.executable).parent / "dask"), *words[1:], "--host", "127.0.0.1",
                "--dashboard-address", "127.0.0.1:0"]

    for role in ("scheduler", "worker"):
        processes(on_this_machine(pods[role]["containers"][0]), cwd=tmp_path)

    course = make_toy_course(tmp_path / "grading")
    hand_in(course, tmp_path, ["ada"])
    kubectl = instructors_snippet("and this starts it, grades", "bash").replace("\\\n", " ").splitlines()
    [exports] = [shlex.split(line)[1:] for line in kubectl if line.startswith("export ")]
    [command] = [shlex.split(line) for line in kubectl if "-m autograder grade" in line]
    assert command[:4] == ["python", "-m", "autograder", "grade"]
    command = [sys.executable, *command[1:4], "--root", str(course.root),
               *[word.replace(":8786", f":{port}") for word in command[4:]]]
    graded = subprocess.run(command, cwd=certificates, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, **dict(word.split("=", 1) for word in exports)))
    assert graded.returncode == 0, graded.stderr
    assert "grading on 1 worker(s)" in graded.stderr
    assert load_outcome(course.root, "ada", "90_toy").score == 5


def test_a_coordinator_killed_mid_run_leaves_nothing_of_the_course_on_the_cluster(cluster, make_toy_course,
                                                                                  tmp_path):
    course = make_toy_course(tmp_path / "grading")
    hand_in(course, tmp_path, ["ada", "bo"], {"add": "import time\ntime.sleep(3)\n" + WRONG_ADD})
    coordinator = subprocess.Popen(grade_command(course, cluster.address), stderr=subprocess.PIPE, text=True)
    for line in coordinator.stderr:  # killed once the workers were prepared
        if "grading on" in line:
            break
    assert list(cluster.scratch.glob(f"{SCRATCH_PREFIX}*"))
    coordinator.kill()
    coordinator.wait(timeout=30)
    with Client(cluster.address) as client:
        deadline = time.monotonic() + dask_grading.FORGET_AFTER + 60
        while time.monotonic() < deadline:  # the scheduler waits for the client to come back, then forgets the run
            plugins = client.run_on_scheduler(lambda dask_scheduler: [*dask_scheduler.worker_plugins,
                                                                      *dask_scheduler.plugins])
            if not [name for name in plugins if name.startswith("modulecraft")] and \
                    not list(cluster.scratch.glob(f"{SCRATCH_PREFIX}*")):
                break
            time.sleep(0.5)
    assert [name for name in plugins if name.startswith("modulecraft")] == []
    assert list(cluster.scratch.glob(f"{SCRATCH_PREFIX}*")) == []
