"""A real JupyterHub for a test: Unix accounts, the hub and its proxy on loopback, and a logged-in browser per user.

The hub is the one an instructor installs (`scripts/hub-install.sh`, `hub/jupyterhub_config.py`), installed under
the repository (`.hub/`, or MODULECRAFT_HUB_PREFIX); only its authenticator differs (JupyterHub's dummy one with a
random password, instead of the machine's passwords). Browsers reach it at http://localhost:<port>, each user's
server at http://<user>.localhost:<port> (Chromium resolves every *.localhost name to this machine).
Everything made here (accounts, folders, processes) is removed by `stop()`/`remove()`, by PID and by name.
"""
from __future__ import annotations

import http.client
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from playwright.sync_api import BrowserContext, Page, expect

REPO = Path(__file__).resolve().parents[2]
PREFIX = Path(os.environ.get("MODULECRAFT_HUB_PREFIX") or REPO / ".hub")
PYTHON = PREFIX / "venv" / "bin" / "python"
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
SPAWN_TIMEOUT = 180_000  # milliseconds: a loaded machine starts a single-user server slowly
COURSE_ID = "modulecraft"
CHAPTERS = ["03_parameters", "04_buffers"]  # two small chapters graded by probes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_as(user: str | None, *command, check=True, **kwargs) -> subprocess.CompletedProcess:
    """Run `command` as Unix `user` (root when None), as a person at a terminal would."""
    prefix = [RUNUSER, "-u", user, "--"] if user else []
    return subprocess.run([*prefix, *map(str, command)], capture_output=True, text=True, check=check, **kwargs)


class Accounts:
    """Unix users made for one test (`useradd -m`) and removed with their homes afterwards."""

    def __init__(self, *roles: str):
        suffix = secrets.token_hex(3)
        self.names = {role: f"mc{role[:4]}{suffix}" for role in roles}
        for name in self.names.values():
            run_as(None, "useradd", "-m", "-s", "/bin/bash", name)

    def __getitem__(self, role: str) -> str:
        return self.names[role]

    def processes(self) -> dict[str, list[int]]:
        """Each account's running processes; not the ended ones their parent has yet to reap (zombies)."""
        running = {}
        for name in self.names.values():
            listed = run_as(None, "ps", "-u", name, "-o", "pid=,stat=", check=False).stdout.split("\n")
            running[name] = [int(pid) for pid, stat in (line.split() for line in listed if line.strip())
                             if not stat.startswith("Z")]
        return running

    def describe(self, pids: list[int]) -> list[str]:
        return [run_as(None, "ps", "-o", "pid=,args=", "-p", str(pid), check=False).stdout.strip() for pid in pids]

    def remove(self) -> None:
        for name, pids in self.processes().items():
            for pid in pids:  # only processes of the test's own accounts
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for name in self.names.values():
            run_as(None, "userdel", "-r", "-f", name, check=False)

    def home(self, role: str) -> Path:
        return Path(pwd.getpwnam(self[role]).pw_dir)


class Hub:
    """`jupyterhub -f hub/jupyterhub_config.py` on free loopback ports, configured through its environment."""

    def __init__(self, base: Path, instructors: list[str], learners: list[str], course_root: Path, exchange: Path,
                 selfcheck: Path):
        self.base, self.port, self.password = base, free_port(), secrets.token_urlsafe(12)
        self.exchange, self.selfcheck = exchange, selfcheck
        self.state = base / "hub-state"
        self.state.mkdir()
        self.log = base / "jupyterhub.log"
        self.environment = {
            **os.environ,
            "MODULECRAFT_INSTRUCTORS": ",".join(instructors), "MODULECRAFT_LEARNERS": ",".join(learners),
            "MODULECRAFT_COURSE_ROOT": str(course_root), "MODULECRAFT_EXCHANGE": str(exchange),
            "MODULECRAFT_SELFCHECK_SOURCE": str(selfcheck),
            "MODULECRAFT_HUB_PREFIX": str(PREFIX), "MODULECRAFT_HUB_STATE": str(self.state),
            "MODULECRAFT_HUB_IP": "127.0.0.1", "MODULECRAFT_HUB_PORT": str(self.port),
            "MODULECRAFT_HUB_API_PORT": str(free_port()), "MODULECRAFT_PROXY_API_PORT": str(free_port()),
            "MODULECRAFT_HUB_AUTH": "dummy", "MODULECRAFT_HUB_DUMMY_PASSWORD": self.password}
        self._start()

    def _start(self) -> None:
        self.process = subprocess.Popen(
            [PREFIX / "venv" / "bin" / "jupyterhub", "-f", REPO / "hub" / "jupyterhub_config.py"], cwd=self.state,
            env=self.environment, stdout=self.log.open("a"), stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_up()

    def restart(self, learners: list[str]) -> None:
        """As the guide says to change the lists: the service stopped, its learners' list changed, started again
        (same ports and database: browsers keep their cookies)."""
        self.stop()
        self.environment["MODULECRAFT_LEARNERS"] = ",".join(learners)
        self._start()

    @property
    def url(self) -> str:
        """The hub as browsers reach it (its default MODULECRAFT_HUB_URL)."""
        return f"http://localhost:{self.port}"

    def server_url(self, name: str) -> str:
        return f"http://{name}.localhost:{self.port}/user/{name}"

    def _wait_until_up(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterHub exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/hub/login", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterHub did not answer within {timeout} s:\n{self.log.read_text()}")

    def proxy_pids(self) -> list[int]:
        pid_file = self.state / "jupyterhub-proxy.pid"
        return [int(pid_file.read_text())] if pid_file.exists() else []

    def stop(self) -> None:
        """SIGTERM: JupyterHub stops the users' servers and its proxy before it exits."""
        proxies = self.proxy_pids()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for pid in proxies:
            _wait_gone(pid)


def _wait_gone(pid: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.2)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def get_with_token(url: str, token: str) -> tuple[int, str, str]:
    """GET `url` with an API token and no cookies, as a learner's script would, following redirects with the token:
    the last answer's status, body and address. Sent to this machine with the URL's host as Host header (Python's
    resolver knows no <user>.localhost)."""
    for _ in range(5):
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=60)
        try:
            connection.request("GET", urllib.parse.urlunsplit(("", "", parts.path, parts.query, "")),
                               headers={"Host": parts.netloc, "Authorization": f"token {token}"})
            response = connection.getresponse()
            status, body, location = response.status, response.read().decode(errors="replace"), response.getheader(
                "Location")
        finally:
            connection.close()
        if status not in (301, 302, 303, 307, 308) or not location:
            return status, body, url
        url = urllib.parse.urljoin(url, location)
    raise AssertionError(f"more than 5 redirects from {url}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class UserSession:
    """One person's browser on the hub: logged in through the login page, their server's pages and API."""

    def __init__(self, context: BrowserContext, hub: Hub, name: str):
        self.context, self.hub, self.name = context, hub, name
        self.page: Page = context.new_page()
        self.page.set_default_timeout(60_000)

    @property
    def server(self) -> str:
        return self.hub.server_url(self.name)

    def _submit_login_form(self) -> None:
        self.page.goto(f"{self.hub.url}/hub/login")
        self.page.fill("#username_input", self.name)
        self.page.fill("#password_input", self.hub.password)
        self.page.click("#login_submit")

    def log_in(self) -> None:
        self._submit_login_form()
        # The hub spawns the server (its progress page), then sends the browser to JupyterLab.
        self.page.wait_for_url(f"{self.server}/lab**", timeout=SPAWN_TIMEOUT)
        expect(self.page.locator("#jp-main-dock-panel")).to_be_visible(timeout=SPAWN_TIMEOUT)

    def log_in_refused(self) -> None:
        """The login form, with the right password, answers with its error."""
        self._submit_login_form()
        expect(self.page.locator(".login_error")).to_be_visible()
        assert self.page.url.startswith(f"{self.hub.url}/hub/login"), self.page.url

    def _xsrf(self) -> str:
        return next(c["value"] for c in self.context.cookies(self.server + "/") if c["name"] == "_xsrf")

    def _fetch(self, method: str, path: str, data=None):
        """A request as the page's own scripts send it (the session's cookies, the XSRF header), from the
        person's page, which is on their server's origin (Playwright's own requests resolve names with the
        system, which knows no <user>.localhost)."""
        assert self.page.url.startswith(self.server), f"{self.name}'s page is at {self.page.url}"
        status, text = self.page.evaluate(
            """async ([method, url, body, xsrf]) => {
                const response = await fetch(url, {method, body, headers: {"X-XSRFToken": xsrf}});
                return [response.status, await response.text()];
            }""", [method, f"{self.server}/{path}", None if data is None else json.dumps(data), self._xsrf()])
        assert 200 <= status < 300, f"{method} {path}: {status} {text[:500]}"
        return json.loads(text) if text else None

    def get(self, path: str):
        return self._fetch("GET", path)

    def post(self, path: str, data=None):
        return self._fetch("POST", path, data)

    def put(self, path: str, data) -> None:
        self._fetch("PUT", path, data)

    def delete(self, path: str) -> None:
        self._fetch("DELETE", path)

    # What JupyterLab's notebook driver (tests/browser/jupyterlab_driver.Notebook) needs of a server.
    def page_url(self, path: str) -> str:
        return f"{self.server}/lab/workspaces/{secrets.token_hex(4)}/tree/{path}"

    def kernel_state(self, notebook: str) -> str | None:
        for session in self.get("api/sessions"):
            if session["path"] == notebook:
                return session["kernel"]["execution_state"]
        return None


ACTION_TIMEOUT = 300_000  # milliseconds: releasing or collecting runs nbgrader on a loaded machine


class Formgrader:
    """The instructor's formgrader pages, driven by the links an instructor clicks (each answers in a dialog)."""

    def __init__(self, session: UserSession):
        self.session, self.page = session, session.page

    def open_assignments(self) -> None:
        """Formgrader in a tab of its own, at Manage Assignments (the guide's address)."""
        self.page.goto(f"{self.session.server}/formgrader/manage_assignments")
        expect(self.page.locator("#main-table")).to_be_visible()

    def assignment_row(self, chapter: str):
        return self.page.locator("#main-table tr", has=self.page.locator("td.name", has_text=chapter))

    def click(self, chapter: str, column: str) -> str:
        """Click the link in `column` ("assign", "release", "collect", "generate-feedback", "release-feedback") of
        the chapter's row; return the text of the success dialog (an error dialog fails the test)."""
        link = self.assignment_row(chapter).locator(f"td.{column} a")
        expect(link).to_be_visible(timeout=ACTION_TIMEOUT)
        link.click()
        return self._dialog(expect_success=True)

    def autograde(self, chapter: str, student: str) -> str:
        """Open the chapter's submissions and click Autograde on the student's row; return the dialog's text."""
        self.page.goto(f"{self.session.server}/formgrader/manage_submissions/{chapter}")
        row = self.page.locator("#main-table tr", has_text=student)
        row.locator("td.autograde a").click()
        return self._dialog(expect_success=False)

    def _dialog(self, expect_success: bool) -> str:
        dialog = self.page.locator("#success-modal, #error-modal")
        expect(dialog).to_be_visible(timeout=ACTION_TIMEOUT)
        text = dialog.inner_text()
        succeeded = dialog.get_attribute("id") == "success-modal"
        assert succeeded == expect_success, text
        dialog.locator("button", has_text="OK").click()
        expect(dialog).to_have_count(0)
        return text


class AssignmentList:
    """A learner's Assignments panel in JupyterLab (Nbgrader → Assignment List): Fetch, Submit, Fetch Feedback."""

    def __init__(self, session: UserSession):
        self.session, self.page = session, session.page

    def open(self) -> None:
        self.page.goto(f"{self.session.server}/lab")
        expect(self.page.locator("#jp-main-dock-panel")).to_be_visible(timeout=SPAWN_TIMEOUT)
        self.page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        self.page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
        expect(self.page.locator("#released_assignments_list")).to_be_visible()

    def shows_released(self, chapter: str) -> None:
        expect(self.page.locator("#released_assignments_list .list_item", has_text=chapter).first).to_be_visible(
            timeout=ACTION_TIMEOUT)

    def _press(self, section: str, chapter: str, button: str) -> None:
        row = self.page.locator(f"#{section} .list_item", has_text=chapter).first
        row.get_by_role("button", name=button, exact=True).click()

    def fetch(self, chapter: str) -> None:
        self._press("released_assignments_list", chapter, "Fetch")
        expect(self.page.locator("#fetched_assignments_list .list_item", has_text=chapter).first).to_be_visible(
            timeout=ACTION_TIMEOUT)

    def submit(self, chapter: str) -> None:
        submitted = self.page.locator("#submitted_assignments_list .list_item", has_text=chapter)
        before = submitted.count()
        self._press("fetched_assignments_list", chapter, "Submit")
        expect(submitted).not_to_have_count(before, timeout=ACTION_TIMEOUT)

    def fetch_feedback(self, chapter: str) -> None:
        row = self.page.locator("#submitted_assignments_list .list_item", has_text=chapter).first
        button = row.get_by_role("button", name="Fetch Feedback", exact=True)
        button.click()
        expect(self.page.get_by_role("button", name="Fetching Feedback...")).to_have_count(0, timeout=ACTION_TIMEOUT)
