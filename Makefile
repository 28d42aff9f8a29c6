# Two entry points for a fresh machine (see README.md):
#   make run   - create .venv, install kapiserver, run it on the embedded SQLite store
#   make test  - create .venv, install everything the tests need (incl. etcd), run the suite
# Nothing is installed into the system Python: everything goes into the
# project-local virtualenv $(VENV) (ignored by git).
PYTHON ?= python3
VENV ?= .venv
CONFIG ?= etc/apiserver.yaml
TRIAL_JOBS ?= 2
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install install-test run test test-examples typecheck bench

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

install: $(PY)
	$(PIP) install -q -e .

install-test: $(PY)
	$(PIP) install -q -e '.[test]'
	@command -v etcd >/dev/null 2>&1 || { \
	  echo "installing etcd-server (Debian package) for the etcd backend tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }

run: install
	$(VENV)/bin/twistd -n kapiserver --config $(CONFIG)

typecheck: install-test
	$(VENV)/bin/mypy

# tests/node start one real node per machine (the node kit): they run after the rest, in one process
test: install-test typecheck
	$(PY) -m twisted.trial -j$(TRIAL_JOBS) tests
	KAPISERVER_NODE_TESTS=1 $(PY) -m twisted.trial tests.node
	$(MAKE) test-examples

# examples/: operators tested with the pytest plugin (one kapiserver for the run; see examples/README.md)
test-examples: install-test
	$(PY) -m pytest -p no:cacheprovider -q examples
