"""``serviceaccounts/<name>/token``: a TokenRequest answered with a signed token (``tokens.py``), bound to a
pod when ``boundObjectRef`` names one, validated as kube-apiserver's ``TokenREST`` does."""

from __future__ import annotations

from typing import Any

from t9k_provider.kube.timestamps import rfc3339
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.validation import invalid_kind
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.tokens import ISSUER, TokenSigner
from t9k_provider.local.apiserver.wire import Route
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause

GROUP = "authentication.k8s.io"
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 1 << 32


def token_request(objects: Objects, signer: TokenSigner, route: Route, body: Any) -> dict[str, Any]:
    namespace, name = route.namespace or "", route.name
    account = objects.get(route.res, namespace, name)
    if not isinstance(body, dict):
        raise errors.bad_request("a TokenRequest must be a JSON object")
    out: list[Cause] = []
    spec = decoding.object_field(body, "spec", "spec", out)
    audiences = decoding.string_items(spec, "audiences", "spec.audiences", out) or [ISSUER]
    seconds = decoding.int_field(spec, "expirationSeconds", "spec.expirationSeconds", out)
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    field = "spec.expirationSeconds"
    if seconds < MIN_SECONDS:
        out.append(fe.invalid(field, seconds, "may not specify a duration less than 10 minutes"))
    elif seconds > MAX_SECONDS:
        out.append(fe.invalid(field, seconds, "may not specify a duration larger than 2^32 seconds"))
    ref = decoding.object_field(spec, "boundObjectRef", "spec.boundObjectRef", out)
    if ref and ref.get("kind") != "Pod":
        out.append(fe.not_supported("spec.boundObjectRef.kind", ref.get("kind"), ["Pod"]))
    if out:
        raise invalid_kind("TokenRequest", GROUP, name, out)
    pod = None
    if ref:
        pod_name = decoding.text_field(ref, "name", "spec.boundObjectRef.name", out)
        pod = objects.store.get(("", "pods", namespace, pod_name))
        if pod is None:
            raise errors.not_found("pods", "", pod_name)
        if ref.get("uid") and ref["uid"] != pod["metadata"]["uid"]:
            raise errors.conflict(
                "pods",
                "",
                pod_name,
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                "The object might have been deleted and then recreated",
            )
        ref = {"kind": "Pod", "apiVersion": "v1", "name": pod_name, "uid": pod["metadata"]["uid"]}
    token, expires = signer.issue(namespace, account, audiences, seconds, pod)
    answered_spec: dict[str, Any] = {"audiences": audiences, "expirationSeconds": seconds}
    if ref:
        answered_spec["boundObjectRef"] = ref
    return {
        "kind": "TokenRequest",
        "apiVersion": f"{GROUP}/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
        "spec": answered_spec,
        "status": {
            "token": token,
            "expirationTimestamp": rfc3339(expires),
        },
    }
