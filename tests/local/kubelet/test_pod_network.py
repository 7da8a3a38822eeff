"""The netns pod network on a bridge of its own, against the host's real network stack (root only)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from t9k_provider.local.kubelet import network
from t9k_provider.testing import lease_pod_subnet, release_pod_subnet, unavailable


@pytest.fixture(autouse=True, scope="module")
def _namespaces() -> None:
    """Skip without network namespaces, but fail under CI as root, where they must exist."""
    if not network.namespaces_available():
        unavailable("pod network namespaces", "they need root, `ip` and `unshare`")


@pytest.fixture
def subnet(tmp_path: Path) -> Iterator[network.PodSubnet]:
    """A pod subnet no cluster of another test worker uses meanwhile."""
    index = lease_pod_subnet(tmp_path)
    try:
        yield network.PodSubnet(index)
    finally:
        release_pod_subnet(index)


GONE_MAC = "02:00:5e:00:00:01"  # a locally administered address no bridge port has


def _neighbour(ip: str, bridge: str) -> str:
    return subprocess.run(
        ["ip", "neigh", "show", ip, "dev", bridge], capture_output=True, text=True, check=True
    ).stdout


def test_a_reused_address_answers_at_once_despite_the_hosts_old_neighbour_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, subnet: network.PodSubnet
) -> None:
    """Addresses are reused as soon as a pod is gone, while the host may still hold a REACHABLE neighbour
    entry naming the gone pod's MAC (for up to 45 s): traffic to the new pod would vanish into the bridge,
    and its first readiness probes time out (the CI flake in the readiness-probe cluster test)."""
    uid = str(uuid.uuid4())
    net = network.NetnsNetwork(tmp_path, subnet)
    ip_tool = network._ip

    async def attach_after_a_gone_pod(*args: str, check: bool = True, batch: tuple[str, ...] = ()) -> str:
        """Attaching the veth ends with the host's entry for the address naming a gone pod's MAC (planted
        after the attach: a bridge whose own MAC changes with a new port flushes its entries itself)."""
        out = await ip_tool(*args, check=check, batch=batch)
        if args[:2] == ("link", "set") and "master" in args:
            ip = next(a for a, owner in net.ipam.owners().items() if owner == net.netns_name(uid))
            stale = ("neigh", "replace", ip, "lladdr", GONE_MAC, "dev", subnet.bridge, "nud", "reachable")
            await ip_tool(*stale)
        return out

    monkeypatch.setattr(network, "_ip", attach_after_a_gone_pod)

    async def scenario() -> None:
        pod = await net.setup(uid)
        try:
            assert GONE_MAC not in _neighbour(pod.ip, subnet.bridge)
            started = time.monotonic()
            with pytest.raises(ConnectionRefusedError):  # nothing listens in the new pod: refused, at once
                socket.create_connection((pod.ip, 9), timeout=3).close()
            assert time.monotonic() - started < 2
        finally:
            await net.teardown(uid)
            await net.close()

    asyncio.run(scenario())


def test_a_namespace_that_cannot_be_removed_is_said(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    subnet: network.PodSubnet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A kubelet's stop tears every pod network down; a removal that fails leaves a namespace behind, so it
    is logged with the pod and the reason rather than ignored."""
    uid = str(uuid.uuid4())
    net = network.NetnsNetwork(tmp_path, subnet)
    ip_tool = network._ip

    async def refuse_netns_del(*args: str, check: bool = True, batch: tuple[str, ...] = ()) -> str:
        if args[:2] == ("netns", "del"):
            return await ip_tool("netns", "del", "t9k-no-such-namespace", check=check)
        return await ip_tool(*args, check=check, batch=batch)

    async def scenario() -> None:
        await net.setup(uid)
        try:
            monkeypatch.setattr(network, "_ip", refuse_netns_del)
            await net.teardown(uid)
        finally:
            monkeypatch.setattr(network, "_ip", ip_tool)
            await net.teardown(uid)  # the namespace really goes
            await net.close()

    asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(uid in m and "network namespace stays" in m and "t9k-no-such-namespace" in m for m in said), (
        said
    )
    assert not (network.NETNS_DIR / net.netns_name(uid)).exists()


def test_a_namespace_a_process_still_holds_gives_its_address_up_at_teardown(
    tmp_path: Path, subnet: network.PodSubnet
) -> None:
    """`ip netns del` only unlinks a namespace: one a process is still in (a container child the kill missed,
    or one still exiting) lives on with its eth0 on the bridge. Its address's lease is released at teardown,
    so the next pod given that address would share it with the old stack, which resets its connections (the
    gloo "Connection reset by peer" seen in the disruption benchmark): the interface must go with the pod."""
    uid = str(uuid.uuid4())
    net = network.NetnsNetwork(tmp_path, subnet)

    async def scenario() -> None:
        pod = await net.setup(uid)
        holder = subprocess.Popen(["ip", "netns", "exec", net.netns_name(uid), "sleep", "60"])
        try:
            await net.teardown(uid)
            assert holder.poll() is None  # the namespace is still held
            assert not Path(f"/sys/class/net/{net._veth(uid)}").exists()
            addrs = subprocess.run(
                ["nsenter", f"--net=/proc/{holder.pid}/ns/net", "ip", "-o", "-4", "addr"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            assert pod.ip not in addrs, addrs
            assert net.netns_name(uid) not in net.ipam.owners().values()
        finally:
            holder.kill()
            holder.wait()
            await net.close()

    asyncio.run(scenario())
