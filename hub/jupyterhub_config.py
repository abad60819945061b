# JupyterHub configuration for the modulecraft course on one machine (see course/INSTRUCTORS.md, "The course on
# JupyterHub"). Start it as root:  /opt/modulecraft-hub/venv/bin/jupyterhub -f hub/jupyterhub_config.py
#
# Every setting below comes from an environment variable with a default; set them in the hub's service file:
#   MODULECRAFT_INSTRUCTORS   Unix users who teach (comma-separated); the first owns the course folder
#   MODULECRAFT_LEARNERS      Unix users who learn (comma-separated)
#   MODULECRAFT_COURSE_ROOT   the instructor's nbgrader course folder, inside the first instructor's home (formgrader
#                             needs it under the server's root; default ~INSTRUCTOR/modulecraft-course);
#                             `python -m autograder.hub setup` makes it
#   MODULECRAFT_EXCHANGE      nbgrader's exchange, shared by everyone (default /srv/nbgrader/exchange)
#   MODULECRAFT_SELFCHECK_SOURCE  the chapters without solutions that learners' self-check grades against (setup
#                             publishes them; default $MODULECRAFT_HUB_STATE/selfcheck)
#   MODULECRAFT_HUB_PREFIX    where scripts/hub-install.sh installed (default /opt/modulecraft-hub)
#   MODULECRAFT_HUB_STATE     the hub's own files: database, cookie secret, per-role Jupyter config (root only)
#   MODULECRAFT_HUB_IP, MODULECRAFT_HUB_PORT   where the hub listens (default all addresses, port 8000)
#   MODULECRAFT_HUB_URL       the hub's address as browsers reach it, e.g. https://hub.example.edu; each user's
#                             server is at https://<user>.hub.example.edu (wildcard DNS and certificate), an
#                             origin of its own (default http://localhost:$MODULECRAFT_HUB_PORT: this machine only)
#   MODULECRAFT_HUB_AUTH      pam (default: the machine's accounts and passwords) or dummy (tests: one shared
#                             password, MODULECRAFT_HUB_DUMMY_PASSWORD; never on a reachable machine)
import json
import os
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub's config loader provides it)


def users(variable):
    return sorted({name.strip() for name in os.environ.get(variable, "").split(",") if name.strip()})


COURSE_ID = "modulecraft"
PREFIX = Path(os.environ.get("MODULECRAFT_HUB_PREFIX", "/opt/modulecraft-hub"))
STATE = Path(os.environ.get("MODULECRAFT_HUB_STATE", "/srv/modulecraft-hub"))
EXCHANGE = Path(os.environ.get("MODULECRAFT_EXCHANGE", "/srv/nbgrader/exchange"))
SELFCHECK_SOURCE = Path(os.environ.get("MODULECRAFT_SELFCHECK_SOURCE") or STATE / "selfcheck")
INSTRUCTORS, LEARNERS = users("MODULECRAFT_INSTRUCTORS"), users("MODULECRAFT_LEARNERS")
COURSE_ROOT = Path(os.environ.get("MODULECRAFT_COURSE_ROOT")
                   or os.path.expanduser(f"~{INSTRUCTORS[0] if INSTRUCTORS else 'instructor'}/modulecraft-course"))
VENV_BIN = PREFIX / "venv" / "bin"

STATE.mkdir(parents=True, exist_ok=True)
STATE.chmod(0o711)  # the role folders below must be readable by the users' servers, nothing else
DATABASE = STATE / "jupyterhub.sqlite"  # users, cookie ids, ports, token hashes: root's alone
DATABASE.touch(mode=0o600)
DATABASE.chmod(0o600)
c.JupyterHub.ip = os.environ.get("MODULECRAFT_HUB_IP", "")
c.JupyterHub.port = int(os.environ.get("MODULECRAFT_HUB_PORT", 8000))
# Every user's server on an origin of its own (<user>.<hub's host>): a learner's server is the learner's program
# (their kernel can replace it), and what it serves runs in the instructor's browser when the instructor opens it;
# on its own origin it can read nothing of the instructor's server or of the hub.
c.JupyterHub.subdomain_host = os.environ.get("MODULECRAFT_HUB_URL") or f"http://localhost:{c.JupyterHub.port}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("MODULECRAFT_HUB_API_PORT", 8081))
c.ConfigurableHTTPProxy.command = [str(PREFIX / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('MODULECRAFT_PROXY_API_PORT', 8001)}"
c.JupyterHub.db_url = f"sqlite:///{DATABASE}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")

# Who may log in, and in which group: nbgrader's course groups by JupyterHub's convention.
if os.environ.get("MODULECRAFT_HUB_AUTH", "pam") == "dummy":
    from jupyterhub.auth import DummyAuthenticator as Authenticator
    c.DummyAuthenticator.password = os.environ["MODULECRAFT_HUB_DUMMY_PASSWORD"]
else:
    from jupyterhub.auth import PAMAuthenticator as Authenticator


class ListedAuthenticator(Authenticator):
    """The lists decide, also for who is logged in already: a name taken off them (and the hub restarted) is
    asked to log in again at its next page or start of a server, which the lists refuse; JupyterHub's own keeps
    a logged-in session (cookie or token) valid until the user is deleted."""

    async def refresh_user(self, user, handler=None):
        return user.name in self.allowed_users


c.JupyterHub.authenticator_class = ListedAuthenticator
c.Authenticator.allowed_users = set(INSTRUCTORS) | set(LEARNERS)
c.Authenticator.allow_existing_users = False  # the lists decide: a name taken off them no longer logs in
c.Authenticator.refresh_pre_spawn = True  # asked before every start of a server
# A request made with an API token (one the learner made, or her server's) is refused when the lists refuse her:
# JupyterHub 6.1's default lets it through, since a token cannot be sent to log in again.
c.Authenticator.auth_refresh_strict = True
c.Authenticator.admin_users = set(INSTRUCTORS[:1])
c.JupyterHub.load_groups = {f"formgrade-{COURSE_ID}": {"users": INSTRUCTORS},
                            f"nbgrader-{COURSE_ID}": {"users": LEARNERS}}

# Each user's server runs as that Unix user, from the hub's virtualenv (an interpreter every user can run).
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.disable_user_config = True  # a learner's ~/.jupyter does not configure the server the hub starts
c.Spawner.http_timeout = 120  # a loaded machine starts a server slowly; JupyterHub waits for it
c.Spawner.start_timeout = 180


def write_role_config(role: str, nbgrader_lines: list[str], server_app: dict, lab_extensions: dict) -> Path:
    """A Jupyter config folder for one role, put on the role's servers' JUPYTER_CONFIG_PATH (it comes before the
    venv's own folders, so it turns on what hub-install.sh turned off for everyone)."""
    folder = STATE / "jupyter" / role
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    (folder / "nbgrader_config.py").write_text("\n".join(["c = get_config()", *nbgrader_lines, ""]))
    (folder / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": server_app}, indent=1))
    (folder / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": lab_extensions}))
    for path in [STATE / "jupyter", folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


EXCHANGE_LINES = [f"c.Exchange.root = {str(EXCHANGE)!r}", f"c.CourseDirectory.course_id = {COURSE_ID!r}"]
# A submission's folder in the exchange's inbound (which nobody can list) gets a random suffix: nbgrader makes its
# files readable by all, so its name must not be guessable from the learner's name and the time (nbgrader's
# default; stated here so that it stays on).
# Submit leaves the folder and its files to the learner and the instructors' group (autograder.hub.PrivateSubmit).
# Every server loads autograder.hub, which serves files inert (no script runs in a page made of someone's files).
LEARNER_CONFIG = write_role_config("learner", [*EXCHANGE_LINES, "c.ExchangeSubmit.add_random_string = True",
                                               "c.ExchangeFactory.submit = 'autograder.hub.PrivateSubmit'"],
                                   {"jpserver_extensions": {"autograder.hub": True}}, {})
INSTRUCTOR_CONFIG = write_role_config(
    "instructor",
    # The course's own configuration (autograder/config.py: feedback without hidden tests, kernel settings), which
    # formgrader does not read from the course folder by itself.
    ["from autograder.config import nbgrader_config",
     f"c.merge(nbgrader_config({str(COURSE_ROOT)!r}, {COURSE_ID!r}))", *EXCHANGE_LINES,
     # Collect takes a submission only from the learner it names (autograder.hub.SafeCollect).
     "c.ExchangeFactory.collect = 'autograder.hub.SafeCollect'"],
    # autograder.hub answers formgrader's Autograde button (only root can confine learners' kernels) before
    # nbgrader's handler, which would delete what was graded, and its submission page, without the learner's scripts.
    {"jpserver_extensions": {"autograder.hub": True, "nbgrader.server_extensions.formgrader": True,
                             "nbgrader.server_extensions.course_list": True}},
    # Formgrader opens in a tab of its own (/user/<instructor>/formgrader): Lab's Nbgrader → Formgrader would
    # frame it, and JupyterHub's policy (frame-ancestors 'none') forbids every frame, which keeps it that way.
    {f"@jupyter/nbgrader:{name}": False for name in ("course-list", "create-assignment")})


def make_home_private(name: str) -> None:
    """A learner's work in progress is theirs alone (useradd may make homes world-readable)."""
    home = Path(os.path.expanduser(f"~{name}"))
    if home.is_dir():
        home.chmod(0o700)


for name in [*INSTRUCTORS, *LEARNERS]:  # from the start, not only once they have logged in
    make_home_private(name)


def role_environment(spawner):
    """Instructors get formgrader and the course folder; learners the Assignments panel, and a self-check that
    grades against the chapters without solutions (`autograder.hub setup` publishes them)."""
    make_home_private(spawner.user.name)
    environment = spawner.environment
    environment["PATH"] = f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin"
    if spawner.user.name in INSTRUCTORS:
        environment["JUPYTER_CONFIG_PATH"] = str(INSTRUCTOR_CONFIG)
        environment["MODULECRAFT_COURSE_ROOT"] = str(COURSE_ROOT)
        # A kernel starts in its notebook's folder as `python -m ipykernel_launcher`, which Python would look up in
        # that folder first: a learner's `ipykernel_launcher.py` (or any module) beside a submission would run as
        # the instructor who opens it. Python (3.11+) then looks only where it is installed.
        environment["PYTHONSAFEPATH"] = "1"
    else:
        environment["JUPYTER_CONFIG_PATH"] = str(LEARNER_CONFIG)
        environment["MODULECRAFT_COURSE_SOURCE"] = str(SELFCHECK_SOURCE)


c.Spawner.pre_spawn_hook = role_environment
