"""The server's child components (the node agents, the T9k controller): started, watched and restarted.

A component that exits while the cluster serves is logged with its exit status and the last lines of its log,
then started again after a backoff (1 s doubling to 30 s; back to 1 s once it ran a minute), as systemd or a
kubelet restart a crashed daemon: the kubelet re-adopts the containers its predecessor left, the controller
derives everything from the cluster. `STATE/components.json` holds each component's state, restarts and
last exit, for `t9k-local status`, so a dead component never goes unsaid.

A component can be held stopped (`t9k-local node stop NAME` holds that node's kubelet): it is SIGKILLed, as
a crash would end it, and not restarted until it is released (`node start`). The request travels as
`STATE/components-held.json` plus SIGUSR1 to the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t9k_provider.kube.timeouts import within
from t9k_provider.local.state import StateDir, write_atomic

log = logging.getLogger("t9k_provider.local")
STATUS_FILE = "components.json"
HELD_FILE = "components-held.json"
FIRST_BACKOFF, MAX_BACKOFF, HEALTHY_AFTER = 1.0, 30.0, 60.0
TAIL_LINES = 15


@dataclass
class Component:
    """One child process: ``argv``; its output appended to ``log_name`` in the state directory (None: the
    server's own output); ``grace``: seconds between SIGTERM and SIGKILL when the cluster stops;
    ``pass_fds``: descriptors of the server each of its processes inherits (the console's socket)."""

    name: str
    argv: list[str]
    log_name: str | None = None
    grace: float = 10.0
    pass_fds: tuple[int, ...] = ()
    proc: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = FIRST_BACKOFF
    last_exit: dict[str, Any] | None = None
    state: str = "starting"
    watcher: asyncio.Task[None] | None = field(default=None, repr=False)
    held: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


def describe_exit(code: int) -> str:
    """`exit code 1`, or `killed by SIGKILL` for a negative returncode."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def log_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of ``path`` (read from its end: a log may be large)."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read()
    except OSError:
        return []
    return data.decode(errors="replace").splitlines()[-lines:]


class Supervisor:
    """Starts components, restarts the ones that die, stops them all (in reverse order) at the end."""

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self.components: dict[str, Component] = {}
        self.stopping = False
        (state.path / HELD_FILE).unlink(missing_ok=True)  # a new run starts every component

    async def start(self, component: Component) -> asyncio.subprocess.Process:
        self.components[component.name] = component
        await self._spawn(component)
        component.watcher = asyncio.create_task(self._watch(component), name=f"component {component.name}")
        assert component.proc is not None
        return component.proc

    async def _spawn(self, component: Component) -> None:
        out: Any = None
        if component.log_name is not None:
            out = self.state.open_log(component.log_name)
        try:
            component.proc = await asyncio.create_subprocess_exec(
                *component.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                pass_fds=component.pass_fds,
            )
        finally:
            if out is not None:
                out.close()
        component.started_at = time.monotonic()
        component.state = "running"
        self._write_status()

    async def _watch(self, component: Component) -> None:
        """Until the cluster stops: wait for the component to exit, say why, start it again (a held one once
        it is released)."""
        while True:
            assert component.proc is not None
            code = await component.proc.wait()
            if self.stopping:
                return
            ran = time.monotonic() - component.started_at
            log_path = self.state.path / (component.log_name or self.state.log_file.name)
            tail = [] if component.held else log_tail(log_path)
            component.last_exit = {
                "status": describe_exit(code),
                "code": code,
                "at": time.time(),
                "ranSeconds": round(ran, 1),
                "log": str(log_path),
                "logTail": tail,
                "held": component.held,
            }
            if component.held:
                component.state = "stopped"
                self._write_status()
                log.warning(
                    "%s (pid %d) stopped on request: %s",
                    component.name,
                    component.proc.pid,
                    describe_exit(code),
                )
                component.released.clear()
                await component.released.wait()
                component.backoff = FIRST_BACKOFF
                await self._spawn(component)
                log.info("%s started again on request (pid %d)", component.name, component.proc.pid)
                continue
            if ran >= HEALTHY_AFTER:
                component.backoff = FIRST_BACKOFF
            component.state = "restarting"
            self._write_status()
            log.error(
                "%s (pid %d) exited: %s after %.1fs; restarting in %.0fs. Last lines of %s:\n%s",
                component.name, component.proc.pid, describe_exit(code), ran, component.backoff, log_path,
                "\n".join(f"  | {line}" for line in tail) or "  (empty)",
            )  # fmt: skip
            await self._respawn(component)

    async def _respawn(self, component: Component) -> None:
        """Start the component again after its backoff; a start that fails (its program gone, no memory to
        fork) is said and tried again after the next backoff."""
        while True:
            await asyncio.sleep(component.backoff)
            component.backoff = min(component.backoff * 2, MAX_BACKOFF)
            component.restarts += 1
            try:
                await self._spawn(component)
            except OSError as exc:
                log.error(
                    "%s could not start: %s; trying again in %.0fs", component.name, exc, component.backoff
                )
                continue
            assert component.proc is not None
            pid, restarts = component.proc.pid, component.restarts
            log.info("%s restarted (pid %d, restart %d)", component.name, pid, restarts)
            return

    def apply_holds(self) -> None:
        """Hold or release components as `STATE/components-held.json` asks (a SIGUSR1 says it changed)."""
        held = set(read_held(self.state))
        for component in self.components.values():
            if component.name in held and not component.held:
                component.held = True
                if component.proc is not None and component.proc.returncode is None:
                    component.proc.kill()
            elif component.name not in held and component.held:
                component.held = False
                component.released.set()

    async def stop(self) -> None:
        self.stopping = True
        for component in reversed(list(self.components.values())):
            if component.watcher is not None:
                component.watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await component.watcher
            if component.proc is not None:
                await _stop_process(component.proc, component.grace)
            component.state = "stopped"
        self._write_status()

    def _write_status(self) -> None:
        status = {
            c.name: {
                "state": c.state,
                "pid": c.proc.pid if c.proc is not None else None,
                "restarts": c.restarts,
                "lastExit": c.last_exit,
                "log": str(self.state.path / (c.log_name or self.state.log_file.name)),
            }
            for c in self.components.values()
        }
        write_atomic(self.state.path / STATUS_FILE, json.dumps(status, indent=1).encode())


def read_held(state: StateDir) -> list[str]:
    try:
        return list(json.loads((state.path / HELD_FILE).read_text()))
    except (OSError, ValueError):
        return []


def request_hold(state: StateDir, name: str, held: bool) -> None:
    """Ask the running server to hold ``name`` stopped (or release it); raises LookupError naming the
    components when there is none of that name, RuntimeError when no server runs."""
    running = state.running()
    if running is None:
        raise RuntimeError(f"no t9k-local server runs on {state.path}")
    known = read_status(state)
    if name not in known:
        raise LookupError(", ".join(sorted(known)))
    names = set(read_held(state))
    names = names | {name} if held else names - {name}
    write_atomic(state.path / HELD_FILE, json.dumps(sorted(names)).encode())
    os.kill(running.pid, signal.SIGUSR1)


def read_status(state: StateDir) -> dict[str, Any]:
    """What the running (or last) server wrote of its components; empty when it wrote nothing."""
    try:
        return json.loads((state.path / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {}


async def _stop_process(proc: asyncio.subprocess.Process, grace: float) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await within(proc.wait(), grace)
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
