"""The classroom tried by a hostile learner, mallory, who has read this repository, on the hub of the classroom
test (tests/hub/test_classroom.py runs first and leaves two chapters released, submitted and graded):

- mallory's server serves a page of her own making, and the instructor opens it: nothing of the instructor's is
  read or written (each server has an origin of its own; her ~/.jupyter does not configure her server);
- mallory submits as alice, and submits a link to the instructor's chapter with its solutions: Collect refuses
  both, `status` lists both, alice's grade stands; her backdated submission is dated when it was made;
- mallory submits scripts (in markdown, in what her code displays while it is graded, in an HTML file): the
  instructor grades her submission by hand in formgrader and opens her file, and none of them runs; nor does a
  page among a learner's own files when she opens it in her server;
- the same submission hands an exercise to the hub's copy of the reference (which her own kernels can read): the
  grading kernel cannot read it, and the exercise scores 0.
"""
from __future__ import annotations

import datetime
import json
import pwd
import re
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from hub_driver import CHAPTERS, COURSE_ID, PREFIX, PYTHON, Formgrader, run_as
from nbgrader.api import Gradebook
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(600)]

# What mallory's page tries, in the instructor's browser: read the instructor's Lab through a frame and a window
# (and the XSRF token from their cookies), then with it read the instructor's course folder and the hub's idea of
# who is logged in, and write a file in the instructor's home.
STEALING_PAGE = """<!doctype html><title>mallory's notes</title><body><script>
(async () => {
  const query = new URLSearchParams(location.search), teacher = query.get("teacher"), stolen = {};
  const pause = milliseconds => new Promise(resolve => setTimeout(resolve, milliseconds));
  // The instructor's Lab in a frame and in a window of its own; on the same origin, its cookies (the XSRF token
  // the API wants with cookies) and its text can be read.
  const frame = document.createElement("iframe");
  frame.src = teacher + "/lab";
  document.body.appendChild(frame);
  const opened = window.open(teacher + "/lab", "_blank");
  await pause(8000);
  let xsrf = "";
  for (const [name, view] of [["frame", () => frame.contentDocument], ["window", () => opened.document]]) {
    try {
      const page = view();
      xsrf = xsrf || (page.cookie.match(/_xsrf=([^;]+)/) || ["", ""])[1];
      stolen[name] = page.cookie + " " + page.body.innerText.slice(0, 500);
    } catch (error) {
      stolen[name] = "refused: " + error;
    }
  }
  const headers = {"Content-Type": "application/json", "X-XSRFToken": decodeURIComponent(xsrf)};
  const attempts = {
    contents: [teacher + "/api/contents/modulecraft-course/chapters", {credentials: "include", headers}],
    hub: [query.get("hub") + "/hub/api/user", {credentials: "include", headers}],
    write: [teacher + "/api/contents/stolen.txt", {method: "PUT", credentials: "include", headers,
            body: JSON.stringify({type: "file", format: "text", content: "mallory was here"})}],
  };
  for (const [name, [url, init]] of Object.entries(attempts)) {
    try {
      const response = await fetch(url, init);
      stolen[name] = response.status + " " + (await response.text()).slice(0, 500);
    } catch (error) {
      stolen[name] = "refused: " + error;
    }
  }
  window.stolen = stolen;
})();
</script></body>"""

# mallory's server replaced by her own: any program of hers may listen on her server's port once she stops it.
IMPOSTOR = """
import http.server, sys
page = open(sys.argv[2], "rb").read()
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Page).serve_forever()
"""


def test_a_learners_page_reads_nothing_of_the_instructors(classroom, tmp_path):
    accounts, hub = classroom.accounts, classroom.hub
    mallory, home = accounts["mallory"], accounts.home("mallory")
    # Her Jupyter configuration would add a header to every answer of her server (or serve pages, or load code).
    config = home / ".jupyter" / "jupyter_server_config.json"
    run_as(mallory, "mkdir", "-p", config.parent)
    run_as(mallory, "sh", "-c", f"cat > {config}", input=json.dumps(
        {"ServerApp": {"tornado_settings": {"headers": {"X-Mallory": "configured"}}}}))
    session = classroom.person("mallory")
    answer = session.page.goto(f"{session.server}/api")
    assert "x-mallory" not in answer.headers, "the hub started mallory's server with her own configuration"

    page = home / "notes.html"
    run_as(mallory, "sh", "-c", f"cat > {page}", input=STEALING_PAGE)
    teacher = classroom.person("instructor")  # logged in first: the hub notices a stopped server within ~30 s
    server_pid, port = singleuser_server(mallory)
    run_as(mallory, "kill", "-9", str(server_pid))
    impostor = start_as(mallory, PYTHON, "-c", IMPOSTOR, str(port), page)
    try:
        victim = teacher.context.new_page()
        victim.goto(f"{hub.server_url(mallory)}/notes.html?teacher={teacher.server}&hub={hub.url}")
        expect(victim).to_have_title("mallory's notes")  # her page, in the instructor's browser
        victim.wait_for_function("window.stolen !== undefined", timeout=60_000)
        stolen = victim.evaluate("window.stolen")
        for opened in teacher.context.pages:  # her page and the window it opened
            if opened is not teacher.page:
                opened.close()
    finally:
        impostor.kill()
        impostor.wait()
    assert "03_parameters" not in stolen["contents"] and accounts["instructor"] not in stolen["hub"], stolen
    assert stolen["frame"].startswith("refused") and stolen["window"].startswith("refused"), stolen
    assert not (accounts.home("instructor") / "stolen.txt").exists(), stolen


def singleuser_server(user: str) -> tuple[int, int]:
    """The pid and port of `user`'s single-user server (its environment says where the proxy sends requests)."""
    listed = run_as(None, "pgrep", "-u", user, "-f", "jupyterhub-singleuser").stdout.split()
    pid = int(listed[0])
    environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    url = next(v for v in environment if v.startswith(b"JUPYTERHUB_SERVICE_URL=")).decode()
    return pid, int(re.search(r":(\d+)/", url).group(1))


def start_as(user: str, *command) -> subprocess.Popen:
    """`command` as `user`, listening once its port is free (the killed server's socket closes a moment later)."""
    account = pwd.getpwnam(user)
    deadline = time.monotonic() + 30
    while True:
        process = subprocess.Popen(list(map(str, command)), stderr=subprocess.PIPE, user=account.pw_uid,
                                   group=account.pw_gid, extra_groups=[], cwd=account.pw_dir,
                                   env={"HOME": account.pw_dir, "PATH": "/usr/bin:/bin"})
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return process  # still serving
        if time.monotonic() > deadline:
            raise RuntimeError(f"the impostor could not listen: {process.stderr.read().decode()}")
        time.sleep(0.5)


def test_forged_and_linked_submissions_are_refused_and_listed(classroom):
    accounts, course_root, exchange = classroom.accounts, classroom.course_root, classroom.exchange
    alice, mallory, chapter = accounts["alice"], accounts["mallory"], CHAPTERS[1]
    before = alice_score(course_root, alice, chapter)
    assert before[1] > 0 and before[0] == before[1], f"test_classroom grades alice first: {before}"
    started = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)

    inbound, released = exchange / COURSE_ID / "inbound", exchange / COURSE_ID / "outbound"
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    long_ago = "2000-01-01 00:00:00.000000 UTC"
    chapter_with_solutions = course_root / "chapters" / chapter / f"{chapter}.ipynb"
    made = run_as(mallory, "sh", "-ec", f"""
        cd {inbound}
        # as alice, later than alice's own submission, with the blank chapter
        mkdir "{alice}+{chapter}+{later}+forged"
        cp {released}/{chapter}/{chapter}.ipynb "{alice}+{chapter}+{later}+forged/"
        echo "{later}" > "{alice}+{chapter}+{later}+forged/timestamp.txt"
        # her own, a link to the instructor's chapter with its solutions (and a link to nothing)
        mkdir "{mallory}+{chapter}+{later}+linked"
        ln -s {chapter_with_solutions} "{mallory}+{chapter}+{later}+linked/{chapter}.ipynb"
        ln -s /nonexistent "{mallory}+{chapter}+{later}+linked/notes.txt"
        # her own, honest but backdated (the folder's name, timestamp.txt and the files' times)
        mkdir "{mallory}+{CHAPTERS[0]}+{long_ago}+backdated"
        cp {released}/{CHAPTERS[0]}/{CHAPTERS[0]}.ipynb "{mallory}+{CHAPTERS[0]}+{long_ago}+backdated/"
        echo "{long_ago}" > "{mallory}+{CHAPTERS[0]}+{long_ago}+backdated/timestamp.txt"
        touch -d 2000-01-01 "{mallory}+{CHAPTERS[0]}+{long_ago}+backdated"/* "{mallory}+{CHAPTERS[0]}+{long_ago}+backdated"
        """, check=False)
    assert made.returncode == 0, made.stderr

    formgrader = Formgrader(classroom.person("instructor"))
    formgrader.open_assignments()
    for collected in CHAPTERS:
        formgrader.click(collected, "collect")
    submitted = course_root / "submitted"
    assert not (submitted / mallory / chapter).exists()
    backdated = (submitted / mallory / CHAPTERS[0] / "timestamp.txt").read_text()
    assert datetime.datetime.strptime(backdated, "%Y-%m-%d %H:%M:%S.%f UTC") >= started, backdated

    status = run_as(accounts["instructor"], PYTHON, "-m", "autograder", "status", "--root", course_root,
                    cwd=course_root).stdout
    assert re.search(rf"{alice}/{chapter}: {re.escape(alice)}\+{chapter}\+.*forged: named after {alice} but made by "
                     rf"{mallory}", status), status
    assert re.search(rf"{mallory}/{chapter}: .*linked: .* is a symbolic link", status), status

    graded = run_as(None, PYTHON, "-m", "autograder.hub", "grade", "--course-root", course_root, check=False)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert alice_score(course_root, alice, chapter) == before


def alice_score(course_root: Path, alice: str, chapter: str) -> tuple[float, float]:
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        notebook = gradebook.find_submission_notebook(chapter, chapter, alice)
        return float(notebook.score), float(notebook.max_score)


def script(name: str) -> str:
    """JavaScript that, when it runs, says so (`window.ran`) and writes `ran-<name>.txt` through the Jupyter server
    of the page's origin, as its user (with the XSRF token of their cookies); no quotes, so it fits any attribute
    or string."""
    return (f"window.ran = (window.ran || []).concat(`{name}`); fetch(location.pathname.split(`/formgrader/`)[0]"
            f".split(`/files/`)[0] + `/api/contents/ran-{name}.txt`, {{method: `PUT`, headers: {{[`X-XSRFToken`]: "
            f"(document.cookie.match(/_xsrf=([^;]+)/) || [])[1]}}, body: JSON.stringify({{type: `file`, format: "
            f"`text`, content: `{name}`}})}})")


def scripts_that_ran(page, home: Path) -> list[str]:
    """What ran in `page` (loaded, a moment later) or wrote into `home`."""
    page.wait_for_load_state("load")
    page.wait_for_timeout(3000)
    return sorted({*page.evaluate("window.ran || []"), *(p.stem[4:] for p in home.glob("ran-*.txt"))})


# mallory's answer to chapter 4's saved_buffers: the reference's own, read from the hub's copy, which every learner's
# kernel can read (the guide says so); what the grading kernel finds there is printed.
BORROWED_ID = "c04_saved_buffers"
HUB_REFERENCE = PREFIX / "modulecraft" / "reference" / "modulecraft" / "exercises" / "c04_buffers.py"
BORROWED = f"""
import importlib.util
try:
    spec = importlib.util.spec_from_file_location("borrowed", {str(HUB_REFERENCE)!r})
    borrowed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(borrowed)
    print("the hub's reference: read")
except Exception as error:
    print("the hub's reference:", type(error).__name__)


def saved_buffers(module):
    return borrowed.saved_buffers(module)
"""


HOSTILE_PAGE = f"<!doctype html><title>notes</title><p>my notes</p><script>{script('file')}</script>" \
               f"<img src=missing onerror=\"{script('file-img')}\">"


def test_a_learners_files_and_outputs_run_no_script(classroom):
    accounts, course_root, exchange = classroom.accounts, classroom.course_root, classroom.exchange
    mallory, chapter = accounts["mallory"], CHAPTERS[1]

    # A learner opens an HTML page and an SVG image among her own files (downloaded, say) in her own server:
    # they show, and their scripts do not run (Jupyter Server's own policy would run them in an origin of their own).
    alice, alice_home = classroom.person("alice"), accounts.home("alice")
    svg = f"<svg xmlns='http://www.w3.org/2000/svg'><text y='20'>my plot</text><script>{script('svg')}</script></svg>"
    notebook = f"{CHAPTERS[0]}/{CHAPTERS[0]}.ipynb"
    for name, text in [("notes.html", HOSTILE_PAGE), ("plot.svg", svg), (notebook, None)]:
        if text is not None:
            run_as(accounts["alice"], "sh", "-c", f"cat > {alice_home / name}", input=text)
        opened = alice.context.new_page()
        try:  # her files, and her notebook as nbconvert's HTML export shows it
            answer = opened.goto(f"{alice.server}/{'files' if text else 'nbconvert/html'}/{name}")
            assert answer.status == 200 and (text is None or "my " in answer.text()), answer.status
            assert re.search(r"(^|;)\s*sandbox\s*(;|$)", answer.headers["content-security-policy"]), answer.headers
            assert scripts_that_ran(opened, alice_home) == [], name
        finally:
            opened.close()

    # mallory's submission: scripts in a markdown cell, in what her code displays while it is graded, in a file;
    # saved_buffers taken from the hub's copy of the reference.
    released = nbformat.read(exchange / COURSE_ID / "outbound" / chapter / f"{chapter}.ipynb", as_version=4)
    answer = next(cell for cell in released.cells if cell.metadata.get("nbgrader", {}).get("grade_id") == BORROWED_ID)
    answer.source = BORROWED
    assert run_as(mallory, PYTHON, "-c", f"open({str(HUB_REFERENCE)!r}).read()", check=False).returncode == 0
    released.cells.append(nbformat.v4.new_markdown_cell(
        f"mallory's answer <img src=missing onerror=\"{script('markdown-img')}\">\n\n<script>\n{script('markdown')}\n"
        "</script>\n"))
    displayed = f'<img src=missing onerror="{script("output-html")}">'
    released.cells.append(nbformat.v4.new_code_cell(
        f"from IPython.display import HTML, Javascript, display\ndisplay(Javascript({script('output-js')!r}))\n"
        f"display(HTML({displayed!r}))"))
    folder = exchange / COURSE_ID / "inbound" / f"{mallory}+{chapter}+2000-01-01 00:00:00.000000 UTC+scripts"
    run_as(mallory, "mkdir", folder)
    run_as(mallory, "sh", "-c", f"cat > '{folder}/{chapter}.ipynb'", input=nbformat.writes(released))
    run_as(mallory, "sh", "-c", f"cat > '{folder}/notes.html'", input=HOSTILE_PAGE)
    # Run by Python in place of the kernel when a kernel starts beside it (the grader's kernels do not start so).
    run_as(mallory, "sh", "-c", f"cat > '{folder}/ipykernel_launcher.py'",
           input="import pathlib\npathlib.Path.home().joinpath('ran-kernel.txt').write_text('kernel')\n")

    teacher = classroom.person("instructor")
    formgrader = Formgrader(teacher)
    formgrader.open_assignments()
    formgrader.click(chapter, "collect")
    graded = run_as(None, PYTHON, "-m", "autograder.hub", "grade", "--course-root", course_root, check=False)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    autograded = (course_root / "autograded" / mallory / chapter / f"{chapter}.ipynb").read_text()
    assert "output-js" in autograded and "output-html" in autograded, "her code's outputs are in what formgrader shows"
    printed = "".join(output.get("text", "") for cell in nbformat.reads(autograded, as_version=4).cells
                      if cell.metadata.get("nbgrader", {}).get("grade_id") == BORROWED_ID for output in cell.outputs)
    assert printed.startswith("the hub's reference: ") and "read" not in printed.split(":")[1], printed
    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        graded_notebook = gradebook.find_submission_notebook(chapter, chapter, mallory)
        submission = graded_notebook.id
        borrowed = {grade.name: grade.score for grade in graded_notebook.grades if grade.name.startswith(BORROWED_ID)}
    assert borrowed == {f"{BORROWED_ID}_visible": 0, f"{BORROWED_ID}_hidden": 0}, borrowed

    # The instructor grades it by hand, and opens her file: her text shows, nothing of hers runs.
    teacher_home = accounts.home("instructor")
    for path, shown in [(f"submissions/{submission}/?index=0", "mallory's answer"),
                        (f"submissions/{submission}/notes.html", "my notes")]:
        opened = teacher.context.new_page()
        try:
            opened.goto(f"{teacher.server}/formgrader/{path}")
            expect(opened.locator("body")).to_contain_text(shown)
            assert scripts_that_ran(opened, teacher_home) == [], path
        finally:
            opened.close()

    # The instructor opens her submitted notebook in Lab (its kernel starts in its folder): the kernel is Jupyter's.
    notebook = str((course_root / "submitted" / mallory / chapter / f"{chapter}.ipynb").relative_to(teacher_home))
    teacher.page.goto(teacher.page_url(notebook))
    deadline = time.monotonic() + 180
    while teacher.kernel_state(notebook) != "idle" and not (teacher_home / "ran-kernel.txt").exists():
        assert time.monotonic() < deadline, f"the kernel did not start: {teacher.kernel_state(notebook)}"
        time.sleep(1)
    assert not (teacher_home / "ran-kernel.txt").exists()
    for session in teacher.get("api/sessions"):
        teacher.delete(f"api/sessions/{session['id']}")
