"""The faults the soak injects into a running local cluster, on a seeded schedule, and the CPU hog it runs
beside them. Every process started here is stopped by its pid; every fault ends with the cluster serving again
(a held node is released, a killed server started again), so the next one finds something to break.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.soak_api import Api
from t9k_provider.local.components import read_status
from t9k_provider.testing import LocalCluster, wait_for

SERVER_RESTART = "API server SIGKILLed and started again"
WATCH_EXPIRY = "history compacted, then every connection cut (watches resume into 410 Gone)"
CONNECTIONS_CUT = "every connection to the API server cut (watches resume)"
KUBELET_KILL = "a kubelet SIGKILLed"
CONTROLLERS_KILL = "the controllers process SIGKILLed"
T9K_CONTROLLER_KILL = "the T9k controller SIGKILLed"
NODE_STOP = "a node's kubelet held stopped for 2-6 s"
KINDS = (
    SERVER_RESTART,
    WATCH_EXPIRY,
    CONNECTIONS_CUT,
    KUBELET_KILL,
    CONTROLLERS_KILL,
    T9K_CONTROLLER_KILL,
    NODE_STOP,
)
#: Bounds of the waits here, generous for a loaded 2-core machine.
START_TIMEOUT = 90.0
COMPONENT_TIMEOUT = 60.0


def cannot_cut() -> str | None:
    """Why this machine cannot reset the server's connections (``ss -K`` needs root and iproute2), or None."""
    if shutil.which("ss") is None:
        return "ss (iproute2) is not installed"
    if os.geteuid() != 0:
        return "ss -K needs root"
    return None


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the load began
    kind: str
    node: str = ""  # for the kubelet faults
    hold: float = 0.0  # NODE_STOP: how long the kubelet stays stopped


def schedule(counts: dict[str, int], window: float, nodes: list[str], rng: random.Random) -> list[Fault]:
    """``counts[kind]`` faults of each kind in a seeded random order, one at a random instant of each of as
    many equal slots of the load window (its first tenth left quiet, so that objects exist before the first
    fault): spread out, yet sometimes close enough for one fault to hit the recovery from the last."""
    kinds = [kind for kind, count in counts.items() for _ in range(count)]
    rng.shuffle(kinds)
    slot = 0.9 * window / max(1, len(kinds))
    faults = []
    for i, kind in enumerate(kinds):
        at = round(0.1 * window + slot * (i + rng.random()), 2)
        node = rng.choice(nodes) if kind in (KUBELET_KILL, NODE_STOP) else ""
        hold = round(rng.uniform(2.0, 6.0), 1) if kind == NODE_STOP else 0.0
        faults.append(Fault(at, kind, node, hold))
    return faults


@dataclass
class Injector:
    """Injects faults into ``cluster``, one at a time; ``done`` lists what each did, in order."""

    cluster: LocalCluster
    done: list[tuple[Fault, str]] = field(default_factory=list)

    def inject(self, fault: Fault) -> None:
        action = {
            SERVER_RESTART: self._restart_server,
            WATCH_EXPIRY: self._expire_watches,
            CONNECTIONS_CUT: self._cut,
            KUBELET_KILL: lambda: self._kill(f"kubelet {fault.node}"),
            CONTROLLERS_KILL: lambda: self._kill("controllers"),
            T9K_CONTROLLER_KILL: lambda: self._kill("T9k controller"),
            NODE_STOP: lambda: self._stop_node(fault.node, fault.hold),
        }[fault.kind]
        self.done.append((fault, action()))

    def _restart_server(self) -> str:
        """A crash: the node agents die with the server, containers run on; the new server starts new agents
        (and a new T9k controller), which re-adopt what runs."""
        old = self.cluster.pid
        began = time.monotonic()
        self.cluster.kill()
        self.cluster.start(START_TIMEOUT)
        return f"pid {old} -> {self.cluster.pid}, serving again after {time.monotonic() - began:.1f} s"

    def _expire_watches(self) -> str:
        api = Api(self.cluster, START_TIMEOUT)
        try:
            compacted = api.json("POST", "/_embedded/compact", {})
        finally:
            api.close()
        return f"compacted to {compacted['revision']}, {self._cut()}"

    def _cut(self) -> str:
        """``ss -K``: the kernel resets every established TCP connection of the server's port (on loopback
        and on the pod bridge's gateway address), watches and requests alike."""
        port = str(self.cluster.port)
        addresses = ["127.0.0.1", str(self.cluster.subnet.gateway)]
        where = ["(", "src", addresses[0], "or", "src", addresses[1], ")"]
        argv = ["ss", "-K", "-t", "-n", "-H", "state", "established", "(", "sport", "=", f":{port}", ")"]
        out = subprocess.run([*argv, "and", *where], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"ss -K failed (needs root and CONFIG_INET_DIAG_DESTROY): {out.stderr}")
        return f"{len(out.stdout.splitlines())} connections cut"

    def _running_pid(self, component: str) -> int:
        """The pid of ``component`` once the server says it runs (it may still be in its restart backoff)."""

        def running() -> int | None:
            status = read_status(self.cluster.state).get(component) or {}
            pid = status.get("pid")
            return pid if status.get("state") == "running" and pid and _alive(pid) else None

        return wait_for(f"{component} running", running, COMPONENT_TIMEOUT, 0.1)

    def _kill(self, component: str) -> str:
        pid = self._running_pid(component)
        os.kill(pid, signal.SIGKILL)
        return f"pid {pid}"

    def _stop_node(self, node: str, hold: float) -> str:
        pid = self._running_pid(f"kubelet {node}")
        self.cluster.stop_node(node, COMPONENT_TIMEOUT)
        time.sleep(hold)  # the fault's length, not a wait for a condition
        self.cluster.start_node(node, COMPONENT_TIMEOUT)
        return f"{node} (pid {pid}) stopped for {hold:g} s"


def _alive(pid: int) -> bool:
    """Running, not a zombie its parent has yet to reap."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


HOG = (
    "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
)


class Hog:
    """A busy loop per core at niceness ``nice``, each ending by itself after ``seconds`` at the latest;
    ``stop()`` kills them by pid and says how many CPU seconds they got (how hard they pressed on everything
    else)."""

    def __init__(self, cores: int, seconds: float, nice: int = 0) -> None:
        self.procs = [
            subprocess.Popen([sys.executable, "-c", HOG, str(seconds)], stdin=subprocess.DEVNULL)
            for _ in range(cores)
        ]
        for proc in self.procs:
            os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
        self.began = time.monotonic()

    def stop(self) -> tuple[float, float]:
        """(CPU seconds the hogs used, wall seconds they ran): each is reaped here with its resource usage."""
        wall = time.monotonic() - self.began
        cpu = 0.0
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu += usage.ru_utime + usage.ru_stime
        return cpu, wall
