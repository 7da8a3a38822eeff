"""Who a container's process is: the pod's and container's `securityContext` as the process's credentials.

The kubelet computes an `Identity` per container (`container_identity`, which also refuses `runAsNonRoot`
as the kubelet does) and the shim applies it in the container's child process just before exec
(`apply_identity`): supplementary groups, gid and uid, `no_new_privs` for `allowPrivilegeEscalation: false`,
and `capabilities.drop` from the bounding, ambient, effective, permitted and inheritable sets.

The local cluster has no images: the "image's filesystem" is the host's. A numeric `runAsUser` gets the
primary group and groups the host's passwd/group files give it (gid 0 when it has no entry, as a runtime does
for a uid missing from the image). The host's interpreter, the project's environment and the package it
imports (an editable install's source tree) may live where that user cannot reach them (a python under
root's 0700 home, a checkout under a 0700 directory): `expose` then lays a read-only view of exactly the
directories the container needs over the unreachable ancestor, in the container's private mount namespace
only, so no directory of the host is opened to anyone else. A directory the user cannot read even then (a
checkout made with umask 077) refuses the container with CreateContainerConfigError naming it and the fix.

Without root the credentials cannot change: the kubelet then runs the container as itself and says so in a
Warning event (`fallback_reason`); `no_new_privs` still applies, and dropping capabilities is moot.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t9k_provider.local.kubelet.podenv import ContainerConfigError

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_LOWER = 3
LINUX_CAPABILITY_VERSION_3 = 0x20080522
MS_BIND = 4096
MS_REC = 16384
MS_RDONLY = 1
MS_REMOUNT = 32

# Linux capability numbers, in order (capability(7)); Kubernetes names them without the CAP_ prefix.
CAPABILITIES = (
    *("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP"),
    *("LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK"),
    *("IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN"),
    *("SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE"),
    *("AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND"),
    *("AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"),
)


@dataclass
class Identity:
    """The credentials and restrictions of a container process (None/empty: keep the shim's)."""

    uid: int | None = None
    gid: int | None = None
    groups: list[int] | None = None  # supplementary groups, set whenever uid or gid is
    no_new_privs: bool = False
    drop_caps: list[int] = field(default_factory=list)
    exposed: list[str] = field(default_factory=list)  # directories the process must reach (`expose`)

    @classmethod
    def load(cls, data: dict[str, Any] | None) -> Identity | None:
        return cls(**data) if data else None


def pod_ref(pod: dict[str, Any]) -> str:
    """The kubelet's `format.Pod`: name_namespace(uid)."""
    meta = pod["metadata"]
    return f"{meta['name']}_{meta.get('namespace', 'default')}({meta.get('uid', '')})"


def effective_context(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The container's securityContext over the pod's (the fields both define)."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    own = container.get("securityContext") or {}
    shared = ("runAsUser", "runAsGroup", "runAsNonRoot", "seLinuxOptions", "seccompProfile")
    return {**{k: pod_sc[k] for k in shared if k in pod_sc}, **own}


def check_non_root(pod: dict[str, Any], container: dict[str, Any], image_uid: int) -> None:
    """The kubelet's verifyRunAsNonRoot: raises ContainerConfigError with its message."""
    sc = effective_context(pod, container)
    if not sc.get("runAsNonRoot"):
        return
    where = f'(pod: "{pod_ref(pod)}", container: {container["name"]})'
    if sc.get("runAsUser") is not None:
        if int(sc["runAsUser"]) == 0:
            raise ContainerConfigError(f"container's runAsUser breaks non-root policy {where}")
        return
    if image_uid == 0:
        raise ContainerConfigError(f"container has runAsNonRoot and image will run as root {where}")


def capability_numbers(names: list[str]) -> list[int]:
    """`capabilities.drop` entries (`NET_RAW`, `CAP_NET_RAW`, `ALL`) as numbers this kernel knows."""
    last = _last_capability()
    out: set[int] = set()
    for name in names:
        key = str(name).upper().removeprefix("CAP_")
        if key == "ALL":
            out.update(range(last + 1))
        elif key in CAPABILITIES and CAPABILITIES.index(key) <= last:
            out.add(CAPABILITIES.index(key))
        else:
            raise ContainerConfigError(f"unknown capability {name!r} in securityContext.capabilities.drop")
    return sorted(out)


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return len(CAPABILITIES) - 1


def runtime_paths() -> list[str]:
    """What every container runs from, as an image would hold it: the interpreter's installation, the
    environment (the pod PATH's head), the directory this package is imported from (site-packages, or an
    editable install's tree) and the rest of the import path (what `.pth` files and PYTHONPATH add).
    `sys.path[0]` is left out: it is the kubelet's own script or working directory, not part of the
    environment. A directory inside another listed one is left out."""
    package_root = str(Path(__file__).resolve().parents[3])
    candidates = [sys.base_prefix, sys.prefix, os.path.dirname(sys.executable), package_root, *sys.path[1:]]
    found = [os.path.realpath(p) for p in candidates if p and os.path.isdir(p)]
    kept: list[str] = []
    for path in sorted(dict.fromkeys(found), key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def container_identity(pod: dict[str, Any], container: dict[str, Any]) -> tuple[Identity | None, str | None]:
    """The identity the shim applies to the container, and why part of it cannot be (no root), or None.

    Raises ContainerConfigError for `runAsNonRoot` violations and unknown capabilities."""
    own_uid = os.geteuid()
    check_non_root(pod, container, own_uid)
    sc = effective_context(pod, container)
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    uid = sc.get("runAsUser")
    gid = sc.get("runAsGroup")
    extra = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        extra.append(int(pod_sc["fsGroup"]))
    no_new_privs = sc.get("allowPrivilegeEscalation") is False
    if own_uid != 0:  # credentials cannot change; an unprivileged process has no capabilities to drop
        requested = (
            (uid is not None and int(uid) != own_uid)
            or (gid is not None and int(gid) != os.getegid())
            or bool(set(extra) - set(os.getgroups()))
        )
        reason = (
            "the local kubelet is not root: runAsUser/runAsGroup/supplementalGroups/fsGroup not applied, "
            f"container {container['name']} runs as uid {own_uid}"
        )
        return (Identity(no_new_privs=True) if no_new_privs else None), (reason if requested else None)
    identity = Identity(
        no_new_privs=no_new_privs,
        drop_caps=capability_numbers((sc.get("capabilities") or {}).get("drop") or []),
    )
    if uid is None and gid is None and not extra:
        return (identity if identity.no_new_privs or identity.drop_caps else None), None
    uid = own_uid if uid is None else int(uid)
    base_groups = _host_groups(uid, None if gid is None else int(gid))
    identity.uid, identity.gid = uid, base_groups[0]
    identity.groups = list(dict.fromkeys(base_groups + extra))
    if uid != 0:
        identity.exposed = runtime_paths()
        _check_readable(identity, container["name"])
    return identity, None


def _check_readable(identity: Identity, container: str) -> None:
    """Raises ContainerConfigError when the identity could not read a directory the container runs from
    even once `expose` made its ancestors reachable: the container would only die with an ImportError."""
    for path in identity.exposed:
        st = os.stat(path)
        if not _permits(st, identity, stat.S_IRUSR | stat.S_IXUSR):
            raise ContainerConfigError(
                f"container {container} runs as uid {identity.uid} (gid {identity.gid}), which cannot read "
                f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}): the local cluster "
                "has no images, its containers run the host's Python environment. Make it readable for that "
                f"user (e.g. chmod -R go+rX {path}; its parent directories may stay private) or run the "
                f"container as uid {st.st_uid}"
            )


def _host_groups(uid: int, gid: int | None) -> list[int]:
    """[primary gid, groups...] of `uid` from the host's passwd/group files (the local "image")."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return [0 if gid is None else gid]
    primary = entry.pw_gid if gid is None else gid
    if gid is not None:
        return [primary]  # an explicit runAsGroup replaces the image user's groups, as in runtimes
    return list(dict.fromkeys([primary, *os.getgrouplist(entry.pw_name, primary)]))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_from_process(libc: ctypes.CDLL, caps: list[int]) -> None:
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    for cap in caps:
        word, bit = divmod(cap, 32)
        mask = ~(1 << bit) & 0xFFFFFFFF
        data[word].effective &= mask
        data[word].permitted &= mask
        data[word].inheritable &= mask
    _check(libc.capset(ctypes.byref(header), data), "capset")


def _permits(st: os.stat_result, identity: Identity, owner_bits: int) -> bool:
    """Whether the identity has all of `owner_bits` (given as the owner's: S_IRUSR...) on a file, by the
    class the file puts it in (owner, group or other), as the kernel decides without capabilities."""
    if st.st_uid == identity.uid:
        shift = 0
    elif st.st_gid in (identity.groups or []) or st.st_gid == identity.gid:
        shift = 3
    else:
        shift = 6
    wanted = owner_bits >> shift
    return st.st_mode & wanted == wanted


def _searchable(path: str, identity: Identity) -> bool:
    return _permits(os.stat(path), identity, stat.S_IXUSR)


def _hidden_behind(path: str, identity: Identity) -> str | None:
    """The highest ancestor of `path` the identity cannot search, if any."""
    current = "/"
    for part in [p for p in os.path.dirname(path).split("/") if p]:
        current = os.path.join(current, part)
        if not _searchable(current, identity):
            return current
    return None


def expose(identity: Identity) -> None:
    """Make `identity.exposed` reachable for the identity, in the (private) mount namespace of the caller:
    an unreachable ancestor is covered by a tmpfs that holds read-only bind mounts of just those paths."""
    libc = _libc()
    covers: dict[str, list[tuple[str, int]]] = {}
    for path in dict.fromkeys(os.path.realpath(p) for p in identity.exposed):
        if os.path.isdir(path) and (ancestor := _hidden_behind(path, identity)) is not None:
            covers.setdefault(ancestor, []).append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
    for ancestor, paths in covers.items():
        mode = stat.S_IMODE(os.stat(ancestor).st_mode) | 0o555
        _check(libc.mount(b"tmpfs", ancestor.encode(), b"tmpfs", 0, f"mode={mode:o}".encode()), "mount tmpfs")
        for path, fd in paths:
            os.makedirs(path, mode=0o755, exist_ok=True)
            source = f"/proc/self/fd/{fd}".encode()
            _check(libc.mount(source, path.encode(), None, MS_BIND | MS_REC, None), f"bind {path}")
            flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC
            _check(libc.mount(b"none", path.encode(), None, flags, None), f"read-only {path}")
            os.close(fd)


def apply_identity(identity: Identity) -> None:
    """In the container's child, before exec: become the identity (order matters: the bounding set needs
    CAP_SETPCAP and the id changes CAP_SETUID/SETGID, which the process loses last)."""
    libc = _libc()
    if identity.exposed:
        expose(identity)
    for cap in identity.drop_caps:
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop capability from the bounding set")
        with contextlib.suppress(OSError):  # kernels without ambient capabilities
            _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0), "lower ambient capability")
    if identity.groups is not None:
        os.setgroups(identity.groups)
    if identity.gid is not None:
        os.setresgid(identity.gid, identity.gid, identity.gid)
    if identity.uid is not None:
        os.setresuid(identity.uid, identity.uid, identity.uid)
    if identity.drop_caps:
        _drop_from_process(libc, identity.drop_caps)
    if identity.no_new_privs:
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
