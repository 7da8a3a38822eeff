"""A pod's probes, as the kubelet's prober workers run them: each running main container's startup, liveness
and readiness probes (`probes.ContainerProber`), their Unhealthy events, and the restart a failed startup or
liveness probe asks for. Part of the pod worker (`PodWorker` inherits it)."""

from __future__ import annotations

import signal
import time
from typing import Any

from t9k_provider.local.kubelet import execute, runtime
from t9k_provider.local.kubelet.network import PodNet
from t9k_provider.local.kubelet.poddir import AttemptFiles
from t9k_provider.local.kubelet.podenv import PodContext
from t9k_provider.local.kubelet.probes import ContainerProber, Probe, ProbeTarget
from t9k_provider.local.kubelet.status import ContainerView, parse_time


class PodProbing:
    """The pod worker's probes (its attributes are the worker's)."""

    pod: dict[str, Any]
    kubelet: Any  # PodHost
    net: PodNet | None
    ctx: PodContext | None
    probers: dict[str, ContainerProber]
    probe_kills: dict[tuple[str, int], float]

    async def _event(self, reason: str, message: str, container: str = "", *, warning: bool = False) -> None:
        raise NotImplementedError  # the worker's

    def _current_files(self, v: ContainerView) -> AttemptFiles:
        raise NotImplementedError  # the worker's

    async def _probe(self, mains: list[ContainerView]) -> None:
        """Run the main containers' probes (see `probes`), and report and act on what they find."""
        for v in mains:
            cur = v.current
            prober = self.probers.get(v.name)
            if cur is None or not cur.running or not cur.started_at or cur.pid is None:
                if prober is not None:
                    prober.cancel()
                    del self.probers[v.name]
                continue
            self._enforce_probe_kill(v, cur.n)
            if prober is None or prober.attempt != cur.n:
                if prober is not None:
                    prober.cancel()
                started = time.monotonic() - (time.time() - (parse_time(cur.started_at) or time.time()))
                prober = ContainerProber(v.spec, cur.n, started)
                if not prober.states:
                    continue
                self.probers[v.name] = prober
            assert self.net is not None
            running = execute.locate(self.kubelet.state_dir, self.pod, v.name, cur.n)
            verdict = prober.due(ProbeTarget(self.net.ip, v.spec, running))
            for probe, message in verdict.failures:
                await self._event("Unhealthy", f"{probe.label} probe failed: {message}", v.name, warning=True)
            if verdict.kill is not None:
                await self._kill_for_probe(v, cur.n, verdict.kill)

    async def _kill_for_probe(self, v: ContainerView, n: int, probe: Probe) -> None:
        """A failed startup or liveness probe: stop the container (SIGTERM, SIGKILL after the grace period);
        `_advance` restarts it per restartPolicy."""
        await self._event(
            "Killing", f"Container {v.name} failed {probe.kind} probe, will be restarted", v.name
        )
        grace = probe.grace_period
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        self.probe_kills[(v.name, n)] = time.time() + float(grace)
        runtime.signal_container(self._current_files(v), signal.SIGTERM)
        self.kubelet.queue_wakeup(self, float(grace))

    def _enforce_probe_kill(self, v: ContainerView, n: int) -> None:
        deadline = self.probe_kills.get((v.name, n))
        if deadline is not None and time.time() >= deadline:
            runtime.signal_container(self._current_files(v), signal.SIGKILL)
