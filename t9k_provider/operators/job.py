"""``T9kJobOperator``: submit a T9k Job, wait for it (in the worker or deferred), stream its logs, clean up.

The job's status is the only source of truth for the task's outcome. Parsing a DAG file builds the operator,
so this module imports only what its constructor and class attributes need (the link, the duration check);
the status, reattach, log and diagnostics helpers, the Kubernetes clients and the job models load inside
``execute``.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, BaseOperator, conf

from t9k_provider.links.job import T9kJobLink
from t9k_provider.waiting.durations import seconds

if TYPE_CHECKING:
    from t9k_provider.hooks.t9k import T9kHook
    from t9k_provider.jobclient.identity import JobRef
    from t9k_provider.jobclient.reattach import ReattachPolicy
    from t9k_provider.replicalogs.targets import ReplicaTarget
    from t9k_provider.waiting.limits import WaitLimits

ON_FINISH_ACTIONS = ("keep", "delete", "delete_on_success")
#: ``reattach_policy`` by name (``reattach.decide`` reads them); a callable decides by itself.
REATTACH_POLICIES = ("if_unchecked", "if_running", "never")
ON_KILL_ACTIONS = ("delete", "keep")
#: XCom key holding the job identity, pushed before any waiting so a failed task still names its job.
IDENTITY_XCOM_KEY = "t9k_job"
#: How long a replaced or terminating job may take to disappear before a new one is created.
DELETION_WAIT_SECONDS = 300.0


class T9kJobFailed(AirflowFailException):
    """The job ended Failed: retrying the task would rerun the same spec into the same failure."""


class T9kJobTimeout(AirflowException):
    """A wait limit was reached; the job was stopped per ``on_kill_action`` and the task may retry."""


def _choice(value: str, allowed: Sequence[str], field: str) -> str:
    if value not in allowed:
        raise ValueError(f"{field}: {value!r} is not one of {', '.join(allowed)}")
    return value


class T9kJobOperator(BaseOperator):
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
    :param startup_timeout: seconds from the job's creation until it leaves Pending (admission + scheduling).
    :param running_timeout: seconds the job may run once its Running condition is true.
    :param paused_timeout: seconds the job may stay Paused before the task fails (None: wait).
    :param unknown_timeout: seconds the job may stay Unknown before the task fails (None: wait).
    :param pod_error_timeout: seconds a replica may be unable to start (ErrImagePull, ImagePullBackOff,
        InvalidImageName, CreateContainerConfigError) before the job is stopped and the task fails
        (retryable); None disables the check and its pod reads.
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
    :param job_url_template: URL of the extra link, e.g. ``https://t9k.example/jobs/{namespace}/{name}``;
        default ``[t9k] job_url_template``.
    :param exact_name: submit an explicit ``metadata.name`` as it is; by default it is the prefix of a name
        unique to the task instance (as ``generateName`` is), so mapped instances and later runs never
        collide.
    """

    template_fields: Sequence[str] = (
        "manifest",
        "namespace",
        "kubernetes_conn_id",
        "cluster_context",
        "config_file",
        "log_replicas",
    )
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {"manifest": "yaml"}
    operator_extra_links = (T9kJobLink(),)
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
        pod_error_timeout: float | timedelta | None = 120,
        reattach_policy: ReattachPolicy = "if_unchecked",
        on_finish_action: str = "keep",
        on_kill_action: str = "delete",
        get_logs: bool = True,
        log_replicas: str | Sequence[str] | None = None,
        logging_interval: float | None = None,
        failure_log_lines: int = 50,
        retry_on_job_failure: bool = False,
        job_url_template: str | None = None,
        exact_name: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        self.pod_error_timeout = seconds(pod_error_timeout, "pod_error_timeout")
        if not callable(reattach_policy):
            _choice(reattach_policy, REATTACH_POLICIES, "reattach_policy")
        self.reattach_policy = reattach_policy
        self.on_finish_action = _choice(on_finish_action, ON_FINISH_ACTIONS, "on_finish_action")
        self.on_kill_action = _choice(on_kill_action, ON_KILL_ACTIONS, "on_kill_action")
        self.get_logs = get_logs
        self.log_replicas = log_replicas
        if log_replicas is not None and "{{" not in str(log_replicas):
            from t9k_provider.replicalogs.targets import parse_targets

            parse_targets(log_replicas)  # fail at DAG parse time, not after submission
        self.logging_interval = seconds(logging_interval, "logging_interval")
        self.failure_log_lines = failure_log_lines
        self.retry_on_job_failure = retry_on_job_failure
        self.job_url_template = job_url_template
        self.exact_name = exact_name
        self._job: JobRef | None = None
        #: What a kill must stop: the job's name is known before it is created, its uid once it is.
        self._target: JobRef | None = None
        self._identity: dict[str, str] | None = None
        #: The hook ``on_kill`` uses, built before the task can create or wait for anything.
        self._killer: T9kHook | None = None
        self._killed = False
        self._stopped = False

    @property
    def job_url(self) -> str | None:
        """The extra link's URL for the job this task submitted or adopted (None before that, or without a
        ``job_url_template``). The configured default is read here, in the worker, not for every operator a
        DAG file's parse builds."""
        if self._job is None:
            return None
        template = self.job_url_template or conf.get("t9k", "job_url_template", fallback=None)
        return template.format(**self._job._asdict()) if template else None

    # -- hook -------------------------------------------------------------------------------------------

    @cached_property
    def hook(self) -> T9kHook:
        from t9k_provider.hooks.t9k import T9kHook

        return T9kHook(
            conn_id=self.kubernetes_conn_id,
            cluster_context=self.cluster_context,
            config_file=self.config_file,
            in_cluster=self.in_cluster,
        )

    # -- building the manifest --------------------------------------------------------------------------

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        # Jinja's loader only searches the DAG folder and template_searchpath; an absolute file path is read
        # here so it is rendered exactly once like any other template.
        if isinstance(self.manifest, str) and self.manifest.endswith(tuple(self.template_ext)):
            path = Path(self.manifest)
            if path.is_absolute() and path.is_file():
                self.manifest = path.read_text()
        super().render_template_fields(context, jinja_env)

    def render_template(
        self, content: Any, context: Any, jinja_env: Any = None, seen_oids: set[int] | None = None
    ) -> Any:
        """Only the ``manifest`` field itself may name a template file: Airflow would load any string ending
        in ``template_ext``, a path in a dict manifest's ``args`` or ``env`` too, or ``config_file``."""
        names_file = isinstance(content, str) and content.endswith(tuple(self.template_ext))
        if names_file and content is not self.manifest:
            return self._render((jinja_env or self.get_template_env()).from_string(content), context)
        return super().render_template(content, context, jinja_env, seen_oids)

    def build_manifest(self, task_identity: dict[str, str] | None, try_number: int | None) -> dict[str, Any]:
        """Validate with the job models (before any API call) and add name, namespace and annotations."""
        from t9k_provider.jobclient import identity as ident
        from t9k_provider.jobs import ManifestError, load

        try:
            model = load(self.manifest)
        except ManifestError as exc:
            raise AirflowFailException(f"invalid T9k Job manifest:\n{exc}") from exc
        except (OSError, ValueError) as exc:
            raise AirflowFailException(f"cannot read the T9k Job manifest: {exc}") from exc
        if self.job_kind is not None and self.job_kind != model.KIND:
            raise AirflowFailException(
                f"kind: {type(self).__name__} runs {self.job_kind} jobs, the manifest is a {model.KIND}; "
                "use T9kJobOperator or the matching operator"
            )
        body = model.to_manifest()
        meta = body.setdefault("metadata", {})
        stated = meta.get("namespace")
        if self.namespace and stated and stated != self.namespace:
            raise AirflowFailException(
                f"metadata.namespace: {stated!r} disagrees with the operator's namespace={self.namespace!r}"
            )
        if not (meta.get("name") and self.exact_name):
            placeholder = {ident.DAG_ID: self.dag_id, ident.TASK_ID: self.task_id, ident.RUN_ID: "dry-run"}
            key = task_identity or {**placeholder, ident.MAP_INDEX: "-1"}
            prefix = meta.get("name") or meta.get("generateName")
            meta.pop("generateName", None)
            meta["name"] = ident.job_name(key, prefix=prefix)
        if task_identity is not None:
            meta["annotations"] = {
                **(meta.get("annotations") or {}),
                **ident.annotations(task_identity, try_number),
            }
        return body

    def _plural(self, kind: str) -> str:
        from t9k_provider.jobs import KINDS

        return KINDS[kind].PLURAL

    def dry_run(self) -> None:
        """Print the manifest that would be submitted; needs neither credentials nor a cluster."""
        import yaml

        body = self.build_manifest(None, None)
        body["metadata"].setdefault("namespace", self.namespace or "<connection namespace>")
        print(yaml.safe_dump(body, sort_keys=False))

    # -- execute ----------------------------------------------------------------------------------------

    def execute(self, context: Any) -> dict[str, Any] | None:
        with self._completing_kills():
            return self._execute(context)

    def _execute(self, context: Any) -> dict[str, Any] | None:
        from t9k_provider.jobclient import identity as ident
        from t9k_provider.jobclient import reattach
        from t9k_provider.jobclient.identity import JobRef
        from t9k_provider.waiting import status as job_status

        ti = context["ti"]
        task_identity = ident.task_identity(ti)
        body = self.build_manifest(task_identity, getattr(ti, "try_number", None))
        kind = body["kind"]
        plural = self._plural(kind)
        namespace = self.namespace or body["metadata"].get("namespace") or self.hook.default_namespace
        body["metadata"]["namespace"] = namespace
        self._identity = task_identity
        self._prepare_kill(JobRef(kind, plural, body["metadata"]["name"], namespace, None))
        self.log.info(
            "T9k %s %s/%s (connection %s)", kind, namespace, body["metadata"]["name"], self.kubernetes_conn_id
        )
        starts_run = reattach.starts_a_run(ti, int(self.retries or 0))
        job = self._submit_or_adopt(body, plural, task_identity, starts_run)
        ref = JobRef(kind, plural, job["metadata"]["name"], namespace, job["metadata"].get("uid"))
        self._job = self._target = ref
        self._raise_if_killed()
        ti.xcom_push(key=IDENTITY_XCOM_KEY, value=ref._asdict())
        T9kJobLink.persist(context, self.job_url)
        if not self.wait_for_completion:
            return job_status.summary(job)
        limits = self._limits(context)
        targets = self._targets(kind, body)
        follower = self._log_follower(ref, targets, {}) if self.get_logs else None
        streams = self._log_streams(ref, targets, {}) if self.get_logs else None
        until = time.time() + (self.wait_before_defer or 0.0) if self.deferrable else None
        with self._stopping(streams, follower):
            result = self._follow(ref, job, limits, follower, until, streams)
        if result is None:
            self._defer(ref, limits, targets, follower.cursors if follower else {})
        return result

    def _limits(self, context: Any) -> WaitLimits:
        from t9k_provider.waiting.limits import WaitLimits

        deadline = None
        if self.execution_timeout:
            ti = context["ti"]
            started = getattr(ti, "start_date", None) or datetime.now(timezone.utc)
            deadline = started.timestamp() + self.execution_timeout.total_seconds()
        return WaitLimits(
            startup_timeout=self.startup_timeout,
            running_timeout=self.running_timeout,
            execution_deadline=deadline,
            paused_timeout=self.paused_timeout,
            unknown_timeout=self.unknown_timeout,
            pod_error_timeout=self.pod_error_timeout,
        )

    # -- submission and adoption --------------------------------------------------------------------------

    def _submit_or_adopt(
        self, body: dict[str, Any], plural: str, task_identity: dict[str, str], starts_run: bool
    ) -> dict[str, Any]:
        from kubernetes.client import ApiException

        from t9k_provider.jobclient import identity as ident
        from t9k_provider.jobclient import reattach
        from t9k_provider.waiting import status as job_status

        name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
        for _ in range(3):
            try:
                created = self.hook.create_job(plural, namespace, body)
                self.log.info("created job %s/%s uid=%s", namespace, name, created["metadata"].get("uid"))
                return created
            except ApiException as exc:
                if exc.status != 409:
                    raise
            try:
                existing = self.hook.get_job(plural, namespace, name)
            except ApiException as exc:
                if exc.status == 404:
                    continue  # deleted between our create and get: create again
                raise
            if not ident.is_ours(existing, task_identity):
                owner = (existing.get("metadata") or {}).get("annotations") or {}
                marks = {k: v for k, v in owner.items() if k.startswith(ident.ANNOTATION_PREFIX)}
                raise AirflowFailException(
                    f"a {body['kind']} named {namespace}/{name} already exists and was not created by this "
                    f"task instance (its Airflow annotations: {marks or 'none'}); "
                    "choose another metadata.name or delete that job"
                )
            decision = reattach.decide(
                existing,
                self.reattach_policy,
                starts_run=starts_run,
                retry_on_job_failure=self.retry_on_job_failure,
            )
            phase = job_status.phase(existing) or "unset"
            if decision == "adopt":
                lost = self.reattach_policy == "if_unchecked" and ident.is_checked(existing)
                why = "; that try reported it, but Airflow retried the task: reporting it again"
                self.log.info(
                    "adopting job %s/%s (phase %s) left by an earlier try%s",
                    namespace,
                    name,
                    phase,
                    why if lost else "",
                )
                return existing
            if decision == "replace":
                self.log.info(
                    "replacing job %s/%s (phase %s) from an earlier try (reattach_policy=%s%s)",
                    namespace,
                    name,
                    phase,
                    getattr(self.reattach_policy, "__name__", self.reattach_policy),
                    ", the task was cleared" if starts_run and ident.is_checked(existing) else "",
                )
                self.hook.delete_job(plural, namespace, name, uid=existing["metadata"].get("uid"))
            else:
                self.log.info("job %s/%s of an earlier try is being deleted: waiting for it", namespace, name)
            self._wait_gone(plural, namespace, name)
        raise AirflowException(f"job {namespace}/{name} kept reappearing while being replaced; try again")

    def _wait_gone(self, plural: str, namespace: str, name: str) -> None:
        from kubernetes.client import ApiException

        deadline = time.monotonic() + DELETION_WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                self.hook.get_job(plural, namespace, name)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            time.sleep(1.0)
        raise AirflowException(
            f"job {namespace}/{name} still exists {DELETION_WAIT_SECONDS:g}s after deletion"
        )

    # -- waiting ------------------------------------------------------------------------------------------

    def _log_follower(self, ref: JobRef, targets: list[ReplicaTarget], cursors: dict[str, list[int]]) -> Any:
        from t9k_provider.replicalogs.follower import LogFollower
        from t9k_provider.replicalogs.targets import pod_selector

        return LogFollower(
            self.hook,
            ref.namespace,
            pod_selector(ref.kind, ref.name),
            lambda labels: any(t.matches(labels) for t in targets),
            cursors=cursors,
            log=self.log,
        )

    def _log_streams(
        self, ref: JobRef, targets: list[ReplicaTarget], cursors: dict[str, list[int]]
    ) -> Any | None:
        from t9k_provider.replicalogs.targets import pod_selector
        from t9k_provider.replicalogs.worker import WorkerLogStreams

        selector = pod_selector(ref.kind, ref.name)
        streams = WorkerLogStreams(self.hook.credentials, self.log, ref.namespace, selector, targets, cursors)
        if streams.live:
            return streams
        streams.finish(0.0)
        return None  # the follower's reads at each change and at the end instead

    def _targets(self, kind: str, body: dict[str, Any]) -> list[ReplicaTarget]:
        from t9k_provider.replicalogs.targets import default_targets, parse_targets

        if self.log_replicas is not None:
            return parse_targets(self.log_replicas)
        return default_targets(kind, body)

    def _read(self, ref: JobRef) -> dict[str, Any]:
        from kubernetes.client import ApiException

        try:
            job = self.hook.get_job(ref.plural, ref.namespace, ref.name)
        except ApiException as exc:
            if exc.status == 404:
                self._raise_if_killed()
                raise AirflowException(
                    f"job {ref.namespace}/{ref.name} was deleted while the task waited"
                ) from exc
            from t9k_provider.hooks.errors import classify

            raise classify(exc, f"read job {ref.name}") from exc
        if ref.uid and job["metadata"].get("uid") != ref.uid:
            raise AirflowException(f"job {ref.namespace}/{ref.name} was replaced by another object")
        return job

    def _follow(
        self,
        ref: JobRef,
        job: dict[str, Any],
        limits: WaitLimits,
        follower: Any,
        until: float | None,
        streams: Any = None,
    ) -> dict[str, Any] | None:
        """Follow the job in the worker until it ends or a wait limit is hit, then conclude (return the result
        or raise). With ``until`` (epoch seconds: the wait before deferring) it returns None once that passed.

        ``job`` is a fresh state (the create or read answer); later ones come from a watch per poll interval.
        With ``streams`` replica lines are printed as they are written; they are stopped before concluding
        (after their last lines, bounded) or deferring, and the follower's cursors continue from theirs.
        """
        from t9k_provider.jobclient.changes import JobChanges
        from t9k_provider.replicalogs.streams import DRAIN_SECONDS
        from t9k_provider.replicalogs.worker import STARTING_LOOK_SECONDS
        from t9k_provider.waiting import status as job_status
        from t9k_provider.waiting.notes import WaitingNotes

        changes = JobChanges(self.hook, ref.plural, ref.namespace, ref.name, ref.uid, self.log)
        first_seen: dict[str, float] = {}
        notes = WaitingNotes(time.time())
        while True:
            self._raise_if_killed()
            if streams is not None:
                streams.sync(job)
            elif follower is not None:
                follower.poll()
            if job_status.outcome(job) in ("succeeded", "failed"):
                if streams is not None:  # every line of the stopped replicas before the verdict
                    follower.cursors.update(streams.finish(DRAIN_SECONDS))
                return self._conclude(ref, None, follower)
            now = time.time()
            verdict = limits.check(job, now, first_seen)
            if verdict is None and limits.pods_needed(job, first_seen):
                verdict = limits.check_pods(self._pods(ref), now, first_seen)
            if verdict is not None:
                why = {"status": verdict.status, "message": verdict.message}
                return self._conclude(ref, why, follower)
            if job_status.outcome(job) == "pending" and notes.due(now):
                notes.say(self._pods(ref), now, self.log)
            if until is not None and now >= until:
                return None
            window = self.poll_interval * random.uniform(0.8, 1.2)
            for bound in (until, limits.execution_deadline):
                if bound is not None:
                    window = min(window, bound - now)
            if streams is not None and streams.starting:
                window = min(window, STARTING_LOOK_SECONDS)
            job = changes.next_state(job, max(window, 0.0), lambda: self._killed) or self._read(ref)

    @contextlib.contextmanager
    def _stopping(self, streams: Any, follower: Any) -> Iterator[None]:
        """However the wait ends (a kill, a limit, a deferral, any error) the streams stop at once, and the
        follower's final pass continues from their cursors. Held by the code that opened the streams."""
        try:
            yield
        finally:
            if streams is not None:
                follower.cursors.update(streams.finish(0.0))

    def _pods(self, ref: JobRef) -> list[dict[str, Any]]:
        """The job's pods for fail-fast checks; a failed read only skips this round."""
        from t9k_provider.replicalogs.targets import pod_selector

        try:
            return self.hook.list_pods(ref.namespace, pod_selector(ref.kind, ref.name))
        except Exception as exc:
            self.log.debug("cannot list pods of job %s: %s", ref.name, exc)
            return []

    def _defer(
        self, ref: JobRef, limits: WaitLimits, targets: list[ReplicaTarget], cursors: dict[str, list[int]]
    ) -> NoReturn:
        """Wait in the triggerer, which follows the ``targets``' logs from ``cursors`` into the task log."""
        from t9k_provider.replicalogs.targets import pod_selector
        from t9k_provider.triggers.job import T9kJobTrigger

        log_targets = [list(t) for t in targets]
        trigger = T9kJobTrigger(
            credentials=self.hook.credentials,
            kind=ref.kind,
            plural=ref.plural,
            name=ref.name,
            namespace=ref.namespace,
            uid=ref.uid,
            poll_interval=self.poll_interval,
            limits=limits.to_kwargs(),
            logging_interval=self.logging_interval if self.get_logs else None,
            on_kill_action=self.on_kill_action,
            resume={"job": ref._asdict(), "limits": limits.to_kwargs(), "log_targets": log_targets},
            pod_selector=pod_selector(ref.kind, ref.name),
            log_targets=log_targets if self.get_logs else None,
            log_cursors=cursors,
        )
        timeout = None
        if limits.execution_deadline is not None:
            # Leave the trigger time to report the timeout itself, so the job is stopped rather than orphaned.
            padding = max(60.0, 2 * self.poll_interval)
            timeout = timedelta(seconds=max(0.0, limits.execution_deadline - time.time()) + padding)
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timeout)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        if next_method == "__fail__":
            # The trigger failed or timed out and Airflow fails the task without calling back: recall the job
            # recorded before deferring, so the extra link (stored again when the task ends) still shows it.
            stored = context["ti"].xcom_pull(task_ids=self.task_id, key=IDENTITY_XCOM_KEY)
            if stored:
                from t9k_provider.jobclient.identity import JobRef

                self._job = JobRef(**stored)
        return super().resume_execution(next_method, next_kwargs, context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: print new logs, then re-read the job before deciding anything.

        Everything needed here travels in the event (``resume``, and ``log_cursors``: where the trigger's live
        logs stopped), never in operator state or defer kwargs.
        """
        with self._completing_kills():
            return self._resume(context, event)

    def _resume(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from t9k_provider.jobclient.identity import JobRef
        from t9k_provider.replicalogs.targets import ReplicaTarget
        from t9k_provider.waiting.limits import WaitLimits

        resume = event["resume"]
        ref = JobRef(**resume["job"])
        limits = WaitLimits(**resume["limits"])
        targets = [ReplicaTarget(*t) for t in resume["log_targets"]]
        self._job = ref
        self._prepare_kill(ref)
        cursors = event.get("log_cursors") or {}
        follower = self._log_follower(ref, targets, cursors) if self.get_logs else None
        if event.get("status") == "running":  # a hand-back for logs: print them; conclude if the job ended
            result = self._follow(ref, self._read(ref), limits, follower, until=time.time())
            if result is None:
                self._defer(ref, limits, targets, follower.cursors if follower else cursors)
            return result
        return self._conclude(ref, event, follower)

    # -- concluding ---------------------------------------------------------------------------------------

    def _conclude(self, ref: JobRef, event: dict[str, Any] | None, follower: Any) -> dict[str, Any]:
        """Decide from a fresh read of the job; ``event`` only explains why waiting stopped early."""
        from t9k_provider.operators.diagnostics import failure_report
        from t9k_provider.waiting import status as job_status

        job = self._read(ref)
        if follower is not None:
            follower.poll()
        state = job_status.outcome(job)
        if state == "succeeded":
            self._mark_checked(ref)
            if self.on_finish_action in ("delete", "delete_on_success"):
                self.hook.delete_job(ref.plural, ref.namespace, ref.name, uid=ref.uid)
            self.log.info("job %s/%s succeeded", ref.namespace, ref.name)
            self._raise_if_killed()  # a kill even now is no success
            return job_status.summary(job)
        report = failure_report(
            self.hook, ref.kind, ref.namespace, ref.name, job, follower, self.failure_log_lines, self.log
        )
        if state == "failed":
            self._mark_checked(ref)
            if self.on_finish_action == "delete":
                self.hook.delete_job(ref.plural, ref.namespace, ref.name, uid=ref.uid)
            message = f"job {ref.namespace}/{ref.name} failed: {job_status.failure_reason(job)}\n{report}"
            self.log.error("%s", message)
            raise (AirflowException if self.retry_on_job_failure else T9kJobFailed)(message)
        status = (event or {}).get("status")
        reason = (event or {}).get(
            "message"
        ) or f"stopped waiting in phase {job_status.phase(job) or 'unset'}"
        if status in ("timeout", "failed") and self.on_kill_action == "delete":
            self.hook.delete_job(ref.plural, ref.namespace, ref.name, uid=ref.uid)
            reason += "; the job was deleted (on_kill_action=delete)"
        message = f"job {ref.namespace}/{ref.name}: {reason}\n{report}"
        self.log.error("%s", message)
        if status == "timeout":
            raise T9kJobTimeout(message)
        if status == "failed" or (event or {}).get("retryable") is False:
            raise AirflowFailException(message)
        raise AirflowException(message)

    def _mark_checked(self, ref: JobRef) -> None:
        from t9k_provider.jobclient.identity import CHECKED

        try:
            self.hook.patch_job_annotations(ref.plural, ref.namespace, ref.name, {CHECKED: "true"})
        except Exception as exc:  # the outcome stands; a later try would merely re-report it
            self.log.warning("could not mark job %s as checked: %s", ref.name, exc)

    # -- kill ---------------------------------------------------------------------------------------------

    def _prepare_kill(self, target: JobRef) -> None:
        """Resolve before the job exists (or is waited for) what ``on_kill`` needs: the job's name and a hook
        of its own. A kill that comes earlier only sets the flag: the task's own flow then stops the job.

        It also loads what ``_stop`` uses, which must import nothing in ``on_kill``'s signal handler."""
        from t9k_provider.hooks import errors  # noqa: F401
        from t9k_provider.jobclient import identity  # noqa: F401
        from t9k_provider.waiting import status  # noqa: F401

        self._target = target
        if self.on_kill_action == "delete" and self._killer is None:
            self._killer = self.hook.detached()
        self._raise_if_killed()

    @contextlib.contextmanager
    def _completing_kills(self) -> Iterator[None]:
        """Airflow 2's SIGTERM handler raises after ``on_kill``, wherever the task was: a kill that came
        before there was a hook to stop the job with is completed on the way out."""
        try:
            yield
        except BaseException:
            if self._killed:
                with contextlib.suppress(Exception):
                    self._stop(self._killer or self.hook)
            raise

    def on_kill(self) -> None:
        """Stop the job (per ``on_kill_action``) and make sure the interrupted flow ends in failure.

        It runs in a signal handler, wherever ``execute`` was: it imports nothing, builds nothing, looks up no
        connection and never raises.
        """
        self._killed = True
        if self._killer is not None:
            self._stop(self._killer)

    def _raise_if_killed(self) -> None:
        """``on_kill`` returns normally on SIGTERM (Airflow 3): this fails the task instead, stopping the job
        first if ``on_kill`` could not (the kill came before there was anything to stop it with)."""
        if not self._killed:
            return
        ref = self._target
        self._stop(self._killer or self.hook)
        raise AirflowException(
            f"task killed{f' while job {ref.name} ran' if ref else ''} (on_kill_action={self.on_kill_action})"
        )

    def _stop(self, hook: T9kHook) -> None:
        """Delete the task's job unless it already ended (stopping it frees nothing then, and a later try
        reports its result); never raises. Deletion is conditional on the state read, so a job that ends
        meanwhile is kept. What it imports, ``_prepare_kill`` loaded before ``on_kill`` could call it."""
        from t9k_provider.hooks.errors import api_status
        from t9k_provider.jobclient import identity as ident
        from t9k_provider.waiting import status as job_status

        ref, identity = self._target, self._identity
        if ref is None or self.on_kill_action != "delete" or self._stopped:
            return
        try:
            for _ in range(3):
                try:
                    job = hook.get_job(ref.plural, ref.namespace, ref.name)
                except Exception as exc:
                    if api_status(exc) != 404:
                        raise
                    job = {}
                meta = job.get("metadata") or {}
                if ref.uid:
                    mine = meta.get("uid") == ref.uid
                else:  # killed while it was being created: ours only if it carries this task instance
                    mine = bool(job and identity and ident.is_ours(job, identity))
                if not mine:
                    self.log.info("task killed: job %s/%s already gone", ref.namespace, ref.name)
                    break
                if job_status.outcome(job) in ("succeeded", "failed"):
                    self.log.info("task killed: job %s/%s had already ended; kept", ref.namespace, ref.name)
                    break
                if hook.delete_job(
                    ref.plural, ref.namespace, ref.name, uid=meta.get("uid"),
                    resource_version=meta.get("resourceVersion"),
                ):  # fmt: skip
                    self.log.info("task killed: job %s/%s deleted", ref.namespace, ref.name)
                    break
            else:
                return  # it kept changing under us: the task's own flow tries again
            self._stopped = True
        except Exception as exc:
            self.log.warning("task killed: could not stop job %s/%s: %s", ref.namespace, ref.name, exc)
