# The two commands of modulecraft (see README.md):
#   make lab    open the course in JupyterLab (first run: creates .venv and installs the project, checks Graphviz)
#   make test   run the whole test suite   (first run: creates .venv with the test extra and torch's CPU build,
#               checks Graphviz and Chromium)
# and the setup alone, for instructors and CI:
#   make setup        what `make lab` installs, without starting JupyterLab
#   make setup-test   what `make test` installs, without running the tests
#   make hub          (root) install what the course's JupyterHub needs, in $(HUB_PREFIX): see hub/ and
#                     course/INSTRUCTORS.md, "The course on JupyterHub"
# What pip installs, and from where (torch's CPU build on Linux), is in scripts/install.sh.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HUB_PREFIX ?= /opt/modulecraft-hub
HUB_TEST_PREFIX := $(CURDIR)/.hub

.PHONY: lab test setup setup-test hub

lab: setup
	$(PY) -m autograder.workspace launch $(ARGS)

test: setup-test
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Without dot the course still runs (drawings show as text); the test suite draws, so it requires dot.
setup: $(VENV)/.installed-runtime
	@bash scripts/system-packages.sh optional graphviz

setup-test: $(VENV)/.installed-test
	@bash scripts/system-packages.sh require graphviz
	@bash scripts/system-packages.sh optional chromium
	@bash scripts/system-packages.sh optional openssl
	@# tests/hub (root): the hub's install inside the repository; when it fails, tests/hub fails and says why
	@if [ "$$(id -u)" = 0 ]; then bash scripts/hub-install.sh $(HUB_TEST_PREFIX) || \
	  echo "make: the JupyterHub install for tests/hub failed (above); the other tests run"; fi

hub:
	bash scripts/hub-install.sh $(HUB_PREFIX)

# Stamps are rebuilt whenever pyproject.toml or the install script changes. An interpreter older than pyproject's
# requires-python is refused first, in seconds, before pip downloads anything.
$(VENV)/.installed-runtime: pyproject.toml scripts/install.sh
	@bash scripts/check-python.sh $(VENV) $(PYTHON)
	PYTHON=$(PYTHON) bash scripts/install.sh $(VENV) runtime
	@touch $@

$(VENV)/.installed-test: pyproject.toml scripts/install.sh
	@bash scripts/check-python.sh $(VENV) $(PYTHON)
	PYTHON=$(PYTHON) bash scripts/install.sh $(VENV) test
	@touch $@ $(VENV)/.installed-runtime
