"""Bad manifests are rejected with one ManifestError whose first line names the field path."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.jobs import ManifestError, load

DELETE = object()

API = "batch.tensorstack.dev/v1beta1"
_FIXTURES = Path(__file__).parent / "fixtures"


def _template(name: str = "main", **extra: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": name, "image": "busybox", **extra}]}}


BASES: dict[str, dict[str, Any]] = {
    "GenericJob": {
        "apiVersion": API,
        "kind": "GenericJob",
        "metadata": {"name": "gj"},
        "spec": {
            "successRules": [{"master": [0]}],
            "failureRules": [{"worker": [0, 1]}],
            "service": {"ports": [{"name": "http", "port": 2222}]},
            "replicaSpecs": [
                {"type": "master", "template": _template()},
                {"type": "worker", "replicas": 2, "template": _template()},
            ],
        },
    },
    "PyTorchTrainingJob": {
        "apiVersion": API,
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "pj"},
        "spec": {
            "torchrunConfig": {"enabled": True, "procPerNode": "gpu"},
            "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 4},
            "replicaSpecs": [{"type": "worker", "replicas": 2, "template": _template("pytorch")}],
        },
    },
    "TensorFlowTrainingJob": {
        "apiVersion": API,
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": "tj"},
        "spec": {
            "replicaSpecs": [
                {"type": "chief", "template": _template("tensorflow")},
                {"type": "worker", "replicas": 2, "template": _template("tensorflow")},
            ],
        },
    },
    "XGBoostTrainingJob": {
        "apiVersion": API,
        "kind": "XGBoostTrainingJob",
        "metadata": {"name": "xj"},
        "spec": {
            "replicaSpecs": [
                {"type": "master", "template": _template("xgboost")},
                {"type": "worker", "replicas": 2, "template": _template("xgboost")},
            ],
        },
    },
    "MPIJob": {
        "apiVersion": API,
        "kind": "MPIJob",
        "metadata": {"name": "mj"},
        "spec": {"worker": {"replicas": 2, "cmd": ["./a.out"], "template": _template("mpi-worker")}},
    },
    "MPIJob/replicaSpecs": {
        "apiVersion": API,
        "kind": "MPIJob",
        "metadata": {"name": "mj"},
        "spec": {
            "mpiConfig": {"script": ["./a.out"]},
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": _template("worker")},
                {"type": "launcher", "template": {}},
            ],
        },
    },
    "ColossalAIJob": {
        "apiVersion": API,
        "kind": "ColossalAIJob",
        "metadata": {"name": "caij"},
        "spec": {
            "launcher": {"image": "colossalai"},
            "worker": {"replicas": 2, "command": ["train.py"], "template": _template("worker")},
        },
    },
    "ColossalAIJob/replicaSpecs": {
        "apiVersion": API,
        "kind": "ColossalAIJob",
        "metadata": {"name": "caij"},
        "spec": {
            "torchConfig": {"script": ["train.py"]},
            "replicaSpecs": [
                {"type": "launcher", "template": _template("launcher")},
                {"type": "worker", "replicas": 2, "template": _template("worker")},
            ],
        },
    },
    "DeepSpeedJob": {
        "apiVersion": API,
        "kind": "DeepSpeedJob",
        "metadata": {"name": "dj"},
        "spec": {
            "config": {"run": {"python": ["train.py"]}, "slotsPerWorker": 1},
            "worker": {"replicas": 2, "template": _template("worker")},
        },
    },
    "BeamJob": {
        "apiVersion": API,
        "kind": "BeamJob",
        "metadata": {"name": "bj"},
        "spec": {
            "flinkClusterTemplate": {"spec": {"flinkVersion": "1.10.1"}},
            "jobTemplate": {"spec": {"template": _template("submit-job", restartPolicy="OnFailure")}},
        },
    },
}

LONG = "a" * 56

# (base, {path: new value or DELETE}, expected first path, words the message must contain)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # GenericJob
    ("GenericJob", {"spec.replicaSpecs": []}, "spec.replicaSpecs", "at least 1"),
    (
        "GenericJob",
        {"spec.replicaSpecs[1].replicas": 0},
        "spec.replicaSpecs[1].replicas",
        "greater than or equal to 1",
    ),
    ("GenericJob", {"spec.replicaSpecs[1].replicas": "2"}, "spec.replicaSpecs[1].replicas", "valid integer"),
    (
        "GenericJob",
        {"spec.replicaSpecs[0].restartPolicy": {"policy": "ExitCode"}},
        "spec.replicaSpecs[0].restartPolicy.policy",
        "'Never', 'OnFailure' or 'Always'",
    ),
    (
        "GenericJob",
        {"spec.replicaSpecs[0].restartPolicy": "OnFailure"},
        "spec.replicaSpecs[0].restartPolicy",
        "dictionary",
    ),
    (
        "GenericJob",
        {"spec.successRules": [{"chief": [0]}]},
        "spec.successRules[0].chief",
        "no replica type 'chief'",
    ),
    (
        "GenericJob",
        {"spec.failureRules": [{"worker": [0, 2]}]},
        "spec.failureRules[0].worker[1]",
        "rank 2 does not exist",
    ),
    (
        "GenericJob",
        {"spec.successRules": [{"worker": ["first"]}]},
        "spec.successRules[0].worker[0]",
        "integer",
    ),
    ("GenericJob", {"spec.successRules": [{}]}, "spec.successRules[0]", "at least one replica"),
    ("GenericJob", {"spec.replicaSpecs[1].type": "master"}, "spec.replicaSpecs[1].type", "listed twice"),
    (
        "GenericJob",
        {"spec.replicaSpecs[0].template": {"spec": {"containers": []}}},
        "spec.replicaSpecs[0].template.spec.containers",
        "at least one container",
    ),
    (
        "GenericJob",
        {"spec.replicaSpecs[0].template": {"spec": {"containers": [{"image": "x"}]}}},
        "spec.replicaSpecs[0].template.spec.containers[0].name",
        "needs a name",
    ),
    ("GenericJob", {"spec.replicaSpecs[0].replica": 3}, "spec.replicaSpecs[0].replica", "unknown field"),
    ("GenericJob", {"spec.cleanUpPolicy": "Some"}, "spec.cleanUpPolicy", "'All', 'Unfinished' or 'None'"),
    (
        "GenericJob",
        {"spec.service.ports[1]": {"name": "http", "port": 80}},
        "spec.service.ports[1].name",
        "duplicate port name",
    ),
    ("GenericJob", {"spec.service.ports[0].port": 70000}, "spec.service.ports[0].port", "65535"),
    ("GenericJob", {"metadata.name": "Bad_Name"}, "metadata.name", "DNS-1035"),
    ("GenericJob", {"metadata.name": "a" * 64}, "metadata.name", "limit is 63"),
    (
        "GenericJob",
        {"spec.runMode": {"debug": {"enabled": True, "replicaSpecs": [{"type": "ps"}]}}},
        "spec.runMode.debug.replicaSpecs[0].type",
        "no replica type 'ps'",
    ),
    (
        "GenericJob",
        {"spec.scheduler": {"t9kScheduler": {"queue": "q", "priority": 101}}},
        "spec.scheduler.t9kScheduler.priority",
        "less than or equal to 100",
    ),
    (
        "GenericJob",
        {"spec.scheduler": {"t9kScheduler": {"priority": 1}}},
        "spec.scheduler.t9kScheduler.queue",
        "field required",
    ),
    (
        "GenericJob",
        {"spec.runMode": {"debug": {"enable": True, "enabled": True}}},
        "spec.runMode.debug",
        "keep only 'enabled'",
    ),
    (
        "GenericJob",
        {"spec.replicaSpecs[1].type": "Worker_1"},
        "spec.replicaSpecs[1].type",
        "lower-case letters",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.replicaSpecs[0].type": "node.a"},
        "spec.replicaSpecs[0].type",
        "names pods",
    ),
    (
        "DeepSpeedJob",
        {"spec.config.run": {"python": "a.py", "Module": "m"}},
        "spec.config.run",
        "got python, module",
    ),
    (
        "DeepSpeedJob",
        {"spec.scheduler": {"t9kScheduler": {"Queue": "q", "queue": "q"}}},
        "spec.scheduler.t9kScheduler",
        "keep only 'queue'",
    ),
    (
        "GenericJob",
        {"spec.successRules": [{"worker": [-1]}]},
        "spec.successRules[0].worker[0]",
        "non-negative",
    ),
    (
        "GenericJob",
        {"spec.service.ports[0].targetPort": 1.5},
        "spec.service.ports[0].targetPort",
        "a valid integer or a valid string",
    ),
    ("GenericJob", {"spec.clean_up_policy": "All"}, "spec.clean_up_policy", "camelCase"),
    # PyTorchTrainingJob
    (
        "PyTorchTrainingJob",
        {"spec.replicaSpecs[0].replicas": -1},
        "spec.replicaSpecs[0].replicas",
        "greater than",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.replicaSpecs[0].restartPolicy": "Sometimes"},
        "spec.replicaSpecs[0].restartPolicy",
        "'ExitCode'",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.torchrunConfig.enabled": False},
        "spec.elastic.enabled",
        "torchrunConfig.enabled",
    ),
    ("PyTorchTrainingJob", {"spec.elastic.minReplicas": 5}, "spec.elastic", "greater than maxReplicas"),
    (
        "PyTorchTrainingJob",
        {"spec.elastic.maxReplicas": DELETE},
        "spec.elastic",
        "needs minReplicas and maxReplicas",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.torchrunConfig.procPerNode": "many"},
        "spec.torchrunConfig.procPerNode",
        '"gpu"',
    ),
    (
        "PyTorchTrainingJob",
        {"spec.torchrunConfig.rdzvBackend": "zk"},
        "spec.torchrunConfig.rdzvBackend",
        "c10d",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.runPolicy": {"backoffLimit": -1}},
        "spec.runPolicy.backoffLimit",
        "greater",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.runPolicy": {"activeDeadlineSeconds": 0}},
        "spec.runPolicy.activeDeadlineSeconds",
        "greater",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.tensorboardSpec": {"logdir": "x"}},
        "spec.tensorboardSpec.logdir",
        "unknown field",
    ),
    (
        "PyTorchTrainingJob",
        {"spec.replicaSpecs[0].scalingWeight": -1},
        "spec.replicaSpecs[0].scalingWeight",
        "greater",
    ),
    ("PyTorchTrainingJob", {"spec.replicaSpecs": DELETE}, "spec.replicaSpecs", "field required"),
    (
        "PyTorchTrainingJob",
        {"metadata.name": LONG, "spec.elastic.maxReplicas": 1000},
        "metadata.name",
        "-worker-999",
    ),
    # TensorFlowTrainingJob
    (
        "TensorFlowTrainingJob",
        {"spec.replicaSpecs[1].template": _template("tf")},
        "spec.replicaSpecs[1].template.spec.containers",
        'TensorFlowTrainingJob needs a container named "tensorflow"',
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.replicaSpecs[1].type": "master"},
        "spec.replicaSpecs[1].type",
        "chief, worker, ps, evaluator",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.replicaSpecs[0].replicas": 2},
        "spec.replicaSpecs[0].replicas",
        "exactly 1 replica",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.replicaSpecs[0].template": {"containers": []}},
        "spec.replicaSpecs[0].template.spec",
        "needs a `spec`",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.replicaSpecs[0].template": {"spec": {"containers": {"name": "tensorflow"}}}},
        "spec.replicaSpecs[0].template.spec.containers",
        "at least one container",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.replicaSpecs[0].restartPolicy": {"policy": "Never"}},
        "spec.replicaSpecs[0].restartPolicy",
        "'Never', 'OnFailure', 'Always' or 'ExitCode'",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.tensorboardSpec": {"trainingLogFilesets": "t9k://pvc/a"}},
        "spec.tensorboardSpec.trainingLogFilesets",
        "valid list",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.runPolicy": {"cleanUpPolicy": "Everything"}},
        "spec.runPolicy.cleanUpPolicy",
        "'Unfinished'",
    ),
    (
        "TensorFlowTrainingJob",
        {"spec.runMode": {"pause": {"enabled": True, "resumeSpecs": [{"type": "ps"}]}}},
        "spec.runMode.pause.resumeSpecs[0].type",
        "no replica type 'ps'",
    ),
    ("TensorFlowTrainingJob", {"apiVersion": "batch.tensorstack.dev/v1"}, "apiVersion", "v1beta1"),
    ("TensorFlowTrainingJob", {"kind": "TensorflowTrainingJob"}, "kind", "unknown kind"),
    ("TensorFlowTrainingJob", {"spec.elastic": {"enabled": True}}, "spec.elastic", "unknown field"),
    # XGBoostTrainingJob
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[0].type": "worker", "spec.replicaSpecs[1].type": "ps"},
        "spec.replicaSpecs[1].type",
        "master, worker",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs": [{"type": "worker", "template": _template("xgboost")}]},
        "spec.replicaSpecs",
        "needs a replica spec of type master",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[0].replicas": 2},
        "spec.replicaSpecs[0].replicas",
        "exactly 1",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[0].template": _template("main")},
        "spec.replicaSpecs[0].template.spec.containers",
        'needs a container named "xgboost"',
    ),
    (
        "XGBoostTrainingJob",
        {"spec.tensorboardSpec": {"image": "tb"}},
        "spec.tensorboardSpec",
        "unknown field",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[1].type": "master"},
        "spec.replicaSpecs[1].type",
        "listed twice",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[1].replicas": "two"},
        "spec.replicaSpecs[1].replicas",
        "integer",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[1].restartPolicy": "never"},
        "spec.replicaSpecs[1].restartPolicy",
        "'Never'",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.runMode": {"debug": {"enabled": "yes"}}},
        "spec.runMode.debug.enabled",
        "valid boolean",
    ),
    (
        "XGBoostTrainingJob",
        {"metadata.name": DELETE, "metadata.generateName": "x" * 55 + "-"},
        "metadata.generateName",
        "child object name",
    ),
    (
        "XGBoostTrainingJob",
        {"spec.replicaSpecs[1].type": "Worker"},
        "spec.replicaSpecs[1].type",
        "master, worker",
    ),
    # MPIJob, documented shape
    (
        "MPIJob",
        {"spec.worker.template": _template("worker")},
        "spec.worker.template.spec.containers",
        'MPIJob needs a container named "mpi-worker"',
    ),
    ("MPIJob", {"spec.worker.cmd": DELETE}, "spec.worker.cmd", "field required"),
    ("MPIJob", {"spec.worker.cmd": []}, "spec.worker.cmd", "at least 1"),
    ("MPIJob", {"spec.replicaSpecs": []}, "spec.replicaSpecs", "cannot be combined with worker"),
    ("MPIJob", {"spec.worker": DELETE}, "spec", "set either worker"),
    ("MPIJob", {"spec.mca": {"btl": 1}}, "spec.mca.btl", "valid string"),
    (
        "MPIJob",
        {"spec.worker.processRecovery": {"enabled": True, "limit": -1}},
        "spec.worker.processRecovery.limit",
        "greater",
    ),
    ("MPIJob", {"spec.worker.extraMPIArgs": "-N 3"}, "spec.worker.extraMPIArgs", "valid list"),
    (
        "MPIJob",
        {
            "spec.worker.template": _template(
                "mpi-worker", volumeMounts=[{"name": "k", "mountPath": "/root/.ssh"}]
            )
        },
        "spec.worker.template.spec.containers[0].volumeMounts[0].mountPath",
        "reserved",
    ),
    ("MPIJob", {"spec.ssh": {"authMountPath": "/root/.ssh"}}, "spec.ssh.authMountPath", "unknown field"),
    ("MPIJob", {"metadata.name": "m" * 61}, "metadata.name", "-launcher"),
    # MPIJob, replicaSpecs shape
    ("MPIJob/replicaSpecs", {"spec.mpiConfig": DELETE}, "spec.mpiConfig", "needs mpiConfig"),
    ("MPIJob/replicaSpecs", {"spec.mpiConfig.script": []}, "spec.mpiConfig.script", "at least 1"),
    (
        "MPIJob/replicaSpecs",
        {"spec.replicaSpecs[1].type": "master"},
        "spec.replicaSpecs[1].type",
        "launcher, worker",
    ),
    (
        "MPIJob/replicaSpecs",
        {"spec.replicaSpecs[1].replicas": 2},
        "spec.replicaSpecs[1].replicas",
        "exactly 1 launcher",
    ),
    (
        "MPIJob/replicaSpecs",
        {"spec.replicaSpecs[0].template": _template("mpi")},
        "spec.replicaSpecs[0].template.spec.containers",
        'needs a container named "worker"',
    ),
    (
        "MPIJob/replicaSpecs",
        {"spec.replicaSpecs[0].type": "launcher"},
        "spec.replicaSpecs[1].type",
        "listed twice",
    ),
    ("MPIJob/replicaSpecs", {"spec.mpiHome": "/usr"}, "spec.replicaSpecs", "cannot be combined with mpiHome"),
    (
        "MPIJob/replicaSpecs",
        {"spec.replicaSpecs[0].restartPolicy": {"policy": "OnFailure", "limit": -2}},
        "spec.replicaSpecs[0].restartPolicy.limit",
        "greater",
    ),
    # ColossalAIJob, documented shape
    (
        "ColossalAIJob",
        {"spec.worker.template": _template("main")},
        "spec.worker.template.spec.containers",
        'ColossalAIJob needs a container named "worker"',
    ),
    ("ColossalAIJob", {"spec.worker.command": DELETE}, "spec.worker.command", "field required"),
    ("ColossalAIJob", {"spec.launcher": DELETE}, "spec.launcher", "needs launcher"),
    ("ColossalAIJob", {"spec.launcher.image": DELETE}, "spec.launcher.image", "field required"),
    ("ColossalAIJob", {"spec.worker.procPerWorker": 0}, "spec.worker.procPerWorker", "greater"),
    (
        "ColossalAIJob",
        {"spec.worker.torchArgs": ["--standalone", "--rdzv_conf", "timeout=900,join_timeout=60"]},
        "spec.worker.torchArgs[1]",
        "joins torchrun arguments with ','",
    ),
    (
        "ColossalAIJob",
        {"spec.worker.torchArgs": ["--max_restarts=1", "--rdzv_conf=timeout=900"]},
        "spec.worker.torchArgs[1]",
        "no '=' in its value",
    ),
    (
        "ColossalAIJob/replicaSpecs",
        {"spec.torchConfig.extraArgs": ["--rdzv_conf", "timeout=900"]},
        "spec.torchConfig.extraArgs[0]",
        "no '=' in its value",
    ),
    ("ColossalAIJob", {"spec.torchConfig": {"script": ["a.py"]}}, "spec.torchConfig", "cannot be combined"),
    (
        "ColossalAIJob",
        {"spec.runPolicy": {"cleanUpWorkers": "all"}},
        "spec.runPolicy.cleanUpWorkers",
        "valid boolean",
    ),
    (
        "ColossalAIJob",
        {"spec.ssh": {"sshAuthMountPath": "/root/.ssh"}},
        "spec.ssh.sshAuthMountPath",
        "unknown field",
    ),
    (
        "ColossalAIJob",
        {
            "spec.ssh": {"authMountPath": "/home/u/.ssh"},
            "spec.worker.template": _template(
                "worker", volumeMounts=[{"name": "h", "mountPath": "/home/u/.ssh/keys"}]
            ),
        },
        "spec.worker.template.spec.containers[0].volumeMounts[0].mountPath",
        "reserved",
    ),
    (
        "ColossalAIJob",
        {"spec.runMode": {"debug": {"enabled": True, "replicaSpecs": [{"type": "master"}]}}},
        "spec.runMode.debug.replicaSpecs[0].type",
        "no replica type 'master'",
    ),
    ("ColossalAIJob", {"spec.launcher.env": [1]}, "spec.launcher.env[0]", "dictionary"),
    # ColossalAIJob, replicaSpecs shape
    ("ColossalAIJob/replicaSpecs", {"spec.torchConfig": DELETE}, "spec.torchConfig", "needs torchConfig"),
    (
        "ColossalAIJob/replicaSpecs",
        {"spec.replicaSpecs[0].replicas": 3},
        "spec.replicaSpecs[0].replicas",
        "exactly 1 launcher",
    ),
    (
        "ColossalAIJob/replicaSpecs",
        {"spec.replicaSpecs": [{"type": "launcher"}]},
        "spec.replicaSpecs",
        "type worker",
    ),
    (
        "ColossalAIJob/replicaSpecs",
        {"spec.torchConfig.procPerWorker": 0},
        "spec.torchConfig.procPerWorker",
        "greater",
    ),
    # DeepSpeedJob
    (
        "DeepSpeedJob",
        {"spec.config.run": {"python": 5}},
        "spec.config.run.python",
        "Input should be a valid string or a valid list",
    ),
    (
        "DeepSpeedJob",
        {"spec.config.run": {}},
        "spec.config.run",
        "exactly one of python, module or exec (none",
    ),
    ("DeepSpeedJob", {"spec.config.run.exec": "./a"}, "spec.config.run", "got python, exec"),
    ("DeepSpeedJob", {"spec.config.run.python": []}, "spec.config.run.python", "must name a program"),
    (
        "DeepSpeedJob",
        {"spec.config.otherArgs": ["--no_ssh_check", "--no_local_rank"]},
        "spec.config.otherArgs[1]",
        "localRank",
    ),
    ("DeepSpeedJob", {"spec.config.otherArgs": ["--module"]}, "spec.config.otherArgs[0]", "run.module"),
    ("DeepSpeedJob", {"spec.config.otherArgs": ["--no_python"]}, "spec.config.otherArgs[0]", "run.exec"),
    (
        "DeepSpeedJob",
        {"spec.config.otherArgs": ["--autotuning=tune"]},
        "spec.config.otherArgs[0]",
        "autotune",
    ),
    (
        "DeepSpeedJob",
        {"spec.config.otherArgs": ["--launcher", "openmpi"]},
        "spec.config.otherArgs[0]",
        "pdsh",
    ),
    (
        "DeepSpeedJob",
        {
            "spec.worker.template": _template(
                "worker", volumeMounts=[{"name": "h", "mountPath": "/t9k/hostfile"}]
            )
        },
        "spec.worker.template.spec.containers[0].volumeMounts[0].mountPath",
        "reserved",
    ),
    (
        "DeepSpeedJob",
        {
            "spec.worker.template": _template(
                "worker", volumeMounts=[{"name": "e", "mountPath": "/root/.deepspeed_env"}]
            )
        },
        "spec.worker.template.spec.containers[0].volumeMounts[0].mountPath",
        "/root/.deepspeed_env",
    ),
    ("DeepSpeedJob", {"spec.config.autotune": "yes"}, "spec.config.autotune", "'none', 'run' or 'tune'"),
    ("DeepSpeedJob", {"spec.worker.replicas": 0}, "spec.worker.replicas", "greater"),
    ("DeepSpeedJob", {"spec.config": DELETE}, "spec.config", "field required"),
    ("DeepSpeedJob", {"spec.config.slotPerWorker": 2}, "spec.config", "keep only 'slotsPerWorker'"),
    ("DeepSpeedJob", {"spec.elastic": {"enabled": True, "maxReplicas": 3}}, "spec.elastic", "minReplicas"),
    ("DeepSpeedJob", {"spec.worker.restartPolicy": "Retry"}, "spec.worker.restartPolicy", "'ExitCode'"),
    ("DeepSpeedJob", {"spec.config.slotsPerWorker": 0}, "spec.config.slotsPerWorker", "greater"),
    (
        "DeepSpeedJob",
        {"spec.runMode": {"debug": {"enabled": True, "replicaSpecs": [{"type": "launcher"}]}}},
        "spec.runMode.debug.replicaSpecs[0].type",
        "no replica type 'launcher'; the job has master, worker",
    ),
    (
        "DeepSpeedJob",
        {"spec.runMode": {"pause": {"resumeSpecs": [{"type": "master"}, {"type": "chief"}]}}},
        "spec.runMode.pause.resumeSpecs[1].type",
        "no replica type 'chief'; the job has master, worker",
    ),
    # BeamJob
    ("BeamJob", {"spec.jobTemplate": DELETE}, "spec.jobTemplate", "field required"),
    ("BeamJob", {"spec.flinkClusterTemplate": DELETE}, "spec.flinkClusterTemplate", "field required"),
    (
        "BeamJob",
        {"spec.flinkClusterTemplate": {"metadata": {}}},
        "spec.flinkClusterTemplate.spec",
        "field required",
    ),
    ("BeamJob", {"spec.jobTemplate": {"spec": {}}}, "spec.jobTemplate.spec.template", "JobTemplateSpec"),
    (
        "BeamJob",
        {"spec.jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
        "spec.jobTemplate.spec.template.spec.containers",
        "at least one container",
    ),
    # 00-t9k-job-overview.md, 运行模式: BeamJob has the immediate mode only
    (
        "BeamJob",
        {"spec.runMode": {"pause": {"enabled": True}}},
        "spec.runMode.pause.enabled",
        "runs only in immediate mode",
    ),
    (
        "BeamJob",
        {"spec.runMode": {"debug": {"enabled": True}}},
        "spec.runMode.debug.enabled",
        "remove runMode.debug or set enabled: false",
    ),
    (
        "BeamJob",
        {"spec.runPolicy": {"cleanUpCluster": "yes"}},
        "spec.runPolicy.cleanUpCluster",
        "valid boolean",
    ),
    (
        "BeamJob",
        {"spec.runPolicy": {"cleanUpWorkers": True}},
        "spec.runPolicy.cleanUpWorkers",
        "unknown field",
    ),
    (
        "BeamJob",
        {"spec.scheduler": {"t9kScheduler": {"queue": "q", "priority": -1}}},
        "spec.scheduler.t9kScheduler.priority",
        "greater",
    ),
    ("BeamJob", {"metadata.name": "beam.job"}, "metadata.name", "DNS-1035"),
    ("BeamJob", {"status": {"phase": "Paused"}}, "status.phase", "'Initializing'"),
    ("BeamJob", {"metadata.name": "b" * 40}, "metadata.name", "flinkcluster-jobmanager"),
    ("BeamJob", {"spec.extra": 1}, "spec.extra", "unknown field"),
    # status of the replica kinds
    (
        "GenericJob",
        {"status": {"conditions": [{"type": "Running", "status": "Yes"}]}},
        "status.conditions[0].status",
        "'True', 'False' or 'Unknown'",
    ),
    ("DeepSpeedJob", {"status": {"phase": "Done"}}, "status.phase", "'Succeeded'"),
    (
        "MPIJob",
        {"status": {"tasks": [{"type": "worker", "replicas": [{"name": "a", "phase": "Gone"}]}]}},
        "status.tasks[0].replicas[0].phase",
        "'Deleted'",
    ),
]

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _mutated(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    manifest = copy.deepcopy(base)
    for path, value in changes.items():
        steps = [int(i) if i else name for name, i in _STEP.findall(path)]
        node: Any = manifest
        for step in steps[:-1]:
            node = node[step]
        last = steps[-1]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(value)
        else:
            node[last] = copy.deepcopy(value)
    return manifest


def _case_id(case: tuple[str, dict[str, Any], str, str]) -> str:
    base, changes, _, _ = case
    return f"{base}:{','.join(changes)}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_invalid_manifest_names_the_field(case: tuple[str, dict[str, Any], str, str]) -> None:
    base, changes, path, words = case
    with pytest.raises(ManifestError) as caught:
        load(_mutated(BASES[base], changes))
    error = caught.value
    first_line = str(error).splitlines()[0]
    assert error.path == path, str(error)
    assert first_line.startswith(f"{path}: "), str(error)
    assert words in str(error), str(error)
    assert isinstance(error, ValueError)
    assert "pydantic" not in str(error) and "Traceback" not in str(error)


@pytest.mark.parametrize("base", sorted(BASES))
def test_bases_are_valid(base: str) -> None:
    assert load(BASES[base]).to_manifest() == BASES[base]


def test_at_least_ten_invalid_manifests_per_kind() -> None:
    per_kind: dict[str, int] = {}
    for base, _, _, _ in CASES:
        kind = BASES[base]["kind"]
        per_kind[kind] = per_kind.get(kind, 0) + 1
    assert len(per_kind) == 8
    assert min(per_kind.values()) >= 10, per_kind


def test_several_problems_are_reported_together() -> None:
    manifest = _mutated(
        BASES["GenericJob"],
        {"spec.replicaSpecs[0].replicas": 0, "spec.cleanUpPolicy": "Some", "spec.replicaSpecs[1].replica": 1},
    )
    with pytest.raises(ManifestError) as caught:
        load(manifest)
    assert [path for path, _ in caught.value.issues] == [
        "spec.replicaSpecs[0].replicas",
        "spec.replicaSpecs[1].replica",
        "spec.cleanUpPolicy",
    ]


def test_published_xgboost_example_is_rejected_at_the_misplaced_containers() -> None:
    with pytest.raises(ManifestError) as caught:
        load(_FIXTURES / "invalid" / "xgboost-docs-as-published.yaml")
    assert caught.value.path == "spec.replicaSpecs[1].template.spec"


def test_the_seeds_tf_config_example_is_refused_saying_what_to_add() -> None:
    """01-genericjob.md, 变量替换: the example's service variables need spec.service, which it lacks; the
    model refuses it (the operators before they submit, the controller as InvalidSpec) and says what to
    add."""
    with pytest.raises(ManifestError) as caught:
        load(_FIXTURES / "invalid" / "seed-genericjob-variables.yaml")
    assert caught.value.path == "spec.replicaSpecs[0].template.spec.containers[0].env[0].value"
    assert "Add to spec: `service: {ports: [{name: http, port: <the port the replicas listen on>}]}`" in str(
        caught.value
    )


def test_deepspeed_run_mode_entries_may_name_master_or_worker() -> None:
    """03-deepspeedjob-api.md: the type of a ReplicaDebugSet and of a ResumeSpec is "one of master or
    worker" (master: worker 0, which runs the launcher)."""
    entries = [{"type": "master", "command": ["sleep", "inf"]}, {"type": "worker"}]
    manifest = copy.deepcopy(BASES["DeepSpeedJob"])
    manifest["spec"]["runMode"] = {
        "debug": {"enabled": True, "replicaSpecs": entries},
        "pause": {"enabled": False, "resumeSpecs": entries},
    }
    loaded = load(manifest)
    assert loaded.to_manifest() == manifest
