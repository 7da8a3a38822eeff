"""Memory-backed emptyDir volumes (`emptyDir: {medium: Memory}`): a tmpfs, as the kubelet mounts one.

The kubelet mounts it in its own (the host's) mount namespace at the volume's directory
(`PodDir.volumes`/<name>) before any container of the pod starts; the containers bind-mount that directory
(`shim`), so they all share one tmpfs, and a page written to it is charged to the memory cgroup of the
container that wrote it, counting against that container's limit. Its size is the kubelet's
(`calculateEmptyDirMemorySize`): the volume's `sizeLimit`, no more than the pod's memory limit (when every
container has one), and no more than the node's memory.

Mounts outlive the kubelet, so a restarted kubelet finds the tmpfs in /proc/self/mountinfo and does not
mount a second one; they are detached (`umount2(MNT_DETACH)`) before a pod directory is removed, when a
finished pod's volumes are released, and by the cleanup of a stopped cluster (`unmount_under`). Where the
kubelet may not mount (not root, or EPERM in a restricted sandbox) the volume stays a directory on disk and
`ensure_memory_volumes` says why, for a Warning event.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from decimal import ROUND_CEILING
from pathlib import Path
from typing import Any

from t9k_provider.local.machinery.quantity import parse_quantity

log = logging.getLogger(__name__)

MEMORY_MEDIUM = "Memory"
MEMORY_MODE = 0o1777  # as /dev/shm: anyone may write, only the owner may remove
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
MOUNTINFO = Path("/proc/self/mountinfo")


def _bytes(value: Any) -> int | None:
    """A positive quantity in bytes (rounded up), or None."""
    parsed = parse_quantity(value) if value is not None else None
    if parsed is None or parsed <= 0:
        return None
    return int(parsed.to_integral_value(rounding=ROUND_CEILING))


def _memory_limit(container: dict[str, Any]) -> int | None:
    return _bytes(((container.get("resources") or {}).get("limits") or {}).get("memory"))


def pod_memory_limit(pod: dict[str, Any]) -> int | None:
    """The pod's memory limit as the kubelet sizes the pod cgroup: only when every container (init ones too)
    has one; the sum of the containers', or the largest init container's when larger, plus the overhead."""
    spec = pod.get("spec") or {}
    mains = [_memory_limit(c) for c in spec.get("containers") or []]
    inits = [_memory_limit(c) for c in spec.get("initContainers") or []]
    if not mains or any(limit is None for limit in mains + inits):
        return None
    total = max([sum(m or 0 for m in mains), *(i or 0 for i in inits)])
    return total + (_bytes((spec.get("overhead") or {}).get("memory")) or 0)


def size_of(pod: dict[str, Any], volume: dict[str, Any], node_memory: int) -> int:
    """The tmpfs size of a memory-backed emptyDir: the node's memory, lowered to the pod's memory limit,
    lowered to the volume's sizeLimit (each only when it is smaller)."""
    size = node_memory
    for limit in (pod_memory_limit(pod), _bytes((volume.get("emptyDir") or {}).get("sizeLimit"))):
        if limit is not None and limit <= size:
            size = limit
    return size


def memory_volumes(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod's emptyDir volumes with `medium: Memory`."""
    return [
        vol
        for vol in (pod.get("spec") or {}).get("volumes") or []
        if "emptyDir" in vol and (vol["emptyDir"] or {}).get("medium") == MEMORY_MEDIUM
    ]


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes (\\040...)."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def mount_points(mountinfo: str | None = None) -> list[str]:
    """Every mount point of this process's mount namespace, in mount order."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text()
        except OSError:  # not Linux: nothing is mounted by the kubelet
            return []
    text = mountinfo
    return [_unescape(line.split()[4]) for line in text.splitlines() if len(line.split()) > 4]


def mounts_under(path: Path, mountinfo: str | None = None) -> list[str]:
    """The mount points at or below `path`, deepest (latest) first: the order to unmount them in."""
    root = os.path.realpath(path)
    prefix = root.rstrip("/") + "/"
    found = [m for m in mount_points(mountinfo) if m == root or m.startswith(prefix)]
    return list(reversed(found))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args: object) -> None:
    """A libc call os does not wrap (as `shim.libc_call`); failures raise OSError."""
    if getattr(_libc(), name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def mount(target: Path, size: int) -> None:
    """Mount a tmpfs of `size` bytes (mode 1777, nosuid, nodev) at `target`, created if need be."""
    target.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode={MEMORY_MODE:o}".encode()
    _call("mount", b"tmpfs", os.fsencode(target), b"tmpfs", MS_NOSUID | MS_NODEV, options)


def ensure(target: Path, size: int) -> str | None:
    """The tmpfs at `target`, mounted unless it already is (a restarted kubelet finds it in mountinfo);
    returns why the volume is a directory on disk instead, or None."""
    if str(os.path.realpath(target)) in mounts_under(target):
        return None
    if os.geteuid() != 0:
        return "the kubelet is not root and cannot mount a tmpfs"
    if target.is_dir() and any(target.iterdir()):
        # Mounting over it would hide what the pod's containers already wrote there (on disk).
        return "its directory on disk already holds files"
    try:
        mount(target, size)
    except OSError as exc:
        if exc.errno != errno.EPERM:
            log.warning("mounting a tmpfs at %s failed: %s", target, exc)
        return f"mounting a tmpfs failed: {exc.strerror or exc}"
    return None


def ensure_memory_volumes(pod: dict[str, Any], volumes_dir: Path, node_memory: int) -> dict[str, str]:
    """Mount a tmpfs for each memory-backed emptyDir of the pod under `volumes_dir`; returns the volumes
    left on disk, each with the reason."""
    on_disk = {}
    for vol in memory_volumes(pod):
        why = ensure(volumes_dir / vol["name"], size_of(pod, vol, node_memory))
        if why is not None:
            on_disk[vol["name"]] = why
    return on_disk


def unmount_under(path: Path) -> list[str]:
    """Detach every mount at or below `path` (lazily: a container still holding one keeps it until it
    exits); returns the mount points detached. Best effort: a failure is logged."""
    done = []
    for point in mounts_under(path):
        try:
            _call("umount2", os.fsencode(point), MNT_DETACH)
            done.append(point)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT):  # gone already
                log.warning("could not unmount %s: %s", point, exc)
    return done
