"""BeamJob: a FlinkCluster plus a batch/v1 Job that submits the Beam pipeline to it."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from t9k_provider.jobs.basemodel import KubeObject, Model
from t9k_provider.jobs.contract import BATCH_JOB_SUFFIX, Leader
from t9k_provider.jobs.envelope import JobSpec, T9kJob
from t9k_provider.jobs.podtemplates import Issues, template_issues
from t9k_provider.jobs.specparts import DebugMode, SchedulePolicy
from t9k_provider.jobs.status import BeamJobStatus


class FlinkClusterTemplate(Model):
    """Metadata and FlinkClusterSpec of the flink-operator cluster, kept as written."""

    metadata: KubeObject | None = None
    spec: KubeObject


class BeamRunPolicy(Model):
    clean_up_cluster: bool = False


class BeamRunMode(Model):
    """BeamJob runs immediately; its API also lists debug mode. Pause is not supported."""

    debug: DebugMode | None = None


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
        spec = self.job_template.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
            return [("jobTemplate.spec.template", "a batch/v1 JobTemplateSpec needs spec.template")]
        return template_issues(spec["template"], "jobTemplate.spec.template", "BeamJob")


class BeamJob(T9kJob):
    """BeamJob runs an Apache Beam Python pipeline on a Flink cluster it creates."""

    KIND: ClassVar[str] = "BeamJob"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("bj",)
    LEADER: ClassVar[Leader] = Leader()  # the submit pods carry no replica labels

    spec: BeamJobSpec
    status: BeamJobStatus | None = None
