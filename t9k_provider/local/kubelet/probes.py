"""Container probes (`startupProbe`, `livenessProbe`, `readinessProbe`) as the kubelet's prober runs them.

Each running attempt of a main container gets a `ContainerProber`; the pod worker calls `due` on every sync
pass and applies the verdicts. Per probe, as in the kubelet's probe worker:

* nothing runs before `initialDelaySeconds` after the container started, then one probe every
  `periodSeconds`, each given `timeoutSeconds`;
* a result changes the probe's state only after `successThreshold` / `failureThreshold` equal results in a
  row; readiness starts as failed, liveness as succeeded, startup as unknown;
* liveness and readiness wait until the startup probe has succeeded; the startup probe stops then;
* a startup or liveness probe that reaches its failure threshold asks for the container to be killed (the
  worker restarts it per `restartPolicy`), and the prober holds off until the next attempt.

Handlers: `exec` runs the command inside the container (`execute`, the `pods/exec` path: its namespaces and
identity), `httpGet` and `tcpSocket` connect to the pod IP (loopback address in host-network mode), never
through a proxy; `grpc` is not implemented and fails with a message that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

from t9k_provider.kube.timeouts import within
from t9k_provider.local.kubelet.execute import RunningContainer, helper_argv

KINDS = ("startup", "liveness", "readiness")
OUTPUT_LIMIT = 10 * 1024  # the kubelet keeps this much of an exec probe's output
USER_AGENT = "kube-probe/1.31"


@dataclass(frozen=True)
class Probe:
    kind: str  # startup, liveness or readiness
    handler: dict[str, Any]
    initial_delay: float = 0
    period: float = 10
    timeout: float = 1
    success_threshold: int = 1
    failure_threshold: int = 3
    grace_period: int | None = None  # probe-level terminationGracePeriodSeconds (liveness/startup)

    @classmethod
    def of(cls, kind: str, spec: dict[str, Any]) -> Probe:
        handler = {k: v for k, v in spec.items() if k in ("exec", "httpGet", "tcpSocket", "grpc")}
        return cls(
            kind=kind,
            handler=handler,
            initial_delay=float(spec.get("initialDelaySeconds") or 0),
            period=float(spec.get("periodSeconds") or 10),
            timeout=float(spec.get("timeoutSeconds") or 1),
            success_threshold=int(spec.get("successThreshold") or 1),
            failure_threshold=int(spec.get("failureThreshold") or 3),
            grace_period=spec.get("terminationGracePeriodSeconds"),
        )

    @property
    def label(self) -> str:
        return self.kind.capitalize()


def container_probes(container: dict[str, Any]) -> list[Probe]:
    return [Probe.of(kind, container[f"{kind}Probe"]) for kind in KINDS if container.get(f"{kind}Probe")]


@dataclass
class ProbeState:
    probe: Probe
    result: bool | None  # the probe's verdict so far (None: unknown)
    last: bool | None = None  # the last single result and how many in a row
    run: int = 0
    next_at: float = 0.0
    task: asyncio.Task[tuple[bool, str]] | None = None

    def record(self, ok: bool) -> bool:
        """Count one result; returns whether the verdict changed."""
        self.run = self.run + 1 if ok == self.last else 1
        self.last = ok
        threshold = self.probe.success_threshold if ok else self.probe.failure_threshold
        if self.run < threshold or self.result == ok:
            return False
        self.result = ok
        return True


@dataclass
class Verdict:
    """What one pass of the prober found: failures to report, and whether the container must be killed."""

    failures: list[tuple[Probe, str]] = field(default_factory=list)
    kill: Probe | None = None


class ContainerProber:
    """The probes of one attempt of one container."""

    def __init__(self, container: dict[str, Any], attempt: int, started_at: float) -> None:
        self.container = container
        self.attempt = attempt
        initial = {"startup": None, "liveness": True, "readiness": False}
        self.states = {
            p.kind: ProbeState(p, initial[p.kind], next_at=started_at + p.initial_delay)
            for p in container_probes(container)
        }
        self.killed = False

    @property
    def started(self) -> bool:
        startup = self.states.get("startup")
        return startup is None or startup.result is True

    @property
    def ready(self) -> bool:
        readiness = self.states.get("readiness")
        return self.started and (readiness is None or readiness.result is True)

    def due(self, target: ProbeTarget) -> Verdict:
        """Collect finished probes and start the ones that are due (they run as tasks; call again later)."""
        verdict = Verdict()
        now = time.monotonic()
        for state in self.states.values():
            if state.task is not None and state.task.done():
                ok, message = _outcome(state.task)
                state.task = None
                if not ok:
                    verdict.failures.append((state.probe, message))
                if state.record(ok) and not ok and state.probe.kind != "readiness" and not self.killed:
                    self.killed = True
                    verdict.kill = state.probe
            if self.killed or state.task is not None or now < state.next_at:
                continue
            if state.probe.kind == "startup" and self.started:
                continue
            if state.probe.kind != "startup" and not self.started:
                continue
            state.next_at = now + state.probe.period
            state.task = asyncio.get_running_loop().create_task(run_probe(state.probe, target))
        return verdict

    def cancel(self) -> None:
        for state in self.states.values():
            if state.task is not None:
                state.task.cancel()


def _outcome(task: asyncio.Task[tuple[bool, str]]) -> tuple[bool, str]:
    """A finished probe's result; one that raised is a failed probe, so that no error can stop the prober
    (its done task would otherwise be read, and raise, on every pass)."""
    if task.cancelled():
        return False, "probe cancelled"
    error = task.exception()
    if error is not None:
        return False, f"probe error: {type(error).__name__}: {error}"
    return task.result()


@dataclass(frozen=True)
class ProbeTarget:
    """Where a container's probes go: its pod's address and, for exec, the running container."""

    pod_ip: str
    container: dict[str, Any]
    running: RunningContainer | None


async def run_probe(probe: Probe, target: ProbeTarget) -> tuple[bool, str]:
    """One probe: (succeeded, why not)."""
    handler = probe.handler
    try:
        if "exec" in handler:
            return await _exec(handler["exec"].get("command") or [], target, probe.timeout)
        if "httpGet" in handler:
            return await asyncio.to_thread(_http_get, handler["httpGet"], target, probe.timeout)
        if "tcpSocket" in handler:
            return await _tcp(handler["tcpSocket"], target, probe.timeout)
    except ValueError as exc:
        return False, str(exc)
    return False, f"probe handler {sorted(handler) or 'missing'} is not supported on the local cluster"


def _port(value: Any, container: dict[str, Any]) -> int:
    """A probe's port: a number or the name of one of the container's ports."""
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for port in container.get("ports") or []:
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"port {value!r} not found in the container's ports")


async def _exec(command: list[str], target: ProbeTarget, timeout: float) -> tuple[bool, str]:
    if target.running is None:
        return False, "container is not running"
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *helper_argv(target.running, write_fd, False, command),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            pass_fds=(write_fd,),
        )
    finally:
        os.close(write_fd)
    try:
        try:
            output, _ = await within(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return False, f"command {command!r} timed out"
        os.set_blocking(read_fd, False)
        try:
            error = os.read(read_fd, 4096).decode(errors="replace")
        except BlockingIOError:  # a process the command left behind still holds the pipe: it started
            error = ""
    finally:
        os.close(read_fd)
    if error:
        return False, error
    text = output[:OUTPUT_LIMIT].decode(errors="replace")
    return proc.returncode == 0, text


def _http_get(spec: dict[str, Any], target: ProbeTarget, timeout: float) -> tuple[bool, str]:
    host = spec.get("host") or target.pod_ip
    port = _port(spec.get("port"), target.container)
    scheme = str(spec.get("scheme") or "HTTP").lower()
    path = spec.get("path") or "/"
    url = f"{scheme}://{host}:{port}{path}"
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
    headers.update({h["name"]: h.get("value", "") for h in spec.get("httpHeaders") or []})
    if scheme == "https":  # the kubelet does not verify a probe's certificate
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=context
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read(OUTPUT_LIMIT).decode(errors="replace")
    except OSError as exc:
        return False, f'Get "{url}": {_dial_error(exc, host, port)}'
    except http.client.HTTPException as exc:  # not HTTP on that port, or a broken answer
        return False, f'Get "{url}": malformed HTTP response: {type(exc).__name__}: {exc}'
    finally:
        conn.close()
    if 200 <= response.status < 400:  # redirects are not followed: a 3xx is a success, as upstream
        return True, body
    return False, f"HTTP probe failed with statuscode: {response.status}"


async def _tcp(spec: dict[str, Any], target: ProbeTarget, timeout: float) -> tuple[bool, str]:
    host = spec.get("host") or target.pod_ip
    port = _port(spec.get("port"), target.container)
    try:
        _, writer = await within(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        return False, _dial_error(exc, host, port)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, ""


def _dial_error(exc: BaseException, host: str, port: int) -> str:
    """Go's wording of a failed dial, which users know from `kubectl describe pod`."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return f"dial tcp {host}:{port}: i/o timeout"
    if isinstance(exc, ConnectionRefusedError):
        return f"dial tcp {host}:{port}: connect: connection refused"
    return f"dial tcp {host}:{port}: {getattr(exc, 'strerror', None) or exc}"
