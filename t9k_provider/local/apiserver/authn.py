"""Who sent a request: the cluster token of ``STATE/token`` is the admin (``system:masters``), a
ServiceAccount token (``tokens.py``) is ``system:serviceaccount:<ns>:<name>`` while its ServiceAccount (and
bound pod) still exist, a terminating one included until a minute past its ``deletionTimestamp`` (so a pod
can still release what it holds while it shuts down); then impersonation headers, each authorized as
kube-apiserver's ``WithImpersonation`` filter does (verb ``impersonate`` on users, groups, serviceaccounts
and uids)."""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from t9k_provider.kube.timestamps import parse_timestamp
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.authz import MASTERS, Attributes, Authorizer, UserInfo, forbidden
from t9k_provider.local.apiserver.tokens import TokenSigner
from t9k_provider.local.storage.store import Store

ADMIN = UserInfo("kubernetes-admin", (MASTERS, "system:authenticated"))
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
_POD_NAME = "authentication.kubernetes.io/pod-name"
_POD_UID = "authentication.kubernetes.io/pod-uid"
_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
_EXTRA_HEADER = "impersonate-extra-"
#: kube-apiserver's ``jwt.DefaultLeeway``: objects deleted before now minus this invalidate their tokens.
DELETION_LEEWAY = 60.0


def service_account_user(
    namespace: str, name: str, uid: str = "", extra: Mapping[str, tuple[str, ...]] | None = None
) -> UserInfo:
    """The user a ServiceAccount authenticates as, with the groups kube-apiserver gives it."""
    return UserInfo(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        uid,
        extra or {},
    )


class Authenticator:
    def __init__(self, store: Store, admin_token: str, signer: TokenSigner) -> None:
        self.store = store
        self.admin_token = admin_token
        self.signer = signer

    def authenticate(self, header: str) -> UserInfo | None:
        """The user of an ``Authorization`` header, or None (401)."""
        supplied = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not supplied:
            return None
        if hmac.compare_digest(supplied.encode(), self.admin_token.encode()):
            return ADMIN
        claims = self.signer.verify(supplied)
        return self._service_account(claims) if claims is not None else None

    def _service_account(self, claims: dict[str, Any]) -> UserInfo | None:
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            return None
        namespace, account = private.get("namespace"), private.get("serviceaccount") or {}
        if not isinstance(namespace, str) or not isinstance(account, dict):
            return None
        invalid_if_deleted_before = time.time() - DELETION_LEEWAY
        stored = self.store.get(("", "serviceaccounts", namespace, str(account.get("name"))))
        if (
            stored is None
            or stored["metadata"]["uid"] != account.get("uid")
            or deleted_before(stored, invalid_if_deleted_before)
        ):
            return None
        extra: dict[str, tuple[str, ...]] = {_CREDENTIAL_ID: (f"JTI={claims.get('jti', '')}",)}
        pod_ref = private.get("pod")
        if pod_ref is not None:
            pod = self.store.get(("", "pods", namespace, str((pod_ref or {}).get("name"))))
            if (
                pod is None
                or pod["metadata"]["uid"] != pod_ref.get("uid")
                or deleted_before(pod, invalid_if_deleted_before)
            ):
                return None
            extra[_POD_NAME] = (pod_ref["name"],)
            extra[_POD_UID] = (pod_ref["uid"],)
        return service_account_user(namespace, stored["metadata"]["name"], stored["metadata"]["uid"], extra)


def deleted_before(obj: dict[str, Any], instant: float) -> bool:
    """Whether ``obj``'s ``deletionTimestamp`` (for a pod: when its grace period ends) lies before ``instant``
    (Unix seconds)."""
    stamp = obj["metadata"].get("deletionTimestamp")
    return bool(stamp) and parse_timestamp(stamp).timestamp() < instant


def impersonate(user: UserInfo, request: web.Request, authorizer: Authorizer) -> UserInfo:
    """The identity the request acts as: ``user`` itself without ``Impersonate-*`` headers."""
    headers = request.headers
    name = headers.get("Impersonate-User", "")
    groups = headers.getall("Impersonate-Group", [])
    uid = headers.get("Impersonate-Uid", "")
    extra: dict[str, tuple[str, ...]] = {}
    for key in headers:
        if key.lower().startswith(_EXTRA_HEADER):
            extra[key[len(_EXTRA_HEADER) :].lower()] = tuple(headers.getall(key))
    if not name:
        if groups or uid or extra:
            # kube-apiserver answers 500 here; bad headers are a client's error (4xx) in this server
            raise errors.bad_request("requested impersonation of groups, a uid or extras without a user")
        return user
    checks: list[Attributes] = []
    if name.startswith(SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
        namespace, account = name[len(SERVICE_ACCOUNT_PREFIX) :].split(":")
        checks.append(
            Attributes("impersonate", "", True, "", "v1", "serviceaccounts", "", namespace, account)
        )
        impersonated = service_account_user(namespace, account, uid, extra)
        if groups:
            impersonated = UserInfo(impersonated.name, (*groups, "system:authenticated"), uid, extra)
    else:
        checks.append(Attributes("impersonate", "", True, "", "v1", "users", "", "", name))
        default_groups = () if name == "system:anonymous" else ("system:authenticated",)
        impersonated = UserInfo(name, (*groups, *(g for g in default_groups if g not in groups)), uid, extra)
    checks += [Attributes("impersonate", "", True, "", "v1", "groups", "", "", g) for g in groups]
    if uid:
        checks.append(Attributes("impersonate", "", True, "authentication.k8s.io", "v1", "uids", "", "", uid))
    checks += [
        Attributes("impersonate", "", True, "authentication.k8s.io", "v1", "userextras", key, "", value)
        for key, values in extra.items()
        for value in values
    ]
    for attrs in checks:
        if not authorizer.authorize(user, attrs)[0]:
            raise forbidden(user, attrs)
    return impersonated
