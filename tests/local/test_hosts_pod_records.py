"""Pod records in the kubelet's hosts files: every pod address resolves back to a name, like cluster DNS."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.kubelet import hosts


def _pod(name: str, ns: str = "ns", labels: dict[str, str] | None = None, **spec: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": dict(spec)}


def _first_names(text: str) -> dict[str, str]:
    """What glibc's reverse lookup answers: the first name of the first line carrying each address."""
    first: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            ip, names = line.split("\t", 1)
            first.setdefault(ip, names.split()[0])
    return first


def test_every_pod_address_of_the_namespace_gets_its_pod_record() -> None:
    me, peer, other = _pod("me"), _pod("peer"), _pod("x", ns="other")
    text = hosts.render(
        me, "10.251.0.2", [(me, "10.251.0.2"), (peer, "10.251.0.3"), (other, "10.251.0.9")], []
    )
    assert "10.251.0.2\t10-251-0-2.ns.pod.cluster.local\n" in text
    assert "10.251.0.3\t10-251-0-3.ns.pod.cluster.local\n" in text
    assert "::ffff:10.251.0.3\t10-251-0-3.ns.pod.cluster.local\n" in text  # how dual-stack servers see it
    assert "10.251.0.9" not in text
    assert text.count("10-251-0-2") == 2  # once per form, though the pod is also its own peer


def test_reverse_lookup_prefers_hostname_then_service_then_pod_record() -> None:
    me = _pod("job-worker-0", labels={"job": "j", "idx": "0"}, hostname="w0", subdomain="job")
    served = _pod("job-worker-1", labels={"job": "j", "idx": "1"})
    bare = _pod("sidecar")
    services = [
        {
            "metadata": {"name": "job-worker-1", "namespace": "ns"},
            "spec": {"selector": {"job": "j", "idx": "1"}},
        },
    ]
    pods = [(me, "10.0.0.2"), (served, "10.0.0.3"), (bare, "10.0.0.4")]
    first = _first_names(hosts.render(me, "10.0.0.2", pods, services))
    assert first == {
        "127.0.0.1": "localhost",
        "::1": "localhost",
        "10.0.0.2": "w0.job.ns.svc.cluster.local",
        "10.0.0.3": "job-worker-1",
        "10.0.0.4": "10-0-0-4.ns.pod.cluster.local",
        "::ffff:10.0.0.2": "10-0-0-2.ns.pod.cluster.local",
        "::ffff:10.0.0.3": "10-0-0-3.ns.pod.cluster.local",
        "::ffff:10.0.0.4": "10-0-0-4.ns.pod.cluster.local",
    }


def test_only_pod_records_carry_ipv4_mapped_addresses() -> None:
    """A mapped line on a Service or host name would give its forward lookups an IPv6 answer too."""
    pod = _pod("p", labels={"a": "b"})
    svc = {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": {"a": "b"}}}
    mapped = [
        line
        for line in hosts.render(pod, "10.0.0.2", [(pod, "10.0.0.2")], [svc]).splitlines()
        if line.startswith("::ffff:")
    ]
    assert mapped == ["::ffff:10.0.0.2\t10-0-0-2.ns.pod.cluster.local"]
    assert "::ffff:" not in hosts.render(_pod("v6"), "fd00::2", [], [])


def test_pod_record_of_ipv6_and_host_network_addresses() -> None:
    assert hosts.pod_record("fd00::a:1", "ns") == "fd00--a-1.ns.pod.cluster.local"
    assert hosts.pod_record("127.1.0.7", "team-a") == "127-1-0-7.team-a.pod.cluster.local"


def test_pod_records_follow_addresses_not_unrelated_pod_updates() -> None:
    """The hosts signature already covers the pod address: a pod record adds nothing for it to watch."""
    pod = {**_pod("p"), "status": {"podIP": "10.0.0.5", "phase": "Running"}}
    ready = {**pod, "status": {**pod["status"], "conditions": [{"type": "Ready"}]}}
    moved = {**pod, "status": {**pod["status"], "podIP": "10.0.0.6"}}
    assert hosts.signature(ready) == hosts.signature(pod)
    assert hosts.signature(moved) != hosts.signature(pod)
