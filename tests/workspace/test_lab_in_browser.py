"""The learner's JupyterLab, as `launch` configures it, in headless Chromium: the index opens unmodified, no
prompt about Jupyter news covers it, and the server writes nothing in the learner's home."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from autograder.workspace import INDEX, STATE_DIR, lab_command, lab_environment

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEWS_PROMPT = "official Jupyter news"  # the toast JupyterLab shows while fetchNews is undecided


@pytest.fixture
def learner_lab(course):
    """JupyterLab serving a copy of the prepared workspace, exactly as `launch` starts it (no test settings)."""
    if CHROMIUM is None:
        pytest.skip("no Chromium found (Debian: apt-get install -y chromium)")
    _, workspace = course
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(16)
    env = lab_environment(workspace / STATE_DIR / "jupyter-learner", "learner")
    env["HOME"] = str(workspace.parent / "home")
    env["MODULECRAFT_SELFCHECK_CACHE"] = str(workspace.parent / "selfcheck-cache")  # a learner's is in ~/.cache
    os.makedirs(env["HOME"])
    command = lab_command(workspace, INDEX, ["--no-browser", "--ip=127.0.0.1", f"--port={port}",
                                              "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"])
    log = (workspace.parent / "lab.log").open("w")
    server = subprocess.Popen(command, cwd=workspace, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (workspace.parent / "lab.log").read_text()
                time.sleep(0.3)
        yield workspace, f"{url}/lab/workspaces/{secrets.token_hex(4)}/tree/{INDEX}?token={token}", Path(env["HOME"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
        log.close()


def test_the_index_opens_unmodified_and_no_news_prompt_shows(learner_lab, playwright_session):
    workspace, page_url, home = learner_lab
    before = (workspace / INDEX).read_bytes()
    browser = playwright_session.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(page_url)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        # The kernel connects and reports its language_info: that is when a notebook became modified.
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        time.sleep(3)  # the news prompt comes a moment after the page loads
        dirty = page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count()
        prompts = page.get_by_text(NEWS_PROMPT).count()
    finally:
        browser.close()
    assert dirty == 0, "opening the index marked it modified"
    assert prompts == 0, "JupyterLab asks about Jupyter news over the index"
    assert (workspace / INDEX).read_bytes() == before
    assert [str(path.relative_to(home)) for path in home.rglob("*")] == [], "JupyterLab wrote in the learner's home"
