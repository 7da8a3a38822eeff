"""A T9k task's lineage for Airflow's OpenLineage provider, which calls the operators'
``get_openlineage_facets_on_start/complete/failure`` (docs/airflow.md#lineage).

The events carry the job (run facet ``t9kJob``: kind, namespace, name, uid, replicas per type, images,
phase), what it may read and write (the volumes its containers mount, the task's checkpoint directory, its
inlets and outlets), and once the task concluded what the conclusion found (``operators.outcome``): the last
progress report (``t9kProgress``), what the replicas used (``t9kUsage``) and, for a job that did not
succeed, the class of its ending and the replica that failed first (``t9kFailure``).

The provider runs the hooks in a fork of the task's process (or a thread) that must not talk to the
supervisor or the cluster, so they read only what the task holds: the rendered manifest before the job
exists, the job as the conclusion read it after. Imported only by those hooks, never while a DAG is parsed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.providers.openlineage.extractors.manager import ExtractorManager
from attrs import define
from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import RunFacet

from t9k_provider.jobclient.identity import JobRef
from t9k_provider.jobs import load
from t9k_provider.jobs.contract import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from t9k_provider.operators.checkpoints import VOLUME, pod_specs
from t9k_provider.operators.outcome import Outcome
from t9k_provider.waiting import status as job_status


@define
class T9kJobRunFacet(RunFacet):
    """The T9k Job the task ran: ``replicas`` per replica type, every container ``images``; ``name`` and
    ``uid`` once it exists, ``namespace`` once known, ``phase`` as the task ended."""

    kind: str
    namespace: str | None
    name: str | None
    uid: str | None
    replicas: dict[str, int]
    images: list[str]
    phase: str | None = None


@define
class T9kProgressRunFacet(RunFacet):
    """The last progress report of the job's leader (XCom ``t9k_progress`` without its history): ``at`` when
    it was written, ``resumptions`` each time the training went back to a checkpoint."""

    step: float
    total: float | None
    metrics: dict[str, Any]
    at: str
    resumptions: list[dict[str, Any]]


@define
class T9kUsageRunFacet(RunFacet):
    """What the job's replicas used (XCom ``t9k_usage``): seconds per replica type and ``total``. The
    fields are camelCase, as OpenLineage's own facets are."""

    replicas: int
    replicaSeconds: dict[str, float]
    gpuSeconds: dict[str, float]


@define
class T9kFailureRunFacet(RunFacet):
    """How a job that did not succeed ended: ``ending`` its class (docs/airflow.md#how-a-task-ends; None when
    none applies), ``detail`` how the infrastructure ended it; ``failedPod`` the replica that failed first,
    with its type, index and node."""

    ending: str | None
    detail: str | None
    failedPod: str | None
    failedReplica: str | None
    node: str | None


def facets(
    manifest: Any,
    namespace: str | None,
    ref: JobRef | None,
    outcome: Outcome | None,
    inlets: Iterable[Any],
    outlets: Iterable[Any],
) -> OperatorLineage:
    """The lineage of a task: before its job exists (``ref`` None) from its rendered ``manifest`` and the
    operator's ``namespace``; after, with the job's identity; once concluded, from the job the conclusion read
    (``outcome``)."""
    # the job as read holds a status the models need not parse again
    model = load({k: v for k, v in outcome.job.items() if k != "status"} if outcome else manifest)
    job = model.to_manifest()
    where = ref.namespace if ref is not None else namespace or (job.get("metadata") or {}).get("namespace")
    inputs, outputs = volume_datasets(job, where)
    inputs += [d for d in map(ExtractorManager.convert_to_ol_dataset, inlets or ()) if d is not None]
    outputs += [d for d in map(ExtractorManager.convert_to_ol_dataset, outlets or ()) if d is not None]
    images = sorted({c["image"] for spec in pod_specs(job["spec"]) for c in spec["containers"]})
    run: dict[str, RunFacet] = {
        "t9kJob": T9kJobRunFacet(
            kind=model.KIND,
            namespace=where,
            name=ref.name if ref is not None else None,
            uid=ref.uid if ref is not None else None,
            replicas=model.spec.replica_counts(),
            images=images,
            phase=(job_status.phase(outcome.job) or None) if outcome is not None else None,
        )
    }
    if outcome is not None:
        run |= outcome_facets(outcome)
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run)


def outcome_facets(outcome: Outcome) -> dict[str, RunFacet]:
    """``t9kProgress`` after a report, ``t9kUsage`` when the pods could be read, ``t9kFailure`` unless the
    job succeeded."""
    found: dict[str, RunFacet] = {}
    progress = outcome.progress
    if progress is not None and progress.at is not None and progress.step is not None:
        found["t9kProgress"] = T9kProgressRunFacet(
            step=progress.step,
            total=progress.total,
            metrics=dict(progress.metrics),
            at=datetime.fromtimestamp(progress.at, timezone.utc).isoformat(),
            resumptions=[dict(r) for r in progress.resumptions],
        )
    if outcome.usage is not None:
        used = outcome.usage
        found["t9kUsage"] = T9kUsageRunFacet(
            replicas=used["replicas"],
            replicaSeconds=dict(used["replica_seconds"]),
            gpuSeconds=dict(used["gpu_seconds"]),
        )
    if job_status.outcome(outcome.job) != "succeeded":
        pod = next((p for p in outcome.pods or () if p["metadata"]["name"] == outcome.failed_first), None)
        labels = ((pod or {}).get("metadata") or {}).get("labels") or {}
        replica_type = labels.get(LABEL_REPLICA_TYPE)
        ending = outcome.ending
        found["t9kFailure"] = T9kFailureRunFacet(
            ending=ending.kind if ending is not None else None,
            detail=(ending.lead or None) if ending is not None else None,
            failedPod=outcome.failed_first,
            failedReplica=f"{replica_type}/{labels.get(LABEL_REPLICA_INDEX, '0')}" if replica_type else None,
            node=((pod or {}).get("spec") or {}).get("nodeName"),
        )
    return found


def volume_datasets(job: dict[str, Any], namespace: str | None) -> tuple[list[Dataset], list[Dataset]]:
    """The datasets of the volumes the job's containers mount, as (inputs, outputs), each once, in the order
    the manifest names them. A mount may be read: every one is an input but the checkpoint directory,
    which the task's own tries write and read (an output); one not mounted ``readOnly`` may be written: an
    output too. Claims are named in the job's ``namespace`` (left out while that is not known)."""
    inputs: dict[tuple[str, str], Dataset] = {}
    outputs: dict[tuple[str, str], Dataset] = {}
    for spec in pod_specs(job.get("spec")):
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        for container in spec["containers"]:
            for mount in container.get("volumeMounts") or []:
                volume = volumes.get(mount.get("name")) or {}
                dataset = volume_dataset(volume, mount.get("subPath") or "", namespace)
                if dataset is None:
                    continue
                key = (dataset.namespace, dataset.name)
                checkpoints = volume.get("name") == VOLUME
                if not checkpoints:
                    inputs.setdefault(key, dataset)
                if checkpoints or not (mount.get("readOnly") or _source(volume)[1].get("readOnly")):
                    outputs.setdefault(key, dataset)
    return list(inputs.values()), list(outputs.values())


def volume_dataset(volume: dict[str, Any], sub_path: str, namespace: str | None) -> Dataset | None:
    """A volume's dataset (OpenLineage naming): a claim ``pvc://<namespace>`` ``<claim>[/<subPath>]``, a
    host path ``file`` ``<path>[/<subPath>]``, an NFS export ``file://<server>`` ``<path>[/<subPath>]``;
    None for what holds no data (an emptyDir, a configMap, a secret...)."""
    kind, source = _source(volume)
    if kind == "persistentVolumeClaim" and namespace:
        return Dataset(namespace=f"pvc://{namespace}", name=_join(source["claimName"], sub_path))
    if kind == "hostPath":
        return Dataset(namespace="file", name=_join(source["path"], sub_path))
    if kind == "nfs":
        return Dataset(namespace=f"file://{source['server']}", name=_join(source["path"], sub_path))
    return None


def _source(volume: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A volume's source type and its fields (``(None, {})`` for a volume without one)."""
    for key, value in volume.items():
        if key != "name" and isinstance(value, dict):
            return key, value
    return None, {}


def _join(root: str, sub_path: str) -> str:
    return posixpath.normpath(posixpath.join(root, sub_path)) if sub_path else root
