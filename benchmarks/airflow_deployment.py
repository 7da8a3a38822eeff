"""Airflow deployed as production runs it, on this machine: one process per component, LocalExecutor.

Airflow 3 runs ``api-server``, ``scheduler``, ``dag-processor`` and ``triggerer``; Airflow 2.11 runs
``webserver`` (its REST API), ``scheduler`` and ``triggerer`` (its standalone DAG processor refuses SQLite, so
the scheduler parses the DAGs, as it does by default on Airflow 2). All of them
share a private ``AIRFLOW_HOME`` with a SQLite metadata DB, serve only on loopback ports chosen at start,
and reach the T9k Jobs through ``kubernetes_default`` built from a local cluster's kubeconfig. Airflow 2
refuses LocalExecutor on SQLite unless its own test switch (``_AIRFLOW__SKIP_DATABASE_EXECUTOR_COMPATIBILITY_
CHECK``) is set; the harness sets it (task processes there write the DB themselves: keep parallelism low).

The tests (``tests/deployment``) and ``python -m benchmarks.pipeline_deployment`` drive it through the REST
API only (v2 with the simple auth manager's all-admins mode on Airflow 3; v1 on Airflow 2, whose anonymous
users get FAB's Admin role), as a user or a CI job would. Every component runs in its own process group, so
``stop`` ends it with everything it spawned, and a guard (``group_guard.py``) ends the group if the harness
dies without stopping it; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from t9k_provider.testing import free_port, polling, wait_for
from t9k_provider.waiting.status import parse_time

AIRFLOW_3 = int(importlib.metadata.version("apache-airflow").split(".")[0]) >= 3
TERMINAL_RUN_STATES = ("success", "failed")
#: Task states after which Airflow will not run the try again by itself.
FINISHED_TASK_STATES = ("success", "failed", "skipped", "upstream_failed", "removed")
JOB_URL_TEMPLATE = "https://t9k.example/jobs/{namespace}/{name}"


def loopback_hostname() -> str:
    """``[core] hostname_callable``: the API server fetches live task and trigger logs from the worker's and
    the triggerer's log servers at the hostname they recorded, which must stay on loopback here."""
    return "127.0.0.1"


@dataclass(frozen=True)
class LogLine:
    """One line of a task log as the REST API returns it; ``at`` is when Airflow logged it."""

    at: datetime | None
    text: str

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> LogLine:
        """From Airflow 3's structured log: ``{"timestamp": ..., "event": ..., ...}``."""
        return cls(parse_time(entry.get("timestamp")), str(entry.get("event", "")))

    @classmethod
    def from_text(cls, line: str) -> LogLine:
        """From Airflow 2's text log: ``[2026-01-01T00:00:00.123+0000] {file.py:12} INFO - message``."""
        match = _TEXT_LINE.match(line)
        if match is None:
            return cls(None, line)
        stamp = match[1]
        return cls(parse_time(f"{stamp[:-2]}:{stamp[-2:]}"), match[2])


_TEXT_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d{4})\] (.*)$")


#: Watches the harness for each component (``python group_guard.py OWNER_PID PGID``).
GROUP_GUARD = Path(__file__).with_name("group_guard.py")


class Component:
    """One Airflow command in its own process group, ended with the harness that started it (a guard process
    per component); its output goes to ``<logs>/<name>.log``."""

    def __init__(self, name: str, argv: list[str], log_file: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.guard: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was not started"
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, env: dict[str, str]) -> None:
        with self.log_file.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # ends the group if this process dies without stopping it; exits once the group's leader has ended
        guard = [sys.executable, str(GROUP_GUARD), str(os.getpid()), str(self.proc.pid)]
        self.guard = subprocess.Popen(guard, stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the whole group (the component and its children), as a crash of its machine would."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, deadline: float | None = None) -> None:
        """SIGTERM the group, wait until ``deadline`` (a ``time.monotonic()``; default: 20 s from now), then
        SIGKILL what is left of the group (workers, runners)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            self.kill(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, (deadline or time.monotonic() + 20) - time.monotonic()))
        self.kill(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        self.proc = None
        if self.guard is not None:  # it sees the leader gone
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.guard.wait(10)
            self.guard = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


#: Tries of a REST read answered with 5xx or not at all (0.5 s, 1 s, 2 s apart).
READ_ATTEMPTS = 4


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status


def airflow_command(*args: str) -> list[str]:
    """``airflow ARGS`` of this interpreter's environment."""
    return [str(Path(sys.executable).parent / "airflow"), *args]


def isolated_env(home: Path) -> dict[str, str]:
    """This process's environment for an Airflow of its own on ``home``: the caller's Airflow settings (a
    pytest session's AIRFLOW_HOME, unit-test mode...) stay out; a SQLite metadata DB, no example DAGs."""
    base = {k: v for k, v in os.environ.items() if not k.lstrip("_").startswith("AIRFLOW")}
    return {
        **base,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }


def migrate_db(env: dict[str, str], timeout: float = 240) -> None:
    """Create the metadata DB of the Airflow ``env`` describes (``airflow db migrate``), in SQLite's WAL mode.

    WAL (a setting the DB file keeps) lets the components read while one of them writes: in the default
    rollback journal a reader waits for every writer, and here a scheduler, a triggerer, task processes and
    the API server all use the one file. On CI (2 cores, the whole suite beside it) the API server once
    answered a read nothing for 30 s while a task of that deployment failed.
    """
    migrate = subprocess.run(
        airflow_command("db", "migrate"), env=env, capture_output=True, text=True, timeout=timeout
    )
    if migrate.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout}{migrate.stderr}")
    database = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(database)) as db:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise RuntimeError(f"{database}: SQLite kept journal mode {mode!r}, not WAL")


class AirflowDeployment:
    """The components on ``home`` (a fresh directory), with ``dags_folder`` as the only DAG bundle.

    ``env`` adds or overrides settings of every component (``AIRFLOW__SECTION__KEY`` variables).
    """

    def __init__(
        self,
        home: Path,
        dags_folder: Path,
        kubeconfig: Path,
        *,
        env: dict[str, str] | None = None,
        parallelism: int = 4,
    ) -> None:
        self.home = home
        self.dags_folder = dags_folder
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api = f"{self.base_url}/api/v2" if AIRFLOW_3 else f"{self.base_url}/api/v1"
        self.logs = home / "component-logs"
        self.env = self._environment(kubeconfig, parallelism) | (env or {})
        self.components: dict[str, Component] = {}

    def _environment(self, kubeconfig: Path, parallelism: int) -> dict[str, str]:
        from cryptography.fernet import Fernet

        venv_bin = str(Path(sys.executable).parent)
        base = isolated_env(self.home)
        connection = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        env = {
            **base,
            "PATH": f"{venv_bin}{os.pathsep}{base.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(parallelism),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.loopback_hostname",
            # Runs start when a test triggers them, never from a schedule.
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            # A killed triggerer's triggers move to a live one after this many seconds without a heartbeat.
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "15",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(connection),
            "AIRFLOW__T9K__JOB_URL_TEMPLATE": JOB_URL_TEMPLATE,
        }
        secret = secrets.token_urlsafe(32)
        if AIRFLOW_3:
            bundle = [
                {
                    "name": "dags-folder",
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(self.dags_folder), "refresh_interval": 300},
                }
            ]
            env |= {
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__SECRET_KEY": secret,
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundle),
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "120",
            }
        else:
            env |= {
                "AIRFLOW__WEBSERVER__SECRET_KEY": secret,
                "AIRFLOW__WEBSERVER__WEB_SERVER_PORT": str(self.port),
                "AIRFLOW__API__AUTH_BACKENDS": "airflow.api.auth.backend.default",
                "AIRFLOW__SCHEDULER__PARSING_PROCESSES": "1",
                "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "120",
                "_AIRFLOW__SKIP_DATABASE_EXECUTOR_COMPATIBILITY_CHECK": "1",
                # A finished task's process schedules its downstream tasks itself (the "mini scheduler")
                # while the scheduler may do the same: each raises the task's try_number (schedule_tis), and
                # only a row lock, which SQLite lacks, keeps them apart. A task then starts on try 2 (seen
                # here: dep_pipeline's train began with "Starting attempt 2 of 3"). The scheduler alone does.
                "AIRFLOW__SCHEDULER__SCHEDULE_AFTER_TASK_EXECUTION": "False",
            }
        return env

    # -- processes ------------------------------------------------------------------------------------------

    def _airflow(self, *args: str) -> list[str]:
        return airflow_command(*args)

    def _argv(self, name: str) -> list[str]:
        if name == "api-server":
            return self._airflow(name, "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1")
        if name == "webserver":
            return self._airflow(name, "--hostname", "127.0.0.1", "--port", str(self.port), "--workers", "1")
        return self._airflow(name)

    @property
    def component_names(self) -> tuple[str, ...]:
        if AIRFLOW_3:
            return ("api-server", "scheduler", "dag-processor", "triggerer")
        return ("webserver", "scheduler", "triggerer")

    def start(self, timeout: float = 240) -> AirflowDeployment:
        """Migrate the DB, start every component and wait until the API reports them all healthy."""
        self.logs.mkdir(parents=True, exist_ok=True)
        if not AIRFLOW_3:
            (self.home / "webserver_config.py").write_text('AUTH_ROLE_PUBLIC = "Admin"\n')
        self.migrate(timeout)
        for name in self.component_names:
            self.start_component(name)
        polling.add_reporter(self, self.report)
        wait_for("every Airflow component to report healthy", self.healthy, timeout, 1.0)
        return self

    def report(self, lines: int = 8) -> str:
        """What a wait that gives up says of this deployment: each component, alive or how it exited, and
        the last lines of its log."""
        said = [f"airflow deployment {self.home}:"]
        for component in self.components.values():
            proc = component.proc
            state = "running" if component.running() else f"exited ({proc.returncode if proc else None})"
            said.append(f"  {component.name} {state}; last lines of {component.log_file.name}:")
            said += [f"    {line[:300]}" for line in component.log_tail(lines).splitlines()]
        return "\n".join(said)

    def migrate(self, timeout: float = 240) -> None:
        migrate_db(self.env, timeout)

    def start_component(self, name: str) -> Component:
        component = Component(name, self._argv(name), self.logs / f"{name}.log")
        self.components[name] = component
        component.start(self.env)
        return component

    def crash(self, name: str) -> None:
        """SIGKILL a component with everything it spawned, as if its machine died; ``start_component``
        starts a new one."""
        component = self.components.pop(name)
        component.kill(signal.SIGKILL)
        component.stop()

    def stop(self, timeout: float = 20) -> None:
        """Stop every component; they shut down in parallel, within ``timeout`` seconds."""
        polling.remove_reporter(self)
        components = [self.components.pop(name) for name in reversed(list(self.components))]
        for component in components:
            if component.running():
                component.kill(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for component in components:
            component.stop(deadline)

    def __enter__(self) -> AirflowDeployment:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def check_alive(self) -> None:
        """Fail fast (with its log) when a component died while a test waited on it."""
        for component in self.components.values():
            if component.proc is not None and not component.running():
                raise RuntimeError(
                    f"airflow {component.name} exited ({component.proc.returncode}); log tail:\n"
                    f"{component.log_tail()}"
                )

    def healthy(self) -> bool:
        self.check_alive()
        try:
            health = self.request("GET", "/monitor/health" if AIRFLOW_3 else "/health")
        except (OSError, ApiError):
            return False
        parts = ["metadatabase", "scheduler", "triggerer"] + (["dag_processor"] if AIRFLOW_3 else [])
        return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

    # -- REST API -------------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        accept: str = "application/json",
        timeout: float = 30,
    ) -> Any:
        """One call of the REST API (``path`` below ``/api/v2`` or ``/api/v1``): the decoded answer.

        A read the server answers with 5xx (its SQLite database locked by another component, a loaded
        machine) or not at all within ``timeout`` is tried again, a few times; a write never is (it could
        happen twice).
        """
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": accept}
        if data is not None:
            headers["Content-Type"] = "application/json"
        attempts = 0
        while True:
            req = urllib.request.Request(self.api + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    text = resp.read().decode(errors="replace")
                return json.loads(text) if accept == "application/json" and text else text
            except urllib.error.HTTPError as exc:
                error: Exception = ApiError(method, path, exc.code, exc.read().decode(errors="replace"))
                retry = exc.code >= 500
            except (TimeoutError, ConnectionError) as exc:  # no answer in time: the server starved or stuck
                error, retry = exc, True
            attempts += 1
            if method != "GET" or not retry or attempts == READ_ATTEMPTS:
                raise error from None
            time.sleep(0.5 * 2 ** (attempts - 1))

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 120) -> None:
        """Until the DAG processor has stored every DAG (the scheduler can then run them)."""

        def stored() -> bool:
            self.check_alive()
            for dag_id in dag_ids:
                try:
                    self.request("GET", f"/dags/{dag_id}")
                except ApiError as exc:
                    if exc.status == 404:
                        return False
                    raise
            return True

        try:
            wait_for(f"the DAG processor to store {', '.join(dag_ids)}", stored, timeout, 1.0)
        except TimeoutError:
            errors = self.request("GET", "/importErrors")
            raise TimeoutError(f"DAGs not stored within {timeout:.0f}s; import errors: {errors}") from None

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """A manual run now; returns its run id."""
        body = {"logical_date": datetime.now(timezone.utc).isoformat(), "conf": conf or {}}
        return str(self.request("POST", f"/dags/{dag_id}/dagRuns", body)["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/dags/{dag_id}/dagRuns/{_quote(run_id)}"))

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        def finished() -> dict[str, Any] | None:
            self.check_alive()
            run = self.dag_run(dag_id, run_id)
            return run if run["state"] in TERMINAL_RUN_STATES else None

        return dict(wait_for(f"run {dag_id}/{run_id} to finish", finished, timeout, 1.0))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, page by page (the API answers at most 100 at a time)."""
        path = f"/dags/{dag_id}/dagRuns/{_quote(run_id)}/taskInstances"
        found: list[dict[str, Any]] = []
        while True:
            page = self.request("GET", f"{path}?limit=100&offset={len(found)}")
            found += page["task_instances"]
            if not page["task_instances"] or len(found) >= page["total_entries"]:
                return found

    def _ti_path(self, dag_id: str, run_id: str, task_id: str) -> str:
        return f"/dags/{dag_id}/dagRuns/{_quote(run_id)}/taskInstances/{task_id}"

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(self.request("GET", self._ti_path(dag_id, run_id, task_id)))

    def wait_for_task(
        self, dag_id: str, run_id: str, task_id: str, states: tuple[str, ...], timeout: float
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            self.check_alive()
            ti = self.task_instance(dag_id, run_id, task_id)
            return ti if ti["state"] in states else None

        what = f"task {dag_id}/{task_id} in run {run_id} to be {' or '.join(states)}"
        try:
            return dict(wait_for(what, reached, timeout, 0.5))
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.task_report(dag_id, run_id, task_id)}") from None

    def task_report(self, dag_id: str, run_id: str, task_id: str, lines: int = 20) -> str:
        """The task instance's state and try, and the last lines of that try's log (or why not)."""
        try:
            ti = self.task_instance(dag_id, run_id, task_id)
            said = f"task {dag_id}/{task_id}: state {ti['state']}, try {ti['try_number']}"
            if not ti["try_number"]:
                return said
            log = self.task_log(dag_id, run_id, task_id, ti["try_number"])
        except (OSError, ApiError) as exc:
            return f"task {dag_id}/{task_id}: not read ({exc!r})"
        tail = [f"  {line.text[:300]}" for line in log[-lines:]]
        return "\n".join([f"{said}; last lines of its log:", *tail])

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """What "Mark failed/success" in the UI does."""
        body: dict[str, Any] = {"new_state": state}
        if not AIRFLOW_3:
            body["dry_run"] = False
        self.request("PATCH", self._ti_path(dag_id, run_id, task_id), body)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> list[LogLine]:
        """The whole log of one try, as the UI shows it (including what the triggerer wrote)."""
        path = f"{self._ti_path(dag_id, run_id, task_id)}/logs/{try_number}?full_content=true"
        if AIRFLOW_3:
            entries = self.request("GET", path)["content"]
            return [LogLine.from_entry(entry) for entry in entries if isinstance(entry, dict)]
        text = self.request("GET", path, accept="text/plain")
        return [LogLine.from_text(line) for line in text.splitlines()]

    def extra_links(self, dag_id: str, run_id: str, task_id: str) -> dict[str, str | None]:
        links = self.request("GET", f"{self._ti_path(dag_id, run_id, task_id)}/links")
        return dict(links["extra_links"] if AIRFLOW_3 else links)

    def task_process(self, dag_id: str, run_id: str, task_id: str) -> int | None:
        """The pid of the process running the task's operator code (not its supervisor), if it runs here.

        Airflow 3's task runner titles itself ``airflow worker -- <task instance id>``; Airflow 2's
        ``airflow task runner: <dag_id> <task_id> <run_id> <job_id>``.
        """
        if AIRFLOW_3:
            title = f"airflow worker -- {self.task_instance(dag_id, run_id, task_id)['id']}"
        else:
            title = f"airflow task runner: {dag_id} {task_id} {run_id} "
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if cmdline.replace("\0", " ").startswith(title):
                return int(proc.name)
        return None


def _quote(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")
