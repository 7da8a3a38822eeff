"""DeepSpeedJob: SSH-connected workers; worker-0 runs the `deepspeed` launcher over pdsh."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from t9k_provider.jobs.basemodel import KubeObject, Model, StringOrList
from t9k_provider.jobs.contract import Leader
from t9k_provider.jobs.envelope import JobSpec, T9kJob
from t9k_provider.jobs.podtemplates import Issues, mount_issues, template_issues
from t9k_provider.jobs.replicachecks import run_mode_issues
from t9k_provider.jobs.specparts import (
    ElasticConfig,
    RunMode,
    RunPolicy,
    SchedulePolicy,
    TrainingRestartPolicy,
)
from t9k_provider.jobs.ssh import SESSION_ENV_DIR

# Paths the controller mounts into every worker (T9k docs: users must not mount over them).
DEEPSPEED_RESERVED_PATHS = ("/root/.ssh", "/t9k/hostfile", "/root/.deepspeed_env", SESSION_ENV_DIR)

# The types runMode.debug.replicaSpecs[] and runMode.pause.resumeSpecs[] may name.
RUN_MODE_TYPES = ("master", "worker")

# `otherArgs` that clash with fields of `spec.config` or with how the controller launches.
FORBIDDEN_OTHER_ARGS = {
    "--no_local_rank": "set spec.config.localRank: false instead",
    "--autotuning": "set spec.config.autotune instead",
    "--module": "use spec.config.run.module instead",
    "--no_python": "use spec.config.run.exec instead",
    "--hostfile": "the controller writes /t9k/hostfile",
}


class DeepSpeedRun(Model):
    """What `deepspeed` starts: exactly one of a script, a module or an executable, with its args."""

    # The DeepSpeedJob API reference capitalises two of the keys.
    RENAMED: ClassVar[dict[str, str]] = {"Module": "module", "Exec": "exec"}

    python: StringOrList | None = None
    module: StringOrList | None = None
    exec_: StringOrList | None = Field(None, alias="exec")

    def argv(self) -> list[str]:
        """The chosen program and its arguments as a list."""
        value = self.python or self.module or self.exec_ or []
        return [value] if isinstance(value, str) else list(value)

    @property
    def mode(self) -> Literal["python", "module", "exec"] | None:
        for mode, value in (("python", self.python), ("module", self.module), ("exec", self.exec_)):
            if value is not None:
                return mode  # type: ignore[return-value]
        return None


class DeepSpeedConfig(Model):
    RENAMED: ClassVar[dict[str, str]] = {"slotPerWorker": "slotsPerWorker"}

    run: DeepSpeedRun | None = None
    slots_per_worker: int | None = Field(None, ge=1)
    local_rank: bool = True
    autotune: Literal["none", "run", "tune"] = "none"
    other_args: list[str] = Field(
        default_factory=list, description="Extra deepspeed arguments (pdsh launcher)."
    )
    custom_command: str | None = Field(None, description="Replaces every config field but slotsPerWorker.")


class DeepSpeedWorker(Model):
    replicas: int = Field(1, ge=1)
    restart_policy: TrainingRestartPolicy = "Never"  # 03-deepspeedjob-api.md, Worker: "Defaults to Never."
    template: KubeObject = Field(default_factory=dict)


class DeepSpeedJobSpec(JobSpec):
    worker: DeepSpeedWorker
    config: DeepSpeedConfig
    disable_custom_env: bool = False
    elastic: ElasticConfig | None = None
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    run_mode: RunMode | None = None
    scheduler: SchedulePolicy | None = None

    def replica_counts(self) -> dict[str, int]:
        count = self.worker.replicas
        if self.elastic is not None and self.elastic.enabled and self.elastic.max_replicas:
            count = max(count, self.elastic.max_replicas)
        return {"worker": count}

    def issues(self) -> Issues:
        issues = template_issues(self.worker.template, "worker.template", "DeepSpeedJob")
        issues += mount_issues(
            self.worker.template, "worker.template", DEEPSPEED_RESERVED_PATHS, "DeepSpeedJob"
        )
        config = self.config
        if config.custom_command is None:
            run = config.run
            programs = {} if run is None else {"python": run.python, "module": run.module, "exec": run.exec_}
            chosen = [name for name, value in programs.items() if value is not None]
            if len(chosen) != 1:
                found = f"got {', '.join(chosen)}" if chosen else "none is set"
                issues.append(("config.run", f"set exactly one of python, module or exec ({found})"))
            elif not config.run.argv():  # type: ignore[union-attr]
                issues.append((f"config.run.{chosen[0]}", "must name a program"))
        for i, arg in enumerate(config.other_args):
            flag = arg.split("=", 1)[0]
            if flag in FORBIDDEN_OTHER_ARGS:
                issues.append(
                    (f"config.otherArgs[{i}]", f"{flag} is not allowed: {FORBIDDEN_OTHER_ARGS[flag]}")
                )
            elif flag == "--launcher":
                value = arg.split("=", 1)[1] if "=" in arg else _next(config.other_args, i)
                if value is not None and value.lower() != "pdsh":
                    issues.append((f"config.otherArgs[{i}]", "DeepSpeedJob supports only the pdsh launcher"))
        # 03-deepspeedjob-api.md: a debug or resume entry's type is "one of master or worker"; `master` is
        # worker 0, which runs the launcher (docs/controller.md#run-modes).
        return issues + run_mode_issues(self.run_mode, RUN_MODE_TYPES)


def _next(args: list[str], i: int) -> str | None:
    return args[i + 1] if i + 1 < len(args) else None


class DeepSpeedJob(T9kJob):
    """DeepSpeedJob runs DeepSpeed training: worker-0 starts `deepspeed` over pdsh on all workers."""

    KIND: ClassVar[str] = "DeepSpeedJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("dj",)
    LEADER: ClassVar[Leader] = Leader("worker")  # worker-0 starts `deepspeed`

    spec: DeepSpeedJobSpec
