# The two commands of modulecraft (see README.md):
#   make lab    open the course in JupyterLab (first run: creates .venv, installs, checks Graphviz)
#   make test   run the whole test suite   (first run: creates .venv with the test extra, Graphviz, Chromium)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: lab test

lab: $(VENV)/.installed-runtime
	@bash scripts/system-packages.sh require graphviz
	$(PY) -m autograder.workspace launch $(ARGS)

test: $(VENV)/.installed-test
	@bash scripts/system-packages.sh require graphviz
	@bash scripts/system-packages.sh optional chromium
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Stamps are rebuilt whenever pyproject.toml changes. torch is pinned and installed first, so that no other
# requirement can resolve a newer (multi-gigabyte CUDA) build.
$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-runtime: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test]"
	@touch $@ $(VENV)/.installed-runtime
