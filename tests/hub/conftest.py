"""The hub tests need root (Unix accounts, the grader's sandbox), Chromium and the hub's install, which they make
under the repository (`.hub/`: nothing outside it but Debian packages). One hub, started once per test run, serves
every test: the classroom first (tests/hub/test_classroom.py), then the hostile learner
(test_hostile_learners.py), then the administrator's operations (test_operations.py, which restarts the hub)."""
from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "browser"))  # JupyterLab's notebook driver and the course's solutions

from hub_driver import CHAPTERS, PREFIX, PYTHON, Accounts, Hub, UserSession, pid_alive, run_as  # noqa: E402

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-dev-shm-usage"]


def unreachable_by_others(path: Path) -> Path | None:
    """The first folder on the way to `path` that other users cannot pass (learners' servers run from it)."""
    for folder in [*reversed(path.parents)]:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None


@pytest.fixture(scope="session")
def hub_install():
    """The hub's install under PREFIX, brought up to date with this checkout (scripts/hub-install.sh: quick when
    nothing changed)."""
    if os.geteuid() != 0:
        pytest.skip("HUB TEST SKIPPED: it creates Unix accounts and grades in the root sandbox; run it as root")
    if not shutil.which("chromium"):
        pytest.skip("HUB TEST SKIPPED: no Chromium (Debian: apt-get install -y chromium; `make test` does this as root)")
    closed = unreachable_by_others(PREFIX)
    if closed is not None:
        pytest.skip(f"HUB TEST SKIPPED: learners' servers run from {PREFIX}, but other users cannot enter {closed}; "
                    "set MODULECRAFT_HUB_PREFIX to a folder they can (e.g. /opt/modulecraft-hub-test)")
    done = subprocess.run(["bash", REPO / "scripts" / "hub-install.sh", PREFIX], capture_output=True, text=True)
    assert done.returncode == 0, f"scripts/hub-install.sh failed:\n{done.stdout}\n{done.stderr}"
    return PREFIX


@dataclasses.dataclass
class Classroom:
    accounts: Accounts
    hub: Hub
    course_root: Path
    exchange: Path
    new_context: object
    sessions: dict = dataclasses.field(default_factory=dict)

    def person(self, role: str) -> UserSession:
        """`role`'s browser, logged in (once per test run)."""
        if role not in self.sessions:
            session = UserSession(self.new_context(), self.hub, self.accounts[role])
            session.log_in()
            self.sessions[role] = session
        return self.sessions[role]


@pytest.fixture(scope="session")
def classroom(hub_install, playwright_session, tmp_path_factory):
    """One instructor, two learners and a hostile one (mallory), the course folder made by `autograder.hub setup`
    and the hub started on free loopback ports. Everything is removed afterwards, and nothing may be left running."""
    base = Path(tempfile.mkdtemp(prefix="modulecraft-hub-", dir="/var/tmp"))
    base.chmod(0o755)  # the exchange inside must be reachable by every account
    accounts = Accounts("instructor", "alice", "bob", "mallory")
    profiles = tmp_path_factory.mktemp("profiles")
    contexts, hub = [], None

    def new_context():
        context = playwright_session.chromium.launch_persistent_context(
            str(profiles / f"profile{len(contexts)}"), executable_path=shutil.which("chromium"), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        contexts.append(context)
        return context

    try:
        course_root = accounts.home("instructor") / "modulecraft-course"
        exchange, selfcheck = base / "exchange", base / "selfcheck"
        run_as(None, PYTHON, "-m", "autograder.hub", "setup", "--course-root", course_root, "--owner",
               accounts["instructor"], "--exchange", exchange, "--selfcheck-source", selfcheck, "--chapters", *CHAPTERS)
        hub = Hub(base, [accounts["instructor"]], [accounts[r] for r in ("alice", "bob", "mallory")], course_root,
                  exchange, selfcheck)
        yield Classroom(accounts, hub, course_root, exchange, new_context)
    finally:
        for context in contexts:
            context.close()
        if hub is not None:
            hub.stop()
        leftovers = {name: accounts.describe(pids) for name, pids in accounts.processes().items()}
        accounts.remove()
        shutil.rmtree(base, ignore_errors=True)
    assert hub.process.poll() is not None and not any(pid_alive(pid) for pid in hub.proxy_pids())
    assert not any(leftovers.values()), f"processes left running after the hub stopped: {leftovers}"
