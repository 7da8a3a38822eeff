"""kube-apiserver's ServiceAccount admission of a new pod: the account defaults to ``default``, and unless
``automountServiceAccountToken: false`` (pod first, then account) every container mounts the projected
``kube-api-access-<random>`` volume (token, ``ca.crt``, ``namespace``) at the path in-cluster clients read.

Unlike kube-apiserver, a pod naming an account that does not exist (yet) is admitted: the namespace
controller creates ``default`` just after its namespace, and pods created in between would otherwise fail.
"""

from __future__ import annotations

import secrets
from typing import Any

from t9k_provider.local.apiserver.strategies.configdata import ROOT_CA_CONFIG_MAP
from t9k_provider.local.apiserver.strategies.podspec import items
from t9k_provider.local.storage.store import Store

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3607  # kube-apiserver's: an hour, plus a margin that marks the token as auto-generated
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # utilrand.String's alphabet


def api_access_volume(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


def admit_pod(pod: dict[str, Any], store: Store) -> None:
    spec = pod["spec"]
    account_name = spec.get("serviceAccountName") or "default"
    spec["serviceAccountName"] = spec["serviceAccount"] = account_name
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        account = store.get(("", "serviceaccounts", pod["metadata"].get("namespace", ""), account_name))
        automount = (account or {}).get("automountServiceAccountToken")
    if automount is False:
        return
    containers = [
        c for c in (*items(spec.get("initContainers")), *items(spec.get("containers"))) if isinstance(c, dict)
    ]
    if not containers or not isinstance(spec.get("volumes", []), list):
        return
    name = "kube-api-access-" + "".join(secrets.choice(_SUFFIX_CHARS) for _ in range(5))
    spec.setdefault("volumes", []).append(api_access_volume(name))
    for c in containers:
        mounts = c.setdefault("volumeMounts", [])
        if isinstance(mounts, list) and not any(
            isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH for m in mounts
        ):
            mounts.append({"name": name, "readOnly": True, "mountPath": MOUNT_PATH})
