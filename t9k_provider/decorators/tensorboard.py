"""``tensorboard=True`` of ``@task.t9k_pytorch`` and ``@task.t9k_tensorflow``: the job's TensorBoard
(``spec.tensorboardSpec``) over the task's own log directory, ``T9K_TENSORBOARD_DIR`` in every replica,
where ``t9k_provider.progress.report`` writes its metrics as scalars (docs/airflow.md#tensorboard).

A T9k TensorBoard reads claims (``t9k://pvc/<claim>/<path>``). With a ``persistentVolumeClaim``
``checkpoint_volume`` the directory is ``tensorboard/`` of the task instance's checkpoint directory, so every
try writes on where the last stopped and the curves go on across retries. Otherwise (no checkpoint volume,
or one that is not a claim) it is a scratch directory of the try on the claim ``t9k-tensorboard``: the
local cluster makes it on first use; a real cluster needs a ``ReadWriteMany`` PVC of that name in the
namespace. A retry then starts new curves, which the task log says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from t9k_provider.operators import checkpoints

DIR_ENV = "T9K_TENSORBOARD_DIR"  # t9k_provider.progress.TENSORBOARD_DIR_ENV, without importing it
SCRATCH_CLAIM = "t9k-tensorboard"
SCRATCH_VOLUME = "t9k-tensorboard"
SCRATCH_MOUNT = "/t9k/tensorboard"
#: The log directory's name in the task instance's checkpoint directory.
IN_CHECKPOINTS = "tensorboard"


class Clash(ValueError):
    """The manifest sets the TensorBoard, its variable or its volume itself."""


@dataclass(frozen=True)
class LogDir:
    """Where a try's replicas write TensorBoard logs and what the TensorBoard reads."""

    fileset: str  # t9k://pvc/<claim>/<path>
    directory: str  # T9K_TENSORBOARD_DIR in the replicas
    scratch: dict[str, Any] | None  # the scratch claim's mount (subPath: the try's directory), None: none
    note: str  # what the task log says about it


def log_dir(
    checkpoint_volume: dict[str, Any] | None, identity: dict[str, str], try_number: int | None
) -> LogDir:
    """The log directory of a try of the task instance ``identity`` (``jobclient.identity``)."""
    instance = checkpoints.subdirectory(identity)
    claim = ((checkpoint_volume or {}).get("persistentVolumeClaim") or {}).get("claimName")
    if claim:
        fileset = f"t9k://pvc/{claim}/{instance}/{IN_CHECKPOINTS}"
        directory = f"{checkpoints.MOUNT_PATH}/{IN_CHECKPOINTS}"
        note = (
            f"tensorboard=True: logs in {DIR_ENV}={directory} ({fileset}), on the checkpoint volume: the "
            "curves go on across retries"
        )
        return LogDir(fileset, directory, None, note)
    path = f"{instance}/try-{try_number or 1}"
    fileset = f"t9k://pvc/{SCRATCH_CLAIM}/{path}"
    why = "no checkpoint_volume" if checkpoint_volume is None else "a checkpoint_volume that is no claim"
    note = (
        f"tensorboard=True with {why}: logs in a scratch directory of this try, {DIR_ENV}={SCRATCH_MOUNT} "
        f"({fileset}); the curves will not survive a retry (a persistentVolumeClaim checkpoint_volume "
        "keeps them)"
    )
    mount = {"name": SCRATCH_VOLUME, "mountPath": SCRATCH_MOUNT, "subPath": path}
    return LogDir(fileset, SCRATCH_MOUNT, mount, note)


def with_tensorboard(manifest: dict[str, Any], where: LogDir) -> dict[str, Any]:
    """``manifest`` (changed in place) with its TensorBoard over ``where.fileset`` and ``T9K_TENSORBOARD_DIR``
    (and the scratch claim's volume and mount) in every replica's containers; ``Clash`` when it sets any of
    them itself."""
    spec = manifest["spec"]
    if spec.get("tensorboardSpec"):
        raise Clash("tensorboard=True: the manifest has a spec.tensorboardSpec already")
    spec["tensorboardSpec"] = {"trainingLogFilesets": [where.fileset]}
    for pod in checkpoints.pod_specs(spec):
        if where.scratch is not None:
            if any(v.get("name") == SCRATCH_VOLUME for v in pod.get("volumes") or []):
                raise Clash(f"tensorboard=True: the manifest has a volume named {SCRATCH_VOLUME!r} already")
            claim = {"persistentVolumeClaim": {"claimName": SCRATCH_CLAIM}}
            pod["volumes"] = [*(pod.get("volumes") or []), {"name": SCRATCH_VOLUME, **claim}]
        for container in pod.get("containers") or []:
            if any(e.get("name") == DIR_ENV for e in container.get("env") or []):
                raise Clash(f"tensorboard=True: container {container.get('name')!r} sets {DIR_ENV} itself")
            container["env"] = [*(container.get("env") or []), {"name": DIR_ENV, "value": where.directory}]
            if where.scratch is not None:
                container["volumeMounts"] = [*(container.get("volumeMounts") or []), dict(where.scratch)]
    return manifest
