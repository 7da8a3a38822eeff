"""Endpoints: no behaviour of their own; the server keeps only those of the ``kubernetes`` Service."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy


def kubernetes_endpoints(host: str, port: int) -> dict[str, Any]:
    """The Endpoints of ``default/kubernetes``: the API server's own address."""
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": [
            {"addresses": [{"ip": host}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
        ],
    }


RESOURCE = Resource("", "v1", "endpoints", "endpoints", "Endpoints", Strategy(), short_names=["ep"])
