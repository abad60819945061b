"""A JupyterLab server started for a test, and a page object that drives it in Chromium.

The waits follow what a trial on this machine showed (`/work/shared/notes/browser-testing.md`): a Run All clicked
before the kernel is idle, both in the status bar and on the server, can be swallowed silently, so it is confirmed
and retried; kernels outlive the page, so sessions are deleted through the REST API between tests.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from autograder.config import GRADING_ENV_VAR
from autograder.workspace import lab_command, lab_environment

REPO = Path(__file__).resolve().parents[2]
COURSE_SOURCE = REPO / "course" / "source"
CHAPTER = "01_init_and_call"  # the chapter the learner's tests open

START_TIMEOUT = 60  # seconds for the server to answer
KERNEL_TIMEOUT = 60_000  # milliseconds for a kernel to start and become idle
RUN_TIMEOUT = 120_000  # milliseconds for a chapter to run top to bottom


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LabServer:
    """JupyterLab serving `root` on a free loopback port, with the private configuration of `role`."""

    def __init__(self, root: Path, role: str, state: Path, log: Path, extra_env: dict[str, str]):
        self.root, self.port, self.token = Path(root), free_port(), secrets.token_hex(16)
        env = {**lab_environment(state, role), **extra_env}
        env.pop(GRADING_ENV_VAR, None)  # the learner's kernels run the self-check
        # Every cell in the DOM, in order (the tests address cells by their index in the notebook file); no
        # news pop-up over the page.
        for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                               "apputils-extension/notification": {"fetchNews": "false"}}.items():
            settings = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(json.dumps(values))
        command = lab_command(self.root, "", [
            "--no-browser", "--ip=127.0.0.1", f"--port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
        ])
        self.log = log
        self.process = subprocess.Popen(command, cwd=self.root, env=env, stdout=log.open("w"),
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def page_url(self, path: str) -> str:
        """A URL opening `path` in a JupyterLab workspace of its own (no tabs restored from earlier pages)."""
        tree = f"/tree/{path}" if path else ""
        return f"{self.url}/lab/workspaces/{secrets.token_hex(4)}{tree}?token={self.token}"

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                self.api("status")
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {START_TIMEOUT} s:\n{self.log.read_text()}")

    def logged_errors(self) -> list[str]:
        """Error and critical lines, and tracebacks, in the server's log so far."""
        return [line for line in self.log.read_text().splitlines()
                if line.startswith(("[E ", "[C ")) or line.startswith("Traceback")]

    def kernel_state(self, notebook: str) -> str | None:
        for session in self.api("sessions"):
            if session["path"] == notebook:
                return session["kernel"]["execution_state"]
        return None

    def delete_sessions(self) -> None:
        """Shut down every kernel, so the next test's notebook gets a fresh one."""
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class Notebook:
    """One notebook open in JupyterLab: cells addressed by their index in the notebook file."""

    def __init__(self, page: Page, server: LabServer, path: str):
        self.page, self.server, self.path = page, server, path
        self.panel = page.locator(".jp-NotebookPanel:has(.jp-Notebook):visible")
        self.cells = self.panel.locator(".jp-Notebook .jp-Cell")

    # -- opening ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, page: Page, server: LabServer, path: str) -> Notebook:
        page.goto(server.page_url(path))
        notebook = cls(page, server, path)
        notebook.wait_idle()
        return notebook

    def wait_idle(self) -> None:
        """The kernel is idle in the status bar and on the server (before that, a Run All can be lost)."""
        expect(self.page.locator(".jp-StatusBar-Widget")).to_contain_text("Idle", timeout=KERNEL_TIMEOUT)
        deadline = time.monotonic() + KERNEL_TIMEOUT / 1000
        while self.server.kernel_state(self.path) != "idle":
            assert time.monotonic() < deadline, f"the kernel of {self.path} never became idle on the server"
            time.sleep(0.2)

    # -- running ---------------------------------------------------------------------------------------
    def menu(self, menu: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    def prompts(self) -> list[str]:
        """Every cell's input prompt ("[ ]:", "[*]:", "[3]:"; empty for markdown), in order."""
        return self.panel.evaluate(
            "panel => [...panel.querySelectorAll('.jp-InputArea-prompt')].map(p => p.textContent)")

    def run_all(self, attempts: int = 3) -> None:
        """Run → Run All Cells, confirmed by a prompt turning to [*] or changing its number; retried when the
        click was swallowed."""
        for _ in range(attempts):
            self.wait_idle()
            before = self.prompts()
            self.menu("Run", "Run All Cells")
            try:
                self.page.wait_for_function(
                    """([panel, before]) => [...panel.querySelectorAll('.jp-InputArea-prompt')]
                         .some((p, i) => p.textContent.includes('[*]') || p.textContent !== before[i])""",
                    arg=[self.panel.element_handle(), before], timeout=10_000)
                break
            except PlaywrightTimeout:
                continue
        else:
            raise AssertionError(f"Run All Cells never started in {self.path} after {attempts} attempts")
        self.wait_finished()

    def wait_finished(self) -> None:
        """No cell is queued or running any more."""
        self.page.wait_for_function(
            """panel => ![...panel.querySelectorAll('.jp-InputArea-prompt')]
                         .some(p => p.textContent.includes('[*]'))""",
            arg=self.panel.element_handle(), timeout=RUN_TIMEOUT)
        self.wait_idle()

    def run_cell(self, index: int) -> None:
        """Run one cell in place (Ctrl+Enter: Shift+Enter on the last cell would append a new one)."""
        cell = self.cells.nth(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Control+Enter")
        expect(cell.locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=RUN_TIMEOUT)
        self.wait_finished()

    # -- editing ---------------------------------------------------------------------------------------
    def set_source(self, index: int, source: str) -> None:
        """Replace a cell's code as if pasted (no auto-indent or auto-closed brackets from typing)."""
        editor = self.cells.nth(index).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.insert_text(source)
        expect(editor).to_contain_text(source.strip().splitlines()[-1].strip())

    def save(self) -> None:
        self.page.keyboard.press("Control+S")
        expect(self.page.locator(".jp-mod-current .jp-mod-dirty")).to_have_count(0, timeout=10_000)

    # -- reading ---------------------------------------------------------------------------------------
    def prompt(self, index: int) -> str:
        return self.cells.nth(index).locator(".jp-InputArea-prompt").inner_text()

    def output_text(self, index: int) -> str:
        return self.cells.nth(index).locator(".jp-OutputArea").inner_text()

    def error_outputs(self, index: int):
        """A cell's error outputs (JupyterLab renders a traceback as stderr text)."""
        return self.cells.nth(index).locator(ERROR_OUTPUT)

    def cells_with_errors(self) -> list[int]:
        return self.panel.evaluate(
            "(panel, selector) => [...panel.querySelectorAll('.jp-Notebook .jp-Cell')]"
            "  .flatMap((cell, index) => cell.querySelector(selector) ? [index] : [])", ERROR_OUTPUT)


ERROR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
