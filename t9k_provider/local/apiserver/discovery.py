"""Discovery documents, rebuilt from the registry on every request so CRDs show up at once."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource
from t9k_provider.local.apiserver.served import BUILTIN, ServedResources

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-t9k-local",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


# Verbs per subresource, as the real server lists them in discovery.
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "log": ["get"],
    "exec": ["create", "get"],
    "attach": ["create", "get"],
    "portforward": ["create", "get"],
    "binding": ["create"],
    "eviction": ["create"],
    "finalize": ["update"],
    "token": ["create"],
}
# Discovery lists the built-in groups first, sorted (the core group first), then the CRDs' groups, sorted.
_BUILTIN_GROUPS = sorted({r.group for r in BUILTIN if r.group})


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _sorted_groups(registry: ServedResources) -> list[tuple[str, list[str]]]:
    groups = registry.group_versions()
    named = [g for g in groups if g]
    order = [g for g in _BUILTIN_GROUPS if g in named] + sorted(g for g in named if g not in _BUILTIN_GROUPS)
    return [(g, groups[g]) for g in order]


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: ServedResources) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(g, vs) for g, vs in _sorted_groups(registry)],
    }


def api_group(registry: ServedResources, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _resource_entries(res: Resource) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": res.plural,
        "singularName": res.singular,
        "namespaced": res.namespaced,
        "kind": res.kind,
        "verbs": list(res.strategy.verbs),
    }
    if res.short_names:
        main["shortNames"] = list(res.short_names)
    if res.categories:
        main["categories"] = list(res.categories)
    entries = [main]
    for sub in res.subresources:
        kind = {
            "log": "Pod",
            "binding": "Binding",
            "eviction": "Eviction",
            "scale": "Scale",
            "token": "TokenRequest",
        }.get(sub, res.kind)
        entry: dict[str, Any] = {
            "name": f"{res.plural}/{sub}",
            "singularName": "",
            "namespaced": res.namespaced,
            "kind": kind,
            "verbs": list(SUBRESOURCE_VERBS[sub]),
        }
        if sub == "scale":
            entry["group"], entry["version"] = "autoscaling", "v1"
        if sub == "token":
            entry["group"], entry["version"] = "authentication.k8s.io", "v1"
        if sub == "eviction":  # kubectl drain evicts only where discovery names the Eviction's version
            entry["group"], entry["version"] = "policy", "v1"
        entries.append(entry)
    return entries


def api_resource_list(registry: ServedResources, group: str, version: str) -> dict[str, Any] | None:
    served = registry.in_version(group, version)
    if not served:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [e for r in served for e in _resource_entries(r)],
    }
