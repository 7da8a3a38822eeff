"""ColossalAIJob in both API shapes: documented (`launcher` + `worker`) and `replicaSpecs` + `torchConfig`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from t9k_provider.jobs.basemodel import KubeObject, Model
from t9k_provider.jobs.contract import Leader
from t9k_provider.jobs.envelope import T9kJob
from t9k_provider.jobs.podtemplates import Issues
from t9k_provider.jobs.specparts import ReplicaSpec
from t9k_provider.jobs.ssh import (
    DEFAULT_SSH_MOUNT_PATH,
    DEFAULT_SSHD_PATH,
    LAUNCHER_CONTAINER,
    NormalizedSSHJob,
    SSHJobSpec,
    SSHSettings,
    no_restart,
)


def launch_arg_pairs(args: list[str]) -> list[tuple[int, str]]:
    """torchrun arguments as the `k=v` / `flag` items of `colossalai run --extra_launch_args`, each with the
    index of the argument it starts at (`--k=v`, `--k v` and `--flag` accepted)."""
    pairs: list[tuple[int, str]] = []
    i = 0
    while i < len(args):
        start, item = i, args[i].lstrip("-")
        if "=" not in item and i + 1 < len(args) and not args[i + 1].startswith("-"):
            item = f"{item}={args[i + 1]}"
            i += 1
        pairs.append((start, item))
        i += 1
    return pairs


def launch_args_issues(args: list[str], path: str) -> Issues:
    """`colossalai run` joins the items with ',' and splits each at its '=' (`k, v = arg.split("=")`), so an
    argument with a ',' or a value with a '=' would crash it on the launcher: rejected here instead."""
    issues: Issues = []
    for index, item in launch_arg_pairs(args):
        where = f"{path}[{index}]"
        if "," in item:
            issues.append((where, "colossalai run joins torchrun arguments with ',': no ','"))
        elif item.count("=") > 1:
            issues.append((where, "colossalai run splits a torchrun argument at '=': no '=' in its value"))
    return issues


class ColossalAISSH(Model):
    auth_mount_path: str = DEFAULT_SSH_MOUNT_PATH
    sshd_path: str = DEFAULT_SSHD_PATH


class ColossalAILauncher(Model):
    """Documented shape: the launcher pod is built from these fields, not from a pod template."""

    image: str = Field(min_length=1)
    working_dir: str | None = None
    env: list[KubeObject] | None = None
    resources: KubeObject | None = None

    def template(self) -> dict:
        container: dict = {"name": LAUNCHER_CONTAINER, "image": self.image}
        if self.working_dir is not None:
            container["workingDir"] = self.working_dir
        if self.env:
            container["env"] = [dict(e) for e in self.env]
        if self.resources is not None:
            container["resources"] = dict(self.resources)
        return {"spec": {"containers": [container]}}


class ColossalAIWorker(Model):
    """Documented shape: workers run sshd; `command` is the training script and its arguments."""

    replicas: int = Field(1, ge=1)
    proc_per_worker: int = Field(1, ge=1)
    command: list[str] = Field(min_length=1, description="Training script and its arguments.")
    torch_args: list[str] | None = None
    template: KubeObject = Field(default_factory=dict)


class TorchConfig(Model):
    """`replicaSpecs` shape: what `colossalai run` starts on every worker."""

    proc_per_worker: int = Field(1, ge=1)
    script: list[str] = Field(min_length=1)
    extra_args: list[str] | None = None


class NormalizedColossalAIJob(NormalizedSSHJob):
    """ColossalAIJob in the one form the controller compiles (see `NormalizedSSHJob`)."""

    proc_per_worker: int = 1
    script: list[str]
    extra_args: list[str] = Field(default_factory=list)


class ColossalAIJobSpec(SSHJobSpec):
    """Exactly one shape: `launcher` + `worker`, or `replicaSpecs` + `torchConfig`."""

    KIND: ClassVar[str] = "ColossalAIJob"
    DOCUMENTED_FIELDS: ClassVar[tuple[str, ...]] = ("worker", "launcher")
    CONFIG_FIELD: ClassVar[str] = "torchConfig"
    DOCUMENTED_WORKER_CONTAINER: ClassVar[str] = "worker"
    SESSION_ENV: ClassVar[bool] = True

    launcher: ColossalAILauncher | None = None
    worker: ColossalAIWorker | None = None
    torch_config: TorchConfig | None = None
    ssh: ColossalAISSH = Field(default_factory=ColossalAISSH)

    def ssh_settings(self) -> SSHSettings:
        return SSHSettings(auth_mount_path=self.ssh.auth_mount_path, sshd_path=self.ssh.sshd_path)

    def kind_issues(self) -> Issues:
        if self.worker is not None:
            issues: Issues = []
            if self.launcher is None:
                issues.append(("launcher", "the documented shape needs launcher (image, workingDir, ...)"))
            return issues + launch_args_issues(self.worker.torch_args or [], "worker.torchArgs")
        if self.torch_config is None:
            return []
        return launch_args_issues(self.torch_config.extra_args or [], "torchConfig.extraArgs")

    def documented_launcher(self) -> ReplicaSpec | None:
        assert self.launcher is not None  # guaranteed by issues()
        return ReplicaSpec(type="launcher", restart_policy=no_restart(), template=self.launcher.template())

    def normalized(self) -> NormalizedColossalAIJob:
        """Both shapes as one `NormalizedColossalAIJob`, sharing nothing with this spec."""
        common = self.normalized_common()
        if self.worker is not None:
            return NormalizedColossalAIJob.deep(
                proc_per_worker=self.worker.proc_per_worker,
                script=list(self.worker.command),
                extra_args=list(self.worker.torch_args or []),
                **common,
            )
        config = self.torch_config
        assert config is not None  # guaranteed by issues()
        return NormalizedColossalAIJob.deep(
            proc_per_worker=config.proc_per_worker,
            script=list(config.script),
            extra_args=list(config.extra_args or []),
            **common,
        )


class ColossalAIJob(T9kJob):
    """ColossalAIJob runs ColossalAI training: a launcher runs `colossalai run` over SSH."""

    KIND: ClassVar[str] = "ColossalAIJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("caij",)
    LEADER: ClassVar[Leader] = Leader("launcher", index=None)

    spec: ColossalAIJobSpec
