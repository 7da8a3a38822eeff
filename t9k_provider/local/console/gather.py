"""What a console page shows, read from the API server like any client: the job, its pods (by the job-uid
label the controller puts on them; a BeamJob's submit pods by their batch/v1 Job), the events about them,
the last lines of each container's log (``pods/log`` with ``tailLines``) and its TensorBoard."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from t9k_provider.jobs.constants import API_VERSION, KIND_NAMES
from t9k_provider.jobs.contract import LABEL_BATCH_JOB_NAME, LABEL_JOB_UID, batch_job_name
from t9k_provider.kube.api import ApiError, KubeApi
from t9k_provider.kube.resources import EVENTS, PODS, ResourceType
from t9k_provider.local.tensorboard.board import TENSORBOARDS

LOG_LINES = 20
#: At most this much of a container's last lines is read.
LOG_LIMIT_BYTES = 256 * 1024
MAX_EVENTS = 100
JOB_TYPES = {kind: ResourceType(API_VERSION, kind, f"{kind.lower()}s") for kind in KIND_NAMES}


def job_type(kind: str) -> ResourceType | None:
    """A T9k Job kind named in a URL: its kind (any case, ``PyTorchTrainingJob``) or its plural."""
    wanted = kind.lower()
    return next((rt for rt in JOB_TYPES.values() if wanted in (rt.kind.lower(), rt.plural)), None)


@dataclass
class Replica:
    """One pod of the job and the last lines of each of its containers (or why they cannot be read)."""

    pod: dict[str, Any]
    logs: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class TensorBoardLink:
    name: str
    url: str | None
    message: str
    failed: bool = False  # it cannot serve as specified (a change of its spec is needed)


@dataclass
class JobPage:
    job: dict[str, Any]
    replicas: list[Replica]
    events: list[dict[str, Any]]
    tensorboard: TensorBoardLink | None


async def list_jobs(kube: KubeApi) -> list[dict[str, Any]]:
    """Every T9k Job in every namespace (a kind whose CRD is not installed has none)."""
    found: list[dict[str, Any]] = []
    for rt in JOB_TYPES.values():
        try:
            items, _ = await kube.list(rt, None)
        except ApiError as exc:
            if exc.status != 404:
                raise
            continue
        found.extend(items)
    return sorted(found, key=lambda j: (j["metadata"].get("namespace", ""), j["kind"], j["metadata"]["name"]))


async def job_page(kube: KubeApi, rt: ResourceType, namespace: str, name: str) -> JobPage:
    """The page's data; ApiError(404) when there is no such job."""
    job = await kube.get(rt, namespace, name)
    pods = await _pods(kube, job)
    replicas = [Replica(p) for p in pods]
    reads = [_tail(kube, r, c) for r in replicas for c in _containers(r.pod)]
    await asyncio.gather(*reads)
    return JobPage(job, replicas, await _events(kube, job, pods), await _tensorboard(kube, job))


async def _pods(kube: KubeApi, job: dict[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    namespace = meta.get("namespace", "default")
    selector = f"{LABEL_JOB_UID}={meta['uid']}"
    if job["kind"] == "BeamJob":
        selector = f"{LABEL_BATCH_JOB_NAME}={batch_job_name(meta['name'])}"
    pods, _ = await kube.list(PODS, namespace, label_selector=selector)
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def _containers(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [c["name"] for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]]


async def _tail(kube: KubeApi, replica: Replica, container: str) -> None:
    meta = replica.pod["metadata"]
    try:
        text = await kube.read_log(
            meta.get("namespace", "default"), meta["name"], container, limit_bytes=LOG_LIMIT_BYTES,
            tail_lines=LOG_LINES, timestamps=False,
        )  # fmt: skip
    except ApiError as exc:  # a container not started yet: the server's Status message says so
        replica.logs[container] = [f"(no log: {exc.message})"]
        return
    replica.logs[container] = text.splitlines()[-LOG_LINES:]


def _when(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


async def _events(kube: KubeApi, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest events about the job and its pods, oldest first."""
    about = {(job["kind"], job["metadata"]["name"])} | {("Pod", p["metadata"]["name"]) for p in pods}
    items, _ = await kube.list(EVENTS, job["metadata"].get("namespace", "default"))
    mine = [e for e in items if ((e.get("involvedObject") or {}).get("kind"), _involved(e)) in about]
    return sorted(mine, key=_when)[-MAX_EVENTS:]


def _involved(event: dict[str, Any]) -> str | None:
    return (event.get("involvedObject") or {}).get("name")


async def _tensorboard(kube: KubeApi, job: dict[str, Any]) -> TensorBoardLink | None:
    """The job's TensorBoard (``status.tensorboard`` names it) and where it is served, when it has one."""
    dependent = ((job.get("status") or {}).get("tensorboard") or {}).get("dependent") or {}
    if not dependent.get("name"):
        return None
    name = dependent["name"]
    found = await tensorboard(kube, job["metadata"].get("namespace", "default"), name)
    return found or TensorBoardLink(name, None, "not created yet")


async def tensorboard(kube: KubeApi, namespace: str, name: str) -> TensorBoardLink | None:
    """Where the TensorBoard ``namespace/name`` is served (its ``status.url`` while it is Ready), else why
    not (its Ready condition's message); None when there is no such TensorBoard."""
    try:
        tb = await kube.get(TENSORBOARDS, namespace, name)
    except ApiError as exc:
        if exc.status != 404:
            raise
        return None
    status = tb.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    url = status.get("url") if ready.get("status") == "True" else None
    message = str(ready.get("message") or status.get("phase") or "not ready yet")
    return TensorBoardLink(name, url, message, failed=status.get("phase") == "Failed")
