# Two entry points for a fresh machine (see README.md):
#   make run   - install kapiserver and run it on the embedded SQLite store
#   make test  - install everything the tests need (incl. etcd) and run the suite
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
CONFIG ?= etc/apiserver.yaml
TRIAL_JOBS ?= 2

.PHONY: install install-test run test bench

install:
	$(PIP) install -q -e .

install-test: install
	$(PIP) install -q -e '.[test]'
	@command -v etcd >/dev/null 2>&1 || { \
	  echo "installing etcd-server (Debian package) for the etcd backend tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }

run: install
	twistd -n kapiserver --config $(CONFIG)

test: install-test
	$(PYTHON) -m twisted.trial -j$(TRIAL_JOBS) kapiserver
