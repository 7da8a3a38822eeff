"""The objects a workload controller makes: owner references, pods from a template, template hashes; and
the pod writes they share (write-through to the pod informer, an event per pod)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import Informer
from t9k_provider.kube.resources import PODS
from t9k_provider.local.machinery import events, workloop
from t9k_provider.local.machinery.jsonvalues import significant

#: the label naming the template revision a StatefulSet's or DaemonSet's pod was made from
REVISION_LABEL = "controller-revision-hash"
_HASH_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # rand.SafeEncodeString's alphabet: no vowels, no look-alikes


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", "apps/v1"),
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from_template(
    owner: dict[str, Any], *, name: str = "", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A pod of ``owner``'s template, controlled by it: named ``name`` or generated from the owner's name,
    with extra ``labels`` and ``spec`` fields."""
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    meta: dict[str, Any] = {
        **{k: tmeta[k] for k in ("labels", "annotations", "finalizers") if k in tmeta},
        "ownerReferences": [owner_reference(owner)],
    }
    if labels:
        meta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{owner['metadata']['name']}-"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {**(template.get("spec") or {}), **spec},
    }


def template_hash(template: dict[str, Any]) -> str:
    """A stable, label-safe hash of a pod template (upstream: fnv32a of the typed struct, so a null or empty
    field, as ``kubectl rollout undo`` sends back, hashes as an absent one)."""
    text = json.dumps(significant(template), sort_keys=True)
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    chars = []
    for _ in range(10):
        number, digit = divmod(number, len(_HASH_CHARS))
        chars.append(_HASH_CHARS[digit])
    return "".join(chars)


class PodWriter:
    """Creates and deletes an owner's pods. Each write goes straight into the pod informer, so the next sync
    counts it before the watch delivers it (a pod is never created twice); each is recorded as an event."""

    def __init__(self, kube: KubeApi, pods: Informer, component: str) -> None:
        self.kube = kube
        self.pods = pods
        self.component = component

    async def create(self, owner: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
        created = await self.kube.create(PODS, owner["metadata"].get("namespace", ""), pod)
        self.pods.observe(created)
        message = f"Created pod: {created['metadata']['name']}"
        await events.record(self.kube, owner, "SuccessfulCreate", message, component=self.component)
        return created

    async def delete(self, owner: dict[str, Any], pod: dict[str, Any]) -> None:
        """Delete ``pod`` (that very one: uid precondition); gone or replaced meanwhile is no error."""
        meta = pod["metadata"]
        try:
            deleted = await self.kube.delete(PODS, meta.get("namespace", ""), meta["name"], uid=meta["uid"])
        except ApiError as exc:
            if exc.status in (404, 409):
                return
            raise
        if deleted.get("kind") == "Pod":
            self.pods.observe(deleted)
        message = f"Deleted pod: {meta['name']}"
        await events.record(self.kube, owner, "SuccessfulDelete", message, component=self.component)


class PodOwnerController(workloop.OwnerController):
    """An owner controller whose children are pods, which it writes through a ``PodWriter`` as
    ``component``."""

    component = ""

    def __init__(self, kube: KubeApi, owners: Informer, pods: Informer) -> None:
        super().__init__(kube, owners, pods)
        self.pod_writer = PodWriter(kube, pods, self.component)
