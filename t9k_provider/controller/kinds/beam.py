"""BeamJob: a FlinkCluster `<job>-flinkcluster`, then a batch/v1 Job `<job>-batchjob` submitting the pipeline
once the cluster runs; the job's outcome is the submit Job's (docs/controller.md#beamjob).

Decision (docs/controller.md#decisions-on-the-open-questions, question 7): the submit container gets the
Flink endpoint both as env `FLINK_MASTER` (`<job>-flinkcluster-jobmanager:8081`, the flink-operator's
JobManager Service and REST port) and, unless the user already passed them, as the Beam pipeline options
`--runner=FlinkRunner --flink_master=<endpoint>`.
"""

from __future__ import annotations

import copy
from typing import Any

from t9k_provider.controller.engine.decision import ChildType, Delete
from t9k_provider.controller.engine.plan import Standing
from t9k_provider.jobs.beam import BeamJob
from t9k_provider.jobs.contract import batch_job_name

from .context import JobContext

FLINKCLUSTERS = ChildType("flinkoperator.k8s.io/v1beta1", "FlinkCluster", "flinkclusters")
BATCH_JOBS = ChildType("batch/v1", "Job", "jobs")
JOBMANAGER_REST_PORT = 8081


def flink_endpoint(job_name: str) -> str:
    return f"{job_name}-flinkcluster-jobmanager:{JOBMANAGER_REST_PORT}"


def build_flinkcluster(typed: BeamJob, ctx: JobContext) -> dict[str, Any]:
    name = f"{ctx.name}-flinkcluster"
    written = typed.spec.flink_cluster_template.metadata or {}
    meta = ctx.meta(name)
    meta["labels"] = {**(written.get("labels") or {}), **meta["labels"]}
    if written.get("annotations"):
        meta["annotations"] = dict(written["annotations"])
    return {
        "apiVersion": FLINKCLUSTERS.api_version,
        "kind": FLINKCLUSTERS.kind,
        "metadata": meta,
        "spec": copy.deepcopy(typed.spec.flink_cluster_template.spec),
    }


def _with_endpoint(container: dict[str, Any], endpoint: str) -> None:
    env = container.setdefault("env", [])
    if not any(e.get("name") == "FLINK_MASTER" for e in env):
        env.append({"name": "FLINK_MASTER", "value": endpoint})
    written = [*(container.get("command") or []), *(container.get("args") or [])]
    extra = []
    if not any(str(a).startswith("--runner") for a in written):
        extra.append("--runner=FlinkRunner")
    if not any(str(a).startswith("--flink_master") for a in written):
        extra.append(f"--flink_master={endpoint}")
    if extra:
        container["args"] = [*(container.get("args") or []), *extra]


def build_batchjob(typed: BeamJob, ctx: JobContext) -> dict[str, Any]:
    name = batch_job_name(ctx.name)
    template = copy.deepcopy(typed.spec.job_template)
    written = template.get("metadata") or {}
    meta = ctx.meta(name)
    meta["labels"] = {**(written.get("labels") or {}), **meta["labels"]}
    spec = template.get("spec") or {}
    pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Never")
    containers = pod_spec.get("containers") or []
    if containers:
        _with_endpoint(containers[0], flink_endpoint(ctx.name))
    return {"apiVersion": BATCH_JOBS.api_version, "kind": BATCH_JOBS.kind, "metadata": meta, "spec": spec}


def _cluster_reason(cluster: dict[str, Any] | None) -> str | None:
    """Why the cluster is not running, as the local flink-operator says it (its Ready condition)."""
    for cond in ((cluster or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True" and cond.get("message"):
            return str(cond["message"])
    return None


def _batch_outcome(batch: dict[str, Any] | None) -> str | None:
    for cond in (batch or {}).get("status", {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "Succeeded" if cond["type"] == "Complete" else "Failed"
    return None


def drive_beam(typed: BeamJob, ctx: JobContext, children: list[dict[str, Any]]) -> Standing:
    """Where the job stands, read from its FlinkCluster and submit Job; cleanUpCluster deletes the cluster."""
    name = ctx.name
    by_key = {(c.get("kind"), (c.get("metadata") or {}).get("name")): c for c in children}
    cluster = by_key.get((FLINKCLUSTERS.kind, f"{name}-flinkcluster"))
    batch = by_key.get((BATCH_JOBS.kind, batch_job_name(name)))
    creates = []
    if cluster is None:
        creates.append(build_flinkcluster(typed, ctx))
    cluster_state = ((cluster or {}).get("status") or {}).get("state")
    running = cluster_state == "Running"
    if batch is None and running:
        creates.append(build_batchjob(typed, ctx))
    outcome = _batch_outcome(batch)
    active = bool(((batch or {}).get("status") or {}).get("active"))
    stopped_early = batch is None and cluster_state == "Stopped"

    desired: dict[str, tuple[str, str, str]] = {
        "ClusterRunning": ("True", "Running", "The Flink cluster is running.")
        if running
        else ("False", cluster_state or "Creating", "The Flink cluster is not running."),
    }
    if stopped_early:
        reason = _cluster_reason(cluster)
        phase = "Failed"
        message = "The Flink cluster stopped before the pipeline was submitted" + (
            f": {reason}" if reason else "."
        )
        desired.update(Completed=("False", "Failed", message), Failed=("True", "ClusterStopped", message))
    elif outcome == "Succeeded":
        phase, message = "Succeeded", "The Beam pipeline's submit Job completed."
        desired.update(JobRunning=("False", "Succeeded", message), Completed=("True", "Succeeded", message))
    elif outcome == "Failed":
        phase, message = "Failed", "The Beam pipeline's submit Job failed."
        desired.update(
            JobRunning=("False", "Failed", message),
            Completed=("False", "Failed", message),
            Failed=("True", "Failed", message),
        )
    elif batch is not None:
        phase = "Running"
        desired["JobRunning"] = (
            ("True", "Running", "The Beam pipeline is being submitted and run.")
            if active
            else ("False", "Pending", "The submit Job has no running pod yet.")
        )
    else:
        phase = "Initializing"
    fields: dict[str, Any] = {}
    if batch is not None:
        fields["jobStatus"] = [
            {
                "phase": outcome or ("Running" if active else "Pending"),
                "reference": {"name": batch["metadata"]["name"], "uid": batch["metadata"].get("uid")},
            }
        ]
    job_id = (((cluster or {}).get("status") or {}).get("components") or {}).get("job", {}).get("id")
    if job_id:
        fields["jobURL"] = (
            f"/t9k/flink-cluster/{name}-flinkcluster/namespace/{ctx.job['metadata'].get('namespace')}"
            f"/#/job/{job_id}/overview/"
        )
    cleanup = ()
    if cluster is not None and typed.spec.run_policy.clean_up_cluster:
        meta = cluster["metadata"]
        if not meta.get("deletionTimestamp"):
            cleanup = (
                Delete(FLINKCLUSTERS.api_version, FLINKCLUSTERS.kind, meta["name"], uid=meta.get("uid")),
            )
    return Standing(phase, desired, tuple(creates), fields, cleanup)
