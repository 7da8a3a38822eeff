# One bootstrap for every machine: `make test` and `make demo` build the environment from nothing.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
AF2_VENV := .venv-airflow2
AF2_STAMP := $(AF2_VENV)/.installed

.PHONY: env test test-fast test-airflow2 lint crds demo clean lock bench bench-check soak

# torch comes from pip: the machine's pip configuration points at a local CPU wheel (see README). DeepSpeed (the
# DeepSpeedJob example's launcher) stays out of the lock, like torch: its sdist declares torch, which the lock would
# resolve to CUDA wheels. Built against the installed CPU torch, without its C++ ops. Both pin what they pull in.
# $(1): the environment's python; the main environment's pip installs into it (`uv venv` gives the Airflow 2.11
# environment no pip of its own). --no-compile, here and for ColossalAI: the tests' processes cache bytecode under
# .cache/pycache (tests/conftest.py), so what pip would compile next to the sources is never read (10 s per environment).
define install_torch_and_deepspeed
	$(PY) -m pip --python $(1) install --quiet --no-compile torch==2.13.0 sympy==1.14.0 \
	  networkx==3.6.1 mpmath==1.3.0 filelock==4.3.1 setuptools==84.2.1 wheel==0.48.0
	DS_BUILD_OPS=0 $(PY) -m pip --python $(1) install --quiet --no-compile --no-deps --no-build-isolation deepspeed==0.19.8 \
	  einops==0.8.2 hjson==3.1.0 msgpack==1.2.4 ninja==1.13.2 py-cpuinfo==9.0.0 tqdm==4.70.1
endef

$(STAMP): requirements/dev.lock pyproject.toml
	@command -v uv >/dev/null || python3 -m pip install --quiet uv
	@test -x $(PY) || uv venv --seed --quiet --python 3.11 $(VENV) || uv venv --seed --quiet $(VENV)
	uv pip sync --quiet --python $(PY) requirements/dev.lock
	uv pip install --quiet --python $(PY) --no-deps -e .
	$(call install_torch_and_deepspeed,$(PY))
	# ColossalAI (the ColossalAIJob example's `colossalai run`, which reaches the workers with fabric/paramiko) likewise:
	# its metadata pins torch<=2.5.1 and CUDA-only extras. --no-deps keeps our CPU torch; what the CLI and
	# launch_from_torch import is pinned here.
	$(PY) -m pip install --quiet --no-compile --no-deps --no-build-isolation colossalai==0.5.0 fabric==3.2.3 invoke==2.2.1 \
	  paramiko==5.1.0 decorator==5.3.1 bcrypt==5.0.0 pynacl==1.6.2
	# The local cluster's pods run the host's programs: the MPI and DeepSpeed examples need sshd, Open MPI and pdsh.
	@if [ ! -x /usr/sbin/sshd ] || ! command -v mpirun >/dev/null || ! command -v pdsh >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make env: sshd, mpirun or pdsh is missing; as root run: apt-get install openssh-server openmpi-bin pdsh" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openmpi-bin pdsh; \
	fi
	# The BeamJob example's local Flink cluster (JobManager/TaskManager processes) runs on the host's Java.
	@if ! command -v java >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make env: java is missing; as root run: apt-get install openjdk-17-jre-headless" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless; \
	fi
	# The UI tests (tests/deployment/browser.py) look at Airflow in Debian's headless Chromium through its WebDriver.
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make env: chromium is missing (the UI tests skip); as root run: apt-get install chromium chromium-driver" >&2; \
	  else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver; fi; \
	fi
	# sshd -D in a pod needs host keys and its privilege-separation directory (/run is a tmpfs: the e2e tests recreate it).
	@if [ "$$(id -u)" = 0 ]; then ssh-keygen -A && install -d -m 0755 /run/sshd; fi
	@touch $(STAMP)

env: $(STAMP)

# Both cores: pytest-xdist workers, each test module on one worker so that its shared cluster starts once; every
# cluster has a pod subnet, bridge and state directory of its own (docs/development.md). Four workers on two
# cores, because cluster tests spend part of their time waiting: in two clean clones one after the other the
# main suite took 1,053 s with 4 and 1,076 s with 3, its cores idle 36 and 160 CPU s (docs/development.md;
# WORKERS=N for another machine). The unit layer (test-fast) is everything not marked cluster, deployment or
# slow. The modules start longest first (tests/support/schedule.py, by tests/durations.json), not xdist's
# most-tests-first, which left the minutes-long modules to start last.
WORKERS ?= 4
PYTEST := pytest -q -n $(WORKERS) --dist loadscope --no-loadscope-reorder
UNIT := -m "not cluster and not deployment and not slow"
# JUNIT=PREFIX writes each part's JUnit XML to PREFIX-main.xml and PREFIX-airflow2.xml (per-test durations:
# scripts/test_durations.py).
junit = $(if $(JUNIT),--junitxml=$(abspath $(JUNIT))-$(1).xml)

# The Airflow 2.11 part runs beside the main suite, with AF2_WORKERS workers: alone its tests kept the cores only
# 76 % busy (they wait on Airflow's loops more than they compute), and beside the main suite they fill the main
# suite's idle time: 1,028 s for both against 956 + 300 s one after the other (docs/development.md). Its output
# comes after the main suite's; either part failing fails `make test`.
AF2_WORKERS ?= 2
test: env $(AF2_STAMP)
	$(VENV)/bin/ruff check .
	@airflow2_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-airflow2 WORKERS=$(AF2_WORKERS) >$$airflow2_log 2>&1 & airflow2=$$!; \
	$(VENV)/bin/$(PYTEST) $(call junit,main); main=$$?; \
	wait $$airflow2; airflow2=$$?; \
	echo "--- make test-airflow2 (run beside the main suite; exit status $$airflow2):"; \
	cat $$airflow2_log; rm -f $$airflow2_log; \
	[ $$main -eq 0 ] && [ $$airflow2 -eq 0 ]

test-fast: env
	$(VENV)/bin/$(PYTEST) $(UNIT)

# What differs between Airflow versions again on Airflow 2.11 (requirements/airflow2.lock), the oldest Airflow
# the provider supports: tests/airflow (operators, decorators, triggers, sensors, their dag.test() runs on the
# local cluster) but the modules marked airflow_independent, the example DAGs' parse and the real-deployment
# tests (tests/deployment: webserver, scheduler, triggerer).
$(AF2_STAMP): requirements/airflow2.lock pyproject.toml $(STAMP)
	@command -v uv >/dev/null || python3 -m pip install --quiet uv
	@test -x $(AF2_VENV)/bin/python || uv venv --quiet --python 3.11 $(AF2_VENV) || uv venv --quiet $(AF2_VENV)
	uv pip sync --quiet --python $(AF2_VENV)/bin/python requirements/airflow2.lock
	uv pip install --quiet --python $(AF2_VENV)/bin/python --no-deps -e .
	# The @task.t9k_pytorch and @task.t9k_deepspeed tests run their functions with this environment's python.
	$(call install_torch_and_deepspeed,$(AF2_VENV)/bin/python)
	@touch $(AF2_STAMP)

test-airflow2: $(AF2_STAMP)
	$(AF2_VENV)/bin/$(PYTEST) $(call junit,airflow2) -m "not airflow_independent" tests/airflow \
		tests/examples/test_dags.py tests/deployment

# The example training pipeline end to end on the embedded local cluster (see README "Run the example pipeline").
# Its processes (Airflow, the cluster's) cache their bytecode as Python does by default, also where the
# environment turns that off (PYTHONDONTWRITEBYTECODE, as container images often do): otherwise every run
# compiles Airflow and its dependencies again, over half of a warm run's time on 2 cores.
demo: env
	env -u PYTHONDONTWRITEBYTECODE $(PY) scripts/demo.py

# Benchmarks side by side with their baselines (about 14 min on 2 cores); rewrites docs/benchmarks.md. The heavy
# parts run only when named: .venv/bin/python -m benchmarks --only livelogs | overhead | scale | scale-full |
# failover | demo | triggerer.
bench: env
	$(PY) -m benchmarks

# Section 7's per-task overhead in under a minute (a few GenericJobOperator tasks under dag.test()), printed beside
# docs/benchmarks.md's figures with their ratio; fails above 1.5x. Part of the routine before stopping
# (docs/development.md).
bench-check: env
	$(PY) -m benchmarks.overhead_check

# The embedded cluster under faults (docs/benchmarks.md section 13): 3 rounds, each on a fresh 2-node cluster with
# the T9k controller, under a CPU hog, creating and changing about 100 objects of every workload kind while the
# API server restarts, watches are cut and expire, kubelets, the controllers and the T9k controller are
# SIGKILLed; fails when an object misses its desired state, a replica runs twice at once or anything is left
# behind. Bounded (minutes); stops everything it starts. `make test` runs a one-round quick version.
soak: env
	$(PY) -m benchmarks --only soak

lint: env
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

crds: env
	$(PY) -m t9k_provider.jobs.crds deploy/crds

clean:
	rm -rf $(VENV) $(AF2_VENV)

# Regenerate the hashed lock files after changing dependencies in pyproject.toml.
lock:
	uv pip compile pyproject.toml --extra airflow --group dev --universal --python-version 3.10 --generate-hashes --no-header --quiet -o requirements/dev.lock
	uv pip compile pyproject.toml --universal --python-version 3.10 --generate-hashes --no-header --quiet -o requirements/controller.lock
	uv pip compile pyproject.toml requirements/airflow2.in --extra airflow --group test --universal --python-version 3.10 --generate-hashes --no-header --quiet -o requirements/airflow2.lock
