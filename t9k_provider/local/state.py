"""The local cluster's state directory: permissions, token, kubeconfig, and the pid file that is also a lock.

``STATE/server.pid`` holds ``<pid>\\n`` while the server starts and ``<pid>\\n<port>\\n`` once it serves; the
running server keeps an exclusive ``flock`` on it, so a pid file whose lock can be taken is stale (the server
crashed) whatever pid it names.
"""

from __future__ import annotations

import base64
import fcntl
import os
import secrets
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

ENV_HOME = "T9K_LOCAL_HOME"
CLUSTER_NAME = "t9k-local"


def default_state_dir() -> Path:
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".t9k-local").expanduser()


class AlreadyRunning(Exception):
    def __init__(self, state_dir: Path, pid: int | None) -> None:
        super().__init__(f"a t9k-local server (pid {pid}) is already running on {state_dir}")
        self.pid = pid


@dataclass(frozen=True)
class Running:
    pid: int
    port: int | None


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write atomically with ``mode`` (a private file is never world-readable, even briefly)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class StateDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser().resolve()

    @property
    def kubeconfig(self) -> Path:
        return self.path / "kubeconfig"

    @property
    def pid_file(self) -> Path:
        return self.path / "server.pid"

    @property
    def log_file(self) -> Path:
        return self.path / "server.log"

    def ensure(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path, 0o700)

    def open_log(self, name: str) -> IO[bytes]:
        """Append to a private (0600) log file in the state directory."""
        fd = os.open(self.path / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "ab")

    def private_file(self, name: str) -> Path:
        """Create ``name`` with mode 0600 unless it exists (SQLite gives its WAL the same mode)."""
        path = self.path / name
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        return path

    def token(self) -> str:
        """The bearer token, kept across restarts so existing kubeconfigs stay valid."""
        path = self.path / "token"
        if path.exists():
            token = path.read_text().strip()
            if token:
                return token
        token = secrets.token_urlsafe(32)
        write_atomic(path, f"{token}\n".encode())
        return token

    @property
    def ca_cert(self) -> Path:
        return self.path / "pki" / "ca.crt"

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_cert))

    def write_kubeconfig(self, port: int, token: str) -> Path:
        cluster = {
            "server": f"https://127.0.0.1:{port}",
            "certificate-authority-data": base64.b64encode(self.ca_cert.read_bytes()).decode(),
        }
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CLUSTER_NAME, "cluster": cluster}],
            "users": [{"name": CLUSTER_NAME, "user": {"token": token}}],
            "contexts": [
                {
                    "name": CLUSTER_NAME,
                    "context": {"cluster": CLUSTER_NAME, "user": CLUSTER_NAME, "namespace": "default"},
                }
            ],
            "current-context": CLUSTER_NAME,
            "preferences": {},
        }
        write_atomic(self.kubeconfig, yaml.safe_dump(config, sort_keys=False).encode())
        return self.kubeconfig

    def kubeconfig_port(self) -> int | None:
        """The port of the last kubeconfig written here, which a restart tries to keep."""
        try:
            config = yaml.safe_load(self.kubeconfig.read_text())
            server = config["clusters"][0]["cluster"]["server"]
            return int(server.rsplit(":", 1)[1].strip("/"))
        except (OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
            return None

    # -- pid file and lock ---------------------------------------------------------------------------------

    def acquire(self) -> IO[str]:
        """Lock the pid file for this process; raises AlreadyRunning. The returned file must stay open.

        A lock that is busy is retried briefly: ``running()`` probes take it for microseconds.
        """
        self.ensure()
        handle = open(self.pid_file, "a+")  # noqa: SIM115 - held open for the life of the server
        os.chmod(self.pid_file, 0o600)
        for attempt in range(5):
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 4:
                    pid = self.read_pid_file()[0]
                    handle.close()
                    raise AlreadyRunning(self.path, pid) from None
                time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle

    @staticmethod
    def publish_port(handle: IO[str], port: int) -> None:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n{port}\n")
        handle.flush()

    def release(self, handle: IO[str]) -> None:
        self.pid_file.unlink(missing_ok=True)
        handle.close()

    def read_pid_file(self) -> tuple[int | None, int | None]:
        try:
            fields = self.pid_file.read_text().split()
        except OSError:
            return None, None
        pid, port = [*(int(f) if f.isdigit() else None for f in fields[:2]), None, None][:2]
        return pid, port

    def running(self, *, clean: bool = False) -> Running | None:
        """The live server on this directory, or None; ``clean`` removes a stale pid file."""
        if not self.pid_file.exists():
            return None
        with open(self.pid_file, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid, port = self.read_pid_file()
                return Running(pid or 0, port)
            if clean:
                self.pid_file.unlink(missing_ok=True)
        return None


def ready(state: StateDir, port: int, timeout: float = 1.0) -> bool:
    try:
        context = state.client_context()
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/readyz", timeout=timeout, context=context
        ) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(state: StateDir, pid: int, timeout: float, alive: Callable[[], bool]) -> int:
    """Wait until the server process ``pid`` serves on its published port; returns the port.

    ``alive`` tells whether that process still runs, so a crash during start-up fails fast.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the t9k-local server exited during start-up; see {state.log_file}")
        found, port = state.read_pid_file()
        if found == pid and port is not None and ready(state, port):
            return port
        time.sleep(0.05)
    raise TimeoutError(f"the t9k-local server did not become ready within {timeout:g}s; see {state.log_file}")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
