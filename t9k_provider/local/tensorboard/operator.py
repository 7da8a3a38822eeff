"""The local TensorBoard operator: reconciles T9k TensorBoards into a `tensorboard` pod and its Service, and
reports where it is served (docs/local-cluster.md#tensorboard).

It runs with the node agents of a process-kubelet cluster (pods are real processes there). A claim is local
storage here, the directory ``STATE/volumes/<ns>/<claim>`` (no PVC objects are served): the operator looks
for it there, as a provisioner knows its volumes, and mounts it into the pod as a persistentVolumeClaim
volume, so the pod sees only what a real TensorBoard pod would. Readiness is the pod's own: a readiness
probe on TensorBoard's HTTP port. Deleting a TensorBoard needs nothing from here: its pod and Service carry
ownerReferences and the garbage collector removes them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.informer import OWNER_INDEX, Informer, object_key
from t9k_provider.kube.resources import PODS, SERVICES, ResourceType
from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.kube.workqueue import WorkQueue
from t9k_provider.local.kubelet.poddir import VOLUMES
from t9k_provider.local.kubelet.podenv import pod_path
from t9k_provider.local.machinery import events, workloop
from t9k_provider.local.tensorboard import board

COMPONENT = "tensorboard-operator"
#: How often a TensorBoard that waits for a claim looks again: a claim appears on disk, with no API event.
CLAIM_RESYNC = 1.0
INSTALL_HINT = "`make env` installs it, or `pip install tensorboard` into the cluster's Python environment"


def missing_tensorboard() -> board.InvalidSpec | None:
    """Why the pods cannot run `tensorboard` (not on their PATH), or None."""
    if shutil.which("tensorboard", path=pod_path()):
        return None
    return board.InvalidSpec(board.UNAVAILABLE, f"tensorboard is not on the pods' PATH ({INSTALL_HINT})")


def is_board_object(obj: dict[str, Any]) -> bool:
    return board.UID_LABEL in ((obj.get("metadata") or {}).get("labels") or {})


class TensorBoardOperator:
    def __init__(self, kube: KubeApi, boards: Informer, pods: Informer, services: Informer, state_dir: Path):
        """``pods`` must be indexed by owner (OWNER_INDEX); claims live under ``state_dir``."""
        self.kube = kube
        self.boards = boards
        self.pods = pods
        self.services = services
        self.claims = Path(state_dir) / VOLUMES
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()

    def on_board(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is not None:
            self.queue.add(object_key(new))

    def on_owned(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A TensorBoard's pod or Service changed or went away: its TensorBoard looks again."""
        obj = new or old
        if obj is None or not is_board_object(obj):
            return
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == board.TENSORBOARDS.kind and ref.get("controller"):
                self.queue.add((object_key(obj)[0], ref["name"]))

    async def run(self) -> None:
        for informer in (self.boards, self.pods, self.services):
            await informer.synced.wait()
        await workloop.run(self.queue, self._sync, "tensorboard")

    def _problem(self, tb: dict[str, Any]) -> tuple[list[board.LogSource], board.InvalidSpec | None]:
        """The directories to show, or what keeps the TensorBoard from serving them."""
        try:
            sources = board.log_sources(tb.get("spec") or {})
        except board.InvalidSpec as exc:
            return [], exc
        problem = missing_tensorboard()
        ns = tb["metadata"].get("namespace", "default")
        for source in sources:
            if problem is None and not (self.claims / ns / source.claim).is_dir():
                message = f'persistentvolumeclaim "{source.claim}" not found (file set {source.written})'
                problem = board.InvalidSpec(board.CLAIM_NOT_FOUND, message)
        return sources, problem

    async def _sync(self, key: workloop.Key) -> None:
        tb = self.boards.get(*key)
        if tb is None or tb["metadata"].get("deletionTimestamp"):
            return
        ns = tb["metadata"].get("namespace", "default")
        owned = [p for p in self.pods.by_index(OWNER_INDEX, tb["metadata"]["uid"]) if is_board_object(p)]
        sources, problem = self._problem(tb)
        wanted = None
        if problem is None and not (tb.get("spec") or {}).get("suspend"):
            wanted = board.pod(tb, sources)
            if self.services.get(ns, board.workload_name(key[1])) is None:
                await self._create(SERVICES, board.service(tb))
        live = []
        for p in owned:
            if p["metadata"].get("deletionTimestamp"):
                continue
            if wanted is None or _stale(p, wanted):
                await self._delete_pod(p)
            else:
                live.append(p)
        if wanted is not None and not live and not owned:
            await self._create(PODS, wanted)
        current = live[0] if live else None
        status = board.derive_status(board.Observed(tb, current, problem), now_rfc3339())
        await self._write_status(tb, status)
        if problem is not None and problem.reason == board.CLAIM_NOT_FOUND:
            self.queue.add_after(key, CLAIM_RESYNC)

    async def _create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        try:
            await self.kube.create(rt, obj["metadata"]["namespace"], obj)
        except ApiError as exc:
            if exc.status != 409:
                raise

    async def _delete_pod(self, p: dict[str, Any]) -> None:
        meta = p["metadata"]
        try:
            await self.kube.delete(PODS, meta.get("namespace", "default"), meta["name"], uid=meta["uid"])
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise

    async def _write_status(self, tb: dict[str, Any], status: dict[str, Any]) -> None:
        recorded = tb.get("status") or {}
        if {k: v for k, v in status.items() if v is not None} == recorded:
            return
        meta = tb["metadata"]
        ns = meta.get("namespace", "default")
        updated = await self.kube.patch(
            board.TENSORBOARDS, ns, meta["name"], {"status": status}, subresource="status"
        )
        self.boards.observe(updated)
        before = _ready_reason(recorded)
        condition = status["conditions"][0]
        after = condition["reason"]
        if before != after and (after == board.READY or after in board.PROBLEMS):
            kind = "Warning" if after in board.PROBLEMS else "Normal"
            await events.record(
                self.kube, tb, after, condition["message"], component=COMPONENT, event_type=kind
            )


def _stale(p: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """A pod made for another spec, or one that ended (evicted, deleted containers): it is replaced."""
    annotations = p["metadata"].get("annotations") or {}
    ended = (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    return ended or annotations.get(board.SPEC_HASH) != wanted["metadata"]["annotations"][board.SPEC_HASH]


def _ready_reason(status: dict[str, Any]) -> str | None:
    return next(
        (c.get("reason") for c in status.get("conditions") or [] if c.get("type") == board.READY), None
    )
