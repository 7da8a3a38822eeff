"""BeamJob: a FlinkCluster plus a batch/v1 Job that submits the Beam pipeline to it."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from t9k_provider.jobs.basemodel import KubeObject, Model
from t9k_provider.jobs.contract import BATCH_JOB_SUFFIX, Leader
from t9k_provider.jobs.envelope import JobSpec, T9kJob
from t9k_provider.jobs.podtemplates import Issues, template_issues
from t9k_provider.jobs.specparts import DebugMode, PauseMode, SchedulePolicy
from t9k_provider.jobs.status import BeamJobStatus


class FlinkClusterTemplate(Model):
    """Metadata and FlinkClusterSpec of the flink-operator cluster, kept as written."""

    metadata: KubeObject | None = None
    spec: KubeObject


class BeamRunPolicy(Model):
    clean_up_cluster: bool = False


class BeamRunMode(Model):
    """BeamJob runs only in immediate mode (the seeds' run-mode table, 00-t9k-job-overview.md): the fields are
    accepted so that a manifest may spell them out disabled, and enabling either is an error."""

    debug: DebugMode | None = None
    pause: PauseMode | None = None

    def issues(self) -> Issues:
        enabled = [name for name in ("debug", "pause") if getattr(getattr(self, name), "enabled", False)]
        return [
            (
                f"runMode.{name}.enabled",
                f"a BeamJob runs only in immediate mode (T9k supports no {name} mode for BeamJob): "
                f"remove runMode.{name} or set enabled: false",
            )
            for name in enabled
        ]


class BeamJobSpec(JobSpec):
    flink_cluster_template: FlinkClusterTemplate
    job_template: KubeObject = Field(description="batch/v1 JobTemplateSpec that submits the pipeline.")
    run_policy: BeamRunPolicy = Field(default_factory=BeamRunPolicy)
    run_mode: BeamRunMode | None = None
    scheduler: SchedulePolicy | None = None

    def extra_child_suffixes(self) -> list[str]:
        # FlinkCluster `<job>-flinkcluster` names its Services and StatefulSets after itself.
        return ["flinkcluster-jobmanager", "flinkcluster-taskmanager", BATCH_JOB_SUFFIX]

    def issues(self) -> Issues:
        found = self.run_mode.issues() if self.run_mode is not None else []
        spec = self.job_template.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
            return [*found, ("jobTemplate.spec.template", "a batch/v1 JobTemplateSpec needs spec.template")]
        return [*found, *template_issues(spec["template"], "jobTemplate.spec.template", "BeamJob")]


class BeamJob(T9kJob):
    """BeamJob runs an Apache Beam Python pipeline on a Flink cluster it creates."""

    KIND: ClassVar[str] = "BeamJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("bj",)
    LEADER: ClassVar[Leader] = Leader()  # the submit pods carry no replica labels

    spec: BeamJobSpec
    status: BeamJobStatus | None = None
