"""Resource limits of the local pods through cgroups: v2 where it is mounted with its controllers, else v1.

Layout, in every hierarchy used (v1: `memory`, `cpu`, and `pids`/`cpuacct` where mounted; v2: one):

    <kubelet's own cgroup, or the hierarchy's root>/t9k-local-<id>/   the kubelet cgroup (one per state dir)
        pod<uid>/                                                     pod cgroup (`pids.max`: podPidsLimit)
            <container>-<n>/                                          attempt n of a container (its limits)

The kubelet creates the pod and container cgroups before it launches a shim; the container process joins
its cgroup before exec (the shim stays outside, so its memory does not count), and the shim reads whether
the OOM killer struck and removes the attempt's cgroup once the attempt is over (`cgroupfs`). Where no
hierarchy is writable, `detect` says why and the kubelet runs without limits.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from decimal import ROUND_CEILING
from pathlib import Path
from typing import Any

from t9k_provider.local.kubelet import tmpfs
from t9k_provider.local.kubelet.cgroupfs import remove_tree
from t9k_provider.local.kubelet.poddir import pods_root
from t9k_provider.local.machinery.quantity import parse_quantity

CPU_PERIOD_US = 100_000  # the CFS period the kubelet uses
MIN_QUOTA_US = 1_000  # the kernel's smallest quota
MIN_SHARES, MAX_SHARES = 2, 262_144
PIDS_LIMIT_ENV = "T9K_LOCAL_POD_PIDS_LIMIT"  # podPidsLimit (unlimited when unset, as upstream)
V1_REQUIRED = ("memory", "cpu")
V1_OPTIONAL = ("pids", "cpuacct")
V2_CONTROLLERS = ("memory", "cpu", "pids")


@dataclass(frozen=True)
class Limits:
    """A container's resources as cgroup values: memory in bytes, CPU in millicores."""

    memory: int | None = None
    cpu_limit: int | None = None
    cpu_request: int | None = None

    @classmethod
    def of_container(cls, container: dict[str, Any]) -> Limits:
        resources = container.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        memory = _quantity(limits.get("memory"))
        cpu_limit = _quantity(limits.get("cpu"), milli=True)
        # As the API server defaults it: a limit without a request is also the request.
        cpu_request = _quantity(requests.get("cpu"), milli=True)
        return cls(memory, cpu_limit, cpu_limit if cpu_request is None else cpu_request)


def _quantity(value: Any, *, milli: bool = False) -> int | None:
    if value is None:
        return None
    parsed = parse_quantity(value)
    if parsed is None or parsed <= 0:
        return None
    return int((parsed * 1000 if milli else parsed).to_integral_value(rounding=ROUND_CEILING))


def cpu_shares(milli: int | None) -> int:
    """The kubelet's MilliCPUToShares: 1024 shares per CPU requested, 2 without a request."""
    if not milli:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli * 1024 // 1000))


def node_shares() -> int:
    """The kubelet cgroup's weight: the machine's CPUs, as upstream weighs `kubepods` by allocatable CPU
    (with the default 1024, every pod together would weigh as much as one process outside)."""
    return cpu_shares((os.cpu_count() or 1) * 1000)


def cpu_weight(shares: int) -> int:
    """cgroup v2 weight of v1 shares, as runc converts them ([2, 262144] -> [1, 10000])."""
    return 1 + ((shares - MIN_SHARES) * 9999) // (MAX_SHARES - MIN_SHARES)


def cpu_quota(milli: int) -> int:
    return max(MIN_QUOTA_US, milli * CPU_PERIOD_US // 1000)


def v1_files(limits: Limits) -> list[tuple[str, str, str]]:
    """(controller, file, value) that give a v1 container cgroup these limits, in writing order; swap is off
    for the container (memory+swap limited to the memory limit, swappiness 0)."""
    files = [("cpu", "cpu.shares", str(cpu_shares(limits.cpu_request)))]
    if limits.cpu_limit is not None:
        files += [
            ("cpu", "cpu.cfs_period_us", str(CPU_PERIOD_US)),
            ("cpu", "cpu.cfs_quota_us", str(cpu_quota(limits.cpu_limit))),
        ]
    if limits.memory is not None:
        files += [
            ("memory", "memory.limit_in_bytes", str(limits.memory)),
            ("memory", "memory.memsw.limit_in_bytes", str(limits.memory)),
        ]
    return [*files, ("memory", "memory.swappiness", "0")]


def v2_files(limits: Limits) -> list[tuple[str, str, str]]:
    """(controller, file, value) for a v2 container cgroup: the same limits, swap off."""
    files = [("cpu", "cpu.weight", str(cpu_weight(cpu_shares(limits.cpu_request))))]
    if limits.cpu_limit is not None:
        files.append(("cpu", "cpu.max", f"{cpu_quota(limits.cpu_limit)} {CPU_PERIOD_US}"))
    if limits.memory is not None:
        files.append(("memory", "memory.max", str(limits.memory)))
    return [*files, ("memory", "memory.swap.max", "0")]


def pod_files(spec: dict[str, Any], version: int) -> list[tuple[str, str, str]]:
    """The pod cgroup's files: its CPU weight from what its containers request (as the kubelet sizes a pod:
    their sum, or the largest init container's when larger), and podPidsLimit when set."""
    mains = sum(Limits.of_container(c).cpu_request or 0 for c in spec.get("containers") or [])
    inits = (Limits.of_container(c).cpu_request or 0 for c in spec.get("initContainers") or [])
    shares = cpu_shares(max([mains, *inits]))
    files = [
        ("cpu", "cpu.shares", str(shares)) if version == 1 else ("cpu", "cpu.weight", str(cpu_weight(shares)))
    ]
    pids_limit = os.environ.get(PIDS_LIMIT_ENV, "").strip()
    if pids_limit.isdigit():
        files.append(("pids", "pids.max", pids_limit))
    return files


# Files a kernel may lack (no swap accounting, no swappiness in v2...): skipped when absent.
OPTIONAL_FILES = frozenset({"memory.memsw.limit_in_bytes", "memory.swappiness", "memory.swap.max"})


@dataclass(frozen=True)
class KubeletCgroups:
    """The kubelet cgroup in each hierarchy: `bases` maps a controller to its directory (v2: every controller
    to the same directory)."""

    version: int
    bases: dict[str, Path]

    def describe(self) -> str:
        return f"cgroup v{self.version} ({', '.join(sorted(self.bases))})"

    def _dirs(self, relative: Path) -> dict[str, Path]:
        return {controller: base / relative for controller, base in self.bases.items()}

    def pod_dirs(self, uid: str) -> list[Path]:
        return _unique(self._dirs(Path(f"pod{uid}")).values())

    def create_container(self, pod: dict[str, Any], container: dict[str, Any], n: int) -> list[str]:
        """Create the cgroup of attempt `n` of `container` under the pod's cgroup, with its limits;
        returns the directories its process joins. Raises OSError when the kernel refuses."""
        pod_dirs = self._dirs(Path(f"pod{pod['metadata']['uid']}"))
        for path in _unique(pod_dirs.values()):
            path.mkdir(exist_ok=True)
            if self.version == 2:
                _enable_subtree(path, V2_CONTROLLERS)
        self._write(pod_dirs, pod_files(pod["spec"], self.version))
        dirs = {controller: path / f"{container['name']}-{n}" for controller, path in pod_dirs.items()}
        for path in _unique(dirs.values()):
            path.mkdir(exist_ok=True)
        limits = Limits.of_container(container)
        self._write(dirs, v1_files(limits) if self.version == 1 else v2_files(limits))
        return [str(p) for p in _unique(dirs.values())]

    def _write(self, dirs: dict[str, Path], files: list[tuple[str, str, str]]) -> None:
        for controller, name, value in files:
            if controller not in dirs:
                continue  # an optional v1 hierarchy (pids) that is not mounted
            target = dirs[controller] / name
            if name in OPTIONAL_FILES and not target.exists():
                continue
            target.write_text(value)

    def remove_pod(self, uid: str) -> None:
        """Remove a pod's cgroups, killing what is left in them (the pod is gone)."""
        for path in self.pod_dirs(uid):
            remove_tree(path)

    def remove_orphans(self, live_uids: set[str]) -> None:
        """After a restart: the cgroups of pods that no longer exist go."""
        for base in _unique(self.bases.values()):
            if base.is_dir():
                for entry in base.iterdir():
                    if entry.is_dir() and entry.name.startswith("pod") and entry.name[3:] not in live_uids:
                        remove_tree(entry)

    def remove(self) -> None:
        """The kubelet stops with its pods: its cgroup goes too."""
        for base in _unique(self.bases.values()):
            remove_tree(base)


def _unique(paths: Any) -> list[Path]:
    return list(dict.fromkeys(paths))


def _enable_subtree(path: Path, controllers: tuple[str, ...]) -> None:
    """v2: let `path`'s children use `controllers` (each level of the tree must delegate them)."""
    control = path / "cgroup.subtree_control"
    enabled = {word.lstrip("+") for word in control.read_text().split()} if control.exists() else set()
    missing = [c for c in controllers if c not in enabled]
    if missing:
        control.write_text(" ".join(f"+{c}" for c in missing))


def cpu_usage(dirs: list[str]) -> tuple[float, int]:
    """(CPU seconds used, CFS periods elapsed while runnable): their ratio over the period is the CPU the
    container got, measured by the kernel rather than by a clock."""
    usage, periods = None, 0
    for path in dirs:
        stat = _keyed(Path(path, "cpu.stat"))
        periods = periods or stat.get("nr_periods", 0)
        if "usage_usec" in stat:  # v2
            usage = stat["usage_usec"] / 1e6
        with contextlib.suppress(OSError, ValueError):
            usage = int(Path(path, "cpuacct.usage").read_text()) / 1e9  # v1, nanoseconds
    return usage or 0.0, periods


def _keyed(path: Path) -> dict[str, int]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split() for line in lines)
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


# -- finding a writable hierarchy


@dataclass(frozen=True)
class _Mount:
    point: Path
    root: str  # the cgroup path the mount shows at its mount point
    controllers: frozenset[str]  # v1: the mount's controllers; v2: empty


def _mounts(mountinfo: str) -> tuple[list[_Mount], list[_Mount]]:
    """(v1 mounts, v2 mounts) of /proc/self/mountinfo."""
    v1, v2 = [], []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        fields, extra = head.split(), tail.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        mount = _Mount(Path(fields[4]), fields[3], frozenset())
        if extra[0] == "cgroup2":
            v2.append(mount)
        elif extra[0] == "cgroup":
            controllers = frozenset(extra[2].split(","))
            v1.append(_Mount(mount.point, mount.root, controllers))
    return v1, v2


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """The calling process's cgroup per v1 controller and, under "", in v2 (/proc/self/cgroup)."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                out[controller] = parts[2]
    return out


def _within(mount: _Mount, path: str) -> Path:
    """Where cgroup `path` is seen under `mount` (the mount point if it is outside the mount's root)."""
    root = mount.root.rstrip("/")
    if path == mount.root or not path.startswith(root + "/"):
        return mount.point
    return mount.point / path[len(root) + 1 :]


def kubelet_cgroup_name(state_dir: Path) -> str:
    """One kubelet cgroup per state directory: local clusters side by side never touch each other's."""
    return "t9k-local-" + hashlib.sha256(str(Path(state_dir).resolve()).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class _Places:
    """Where a kubelet cgroup may go: v2 parents in order of preference (each with its mount), and the v1
    parent per controller."""

    v2: list[tuple[_Mount, Path]]
    v1: dict[str, Path]


def _places(mountinfo: str | None, proc_cgroup: str | None) -> _Places:
    mountinfo = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    proc_cgroup = Path("/proc/self/cgroup").read_text() if proc_cgroup is None else proc_cgroup
    v1, v2 = _mounts(mountinfo)
    own = _own_paths(proc_cgroup)
    v2_parents = [
        (mount, parent) for mount in v2 for parent in _unique([_within(mount, own.get("", "/")), mount.point])
    ]
    v1_parents = {c: _within(m, own.get(c, "/")) for m in v1 for c in m.controllers}
    return _Places(v2_parents, v1_parents)


def detect(
    state_dir: Path, *, mountinfo: str | None = None, proc_cgroup: str | None = None
) -> tuple[KubeletCgroups | None, str]:
    """Create the kubelet cgroup in the first writable place: v2 (under this process's cgroup, else the
    hierarchy's root, which alone may hold both processes and controlled children), else v1 (under this
    process's cgroup). Returns it and how, or None and why limits cannot be enforced."""
    try:
        places = _places(mountinfo, proc_cgroup)
    except OSError as exc:
        return None, f"cgroups cannot be read: {exc}"
    name = kubelet_cgroup_name(state_dir)
    problems: list[str] = []
    for mount, parent in places.v2:
        try:
            available = set((mount.point / "cgroup.controllers").read_text().split())
        except OSError:
            continue
        if not set(V2_CONTROLLERS) <= available:
            continue
        try:
            _enable_subtree(parent, V2_CONTROLLERS)
            base = parent / name
            base.mkdir(exist_ok=True)
            _enable_subtree(base, V2_CONTROLLERS)
            (base / "cpu.weight").write_text(str(cpu_weight(node_shares())))
        except OSError as exc:
            problems.append(f"{parent}: {exc.strerror or exc}")
            continue
        return KubeletCgroups(2, {c: base for c in V2_CONTROLLERS}), ""
    missing = [c for c in V1_REQUIRED if c not in places.v1]
    if missing and not problems:
        return None, f"no cgroup v2 with {', '.join(V2_CONTROLLERS)} and no cgroup v1 {', '.join(missing)}"
    if not missing:
        bases: dict[str, Path] = {}
        try:
            for controller in (*V1_REQUIRED, *(c for c in V1_OPTIONAL if c in places.v1)):
                base = places.v1[controller] / name
                base.mkdir(exist_ok=True)
                bases[controller] = base
            (bases["cpu"] / "cpu.shares").write_text(str(node_shares()))
            return KubeletCgroups(1, bases), ""
        except OSError as exc:
            for base in _unique(bases.values()):
                remove_tree(base)
            problems.append(f"{exc.filename or 'cgroup v1'}: {exc.strerror or exc}")
    return None, "cgroups are not writable (" + "; ".join(problems) + ")"


def remove_leftovers(state_dir: Path) -> None:
    """Remove the kubelet cgroup of `state_dir` wherever `detect` may put it, with what is left in it: for a
    cluster whose kubelet left its pods to a next kubelet that will not come (or was killed). Then the
    memory-backed volumes (`tmpfs`) of its pods, whose pages were charged to those cgroups, are unmounted:
    nothing stays mounted under the state dir's `pods/`."""
    with contextlib.suppress(OSError):
        places = _places(None, None)
        name = kubelet_cgroup_name(state_dir)
        v1 = [places.v1[c] for c in (*V1_REQUIRED, *V1_OPTIONAL) if c in places.v1]
        for parent in _unique([*(p for _, p in places.v2), *v1]):
            remove_tree(parent / name)
    tmpfs.unmount_under(pods_root(state_dir))
