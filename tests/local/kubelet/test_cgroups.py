"""The kubelet's cgroups: limits as cgroup files (v1 and v2 on a fake cgroupfs), and on this machine's own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from t9k_provider.local.kubelet import cgroupfs, cgroups
from t9k_provider.local.kubelet.cgroups import KubeletCgroups, Limits
from t9k_provider.testing import unavailable

LIMITED = {
    "name": "main",
    "resources": {"limits": {"memory": "64Mi", "cpu": "200m"}, "requests": {"cpu": "100m"}},
}
UNLIMITED = {"name": "main"}


def pod(uid: str, *containers: dict, inits: tuple[dict, ...] = ()) -> dict:
    return {"metadata": {"uid": uid}, "spec": {"containers": list(containers), "initContainers": list(inits)}}


def mountinfo(*mounts: tuple[Path, str, str]) -> str:
    """/proc/self/mountinfo lines for (mount point, fstype, super options)."""
    return "".join(
        f"{30 + i} 25 0:{26 + i} / {point} rw,relatime shared:{i} - {fstype} {fstype} {options}\n"
        for i, (point, fstype, options) in enumerate(mounts)
    )


def read(path: Path) -> str:
    return path.read_text().strip()


# -- values


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, Limits(None, None, None)),
        ({"limits": {"memory": "64Mi", "cpu": "200m"}}, Limits(64 * 2**20, 200, 200)),
        ({"limits": {"cpu": "1"}, "requests": {"cpu": "0.25"}}, Limits(None, 1000, 250)),
        ({"limits": {"memory": "1G"}, "requests": {"cpu": "1500m"}}, Limits(10**9, None, 1500)),
        ({"limits": {"cpu": "0.0005"}}, Limits(None, 1, 1)),  # rounded up: never unlimited by rounding
    ],
)
def test_limits_of_a_container(resources: dict, expected: Limits) -> None:
    assert Limits.of_container({"resources": resources}) == expected


def test_cpu_shares_weight_and_quota_convert_as_the_kubelet_and_runc_do() -> None:
    assert [cgroups.cpu_shares(m) for m in (None, 0, 1, 200, 1000, 10**6)] == [2, 2, 2, 204, 1024, 262144]
    assert [cgroups.cpu_weight(s) for s in (2, 1024, 262144)] == [1, 39, 10000]
    assert [cgroups.cpu_quota(m) for m in (1, 200, 1500)] == [1000, 20000, 150000]


def test_pod_weight_is_the_sum_of_requests_or_the_largest_init_container() -> None:
    limit_only = {"name": "b", "resources": {"limits": {"cpu": "200m"}}}
    big_init = {"name": "i", "resources": {"requests": {"cpu": "500m"}}}
    assert cgroups.pod_files(pod("u", LIMITED, limit_only)["spec"], 1) == [("cpu", "cpu.shares", "307")]
    assert cgroups.pod_files(pod("u", LIMITED, inits=(big_init,))["spec"], 1) == [
        ("cpu", "cpu.shares", "512")
    ]
    assert cgroups.pod_files(pod("u", UNLIMITED)["spec"], 2) == [("cpu", "cpu.weight", "1")]


# -- cgroup v1 on a fake cgroupfs


@pytest.fixture
def v1(tmp_path: Path) -> tuple[Path, str, str]:
    root = tmp_path / "cgroup"
    for controller in ("memory", "cpu", "pids", "cpuacct"):
        (root / controller).mkdir(parents=True)
    (root / "memory" / "session").mkdir()
    info = mountinfo(*((root / c, "cgroup", f"rw,{c}") for c in ("memory", "cpu", "pids", "cpuacct")))
    own = "5:memory:/session\n4:cpu:/\n3:pids:/\n2:cpuacct:/\n0::/\n"
    return root, info, own


def test_v1_kubelet_cgroup_under_the_own_cgroup_of_each_hierarchy(tmp_path: Path, v1) -> None:
    root, info, own = v1
    found, why = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup=own)
    assert found is not None, why
    name = cgroups.kubelet_cgroup_name(tmp_path / "state")
    assert found.version == 1
    assert found.bases == {
        "memory": root / "memory" / "session" / name,
        "cpu": root / "cpu" / name,
        "pids": root / "pids" / name,
        "cpuacct": root / "cpuacct" / name,
    }
    assert all(base.is_dir() for base in found.bases.values())
    assert read(found.bases["cpu"] / "cpu.shares") == str(cgroups.cpu_shares(1000 * (os.cpu_count() or 1)))
    assert name != cgroups.kubelet_cgroup_name(tmp_path / "other"), "one kubelet cgroup per state dir"


def test_v1_container_files(tmp_path: Path, v1, monkeypatch: pytest.MonkeyPatch) -> None:
    _, info, own = v1
    monkeypatch.setenv(cgroups.PIDS_LIMIT_ENV, "512")
    found, _ = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup=own)
    assert found is not None
    memory_dir = found.bases["memory"] / "poduid-1" / "main-0"
    memory_dir.mkdir(parents=True)
    (memory_dir / "memory.memsw.limit_in_bytes").write_text("9223372036854771712")  # swap accounting on
    dirs = found.create_container(pod("uid-1", LIMITED), LIMITED, 0)
    assert dirs == [str(found.bases[c] / "poduid-1" / "main-0") for c in ("memory", "cpu", "pids", "cpuacct")]
    cpu_dir = found.bases["cpu"] / "poduid-1" / "main-0"
    assert read(cpu_dir / "cpu.shares") == "102"
    assert (read(cpu_dir / "cpu.cfs_period_us"), read(cpu_dir / "cpu.cfs_quota_us")) == ("100000", "20000")
    assert read(memory_dir / "memory.limit_in_bytes") == str(64 * 2**20)
    assert read(memory_dir / "memory.memsw.limit_in_bytes") == str(64 * 2**20), "no swap beyond the limit"
    assert read(found.bases["cpu"] / "poduid-1" / "cpu.shares") == "102", "the pod weighs its requests"
    assert read(found.bases["pids"] / "poduid-1" / "pids.max") == "512"
    assert not (found.bases["pids"] / "poduid-1" / "main-0" / "pids.max").exists(), "podPidsLimit is per pod"


def test_v1_without_limits_leaves_quota_and_memory_alone(tmp_path: Path, v1) -> None:
    _, info, own = v1
    found, _ = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup=own)
    assert found is not None
    found.create_container(pod("uid-2", UNLIMITED), UNLIMITED, 3)
    cpu_dir = found.bases["cpu"] / "poduid-2" / "main-3"
    assert read(cpu_dir / "cpu.shares") == "2"
    assert not (cpu_dir / "cpu.cfs_quota_us").exists()
    assert not (found.bases["memory"] / "poduid-2" / "main-3" / "memory.limit_in_bytes").exists()
    assert not (found.bases["memory"] / "poduid-2" / "memory.memsw.limit_in_bytes").exists()


# -- cgroup v2 on a fake cgroupfs


@pytest.fixture
def v2(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "unified"
    (root / "user.slice" / "session-1.scope").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma\n")
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    return root, mountinfo((root, "cgroup2", "rw,nsdelegate"))


def test_v2_kubelet_cgroup_delegates_the_controllers(tmp_path: Path, v2) -> None:
    root, info = v2
    own = "0::/user.slice/session-1.scope\n"
    found, why = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup=own)
    assert found is not None, why
    base = root / "user.slice" / "session-1.scope" / cgroups.kubelet_cgroup_name(tmp_path / "state")
    assert found.version == 2 and set(found.bases.values()) == {base}
    assert read(base.parent / "cgroup.subtree_control") == "+memory +cpu +pids"
    assert read(base / "cgroup.subtree_control") == "+memory +cpu +pids"
    assert read(base / "cpu.weight") == str(cgroups.cpu_weight(cgroups.node_shares()))


def test_v2_falls_back_to_the_root_where_the_own_cgroup_cannot_delegate(tmp_path: Path, v2) -> None:
    root, info = v2
    (root / "busy").write_text("")  # stands for a cgroup whose controllers cannot be enabled
    found, why = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup="0::/busy\n")
    assert found is not None, why
    assert set(found.bases.values()) == {root / cgroups.kubelet_cgroup_name(tmp_path / "state")}
    assert read(root / "cgroup.subtree_control") == "cpu memory pids", "already delegated: left as it is"


def test_v2_container_files(tmp_path: Path, v2) -> None:
    _, info = v2
    found, _ = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup="0::/\n")
    assert found is not None
    container = found.bases["memory"] / "poduid-1" / "main-0"
    container.mkdir(parents=True)
    (container / "memory.swap.max").write_text("max")
    assert found.create_container(pod("uid-1", LIMITED), LIMITED, 0) == [str(container)]
    assert read(container.parent / "cgroup.subtree_control") == "+memory +cpu +pids"
    assert read(container / "cpu.weight") == str(cgroups.cpu_weight(102))
    assert read(container / "cpu.max") == "20000 100000"
    assert read(container / "memory.max") == str(64 * 2**20)
    assert read(container / "memory.swap.max") == "0"


def test_v2_is_preferred_only_with_its_controllers(tmp_path: Path, v1, v2) -> None:
    """A hybrid machine (cgroup2 mounted without controllers, as here) uses v1."""
    _, v1_info, own = v1
    v2_root, v2_info = v2
    (v2_root / "cgroup.controllers").write_text("\n")
    found, _ = cgroups.detect(tmp_path / "state", mountinfo=v1_info + v2_info, proc_cgroup=own)
    assert found is not None and found.version == 1


# -- no cgroups


def test_not_writable_or_missing_cgroups_say_why(tmp_path: Path, v1) -> None:
    found, why = cgroups.detect(tmp_path / "state", mountinfo="", proc_cgroup="0::/\n")
    assert found is None and "no cgroup v2" in why
    root, info, own = v1
    (root / "cpu").rmdir()
    (root / "cpu").write_text("")  # the hierarchy refuses a new cgroup
    found, why = cgroups.detect(tmp_path / "state", mountinfo=info, proc_cgroup=own)
    assert found is None and why.startswith("cgroups are not writable")
    assert not any((root / "memory" / "session").iterdir()), "a half-made kubelet cgroup is removed"


# -- what the shim reads


def test_oom_kills_and_cpu_usage_from_the_kernel_files(tmp_path: Path) -> None:
    v1_memory, v1_cpu, v1_cpuacct, v2_dir = (tmp_path / n for n in ("memory", "cpu", "cpuacct", "v2"))
    for d in (v1_memory, v1_cpu, v1_cpuacct, v2_dir):
        d.mkdir()
    (v1_memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (v1_cpu / "cpu.stat").write_text("nr_periods 40\nnr_throttled 38\nthrottled_time 3000000000\n")
    (v1_cpuacct / "cpuacct.usage").write_text("800000000\n")
    (v2_dir / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n")
    (v2_dir / "cpu.stat").write_text("usage_usec 500000\nuser_usec 400000\nnr_periods 25\nnr_throttled 20\n")
    v1_dirs = [str(v1_memory), str(v1_cpu), str(v1_cpuacct)]
    assert cgroupfs.oom_kills(v1_dirs) == 2
    assert cgroupfs.oom_kills([str(v2_dir)]) == 1
    assert cgroupfs.oom_kills([str(v1_cpu)]) == 0
    assert cgroups.cpu_usage(v1_dirs) == (0.8, 40)
    assert cgroups.cpu_usage([str(v2_dir)]) == (0.5, 25)


# -- this machine's cgroups (root with cgroup v1 or v2 on CI)


@pytest.fixture
def real(tmp_path: Path) -> Iterator[KubeletCgroups]:
    found, why = cgroups.detect(tmp_path / "state")
    if found is None:
        unavailable("writable cgroups", why)
    yield found
    found.remove()
    assert not any(base.exists() for base in found.bases.values())


def run_in(dirs: list[str], script: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", script], preexec_fn=lambda: cgroupfs.join(dirs), timeout=60, check=False
    )


def test_memory_limit_kills_and_is_counted(real: KubeletCgroups) -> None:
    dirs = real.create_container(pod("uid-oom", LIMITED), LIMITED, 0)
    done = run_in(dirs, "b = bytearray(200 * 1024 * 1024)")
    assert done.returncode == -9
    assert cgroupfs.oom_kills(dirs) == 1
    fine = real.create_container(pod("uid-oom", UNLIMITED), UNLIMITED, 1)
    assert run_in(fine, "b = bytearray(200 * 1024 * 1024)").returncode == 0
    assert cgroupfs.oom_kills(fine) == 0


def test_removing_a_pod_kills_what_is_left_in_it(real: KubeletCgroups) -> None:
    dirs = real.create_container(pod("uid-rm", UNLIMITED), UNLIMITED, 0)
    proc = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: cgroupfs.join(dirs))
    try:
        real.remove_orphans({"uid-other"})
        assert proc.wait(timeout=10) == -9
        assert not any(Path(d).exists() for d in dirs)
        assert not any(p.exists() for p in real.pod_dirs("uid-rm"))
    finally:
        proc.kill()
        proc.wait()


def test_cpu_limit_gives_about_the_quota(real: KubeletCgroups) -> None:
    """200m: about 0.2 CPU per CFS period, as the kernel counts it (cpu.stat), not as a clock would."""
    dirs = real.create_container(pod("uid-cpu", LIMITED), LIMITED, 0)
    proc = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: cgroupfs.join(dirs)
    )
    try:
        deadline = time.monotonic() + 60
        while cgroups.cpu_usage(dirs)[1] < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        usage, periods = cgroups.cpu_usage(dirs)
    finally:
        proc.kill()
        proc.wait()
    assert periods >= 20
    assert 0.02 < usage / (periods * cgroups.CPU_PERIOD_US / 1e6) <= 0.25


def test_leftovers_of_a_kubelet_are_removed_with_what_runs_in_them(tmp_path: Path) -> None:
    found, why = cgroups.detect(tmp_path / "state")
    if found is None:
        unavailable("writable cgroups", why)
    dirs = found.create_container(pod("uid-left", UNLIMITED), UNLIMITED, 0)
    proc = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: cgroupfs.join(dirs))
    try:
        cgroups.remove_leftovers(tmp_path / "other-state")
        assert all(base.exists() for base in found.bases.values()), "another cluster's cgroup is left alone"
        cgroups.remove_leftovers(tmp_path / "state")
        assert proc.wait(timeout=10) == -9
        assert not any(base.exists() for base in found.bases.values())
    finally:
        proc.kill()
        proc.wait()
