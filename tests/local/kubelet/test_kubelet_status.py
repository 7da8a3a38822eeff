"""Pod status computation (phases, container states, conditions) and hosts files, without a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from t9k_provider.local.apiserver.strategies.pods import PodStrategy
from t9k_provider.local.kubelet import hosts, network, podworker
from t9k_provider.local.kubelet.runtime import Attempt
from t9k_provider.local.kubelet.status import (
    ContainerView,
    phase,
    pod_status,
    status_patch,
    terminate_unfinished,
)
from t9k_provider.local.machinery.strategicpatch import strategic_merge_patch

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z", "2026-01-01T00:00:09Z"


def _pod(policy: str = "Never", inits: int = 0) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {
            "restartPolicy": policy,
            "initContainers": [{"name": f"i{i}", "image": "busybox"} for i in range(inits)],
            "containers": [{"name": "a", "image": "img:1"}, {"name": "b", "image": "img:2"}],
        },
        "status": {"phase": "Pending"},
    }


def _running(n: int = 0) -> Attempt:
    return Attempt(n=n, running=True, started_at=T0)


def _done(code: int, n: int = 0) -> Attempt:
    return Attempt(n=n, running=False, exit_code=code, started_at=T0, finished_at=T1)


def _views(pod: dict, *attempts: list[Attempt]) -> list[ContainerView]:
    return [
        ContainerView(spec=c, attempts=a) for c, a in zip(pod["spec"]["containers"], attempts, strict=False)
    ]


@pytest.mark.parametrize(
    ("policy", "a", "b", "expected"),
    [
        ("Never", [], [], "Pending"),
        ("Never", [_running()], [], "Pending"),  # one container not started yet
        ("Never", [_running()], [_done(0)], "Running"),
        ("Never", [_done(0)], [_done(3)], "Failed"),
        ("Never", [_done(0)], [_done(0)], "Succeeded"),
        ("OnFailure", [_done(0)], [_done(3)], "Running"),  # b will be restarted
        ("OnFailure", [_done(0)], [_done(0)], "Succeeded"),
        ("Always", [_done(0)], [_done(0)], "Running"),
    ],
)
def test_phase_follows_restart_policy(policy: str, a: list, b: list, expected: str) -> None:
    pod = _pod(policy)
    assert phase(pod, [], _views(pod, a, b)) == expected


def test_failed_init_container_with_never_fails_the_pod() -> None:
    pod = _pod("Never", inits=1)
    inits = [ContainerView(spec=pod["spec"]["initContainers"][0], attempts=[_done(1)])]
    assert phase(pod, inits, _views(pod, [], [])) == "Failed"
    pod = _pod("OnFailure", inits=1)
    assert phase(pod, inits, _views(pod, [], [])) == "Pending"


def test_status_of_a_pod_with_exit_codes_0_and_3() -> None:
    pod = _pod("Never")
    mains = _views(pod, [_done(0)], [_done(3)])
    status = pod_status(
        pod,
        [],
        mains,
        now=T2,
        pod_ip="10.251.0.5",
        host_ip="10.251.0.1",
        start_time=T0,
        restart_pending=set(),
    )
    assert status["phase"] == "Failed"
    assert status["podIP"] == "10.251.0.5" and status["podIPs"] == [{"ip": "10.251.0.5"}]
    a, b = status["containerStatuses"]
    assert a["state"]["terminated"]["exitCode"] == 0 and a["state"]["terminated"]["reason"] == "Completed"
    assert b["state"]["terminated"]["exitCode"] == 3 and b["state"]["terminated"]["reason"] == "Error"
    assert b["state"]["terminated"]["finishedAt"] == T1
    assert b["containerID"].startswith("t9k-local://") and b["image"] == "img:2" and b["imageID"]
    assert (b["ready"], b["started"], b["restartCount"], b["lastState"]) == (False, False, 0, {})
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["PodScheduled"]["status"] == "True"
    assert conds["Initialized"]["status"] == "True"
    assert conds["Ready"]["status"] == "False" and conds["ContainersReady"]["status"] == "False"


def test_running_container_after_restart_reports_last_state() -> None:
    pod = _pod("OnFailure")
    mains = _views(pod, [_done(2, 0), _running(1)], [_running(0)])
    status = pod_status(pod, [], mains, now=T2, pod_ip="", host_ip="h", start_time=T0, restart_pending=set())
    a = status["containerStatuses"][0]
    assert a["restartCount"] == 1 and a["state"] == {"running": {"startedAt": T0}}
    assert a["lastState"]["terminated"]["exitCode"] == 2
    assert a["ready"] and a["started"]
    assert status["phase"] == "Running"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"


def test_container_waiting_for_a_restart_counts_the_restart_already() -> None:
    pod = _pod("OnFailure")
    views = _views(pod, [_done(2, 0)], [_running(0)])
    views[0].waiting_reason = "CrashLoopBackOff"
    status = pod_status(pod, [], views, now=T2, pod_ip="", host_ip="h", start_time=T0, restart_pending={"a"})
    a = status["containerStatuses"][0]
    assert a["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert a["restartCount"] == 1 and a["lastState"]["terminated"]["exitCode"] == 2


def test_condition_transition_times_are_kept_while_unchanged() -> None:
    pod = _pod("Never")
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": T0}]
    status = pod_status(
        pod,
        [],
        _views(pod, [_running()], []),
        now=T2,
        pod_ip="",
        host_ip="h",
        start_time=T0,
        restart_pending=set(),
    )
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == T0 and ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [b]"


def test_backoff_doubles_and_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(podworker.BACKOFF_ENV, raising=False)
    assert [podworker.restart_backoff(n) for n in (1, 2, 3, 4)] == [0.0, 10.0, 20.0, 40.0]
    assert podworker.restart_backoff(30) == podworker.BACKOFF_CAP


def test_hosts_file_maps_services_and_subdomains() -> None:
    def pod(name: str, labels: dict, **spec: str) -> dict:
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}  # Services publish ready pods
        return {
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": dict(spec),
            "status": ready,
        }

    w0 = pod("job-worker-0", {"job": "j", "idx": "0"}, subdomain="job")
    w1 = pod("job-worker-1", {"job": "j", "idx": "1"}, hostname="w1", subdomain="job")
    other_ns = {"metadata": {"name": "x", "namespace": "other", "labels": {"job": "j"}}, "spec": {}}
    services = [
        {
            "metadata": {"name": "job", "namespace": "ns"},
            "spec": {"clusterIP": "None", "selector": {"job": "j"}},
        },
        {
            "metadata": {"name": "job-worker-0", "namespace": "ns"},
            "spec": {"selector": {"job": "j", "idx": "0"}},
        },
        {"metadata": {"name": "nosel", "namespace": "ns"}, "spec": {}},
    ]
    text = hosts.render(
        w1, "10.0.0.3", [(w0, "10.0.0.2"), (w1, "10.0.0.3"), (other_ns, "10.0.0.9")], services
    )
    lines = [line.split("\t", 1) for line in text.splitlines() if not line.startswith("#")]
    table = [(ip, names.split()) for ip, names in lines]
    assert ("10.0.0.3", ["w1.job.ns.svc.cluster.local", "w1"]) in table
    assert ("10.0.0.2", ["job", "job.ns", "job.ns.svc", "job.ns.svc.cluster.local"]) in table
    assert ("10.0.0.3", ["job", "job.ns", "job.ns.svc", "job.ns.svc.cluster.local"]) in table
    assert (
        "10.0.0.2",
        ["job-worker-0", "job-worker-0.ns", "job-worker-0.ns.svc", "job-worker-0.ns.svc.cluster.local"],
    ) in table
    assert ("10.0.0.3", ["w1.job", "w1.job.ns", "w1.job.ns.svc", "w1.job.ns.svc.cluster.local"]) in table
    assert "10.0.0.9" not in text and "nosel" not in text


def test_hosts_file_includes_host_aliases() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar"]}]},
    }
    assert "10.1.2.3\tfoo.local bar\n" in hosts.render(pod, "10.0.0.1", [], [])


def test_hosts_file_is_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    assert hosts.write_in_place(path, "a\n")
    inode = path.stat().st_ino
    assert not hosts.write_in_place(path, "a\n")
    assert hosts.write_in_place(path, "b\n")
    assert path.stat().st_ino == inode and path.read_text() == "b\n"
    assert hosts.write_in_place(path, "")
    assert path.stat().st_ino == inode and path.read_text() == ""


def test_a_reader_never_finds_the_hosts_file_empty_while_it_is_rewritten(tmp_path: Path) -> None:
    # A container resolving a peer reads the file while the kubelet rewrites it for a pod that came or went.
    path = tmp_path / "hosts"
    first, second = "10.1.0.7\tworker-0\n", "10.1.0.7\tworker-0\n10.1.0.8\tworker-1\n"
    hosts.write_in_place(path, first)
    reader = subprocess.Popen(
        [sys.executable, "-c", READ_UNTIL_STOPPED, str(path), str(tmp_path / "stop")], stdout=subprocess.PIPE
    )
    try:
        for i in range(3000):
            hosts.write_in_place(path, second if i % 2 == 0 else first)
    finally:
        (tmp_path / "stop").touch()
        out, _ = reader.communicate(timeout=30)
    reads, empty = map(int, out.split())
    assert reads > 0 and empty == 0, f"{empty} of {reads} reads found the file empty"


READ_UNTIL_STOPPED = """
import os, sys
path, stop = sys.argv[1], sys.argv[2]
reads = empty = 0
while not os.path.exists(stop):
    with open(path) as f:
        empty += f.read() == ""
    reads += 1
print(reads, empty)
"""


def test_ipam_leases_are_exclusive_and_reclaimed(tmp_path: Path) -> None:
    import ipaddress

    ipam = network.Ipam(tmp_path / "ipam", ipaddress.ip_network("10.9.0.0/29"), {"10.9.0.1"})
    a = ipam.allocate("ns-a", alive=lambda _o: True)
    b = ipam.allocate("ns-b", alive=lambda _o: True)
    assert (a, b) == ("10.9.0.2", "10.9.0.3")
    assert ipam.allocate("ns-a", alive=lambda _o: True) == a  # idempotent for the same owner
    ipam.release_owner("ns-a")
    assert ipam.allocate("ns-c", alive=lambda _o: True) == "10.9.0.2"
    # a fresh lease is kept even though its owner's namespace does not exist yet (it is being created)
    assert ipam.owner("10.9.0.3") == "ns-b"
    assert ipam.allocate("ns-e", alive=lambda owner: owner != "ns-b") == "10.9.0.4"
    ipam.release_owner("ns-e")
    # a lease whose owner is dead is taken over once the grace period has passed
    old = time.time() - network.LEASE_GRACE_SECONDS - 1
    os.utime(tmp_path / "ipam" / "10.9.0.3", (old, old))
    assert ipam.allocate("ns-d", alive=lambda owner: owner != "ns-b") == "10.9.0.3"
    for i in range(3):
        ipam.allocate(f"fill-{i}", alive=lambda _o: True)
    with pytest.raises(RuntimeError, match="no free pod address"):
        ipam.allocate("one-too-many", alive=lambda _o: True)


def test_a_pod_ended_before_its_container_ran_reports_it_terminated() -> None:
    """The deadline of a slow-starting pod can pass before its container runs: the finished pod's containers
    are terminated (ContainerStatusUnknown, 137), as the kubelet's TerminatePod has it, never waiting."""
    pod = _pod("Never", inits=1)
    inits = [ContainerView(spec=pod["spec"]["initContainers"][0])]
    status = pod_status(pod, inits, _views(pod, [], [_done(0)]), now=T2, pod_ip="", host_ip="h",
                        start_time=T0, restart_pending=set())  # fmt: skip
    terminate_unfinished(status)
    a, b = status["containerStatuses"]
    assert a["state"]["terminated"] == {
        "exitCode": 137,
        "reason": "ContainerStatusUnknown",
        "message": "The container could not be located when the pod was terminated",
    }
    assert b["state"]["terminated"]["reason"] == "Completed"  # what did run keeps its own record
    assert "waiting" in status["initContainerStatuses"][0]["state"]  # never started: nothing to claim


def test_a_new_pod_ip_replaces_the_old_one_and_others_conditions_stay() -> None:
    """A pod whose network was set up again (a restarted kubelet) has one address, not both: podIPs merge
    by ip, so the kubelet's patch replaces that list whole, while a DisruptionTarget another wrote stays."""
    ready = {"type": "Ready", "status": "True"}
    target = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    stored = {
        "status": {"podIP": "10.251.0.5", "podIPs": [{"ip": "10.251.0.5"}], "conditions": [ready, target]}
    }
    status = {
        "podIP": "10.251.0.9",
        "podIPs": [{"ip": "10.251.0.9"}],
        "conditions": [{**ready, "status": "False"}],
    }
    merged = strategic_merge_patch(stored, status_patch(status), PodStrategy.merge_fields)["status"]
    assert merged["podIPs"] == [{"ip": "10.251.0.9"}] and merged["podIP"] == "10.251.0.9"
    assert {c["type"]: c["status"] for c in merged["conditions"]} == {
        "Ready": "False",
        "DisruptionTarget": "True",
    }
