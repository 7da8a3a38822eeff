# One bootstrap for every machine: `make test` and `make demo` build the environment from nothing.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: env test lint crds demo clean lock bench

$(STAMP): requirements/dev.lock pyproject.toml
	@command -v uv >/dev/null || python3 -m pip install --quiet uv
	@test -x $(PY) || uv venv --seed --quiet --python 3.11 $(VENV) || uv venv --seed --quiet $(VENV)
	uv pip sync --quiet --python $(PY) requirements/dev.lock
	uv pip install --quiet --python $(PY) --no-deps -e .
	# torch comes from pip: the machine's pip configuration points at a local CPU wheel (see README).
	$(PY) -m pip install --quiet torch==2.13.0
	# The local cluster's pods run the host's programs: the MPI examples need sshd and Open MPI (Debian packages).
	@if [ ! -x /usr/sbin/sshd ] || ! command -v mpirun >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make env: /usr/sbin/sshd or mpirun is missing; as root run: apt-get install openssh-server openmpi-bin" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openmpi-bin; \
	fi
	# sshd -D in a pod needs host keys and its privilege-separation directory (/run is a tmpfs: the e2e tests recreate it).
	@if [ "$$(id -u)" = 0 ]; then ssh-keygen -A && install -d -m 0755 /run/sshd; fi
	@touch $(STAMP)

env: $(STAMP)

test: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -q

# The example training pipeline end to end on the embedded local cluster (see README "Run the example pipeline").
demo: env
	$(PY) scripts/demo.py

# Issue 7 benchmarks, side by side with their baselines (< 15 min on 2 cores); rewrites docs/benchmarks.md.
bench: env
	$(PY) -m benchmarks

lint: env
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

crds: env
	$(PY) -m t9k_provider.jobs.crds deploy/crds

clean:
	rm -rf $(VENV)

# Regenerate the hashed lock files after changing dependencies in pyproject.toml.
lock:
	uv pip compile pyproject.toml --extra airflow --group dev --universal --python-version 3.10 --generate-hashes --no-header --quiet -o requirements/dev.lock
	uv pip compile pyproject.toml --universal --python-version 3.10 --generate-hashes --no-header --quiet -o requirements/controller.lock
