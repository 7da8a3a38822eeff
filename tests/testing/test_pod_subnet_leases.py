"""Pod subnet leases: what keeps the clusters of parallel test workers on bridges of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from t9k_provider.local.kubelet import network
from t9k_provider.testing import cluster as harness


@pytest.fixture
def leases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lease directory of this test's own (the machine's stays untouched)."""
    monkeypatch.setattr(network, "run_dir", lambda: tmp_path)
    return tmp_path / "pod-subnets"


def test_each_lease_is_a_subnet_no_one_else_holds(leases: Path) -> None:
    first, second = harness.lease_pod_subnet(Path("/a")), harness.lease_pod_subnet(Path("/b"))
    assert first != second and {first, second} <= set(harness.LEASED_SUBNETS)
    assert 0 not in (first, second), "subnet 0 stays the default of t9k-local up"
    assert (leases / str(first)).read_text() == f"{os.getpid()}\n/a\n"
    harness.release_pod_subnet(first)
    assert harness.lease_pod_subnet(Path("/c")) == first, "a released subnet is leased again"


def test_the_lease_of_a_process_that_is_gone_is_taken_back(leases: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    leases.mkdir(parents=True)
    for index in harness.LEASED_SUBNETS:
        (leases / str(index)).write_text(f"{gone.stdout.strip()}\n/crashed\n")
    assert harness.lease_pod_subnet(Path("/new")) == harness.LEASED_SUBNETS[0]
    assert sorted(p.name for p in leases.iterdir() if not p.name.startswith(".")) == [
        str(harness.LEASED_SUBNETS[0])
    ], "the other leases of processes that are gone are swept"


def test_every_subnet_held_by_a_live_process_is_an_error(leases: Path) -> None:
    leases.mkdir(parents=True)
    for index in harness.LEASED_SUBNETS:
        (leases / str(index)).write_text(f"{os.getppid()}\n/busy\n")
    with pytest.raises(RuntimeError, match="every pod subnet the harness leases"):
        harness.lease_pod_subnet(Path("/one-too-many"))


def test_only_the_holder_releases_a_lease(leases: Path) -> None:
    index = harness.lease_pod_subnet(Path("/a"))
    (leases / str(index)).write_text(f"{os.getppid()}\n/someone-else\n")
    harness.release_pod_subnet(index)
    assert (leases / str(index)).exists()


@pytest.mark.parametrize("index", [-1, 256])
def test_a_pod_subnet_out_of_range_is_refused(index: int) -> None:
    with pytest.raises(ValueError, match="pod subnet: must be 0-255"):
        network.PodSubnet(index)


def test_a_pod_subnet_names_its_bridge_network_and_gateway() -> None:
    subnet = network.PodSubnet(7)
    assert (subnet.bridge, str(subnet.network), subnet.gateway) == ("t9k7", "10.251.7.0/24", "10.251.7.1")
    assert network.PodSubnet().bridge == "t9k0"
