"""A pod's probes, as the kubelet's prober manager runs them: each running main container's startup, liveness
and readiness probes (`probes.ContainerProber`), their Unhealthy events, and the kill a failed startup or
liveness probe asks for (the pod worker restarts the container per its restartPolicy)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from t9k_provider.local.kubelet import execute, runtime
from t9k_provider.local.kubelet.poddir import AttemptFiles
from t9k_provider.local.kubelet.podsetup import EventRecorder
from t9k_provider.local.kubelet.probes import ContainerProber, Probe, ProbeTarget
from t9k_provider.local.kubelet.status import ContainerView, parse_time


class PodProbes:
    """The probers of one pod's running containers, and the attempts a probe is killing."""

    def __init__(self, state_dir: Path, record: EventRecorder, wake: Callable[[float], None]) -> None:
        self.state_dir = state_dir
        self.record = record
        self.wake = wake
        self.probers: dict[str, ContainerProber] = {}  # container -> the probes of its running attempt
        self.kills: dict[tuple[str, int], float] = {}  # attempt killed by a probe -> SIGKILL deadline

    async def run(
        self,
        pod: dict[str, Any],
        pod_ip: str,
        mains: list[ContainerView],
        files: Callable[[ContainerView], AttemptFiles],
    ) -> None:
        """Run the main containers' probes that are due, and report and act on what they find."""
        for v in mains:
            cur = v.current
            prober = self.probers.get(v.name)
            if cur is None or not cur.running or not cur.started_at or cur.pid is None:
                if prober is not None:
                    prober.cancel()
                    del self.probers[v.name]
                continue
            deadline = self.kills.get((v.name, cur.n))
            if deadline is not None and time.time() >= deadline:
                runtime.signal_container(files(v), signal.SIGKILL)
            if prober is None or prober.attempt != cur.n:
                if prober is not None:
                    prober.cancel()
                started = time.monotonic() - (time.time() - (parse_time(cur.started_at) or time.time()))
                prober = ContainerProber(v.spec, cur.n, started)
                if not prober.states:
                    continue
                self.probers[v.name] = prober
            running = execute.locate(self.state_dir, pod, v.name, cur.n)
            verdict = prober.due(ProbeTarget(pod_ip, v.spec, running))
            for probe, message in verdict.failures:
                await self.record("Unhealthy", f"{probe.label} probe failed: {message}", v.name, warning=True)
            if verdict.kill is not None:
                await self._kill(pod, v, cur.n, verdict.kill, files(v))

    async def _kill(
        self, pod: dict[str, Any], v: ContainerView, n: int, probe: Probe, files: AttemptFiles
    ) -> None:
        """A failed startup or liveness probe: stop the container (SIGTERM, SIGKILL after its grace)."""
        await self.record(
            "Killing", f"Container {v.name} failed {probe.kind} probe, will be restarted", v.name
        )
        grace = probe.grace_period
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        self.kills[(v.name, n)] = time.time() + float(grace)
        runtime.signal_container(files, signal.SIGTERM)
        self.wake(float(grace))

    def show(self, mains: list[ContainerView]) -> None:
        """What the probes said last, onto the views the status is written from (also while deleting)."""
        for v in mains:
            prober = self.probers.get(v.name)
            if prober is not None and v.current is not None and prober.attempt == v.current.n:
                v.probe_started, v.probe_ready = prober.started, prober.ready

    def cancel(self) -> None:
        for prober in self.probers.values():
            prober.cancel()
