"""The kubelet-managed `/etc/hosts` of each pod: how service and pod names resolve without a DNS server.

Every Service of the pod's namespace maps to the IPs of its endpoints: the pods its selector matches that are
Ready (their readiness probes pass), or all of them with `publishNotReadyAddresses` (the local cluster has no
kube-proxy, so a ClusterIP Service resolves like a headless one), under the short name and the `<svc>.<ns>`,
`<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local` forms. A pod with `hostname` and `subdomain` also resolves
as `<hostname>.<subdomain>[.<ns>[.svc[.cluster.local]]]` while it is an endpoint of that Service, as cluster
DNS answers it.

Every pod of the namespace with an IP also gets cluster DNS' pod record `<a-b-c-d>.<ns>.pod.cluster.local`
on the last line for its IP: glibc answers a reverse lookup with the first name of the first line carrying the
address, so a peer resolves back to its Service name when it has one (the pod's own address to its hostname)
and to its pod record otherwise, instead of failing over to a resolver that is not there. Dual-stack servers
(e.g. PyTorch's TCPStore) see IPv4 peers as `::ffff:a.b.c.d`, which the DNS backend unmaps but the files
backend does not, so the pod record also carries that form (only the pod record: a mapped line on a Service
or host name would add an IPv6 answer to its forward lookups).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from t9k_provider.local.machinery.endpoints import is_endpoint, is_ready, publishes_not_ready

CLUSTER_DOMAIN = "cluster.local"
HEADER = (
    "# Kubernetes-managed hosts file (t9k-local kubelet).\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
)

# No cluster DNS: with no nameserver line, resolvers only ever ask 127.0.0.1 (fails fast, stays local).
RESOLV_CONF = (
    "# t9k-local: no cluster DNS; service and pod names resolve through /etc/hosts\noptions attempts:1\n"
)


def pod_hostname(pod: dict[str, Any]) -> str:
    return (pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"]


def signature(pod: dict[str, Any]) -> tuple[Any, ...]:
    """Everything about a pod that can change a hosts file: when it is unchanged, nothing is rewritten."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    labels = tuple(sorted((meta.get("labels") or {}).items()))
    return (
        meta.get("uid"),
        labels,
        spec.get("hostname"),
        spec.get("subdomain"),
        status.get("podIP"),
        status.get("phase") in ("Succeeded", "Failed"),
        is_ready(pod),
    )


def _forms(name: str, namespace: str) -> list[str]:
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}",
    ]


def pod_record(ip: str, namespace: str) -> str:
    """Cluster DNS' name for a pod address: dots (or an IPv6 address's colons) become dashes."""
    return f"{ip.replace('.', '-').replace(':', '-')}.{namespace}.pod.{CLUSTER_DOMAIN}"


def render(
    pod: dict[str, Any], pod_ip: str, pods: Iterable[tuple[dict[str, Any], str]], services: Iterable[dict]
) -> str:
    """Hosts file of `pod`; `pods` are (pod, ip) pairs of the namespace's pods that have an IP."""
    ns = pod["metadata"].get("namespace", "default")
    spec = pod.get("spec") or {}
    lines = [HEADER]
    own = pod_hostname(pod)
    if spec.get("subdomain"):
        lines.append(f"{pod_ip}\t{own}.{spec['subdomain']}.{ns}.svc.{CLUSTER_DOMAIN}\t{own}\n")
    else:
        lines.append(f"{pod_ip}\t{own}\n")
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines.append("\n# Entries added by HostAliases.\n")
        lines += [f"{a.get('ip')}\t{' '.join(a.get('hostnames') or [])}\n" for a in aliases if a.get("ip")]
    peers = [(p, ip) for p, ip in pods if p["metadata"].get("namespace", "default") == ns and ip]
    own_services = {
        s["metadata"]["name"]: s for s in services if s["metadata"].get("namespace", "default") == ns
    }
    for name, svc in sorted(own_services.items()):
        for peer, ip in peers:
            if is_endpoint(svc, peer):
                lines.append(f"{ip}\t{' '.join(_forms(name, ns))}\n")
    for peer, ip in peers:
        sub = (peer.get("spec") or {}).get("subdomain")
        if sub and sub in own_services and (publishes_not_ready(own_services[sub]) or is_ready(peer)):
            host = pod_hostname(peer)
            lines.append(f"{ip}\t{' '.join(f'{host}.{form}' for form in _forms(sub, ns))}\n")
    addresses = dict.fromkeys(ip for ip in [pod_ip, *(ip for _, ip in peers)] if ip)
    for ip in addresses:
        lines.append(f"{ip}\t{pod_record(ip, ns)}\n")
        if ":" not in ip:
            lines.append(f"::ffff:{ip}\t{pod_record(ip, ns)}\n")
    return "".join(lines)


def write_in_place(path: Path, content: str) -> bool:
    """Rewrite the file's content keeping its inode (it is bind-mounted into running containers)."""
    try:
        if path.read_text() == content:
            return False
    except FileNotFoundError:
        pass
    data = content.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:  # never truncated first: a lookup in a container during the rewrite never finds the file empty
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    return True
