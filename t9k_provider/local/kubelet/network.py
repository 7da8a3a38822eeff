"""Pod networking: a network namespace per pod on the kubelet's own bridge, or the host-network fallback.

netns mode (root, namespaces available): a bridge per pod subnet (`PodSubnet` N: bridge `t9kN` with
10.251.N.1/24; N is 0 unless `t9k-local run --pod-subnet N` says otherwise), one namespace per pod joined by a
veth pair, no default route, no forwarding, no NAT, so pod traffic never leaves the bridge. Two replicas can
listen on the same port. The API server (127.0.0.1 on the host) is not reachable from inside a pod. Clusters
on different subnets never see each other's pods: the test harness gives every cluster a subnet of its own,
so clusters can run side by side (one per test worker).

host mode (fallback, or `network="host"`): pods share the host network; each gets its own loopback address
127.1.x.y as podIP. Processes binding 0.0.0.0 on the same port collide, and services resolve only where the
kubelet can bind-mount the pod's hosts file over /etc/hosts (root), otherwise not at all.

Addresses are leased machine-wide (one file per address under RUN_DIR/ipam), so several local clusters
can share a bridge; each lease names the netns that holds it, so leases of crashed clusters are reclaimed.
An address is reused as soon as its pod is gone, so setting up a pod drops the host's neighbour entry for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import ipaddress
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LOOPBACK_SUBNET = ipaddress.ip_network("127.1.0.0/16")
NETNS_DIR = Path("/run/netns")
#: Seconds a fresh lease is protected while its owner creates the namespace it names.
LEASE_GRACE_SECONDS = 60.0
#: Seconds ``remove_leftovers`` waits for the kernel to detach a leased subnet's bridge's last veths.
BRIDGE_EMPTIED_SECONDS = 10.0


def run_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/run/t9k-local")
    return Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/t9k-local-{os.getuid()}")


def cluster_id(state_dir: Path) -> str:
    return hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:6]


@dataclass(frozen=True)
class PodSubnet:
    """Pod subnet ``index`` (0-255): bridge ``t9k<index>`` with 10.251.<index>.0/24, its first address on the
    bridge (the pods' gateway to the host, where they reach the API server)."""

    index: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.index <= 255:
            raise ValueError(f"pod subnet: must be 0-255 (got {self.index})")

    @property
    def bridge(self) -> str:
        return f"t9k{self.index}"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(f"10.251.{self.index}.0/24")

    @property
    def gateway(self) -> str:
        return f"10.251.{self.index}.1"


@dataclass
class PodNet:
    ip: str
    netns: str | None  # path of the pod's network namespace, None in host mode
    isolate: bool  # whether containers get their own UTS + mount namespaces (hostname, hosts file, volumes)


class Ipam:
    """Machine-wide address leases: `RUN_DIR/ipam/<ip>` holds the owner name (created with O_EXCL)."""

    def __init__(self, directory: Path, network: ipaddress.IPv4Network, reserved: set[str]) -> None:
        self.dir = directory
        self.network = network
        self.reserved = reserved
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    def owner(self, ip: str) -> str | None:
        try:
            return (self.dir / ip).read_text()
        except FileNotFoundError:
            return None

    def allocate(self, owner: str, alive: Callable[[str], bool]) -> str:
        for addr in self.network.hosts():
            ip = str(addr)
            if ip in self.reserved:
                continue
            path = self.dir / ip
            current = self.owner(ip)
            if current == owner:
                return ip
            if current is not None and not alive(current) and self._age(path) > LEASE_GRACE_SECONDS:
                path.unlink(missing_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(owner)
            return ip
        raise RuntimeError(f"no free pod address left in {self.network}")

    def _age(self, path: Path) -> float:
        """A lease is written before its owner's namespace exists: young leases are never reclaimed."""
        try:
            return time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return float("inf")

    def release_owner(self, owner: str) -> None:
        for path in self.dir.iterdir():
            if self.owner(path.name) == owner:
                path.unlink(missing_ok=True)

    def owners(self) -> dict[str, str]:
        return {p.name: o for p in self.dir.iterdir() if (o := self.owner(p.name)) is not None}


async def _ip(*args: str, check: bool = True, batch: Sequence[str] = ()) -> str:
    """``ip ARGS``; with ``batch``, ``ip ARGS -batch -`` runs those commands in one process (each exec of
    `ip` costs milliseconds on a pod's way to its start), stopping at the first that fails."""
    argv = (*args, "-batch", "-") if batch else args
    proc = await asyncio.create_subprocess_exec(
        "ip", *argv, stdin=asyncio.subprocess.PIPE if batch else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate("\n".join(batch).encode() if batch else None)
    if check and proc.returncode != 0:
        what = " ".join(args) + "".join(f"; {line}" for line in batch)
        raise RuntimeError(f"ip {what}: {err.decode().strip()}")
    return out.decode()


def _lock_file() -> int:
    directory = run_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(directory / "bridge.lock", os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.asynccontextmanager
async def _bridge_lock() -> AsyncIterator[None]:
    """Machine-wide lock (flock) around creating, attaching to and deleting a bridge."""
    fd = _lock_file()
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def _bridge_lock_sync() -> Iterator[None]:
    fd = _lock_file()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def namespaces_available() -> bool:
    """Root, the `ip` tool, and a network namespace can actually be created here."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--net", "--uts", "--mount", "true"], capture_output=True, timeout=10)
    return probe.returncode == 0


def mount_isolation_available() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return (
        subprocess.run(["unshare", "--uts", "--mount", "true"], capture_output=True, timeout=10).returncode
        == 0
    )


class HostNetwork:
    mode = "host"

    def __init__(self, state_dir: Path) -> None:
        self.cid = cluster_id(state_dir)
        self.isolate = mount_isolation_available()
        self.ipam = self.leases()
        self.host_ip = "127.0.0.1"

    @staticmethod
    def leases() -> Ipam:
        return Ipam(run_dir() / "ipam-loopback", LOOPBACK_SUBNET, set())

    def _owner(self, uid: str) -> str:
        return f"{self.cid}/{uid}"

    async def setup(self, uid: str) -> PodNet:
        # Loopback leases cannot be checked for liveness; each cluster frees its own in cleanup_stale.
        ip = self.ipam.allocate(self._owner(uid), alive=lambda _owner: True)
        return PodNet(ip=ip, netns=None, isolate=self.isolate)

    async def teardown(self, uid: str) -> None:
        self.ipam.release_owner(self._owner(uid))

    async def cleanup_stale(self, live_uids: set[str]) -> None:
        for owner in set(self.ipam.owners().values()):
            cid, _, uid = owner.partition("/")
            if cid == self.cid and uid not in live_uids:
                self.ipam.release_owner(owner)

    async def close(self) -> None:
        return None


class NetnsNetwork:
    mode = "netns"

    def __init__(self, state_dir: Path, subnet: PodSubnet) -> None:
        self.cid = cluster_id(state_dir)
        self.subnet = subnet
        self.bridge = subnet.bridge
        self.ipam = Ipam(run_dir() / "ipam", subnet.network, {subnet.gateway})
        self.host_ip = subnet.gateway
        self._bridge_ready = False

    def netns_name(self, uid: str) -> str:
        return f"t9k-{self.cid}-{uid[:8]}"

    def _veth(self, uid: str) -> str:
        return f"t9{self.cid[:5]}{uid[:8]}"

    async def ensure_bridge(self) -> None:
        """The bridge exists, is up and has the gateway address. Checked in full once per kubelet; after
        that only its presence and being up (`/sys`, no process), which another cluster sharing the subnet
        can only change by deleting it when no pod is attached (`close`)."""
        bridge, gateway = self.bridge, self.subnet.gateway
        if self._bridge_ready and _is_up(bridge):
            return
        if not Path(f"/sys/class/net/{bridge}").exists():
            await _ip("link", "add", bridge, "type", "bridge", check=False)
        addrs = await _ip("-o", "-4", "addr", "show", "dev", bridge)
        if f"{gateway}/" not in addrs:
            await _ip("addr", "add", f"{gateway}/{self.subnet.network.prefixlen}", "dev", bridge, check=False)
        await _ip("link", "set", bridge, "up")
        self._bridge_ready = True

    def _attached(self, uid: str) -> bool:
        master = Path(f"/sys/class/net/{self._veth(uid)}/master")
        return master.exists() and master.resolve().name == self.bridge

    async def setup(self, uid: str) -> PodNet:
        name = self.netns_name(uid)
        ip = self.ipam.allocate(name, alive=lambda owner: (NETNS_DIR / owner).exists())
        path = NETNS_DIR / name
        if path.exists() and self._attached(uid):
            return PodNet(ip=ip, netns=str(path), isolate=True)
        # The bridge lock keeps another cluster's close() from deleting the bridge while we attach to it.
        async with _bridge_lock():
            if path.exists():  # half-built by an interrupted setup: start over
                await _ip("netns", "del", name, check=False)
            await self.ensure_bridge()
            veth = self._veth(uid)
            await _ip(batch=[f"netns add {name}", f"link add {veth} type veth peer name eth0 netns {name}"])
            prefix = self.subnet.network.prefixlen
            await _ip(
                "-n", name, batch=[f"addr add {ip}/{prefix} dev eth0", "link set eth0 up", "link set lo up"]
            )
            # Attaching to the bridge comes last: an attached veth marks a complete setup. The address may
            # have belonged to a pod that is gone: the host's neighbour entry for it can still name that
            # pod's MAC (REACHABLE for up to 45 s, then a few more seconds of unicast probes), and the
            # kubelet's probes to the new pod would vanish into the bridge as i/o timeouts: flushed after.
            attach = f"link set {veth} master {self.bridge} up"
            await _ip(batch=[attach, f"neigh flush to {ip} dev {self.bridge}"])
        return PodNet(ip=ip, netns=str(path), isolate=True)

    async def teardown(self, uid: str) -> None:
        """Remove the pod's interface, then its namespace; one that cannot go is said (the next kubelet's
        cleanup retries it). The interface goes first, and explicitly, as CNI's bridge plugin deletes it on
        DEL: a namespace outlives `ip netns del` while any process is still in it (and the kernel frees even
        an empty one later, in its own time), and its eth0 would keep answering for an address whose lease
        is released below, so a pod given that address next would share it on the bridge and have its
        connections reset by the old stack."""
        name = self.netns_name(uid)
        veth = self._veth(uid)
        if Path(f"/sys/class/net/{veth}").exists():  # deleting one end of a veth pair deletes both
            await _ip("link", "del", veth, check=False)
        if (NETNS_DIR / name).exists():
            try:
                await _ip("netns", "del", name)
            except RuntimeError as exc:
                log.warning("pod %s: its network namespace stays: %s", uid, exc)
        self.ipam.release_owner(name)

    async def cleanup_stale(self, live_uids: set[str]) -> None:
        live = {self.netns_name(uid) for uid in live_uids}
        prefix = f"t9k-{self.cid}-"
        # Both listed before the first await: a pod set up meanwhile (not in live_uids) is not listed either.
        names = [p.name for p in NETNS_DIR.iterdir()] if NETNS_DIR.is_dir() else []
        owners = set(self.ipam.owners().values())
        for name in names:
            if name.startswith(prefix) and name not in live:
                log.info("removing stale pod network namespace %s", name)
                await _ip("-n", name, "link", "del", "eth0", check=False)  # its address goes now (`teardown`)
                await _ip("netns", "del", name, check=False)
        for owner in owners:
            if owner.startswith(prefix) and owner not in live:
                self.ipam.release_owner(owner)

    async def close(self) -> None:
        """Remove the bridge once no pod of any cluster is attached to it."""
        async with _bridge_lock():
            if _unused(self.bridge):
                await _ip("link", "del", self.bridge, check=False)


def _is_up(bridge: str) -> bool:
    """The link exists and is administratively up (IFF_UP in its flags)."""
    try:
        return bool(int(Path(f"/sys/class/net/{bridge}/flags").read_text(), 16) & 0x1)
    except (OSError, ValueError):
        return False


def _unused(bridge: str) -> bool:
    brif = Path(f"/sys/class/net/{bridge}/brif")
    return brif.is_dir() and not any(brif.iterdir())


def _emptied(bridge: str, seconds: float) -> bool:
    """Whether ``bridge`` exists with nothing attached, within ``seconds``: the kernel destroys a deleted
    namespace, and with it the veth that joined it to the bridge, some time after its last process exits
    (under load, hundreds of milliseconds after the kubelet's teardown returned)."""
    deadline = time.monotonic() + seconds
    while not _unused(bridge):
        if not Path(f"/sys/class/net/{bridge}/brif").is_dir() or time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def remove_leftovers(state_dir: Path, subnet: PodSubnet | None = None) -> list[str]:
    """Remove the pod networks of `state_dir`'s cluster that its kubelet did not tear down (it was killed, or
    left its pods to a next kubelet): namespaces (with their veths) and address leases, in both modes, and
    `subnet`'s bridge if nothing is attached to it any more; returns the namespaces removed. A next kubelet of
    the same state directory would remove them at start; this is for a cluster that will not start again,
    whose leftovers would otherwise hold pod addresses for good."""
    cid = cluster_id(state_dir)
    prefix = f"t9k-{cid}-"
    removed = []
    if NETNS_DIR.is_dir() and shutil.which("ip") is not None:
        for path in sorted(NETNS_DIR.iterdir()):
            if path.name.startswith(prefix):
                subprocess.run(["ip", "netns", "del", path.name], capture_output=True, timeout=30)
                removed.append(path.name)
    pod_leases = Ipam(run_dir() / "ipam", (subnet or PodSubnet()).network, set())
    pools = ((pod_leases, prefix), (HostNetwork.leases(), f"{cid}/"))
    for ipam, ours in pools:
        for owner in set(ipam.owners().values()):
            if owner.startswith(ours):
                ipam.release_owner(owner)
    if subnet is not None and _emptied(subnet.bridge, BRIDGE_EMPTIED_SECONDS):
        with _bridge_lock_sync():
            if _unused(subnet.bridge):
                subprocess.run(["ip", "link", "del", subnet.bridge], capture_output=True, timeout=30)
    return removed


def clear_subnet(subnet: PodSubnet) -> list[str]:
    """Remove what clusters that are gone left on ``subnet``'s bridge (the namespaces its veths lead to,
    their address leases) and the bridge itself; returns those namespaces. For a subnet leased to one
    cluster at a time (the test harness's), taken over from a holder that died without ``stop()``: its pods'
    namespaces kept their veths on the bridge, so no later cluster on it could ever remove the bridge."""
    if shutil.which("ip") is None or not Path(f"/sys/class/net/{subnet.bridge}").exists():
        return []
    listed = subprocess.run(
        ["ip", "-o", "link", "show", "master", subnet.bridge], capture_output=True, text=True, timeout=30
    )
    spaces = sorted(set(re.findall(r"link-netns (\S+)", listed.stdout)))
    for name in spaces:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    leases = Ipam(run_dir() / "ipam", subnet.network, set())
    for owner in set(leases.owners().values()) & set(spaces):
        leases.release_owner(owner)
    with _bridge_lock_sync():
        subprocess.run(["ip", "link", "del", subnet.bridge], capture_output=True, timeout=30)
    return spaces


def select_network(mode: str, state_dir: Path, subnet: PodSubnet) -> HostNetwork | NetnsNetwork:
    """`auto` picks netns (on `subnet`) when namespaces work here; `netns` insists; `host` forces the
    fallback."""
    if mode not in ("auto", "netns", "host"):
        raise ValueError(f"network: must be one of auto, netns, host (got {mode!r})")
    if mode == "host":
        net: HostNetwork | NetnsNetwork = HostNetwork(state_dir)
        log.warning("pod network: host (requested); pods get loopback addresses and share ports")
        return net
    if namespaces_available():
        log.warning(
            "pod network: netns (bridge %s, %s, no route outside the bridge)", subnet.bridge, subnet.network
        )
        return NetnsNetwork(state_dir, subnet)
    if mode == "netns":
        raise RuntimeError("network namespaces are not available here (needs root, `ip` and `unshare`)")
    net = HostNetwork(state_dir)
    log.warning(
        "pod network: host (fallback: no root or namespaces unavailable); pods share the host network with "
        "loopback addresses 127.1.x.y, same-port binds on 0.0.0.0 collide%s",
        "" if net.isolate else ", service names do not resolve (no /etc/hosts isolation)",
    )
    return net
