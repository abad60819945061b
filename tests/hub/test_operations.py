"""What the instructor's guide says the hub's administrator does, on the hub of the classroom test (run after it and
the hostile learner's test; the last test restarts the hub):

- `autograder.hub grade` skips a graded submission, `--force` grades it again: a submission whose graded copy
  and scores were lost (what nbgrader's Autograde button did) is graded anew, the learner's files untouched;
- `autograder.hub setup` refuses an exchange whose course folder a learner made first;
- a learner taken off the list, the hub restarted: every server stopped, the removed learner cannot log in again
  nor keep the session she had, nor use an API token she made before (on the hub or her server) or make a new one
  with her old cookie; the others' next page offers to start their server again.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import urllib.parse
from pathlib import Path

import pytest
from hub_driver import CHAPTERS, COURSE_ID, PYTHON, SPAWN_TIMEOUT, get_with_token, run_as
from nbgrader.api import Gradebook
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]


def scores(course_root: Path, learner: str, chapter: str) -> tuple[float, float]:
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        notebook = gradebook.find_submission_notebook(chapter, chapter, learner)
        return float(notebook.score), float(notebook.max_score)


def files(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Each file under `folder`: its content's hash, modification time and owner."""
    return {str(path.relative_to(folder)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns,
                                            path.stat().st_uid)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_grade_force_grades_a_graded_submission_again(classroom):
    accounts, course_root = classroom.accounts, classroom.course_root
    alice, chapter = accounts["alice"], CHAPTERS[1]
    graded = scores(course_root, alice, chapter)
    assert graded[1] > 0 and graded[0] == graded[1], graded
    submitted, home = course_root / "submitted" / alice / chapter, accounts.home("alice") / chapter
    learners_files = files(submitted), files(home)

    # The graded copy deleted and the scores zeroed, as nbgrader's Autograde left a graded submission.
    autograded = course_root / "autograded" / alice / chapter
    shutil.rmtree(autograded)
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        for notebook in gradebook.find_submission(chapter, alice).notebooks:
            for grade in notebook.grades:
                grade.auto_score = 0
        gradebook.db.commit()
    assert scores(course_root, alice, chapter)[0] == 0

    command = [PYTHON, "-m", "autograder.hub", "grade", "--course-root", course_root]
    skipped = run_as(None, *command, check=False)
    assert skipped.returncode == 0 and "already graded and unchanged" in skipped.stdout, skipped.stdout + skipped.stderr
    assert scores(course_root, alice, chapter)[0] == 0 and not autograded.exists()

    forced = run_as(None, *command, "--force", check=False)
    assert forced.returncode == 0 and "already graded" not in forced.stdout, forced.stdout + forced.stderr
    assert scores(course_root, alice, chapter) == graded
    assert (autograded / f"{chapter}.ipynb").stat().st_uid == accounts.home("instructor").stat().st_uid
    assert (files(submitted), files(home)) == learners_files


def test_setup_refuses_an_exchange_a_learner_prepared(classroom):
    """A learner who makes the course's folder in the exchange before `setup` would own it (and could block
    releases, or read what is put there): setup stops and names her."""
    accounts = classroom.accounts
    exchange = Path(tempfile.mkdtemp(dir=classroom.exchange.parent))  # removed with the classroom's folder
    exchange.chmod(0o1777)
    run_as(accounts["mallory"], "mkdir", "-p", exchange / COURSE_ID / "inbound")
    done = run_as(None, PYTHON, "-m", "autograder.hub", "setup", "--course-root", exchange / "course", "--owner",
                  accounts["instructor"], "--exchange", exchange, "--selfcheck-source", exchange / "selfcheck",
                  "--chapters", CHAPTERS[0], check=False)
    assert done.returncode != 0 and f"was made by {accounts['mallory']}, not by" in done.stderr, done
    assert (exchange / COURSE_ID).stat().st_uid == accounts.home("mallory").stat().st_uid
    assert not (exchange / "course").exists()


def test_a_learner_taken_off_the_list_is_logged_out_for_good(classroom):
    accounts, hub = classroom.accounts, classroom.hub
    alice, bob = classroom.person("alice"), classroom.person("bob")  # logged in, their servers running
    servers = {name: running_servers(name) for name in (alice.name, bob.name)}
    assert all(servers.values()), servers
    # bob makes an API token on the hub's token page, which he leaves open; it reaches the hub and his server.
    bob.page.goto(f"{hub.url}/hub/token")
    made = press_request_token(bob.page)
    assert made.status == 201
    token = made.json()["token"]  # the page shows it once its script has run: read then, it could still be empty
    expect(bob.page.locator("#token-result")).to_have_text(token)
    whoami, his_files = f"{hub.url}/hub/api/user", f"{bob.server}/api/contents"
    status, text, _ = get_with_token(whoami, token)
    assert status == 200 and json.loads(text)["name"] == bob.name, (status, text)
    assert get_with_token(his_files, token)[0] == 200

    hub.restart(learners=[accounts["alice"], accounts["mallory"]])  # bob taken off the list

    # Every server stopped with the hub; saved work stays.
    assert not any(running_servers(name) for name in accounts.names.values())
    assert (accounts.home("bob") / CHAPTERS[0] / f"{CHAPTERS[0]}.ipynb").exists()
    # The token page bob left open (his old cookie and XSRF token) makes no new token, and the one he made is
    # refused by the hub and at his server's address.
    assert "jupyterhub-hub-login" in {cookie["name"] for cookie in bob.context.cookies(f"{hub.url}/hub/")}
    assert press_request_token(bob.page).status == 403
    assert get_with_token(whoami, token)[0] == 403
    # (A server not running answers a user the hub accepts with "not running"; bob is sent to log in.)
    status, text, answered = get_with_token(his_files, token)
    assert urllib.parse.urlsplit(answered).path == "/hub/login", (status, answered, text[:300])
    assert not running_servers(bob.name)
    # bob's session (his browser's cookie) is over: his next page is the login page, which refuses him.
    bob.page.goto(f"{hub.url}/hub/home")
    expect(bob.page).to_have_url(re.compile(rf"{re.escape(hub.url)}/hub/login.*"))
    bob.page.goto(f"{bob.server}/lab")
    expect(bob.page.locator("#login_submit")).to_be_visible()
    bob.log_in_refused()
    assert not running_servers(bob.name)
    # alice, still logged in: her next page says her server is not running, and its Launch button starts it.
    alice.page.goto(f"{alice.server}/lab")
    alice.page.locator("#start").click()
    expect(alice.page.locator("#jp-main-dock-panel")).to_be_visible(timeout=SPAWN_TIMEOUT)


def press_request_token(page):
    """Press the token page's "Request new API token": the hub's answer to the request its script sends."""
    with page.expect_response(lambda response: response.request.method == "POST"
                              and "/hub/api/users/" in response.url) as answer:
        page.get_by_role("button", name="Request new API token").click()
    return answer.value


def running_servers(user: str) -> list[str]:
    return run_as(None, "pgrep", "-u", user, "-f", "jupyterhub-singleuser", check=False).stdout.split()
