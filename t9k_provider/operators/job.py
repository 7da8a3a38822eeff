"""``T9kJobOperator``: submit a T9k Job, wait for it (in the worker or deferred), stream its logs, clean up.

The operator is the Airflow lifecycle only: what it does to the cluster is ``jobclient``'s, how it waits is
``waiting.loop`` (the trigger runs the same loop), how the task ends is ``outcome``'s, and a kill is a
``KillSwitch``. The job's status is the only source of truth for the task's outcome; what the task returns
and what a failure's message leads with are hook points (``job_result``, ``failure_lead``). Parsing a DAG
file builds the operator, so this module imports only what its constructor and class attributes need (the
link, the duration check, the failure types); the rest loads inside ``execute``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import BaseOperator, conf

from t9k_provider.links.job import JobLinks, T9kJobLink, T9kTensorBoardLink
from t9k_provider.operators.checkpoints import checked_volume
from t9k_provider.operators.failures import T9kJobFailed, T9kJobTimeout, with_retry_policy
from t9k_provider.operators.kill import KillSwitch
from t9k_provider.operators.lineage_hooks import JobLineage
from t9k_provider.operators.manifest import TemplatedManifest
from t9k_provider.operators.options import OnFinishAction, OnKillAction, choose, seconds
from t9k_provider.operators.options import ReattachPolicy as Reattach

if TYPE_CHECKING:
    from t9k_provider.hooks.t9k import T9kHook
    from t9k_provider.jobclient.client import JobClient
    from t9k_provider.jobclient.identity import JobRef
    from t9k_provider.operators.outcome import FailureLead, Outcome
    from t9k_provider.replicalogs.targets import Followed
    from t9k_provider.replicalogs.waitlogs import WaitLogs
    from t9k_provider.waiting.limits import WaitLimits
    from t9k_provider.waiting.result import WaitResult

__all__ = ["T9kJobFailed", "T9kJobOperator", "T9kJobTimeout"]

#: XCom key holding the job identity, pushed before any waiting so a failed task still names its job.
IDENTITY_XCOM_KEY = "t9k_job"


class T9kJobOperator(TemplatedManifest, JobLinks, JobLineage, BaseOperator):
    """Run a T9k Job of any kind and succeed or fail with it.

    :param manifest: the job: a dict, YAML/JSON text, a ``.yaml``/``.yml``/``.json`` file path (relative
        to the DAG folder or ``template_searchpath``, or absolute; Jinja-rendered once) or a
        ``t9k_provider.jobs`` model.
    :param namespace: overrides the connection's namespace; must agree with ``metadata.namespace``.
    :param kubernetes_conn_id: a ``kubernetes`` connection (``in_cluster``, ``kube_config_path``,
        ``kube_config``, ``cluster_context``, ``namespace``).
    :param wait_for_completion: False returns right after submission (or adoption).
    :param deferrable: wait in the triggerer; default ``[operators] default_deferrable``.
    :param wait_before_defer: deferrable mode only: seconds to follow the job in the worker before deferring,
        so a job that ends by then concludes without a deferral round trip; 0 defers at once.
    :param poll_interval: seconds between status reads (jittered by +-20%).
    :param startup_timeout: seconds from the job's creation (or its Queue's admission) to leaving Pending.
    :param queue_timeout: seconds a job may wait in its T9k Queue's line, from its creation (None: wait).
    :param running_timeout: seconds the job may run once its Running condition is true.
    :param paused_timeout: seconds the job may stay Paused before the task fails (None: wait).
    :param unknown_timeout: seconds the job may stay Unknown before the task fails (None: wait).
    :param progress_timeout: seconds the running job may go without a progress report from its leader
        (``t9k_provider.progress``; from its Running to the first) before it is stopped; needs ``get_logs``.
    :param checkpoint_volume: a volume source (``{"persistentVolumeClaim": {"claimName": "ckpt"}}``) mounted
        at ``T9K_CHECKPOINT_DIR``: a directory per task instance, the same on every try (``T9K_TRY_NUMBER``).
    :param pod_error_timeout: seconds a replica may be unable to start (an image pull error, a bad config,
        more GPUs than any node has) before the job is stopped; None disables the check and its pod reads.
    :param reattach_policy: when a job from an earlier try of this task instance exists: ``if_unchecked``
        adopts it unless an earlier try already reported its outcome and this try re-runs the task (a user
        cleared it) or retries a reported job failure; ``if_running`` adopts only an unfinished job;
        ``never`` replaces it; or a callable ``(job: dict) -> bool``. Replacing deletes the old job first.
    :param on_finish_action: ``keep``, ``delete`` or ``delete_on_success`` once the job is terminal.
    :param on_kill_action: ``delete`` or ``keep`` the job when the task is killed or times out.
    :param get_logs: copy replica logs into the task log.
    :param log_replicas: ``"all"``, ``"<type>"`` or ``"<type>/<index>"`` (or a list); default: the
        kind's leader replica.
    :param logging_interval: deferrable mode only: seconds between worker re-entries that print new log lines;
        None prints the logs once the job is finished.
    :param failure_log_lines: log lines of the failing replica included in the failure report.
    :param retry_on_job_failure: raise a retryable error (a new job on retry) instead of failing for good.
    :param job_url_template: the "T9k Job" link's URL, e.g. ``https://t9k.example/jobs/{namespace}/{name}``;
        default: the connection's extra of that name, else ``[t9k] job_url_template``.
    :param tensorboard_url_template: the "TensorBoard" link's, of a job with a ``tensorboardSpec``; likewise.
    :param exact_name: submit an explicit ``metadata.name`` as it is; by default it prefixes a name unique
        to the task instance (as ``generateName`` does), so mapped instances and later runs never collide.
    """

    template_fields: Sequence[str] = (
        "manifest", "namespace", "kubernetes_conn_id", "cluster_context", "config_file", "log_replicas",
    )  # fmt: skip
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {"manifest": "yaml"}
    operator_extra_links = (T9kJobLink(), T9kTensorBoardLink())
    ui_color = "#e8f0fe"

    #: Set by the per-kind subclasses; None accepts every kind.
    job_kind: str | None = None

    def __init__(
        self,
        *,
        manifest: Any,
        namespace: str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        wait_for_completion: bool = True,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        wait_before_defer: float | timedelta = 20.0,
        poll_interval: float = 10.0,
        startup_timeout: float | timedelta | None = None,
        running_timeout: float | timedelta | None = None,
        paused_timeout: float | timedelta | None = None,
        unknown_timeout: float | timedelta | None = None,
        queue_timeout: float | timedelta | None = None,
        pod_error_timeout: float | timedelta | None = 120,
        progress_timeout: float | timedelta | None = None,
        checkpoint_volume: dict[str, Any] | None = None,
        reattach_policy: Reattach | str | Callable[[dict[str, Any]], bool] = "if_unchecked",
        on_finish_action: OnFinishAction | str = "keep",
        on_kill_action: OnKillAction | str = "delete",
        get_logs: bool = True,
        log_replicas: str | Sequence[str] | None = None,
        logging_interval: float | None = None,
        failure_log_lines: int = 50,
        retry_on_job_failure: bool = False,
        job_url_template: str | None = None,
        tensorboard_url_template: str | None = None,
        exact_name: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_policy(kwargs))
        self.manifest = manifest.to_manifest() if hasattr(manifest, "to_manifest") else manifest
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.wait_before_defer = seconds(wait_before_defer, "wait_before_defer")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval: must be positive, got {poll_interval!r}")
        self.poll_interval = float(poll_interval)
        self.startup_timeout = seconds(startup_timeout, "startup_timeout")
        self.running_timeout = seconds(running_timeout, "running_timeout")
        self.paused_timeout = seconds(paused_timeout, "paused_timeout")
        self.unknown_timeout = seconds(unknown_timeout, "unknown_timeout")
        self.queue_timeout = seconds(queue_timeout, "queue_timeout")
        self.pod_error_timeout = seconds(pod_error_timeout, "pod_error_timeout")
        self.progress_timeout = seconds(progress_timeout, "progress_timeout")
        if self.progress_timeout is not None and not get_logs:
            raise ValueError("progress_timeout: needs get_logs=True (reports are read from the leader's log)")
        self.checkpoint_volume = checked_volume(checkpoint_volume)
        if not callable(reattach_policy):
            reattach_policy = choose(Reattach, reattach_policy, "reattach_policy")
        self.reattach_policy = reattach_policy
        self.on_finish_action = choose(OnFinishAction, on_finish_action, "on_finish_action")
        self.on_kill_action = choose(OnKillAction, on_kill_action, "on_kill_action")
        self.get_logs = get_logs
        self.log_replicas = log_replicas
        if log_replicas is not None and "{{" not in str(log_replicas):
            from t9k_provider.replicalogs.targets import parse_targets

            parse_targets(log_replicas)  # fail at DAG parse time, not after submission
        self.logging_interval = seconds(logging_interval, "logging_interval")
        self.failure_log_lines = failure_log_lines
        self.retry_on_job_failure = retry_on_job_failure
        self.job_url_template = job_url_template
        self.tensorboard_url_template = tensorboard_url_template
        self.exact_name = exact_name
        self._job: JobRef | None = None
        #: What a kill stops, aimed in ``execute`` before the task can create or wait for anything.
        self._kill = KillSwitch(self.on_kill_action)

    @cached_property
    def hook(self) -> T9kHook:
        from t9k_provider.kube.importing import collector_spared

        with collector_spared("t9k_provider.hooks.t9k"):
            from t9k_provider.hooks.t9k import T9kHook
        return T9kHook(
            conn_id=self.kubernetes_conn_id, cluster_context=self.cluster_context,
            config_file=self.config_file, in_cluster=self.in_cluster,
        )  # fmt: skip

    @cached_property
    def _client(self) -> JobClient:
        from t9k_provider.jobclient.client import JobClient

        return JobClient(self.hook, self.log)

    def execute(self, context: Any) -> Any:
        with self._kill.completing(lambda: self._client):
            return self._execute(context)

    def _execute(self, context: Any) -> Any:
        from t9k_provider.jobclient import identity as ident
        from t9k_provider.jobclient import reattach
        from t9k_provider.jobclient.client import Adoption
        from t9k_provider.jobclient.identity import JobRef
        from t9k_provider.jobs import KINDS
        from t9k_provider.waiting import status as job_status
        from t9k_provider.waiting.limits import WaitLimits, execution_deadline

        ti = context["ti"]
        task_identity = ident.task_identity(ti)
        body = self.build_manifest(task_identity, getattr(ti, "try_number", None))
        followed = self.followed(body)
        kind, name = body["kind"], body["metadata"]["name"]
        plural = KINDS[kind].PLURAL
        namespace = self.namespace or body["metadata"].get("namespace") or self.hook.default_namespace
        body["metadata"]["namespace"] = namespace
        self._kill_aims_at(JobRef(kind, plural, name, namespace, None), task_identity)
        self.log.info("T9k %s %s/%s (connection %s)", kind, namespace, name, self.kubernetes_conn_id)
        starts_run = reattach.starts_a_run(ti, int(self.retries or 0))
        adoption = Adoption(self.reattach_policy, starts_run, self.retry_on_job_failure)
        job = self._client.submit_or_adopt(body, plural, task_identity, adoption)
        ref = JobRef(kind, plural, job["metadata"]["name"], namespace, job["metadata"].get("uid"))
        self._job = ref
        self._kill_aims_at(ref)
        ti.xcom_push(key=IDENTITY_XCOM_KEY, value=ref._asdict())
        for link in self.operator_extra_links:
            link.persist(context, self)
        if not self.wait_for_completion:
            return job_status.summary(job)
        started = getattr(ti, "start_date", None)
        limits = WaitLimits.of(self, execution_deadline(started, self.execution_timeout))
        logs = self._logs(ref, followed, {}, None, live=True)
        until = time.time() + (self.wait_before_defer or 0.0) if self.deferrable else None
        result = self._wait_in_worker(ref, limits, logs, job, until)
        if result.status == "running":
            self._defer(ref, limits, followed, logs, result)
        return self._conclude(ref, result, logs, context)

    def job_result(self, outcome: Outcome) -> Any:
        """Hook point: what the task returns for a job that succeeded (XCom ``return_value``)."""
        return outcome.summary

    def failure_lead(self, outcome: Outcome) -> FailureLead | None:
        """Hook point: what a failed job's message leads with besides its report (None: nothing to add)."""
        return None

    def _logs(
        self, ref: JobRef, followed: Followed, cursors: dict[str, list[int]], progress: Any, *, live: bool
    ) -> WaitLogs | None:
        """The replica logs of the wait (None: ``get_logs`` is off); ``progress``: what came so far."""
        if not self.get_logs:
            return None
        from t9k_provider.replicalogs.targets import pod_selector
        from t9k_provider.replicalogs.waitlogs import WaitLogs

        selector = pod_selector(ref.kind, ref.name)
        return WaitLogs(self.hook, ref.namespace, selector, followed, cursors, progress, self.log, live=live)

    def _wait_in_worker(
        self, ref: JobRef, limits: WaitLimits, logs: WaitLogs | None, job: Any, until: float | None,
        earlier: WaitResult | None = None,
    ) -> WaitResult:  # fmt: skip
        """The wait in the worker (``WorkerWait``) from ``job`` (as read: a ``WaitResult`` when gone): its
        result, ``running`` once ``until`` passed; ``earlier``: the hand-back of the task's earlier wait,
        whose disruptions said and Queue seen this one goes on from."""
        from t9k_provider.operators.worker_wait import WorkerWait
        from t9k_provider.waiting.result import WaitResult

        if isinstance(job, WaitResult):
            return job
        return WorkerWait(
            self._client, ref, limits, logs, poll_interval=self.poll_interval, kill=self._kill, log=self.log
        ).run(job, until, earlier)

    def _conclude(self, ref: JobRef, result: WaitResult, logs: WaitLogs | None, context: Any) -> Any:
        from t9k_provider.operators.outcome import conclude

        return conclude(self, self._client, ref, result, context, logs, self._kill, self.log)

    def _defer(
        self, ref: JobRef, limits: WaitLimits, followed: Followed, logs: WaitLogs | None, earlier: WaitResult
    ) -> None:  # fmt: skip
        """Wait in the triggerer: logs and progress from where ``logs`` stopped, disruptions and the Queue
        from where the ``earlier`` wait left them."""
        from t9k_provider.triggers.job import T9kJobTrigger

        trigger = T9kJobTrigger.for_operator(
            ref, self.hook.credentials, limits, followed, logs.cursors if logs else {},
            logs.lines.progress.to_json() if logs else None, poll_interval=self.poll_interval,
            logging_interval=self.logging_interval, on_kill_action=self.on_kill_action,
            follow_logs=self.get_logs, disruptions_seen=earlier.disruptions_seen, queue=earlier.queue,
        )  # fmt: skip
        timeout = limits.deferral_timeout(time.time(), self.poll_interval)
        span = timedelta(seconds=timeout) if timeout is not None else None
        self.defer(trigger=trigger, method_name="execute_complete", timeout=span)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        if next_method == "__fail__":
            # the trigger failed or timed out: recall the job stored before deferring, for the extra links
            stored = context["ti"].xcom_pull(task_ids=self.task_id, key=IDENTITY_XCOM_KEY)
            if stored:
                from t9k_provider.jobclient.identity import JobRef

                self._job = JobRef(**stored)
        return super().resume_execution(next_method, next_kwargs, context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """Resume after the trigger fired: print new logs, then re-read the job before deciding anything.
        Everything needed travels in the event (``resume``; ``log_cursors``: where the trigger's live logs
        stopped), never in operator state or defer kwargs."""
        with self._kill.completing(lambda: self._client):
            return self._resume(event, context)

    def _resume(self, event: dict[str, Any], context: Any) -> Any:
        from t9k_provider.jobclient.identity import JobRef
        from t9k_provider.replicalogs.targets import Followed
        from t9k_provider.waiting.limits import WaitLimits
        from t9k_provider.waiting.result import WaitResult

        resume = event["resume"]
        ref = JobRef(**resume["job"])
        limits = WaitLimits(**resume["limits"])
        followed = Followed.from_json(resume)
        self._job = ref
        self._kill_aims_at(ref)
        logs = self._logs(ref, followed, event.get("log_cursors") or {}, event.get("progress"), live=False)
        result = WaitResult.from_event(event)
        if result.status == "running":  # a hand-back for logs: print, conclude if it ended meanwhile
            result = self._wait_in_worker(ref, limits, logs, self._client.read(ref), time.time(), result)
            if result.status == "running":
                self._defer(ref, limits, followed, logs, result)
        return self._conclude(ref, result, logs, context)

    def _kill_aims_at(self, target: JobRef, identity: dict[str, str] | None = None) -> None:
        """Aim the kill switch at the job, before it exists (or is waited for); it builds its own client now,
        and loads what stopping uses, as ``on_kill``'s signal handler must import nothing."""
        from t9k_provider.jobclient.client import JobClient

        if identity is not None:
            self._kill.identity = identity
        self._kill.arm(target, lambda: JobClient(self.hook.detached(), self.log), self.log)

    def on_kill(self) -> None:
        """Stop the job (per ``on_kill_action``) and make sure the interrupted flow ends in failure. It runs
        in a signal handler, wherever ``execute`` was: it imports nothing, builds nothing and never raises."""
        self._kill.fire()
