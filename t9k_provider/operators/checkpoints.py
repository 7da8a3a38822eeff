"""``checkpoint_volume``: a volume every replica of a task's job mounts, at a directory of its own per task
instance that every try of it finds again, so a retried training resumes from its last checkpoint instead of
starting over.

The directory is the volume's ``<dag>/<run>/<task>[/<map index>]``, mounted with ``subPath`` (the kubelet
creates it), so ``T9K_CHECKPOINT_DIR`` is the same path in every replica and on every try, and no task can
overwrite another's checkpoints. ``T9K_TRY_NUMBER`` says which try runs and ``T9K_JOB_RESTARTS`` how often
the job has restarted as a whole within it after a disruption (its pod's annotation
``batch.tensorstack.dev/job-restarts`` through the downward API; empty where the controller sets none,
docs/controller.md#whole-restart): a training starts afresh only on a first try's first run, even when an
earlier run left files, and resumes otherwise.
Applied to the manifest before the job models validate it again; a manifest that uses the volume's name, its
mount path or the variables itself fails before any API call, naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from t9k_provider.jobs.contract import ANNOTATION_JOB_RESTARTS

VOLUME = "t9k-checkpoints"
MOUNT_PATH = "/t9k/checkpoints"
DIR_ENV = "T9K_CHECKPOINT_DIR"
TRY_ENV = "T9K_TRY_NUMBER"
RESTARTS_ENV = "T9K_JOB_RESTARTS"
ENV_NAMES = (DIR_ENV, TRY_ENV, RESTARTS_ENV)
#: Volume sources whose data dies with the pod (or that are read-only): a retry would find nothing there.
NOT_DURABLE = frozenset({"emptyDir", "ephemeral", "configMap", "secret", "downwardAPI", "projected"})
EXAMPLE = "{'persistentVolumeClaim': {'claimName': 'ckpt'}} or {'hostPath': {'path': '/data/ckpt'}}"


class Clash(ValueError):
    """The manifest already uses the checkpoint volume's name, mount path or variables."""


def checked_volume(volume: Any) -> dict[str, Any] | None:
    """``volume`` as the operator keeps it, or ``ValueError`` naming ``checkpoint_volume`` (at DAG parse)."""
    if volume is None:
        return None
    if not isinstance(volume, dict) or len(volume) != 1 or not isinstance(next(iter(volume.values())), dict):
        raise ValueError(f"checkpoint_volume: one volume source such as {EXAMPLE}, got {volume!r}")
    source = next(iter(volume))
    if source == "name":
        raise ValueError("checkpoint_volume: give the volume source only; the operator names the volume")
    if source in NOT_DURABLE:
        raise ValueError(
            f"checkpoint_volume: a {source} volume does not outlive its pod, so a retry would find no "
            f"checkpoint; use storage that does, such as {EXAMPLE}"
        )
    return dict(volume)


def subdirectory(identity: dict[str, str]) -> str:
    """``<dag>/<run>/<task>[/<map index>]`` of a task instance (``jobclient.identity``), each part reduced
    to characters safe in a path."""
    from t9k_provider.jobclient import identity as ident  # a task's run time only, not the DAG's parse

    map_index = int(identity[ident.MAP_INDEX])
    parts = [identity[ident.DAG_ID], identity[ident.RUN_ID], identity[ident.TASK_ID]]
    return "/".join(_safe(part) for part in [*parts, *([str(map_index)] if map_index >= 0 else [])])


def with_checkpoints(
    manifest: dict[str, Any], volume: dict[str, Any], identity: dict[str, str], try_number: int | None
) -> dict[str, Any]:
    """``manifest`` (changed in place) with ``volume`` in every pod template, mounted in each container at
    ``MOUNT_PATH`` (``subPath``: the task instance's ``subdirectory``), and the three variables set; ``Clash``
    when the manifest already uses any of them."""
    restarts = {"fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_JOB_RESTARTS}']"}}
    env = [
        {"name": DIR_ENV, "value": MOUNT_PATH},
        {"name": TRY_ENV, "value": str(try_number or 1)},
        {"name": RESTARTS_ENV, "valueFrom": restarts},
    ]
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "subPath": subdirectory(identity)}
    for spec in pod_specs(manifest.get("spec")):
        if any(v.get("name") == VOLUME for v in spec.get("volumes") or []):
            raise Clash(f"checkpoint_volume: the manifest has a volume named {VOLUME!r} already")
        spec["volumes"] = [*(spec.get("volumes") or []), {"name": VOLUME, **volume}]
        for container in spec.get("containers") or []:
            used = [m for m in container.get("volumeMounts") or [] if m.get("mountPath") == MOUNT_PATH]
            named = [e["name"] for e in container.get("env") or [] if e.get("name") in ENV_NAMES]
            if used or named:
                what = f"mounts {MOUNT_PATH}" if used else f"sets {named[0]}"
                raise Clash(f"checkpoint_volume: container {container.get('name')!r} {what} itself")
            container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
            container["env"] = [*(container.get("env") or []), *env]
    return manifest


def pod_specs(node: Any) -> list[dict[str, Any]]:
    """Every pod spec in a job's spec, whatever the kind nests it under (``replicaSpecs[].template``,
    ``worker.template``, a Beam job's templates): a dict with a ``containers`` list."""
    if isinstance(node, list):
        return [spec for item in node for spec in pod_specs(item)]
    if not isinstance(node, dict):
        return []
    if isinstance(node.get("containers"), list):
        return [node]
    return [spec for value in node.values() for spec in pod_specs(value)]


def _safe(part: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", part)
    return f"_{safe}" if safe in ("", ".", "..") else safe
