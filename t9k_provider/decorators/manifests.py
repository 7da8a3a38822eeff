"""The job manifest a decorated task submits, per kind.

Every replica's training container runs the shipped function through ``runner.py``, launched as the kind's
controller expects (torchrun, DeepSpeed's launcher, plain processes), and an init container delivers the call
(see ``transport``). Restarts are left to Airflow's retries: a restarted rank cannot rejoin its peers'
collectives, so replicas never restart and the job fails as a whole. The manifest has no ``metadata.name``:
the operator names the job after the task. Built without the job models, so parsing a DAG stays cheap; the
operator validates it with them before submitting.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from t9k_provider.kube.resources import GPU

#: How the call reaches the replicas (see ``transport``): an init container writes the runner and the call
#: into an ``emptyDir`` that the training container mounts. Files, not variables: DeepSpeed's launcher starts
#: the processes of the other workers over SSH.
VOLUME = "t9k-taskflow"
MOUNT = "/t9k-taskflow"
INIT_CONTAINER = "t9k-taskflow"
RUNNER_PATH = f"{MOUNT}/runner.py"
CALL_PATH = f"{MOUNT}/call.json"
RUNNER_ENV = "T9K_TASKFLOW_RUNNER"
CALL_ENV = "T9K_TASKFLOW_CALL"
#: What the init container runs.
UNPACK = f"""import base64, os, zlib
for variable, path in (("{RUNNER_ENV}", "{RUNNER_PATH}"), ("{CALL_ENV}", "{CALL_PATH}")):
    with open(path, "wb") as out:
        out.write(zlib.decompress(base64.b64decode(os.environ[variable])))
"""
#: ``t9k_provider.jobs.API_VERSION``, spelled out: importing the job models costs DAG-parse time.
API_VERSION = "batch.tensorstack.dev/v1beta1"
#: No replica restarts; finished pods are kept at the end (rank 0's log holds the result), unfinished deleted.
RUN_POLICY = {"backoffLimit": 0, "cleanUpPolicy": "Unfinished"}
#: The kinds whose jobs have a TensorBoard (``spec.tensorboardSpec``): their decorators take ``tensorboard``.
TENSORBOARD_KINDS = ("PyTorchTrainingJob", "TensorFlowTrainingJob")
#: List items that ``manifest_override`` merges one by one, identified by the first key they all have.
MERGE_KEYS = ("type", "mountPath", "name")


class JobOptions:
    """What the decorator's arguments say about the job (manifest spellings for the nested dicts).

    Plain classes here and in ``Recipe``: both are built while a DAG file is parsed, and in the DAG
    processor's forked parsing process a ``NamedTuple`` class costs about 0.7 ms to create."""

    __slots__ = (
        "container_resources", "env", "gpus", "image", "launch", "manifest_override", "python", "run_policy",
        "scheduler", "size", "volume_mounts", "volumes",
    )  # fmt: skip

    def __init__(
        self,
        image: str,
        size: int,
        launch: Mapping[str, Any],
        python: str = "python",
        container_resources: dict[str, Any] | None = None,
        env: dict[str, Any] | list[dict[str, Any]] | None = None,
        volumes: list[dict[str, Any]] | None = None,
        volume_mounts: list[dict[str, Any]] | None = None,
        run_policy: dict[str, Any] | None = None,
        scheduler: dict[str, Any] | None = None,
        manifest_override: dict[str, Any] | None = None,
        gpus: int = 0,
    ) -> None:
        self.image, self.size, self.python = image, size, python
        self.gpus = gpus  #: GPUs per replica: the training container's nvidia.com/gpu request and limit
        self.launch = launch  #: values of the decorator's own options (``Recipe.launch_options``)
        self.container_resources, self.env = container_resources, env
        self.volumes, self.volume_mounts = volumes, volume_mounts
        self.run_policy, self.scheduler, self.manifest_override = run_policy, scheduler, manifest_override


class Recipe:
    """One decorator: its kind, the training container, and the replica type whose index 0 is rank 0."""

    __slots__ = (
        "container", "decorator", "image", "kind", "launch_options", "leader", "size_option", "spec",
        "takes_run_policy",
    )  # fmt: skip

    def __init__(
        self,
        decorator: str,
        kind: str,
        container: str,
        leader: str,
        image: str,
        size_option: str,
        launch_options: Mapping[str, Any],
        takes_run_policy: bool,
        spec: Callable[[dict[str, Any], JobOptions], dict[str, Any]],
    ) -> None:
        self.decorator, self.kind, self.container, self.leader = decorator, kind, container, leader
        self.image, self.size_option, self.takes_run_policy = image, size_option, takes_run_policy
        self.launch_options = launch_options  #: options only this decorator takes, with their defaults
        self.spec = spec

    def manifest(self, options: JobOptions) -> dict[str, Any]:
        spec = self.spec(self.pod_template(options), options)
        if options.scheduler:
            spec["scheduler"] = options.scheduler
        manifest = {"apiVersion": API_VERSION, "kind": self.kind, "spec": spec}
        if options.manifest_override:
            manifest = merge(manifest, options.manifest_override)
        return manifest

    def pod_template(self, options: JobOptions) -> dict[str, Any]:
        env = options.env or []
        if isinstance(env, Mapping):
            env = [{"name": str(k), "value": str(v)} for k, v in env.items()]
        main: dict[str, Any] = {"name": self.container, "image": options.image}
        if self.kind != "DeepSpeedJob":  # DeepSpeed's controller writes the command itself
            main |= {"command": [options.python, "-u"], "args": [RUNNER_PATH, CALL_PATH]}
        env = [*env, *self.extra_env()]
        if env:
            main["env"] = env
        resources = gpu_resources(options.container_resources, options.gpus)
        if resources:
            main["resources"] = resources
        main["volumeMounts"] = [*(options.volume_mounts or []), _files_mount()]
        unpack = {
            "name": INIT_CONTAINER,
            "image": options.image,
            "command": [options.python, "-c", UNPACK],
            "env": [
                # Both filled in when the task runs (with_call), once upstream results are known.
                {"name": RUNNER_ENV, "value": ""},
                {"name": CALL_ENV, "value": ""},
            ],
            "volumeMounts": [_files_mount()],
        }
        return {
            "spec": {
                "containers": [main],
                "volumes": [
                    *(options.volumes or []),
                    {"name": VOLUME, "emptyDir": {}},
                ],
                "initContainers": [unpack],
            }
        }

    def extra_env(self) -> list[dict[str, str]]:
        if self.kind == "GenericJob":  # the controller substitutes GenericJob's $(...) variables
            return [
                {"name": "RANK", "value": "$(rank)"},
                {"name": "WORLD_SIZE", "value": "$(replicas[worker])"},
            ]
        return []


def gpu_resources(resources: dict[str, Any] | None, gpus: int) -> dict[str, Any] | None:
    """``resources`` with ``gpus`` GPUs as request and limit (an extended resource: both must be equal)."""
    if not gpus:
        return resources
    out = copy.deepcopy(resources or {})
    for key in ("limits", "requests"):
        out[key] = {**(out.get(key) or {}), GPU: str(gpus)}
    return out


def _files_mount() -> dict[str, str]:
    return {"name": VOLUME, "mountPath": MOUNT}


def with_call(manifest: dict[str, Any], runner: str, call: str) -> dict[str, Any]:
    """The manifest with the encoded runner and call in every ``t9k-taskflow`` init container."""
    result = copy.deepcopy(manifest)
    values = {RUNNER_ENV: runner, CALL_ENV: call}
    filled = 0
    for container in _init_containers(result):
        for variable in container.get("env") or []:
            if variable.get("name") in values:
                variable["value"] = values[variable["name"]]
                filled += 1
    if not filled:
        raise ValueError(f"the manifest has no {INIT_CONTAINER} init container to carry the call")
    return result


def _init_containers(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [c for item in node for c in _init_containers(item)]
    if not isinstance(node, dict):
        return []
    found = [
        c for c in node.get("initContainers") or [] if isinstance(c, dict) and c.get("name") == INIT_CONTAINER
    ]
    return found + [
        c for key, value in node.items() if key != "initContainers" for c in _init_containers(value)
    ]


def merge(base: Any, override: Any) -> Any:
    """``override`` deep-merged over ``base``.

    Dicts merge key by key (``None`` removes a key); lists whose items all carry one of ``MERGE_KEYS``
    (replica specs by type, volume mounts by mountPath, containers, env and volumes by name) merge item by
    item, new items appended; anything else is replaced.
    """
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(override, list):
        key = _merge_key(base + override)
        if key is not None:
            merged_items = [dict(item) for item in base]
            for item in override:
                at = next((i for i, b in enumerate(merged_items) if b[key] == item[key]), None)
                if at is None:
                    merged_items.append(copy.deepcopy(item))
                else:
                    merged_items[at] = merge(merged_items[at], item)
            return merged_items
    return copy.deepcopy(override)


def _merge_key(items: list[Any]) -> str | None:
    for key in MERGE_KEYS:
        if items and all(isinstance(item, dict) and key in item for item in items):
            return key
    return None


def _replica(replica_type: str, replicas: int, template: dict[str, Any]) -> dict[str, Any]:
    return {"type": replica_type, "replicas": replicas, "restartPolicy": "Never", "template": template}


def _run_policy(options: JobOptions) -> dict[str, Any]:
    return {**RUN_POLICY, **(options.run_policy or {})}


def _generic(template: dict[str, Any], options: JobOptions) -> dict[str, Any]:
    replica = _replica("worker", options.size, template) | {"restartPolicy": {"policy": "Never"}}
    return {"replicaSpecs": [replica], "cleanUpPolicy": RUN_POLICY["cleanUpPolicy"]}


def _pytorch(template: dict[str, Any], options: JobOptions) -> dict[str, Any]:
    spec = {"replicaSpecs": [_replica("worker", options.size, template)], "runPolicy": _run_policy(options)}
    nproc = options.launch.get("nproc_per_node")
    if nproc is None and options.gpus > 1:  # one process per GPU unless nproc_per_node says otherwise
        nproc = options.gpus
    if nproc is not None:  # torchrun starts nproc processes per replica and sets their ranks
        spec["torchrunConfig"] = {"enabled": True, "procPerNode": nproc, "maxRestarts": 0}
    return spec


def _tensorflow(template: dict[str, Any], options: JobOptions) -> dict[str, Any]:
    return {"replicaSpecs": [_replica("worker", options.size, template)], "runPolicy": _run_policy(options)}


def _xgboost(template: dict[str, Any], options: JobOptions) -> dict[str, Any]:
    replicas = [_replica("master", 1, template), _replica("worker", options.size, copy.deepcopy(template))]
    return {"replicaSpecs": replicas, "runPolicy": _run_policy(options)}


def _deepspeed(template: dict[str, Any], options: JobOptions) -> dict[str, Any]:
    return {
        "worker": {"replicas": options.size, "restartPolicy": "Never", "template": template},
        "config": {
            # One rank per GPU unless slots_per_worker says otherwise.
            "slotsPerWorker": options.launch.get("slots_per_worker") or max(options.gpus, 1),
            "localRank": False,  # the launcher sets LOCAL_RANK in the environment instead
            "run": {"python": [RUNNER_PATH, CALL_PATH]},
        },
        "runPolicy": _run_policy(options),
    }


RECIPES: dict[str, Recipe] = {
    recipe.decorator: recipe
    for recipe in (
        Recipe("t9k", "GenericJob", "main", "worker", "python:3.11", "replicas", {}, False, _generic),
        Recipe(
            "t9k_pytorch",
            "PyTorchTrainingJob",
            "pytorch",
            "worker",
            "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
            "workers",
            {"nproc_per_node": None},
            True,
            _pytorch,
        ),
        Recipe(
            "t9k_tensorflow",
            "TensorFlowTrainingJob",
            "tensorflow",
            "worker",
            "tensorflow/tensorflow:2.17.0",
            "workers",
            {},
            True,
            _tensorflow,
        ),
        Recipe(
            "t9k_xgboost",
            "XGBoostTrainingJob",
            "xgboost",
            "master",
            "python:3.11",
            "workers",
            {},
            True,
            _xgboost,
        ),
        Recipe(
            "t9k_deepspeed",
            "DeepSpeedJob",
            "worker",
            "worker",
            "deepspeed/deepspeed:v072_torch112_cu117",
            "workers",
            {"slots_per_worker": None},
            True,
            _deepspeed,
        ),
    )
}
