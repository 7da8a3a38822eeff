"""Pod records in the kubelet's hosts files: every pod address resolves back to a name, like cluster DNS."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.kubelet import hosts

READY = {"conditions": [{"type": "Ready", "status": "True"}]}  # Services publish ready pods


def _pod(name: str, ns: str = "ns", labels: dict[str, str] | None = None, **spec: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    return {"metadata": meta, "spec": dict(spec), "status": READY}


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


def test_services_publish_only_ready_pods_unless_not_ready_addresses_are_published() -> None:
    """Readiness-gated endpoints: a pod whose readiness probe fails drops out of its Service's names (and
    its subdomain record), unless the Service has `publishNotReadyAddresses` (as T9k job Services do)."""
    ready = _pod("a", labels={"app": "x"})
    unready = {**_pod("b", labels={"app": "x"}, hostname="b", subdomain="gated"), "status": {}}
    gated = {"metadata": {"name": "gated", "namespace": "ns"}, "spec": {"selector": {"app": "x"}}}
    published = {
        "metadata": {"name": "all", "namespace": "ns"},
        "spec": {"selector": {"app": "x"}, "publishNotReadyAddresses": True},
    }
    text = hosts.render(ready, "10.0.0.2", [(ready, "10.0.0.2"), (unready, "10.0.0.3")], [gated, published])
    names = {
        (line.split("\t")[0], line.split("\t")[1].split()[0]) for line in text.splitlines() if "\t" in line
    }
    assert ("10.0.0.2", "gated") in names and ("10.0.0.3", "gated") not in names
    assert ("10.0.0.2", "all") in names and ("10.0.0.3", "all") in names
    assert ("10.0.0.3", "b.gated") not in names
    assert hosts.signature(ready) != hosts.signature(
        {**ready, "status": {}}
    )  # readiness rewrites hosts files
