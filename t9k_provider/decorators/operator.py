"""The operator behind ``@task.t9k*``: a decorated function run as a T9k Job by the kind's own operator.

It builds the job's manifest when the DAG is parsed, adds the call (source and resolved arguments) when the
task renders its templates, so the Rendered Template shows what is submitted, and lets the typed operator do
the rest (validation, naming, submission, reattach, deferral, logs, links, kill, retry and finish actions).
It overrides two of that operator's hook points: the task's result is the return value of global rank 0,
read from that replica's log (``job_result``), and a failed job's message leads with the function's remote
traceback (``failure_lead``).
"""

from __future__ import annotations

import importlib.util
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, DecoratedOperator

from t9k_provider.decorators import manifests
from t9k_provider.decorators.manifests import JobOptions, Recipe
from t9k_provider.decorators.source import check, ship
from t9k_provider.kube.resources import GPU
from t9k_provider.operators.job import T9kJobOperator
from t9k_provider.operators.options import OnFinishAction, choose

if TYPE_CHECKING:
    from t9k_provider.decorators.transport import RemoteError
    from t9k_provider.operators.outcome import FailureLead, Outcome

#: Options some decorator takes: any other decorator names them in its error.
KIND_OPTIONS = {
    option: [r.decorator for r in manifests.RECIPES.values() if option in (r.size_option, *r.launch_options)]
    for recipe in manifests.RECIPES.values()
    for option in (recipe.size_option, *recipe.launch_options)
}
SERIALIZERS = ("json", "cloudpickle", "dill")
#: Log lines read back: rank 0 prints its result last, but a launcher may print more after it.
RESULT_TAIL_LINES = 1000
ERROR_TAIL_LINES = 500
LOG_READ_BYTES = 4 << 20
#: Where a failure report's headline names its replica: ``f() on rank 1 (replica <host>) raised ...``.
REPLICA = re.compile(r"\(replica ([^)\s]+)\)")


class T9kDecoratedOperator(DecoratedOperator, T9kJobOperator):
    """Runs ``python_callable`` on every replica of the job ``recipe`` describes; returns rank 0's result.

    :param image: the replicas' image (Python plus what the function imports); the local cluster runs its own
        interpreter instead.
    :param python: the interpreter command in the image.
    :param container_resources: the training container's ``resources`` (requests/limits); named as in
        ``KubernetesPodOperator``, because ``resources`` is a ``BaseOperator`` argument.
    :param gpus: GPUs per replica (``nvidia.com/gpu`` request and limit of the training container); with more
        than one, ``@task.t9k_pytorch`` starts that many processes per replica (torchrun) and
        ``@task.t9k_deepspeed`` that many ranks per worker, unless ``nproc_per_node`` / ``slots_per_worker``
        say otherwise.
    :param env: the training container's environment: ``{name: value}`` or a list of EnvVar dicts.
    :param volumes: pod volumes; ``volume_mounts``: the training container's mounts.
    :param run_policy: ``spec.runPolicy`` entries (TrainingJobs and DeepSpeedJob); default
        ``{"backoffLimit": 0, "cleanUpPolicy": "Unfinished"}``.
    :param scheduler: ``spec.scheduler``, e.g. ``{"t9kScheduler": {"queue": "default"}}``.
    :param manifest_override: a partial manifest deep-merged over the generated one (``manifests.merge``).
    :param serializer: ``json`` (default), ``cloudpickle`` or ``dill`` for the arguments and the result.
    :param retry_on_job_failure: True: a function that raised fails the task retryably (Airflow's
        ``retries``) unless its error says retrying cannot help; by default a bug fails it at once, whatever
        ``retries`` says (an infrastructure ending is retried either way).
    :param tensorboard: ``@task.t9k_pytorch`` and ``@task.t9k_tensorflow``: the job gets a TensorBoard over
        the task's log directory ``T9K_TENSORBOARD_DIR`` (``decorators.tensorboard``), where
        ``progress.report`` writes its metrics as scalars; the task gets the "TensorBoard" link.

    Every other ``T9kJobOperator`` parameter works as there, except ``manifest`` and ``wait_for_completion``.
    """

    recipe: ClassVar[Recipe]
    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *T9kJobOperator.template_fields)
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **DecoratedOperator.template_fields_renderers,
        **T9kJobOperator.template_fields_renderers,
    }
    shallow_copy_attrs: Sequence[str] = ("python_callable",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.custom_operator_name = f"@task.{cls.recipe.decorator}"  # how Airflow's UI names the task type

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        image: str | None = None,
        python: str = "python",
        container_resources: dict[str, Any] | None = None,
        gpus: int = 0,
        env: dict[str, Any] | list[dict[str, Any]] | None = None,
        volumes: list[dict[str, Any]] | None = None,
        volume_mounts: list[dict[str, Any]] | None = None,
        run_policy: dict[str, Any] | None = None,
        scheduler: dict[str, Any] | None = None,
        manifest_override: dict[str, Any] | None = None,
        serializer: str = "json",
        retry_on_job_failure: bool = False,
        tensorboard: bool = False,
        **kwargs: Any,
    ) -> None:
        recipe = self.recipe
        checked = {
            "run_policy": run_policy,
            "serializer": serializer,
            "gpus": gpus,
            "container_resources": container_resources,
            "tensorboard": tensorboard,
        }
        self.check_options({**kwargs, **checked})
        size = kwargs.pop(recipe.size_option, 1)
        launch = {option: kwargs.pop(option, default) for option, default in recipe.launch_options.items()}
        check(python_callable)
        self.serializer = serializer
        self.tensorboard = tensorboard
        options = JobOptions(
            image=image or recipe.image,
            size=size,
            python=python,
            container_resources=container_resources,
            env=env,
            volumes=volumes,
            volume_mounts=volume_mounts,
            run_policy=run_policy,
            scheduler=scheduler,
            manifest_override=manifest_override,
            launch=launch,
            gpus=gpus,
        )
        super().__init__(
            python_callable=python_callable,
            manifest=recipe.manifest(options),
            retry_on_job_failure=retry_on_job_failure,
            **kwargs,
        )

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Reject what this decorator cannot do. The decorator calls this when the DAG file is parsed (a
        mapped task is only constructed when it runs), the constructor again."""
        recipe = cls.recipe
        name = f"@task.{recipe.decorator}"
        for forbidden in ("manifest", "wait_for_completion"):
            if forbidden in options:
                raise TypeError(f"{name} takes no {forbidden!r}: it builds the job and waits for its result")
        own = (recipe.size_option, *recipe.launch_options)
        foreign = sorted(option for option in options if option in KIND_OPTIONS and option not in own)
        if foreign:
            owners = ", ".join(f"@task.{d}" for d in KIND_OPTIONS[foreign[0]])
            raise TypeError(f"{name} has no option {foreign[0]!r} (an option of {owners})")
        _positive(name, recipe.size_option, options.get(recipe.size_option, 1))
        _gpus(name, options.get("gpus", 0), options.get("container_resources"))
        for option in recipe.launch_options:
            value = options.get(option)
            if value is not None and not (option == "nproc_per_node" and value == "gpu"):
                _positive(name, option, value)
        tensorboard = options.get("tensorboard", False)
        if not isinstance(tensorboard, bool):
            raise TypeError(f"{name}: tensorboard must be True or False, got {tensorboard!r}")
        if tensorboard and recipe.kind not in manifests.TENSORBOARD_KINDS:
            raise TypeError(
                f"{name} has no tensorboard: a {recipe.kind} has no TensorBoard (@task.t9k_pytorch and "
                "@task.t9k_tensorflow have)"
            )
        if options.get("run_policy") is not None and not recipe.takes_run_policy:
            raise TypeError(
                f"{name} has no run_policy: a {recipe.kind} has none (use manifest_override for its spec)"
            )
        serializer = options.get("serializer", "json")
        if serializer not in SERIALIZERS:
            raise ValueError(f"serializer: {serializer!r} is not one of {', '.join(SERIALIZERS)}")
        if serializer != "json" and importlib.util.find_spec(serializer) is None:
            raise ValueError(
                f"serializer={serializer!r} needs the {serializer} package where Airflow runs "
                "(and in the image)"
            )
        choose(OnFinishAction, options.get("on_finish_action", "keep"), "on_finish_action")

    # -- the job ----------------------------------------------------------------------------------------

    def has_tensorboard(self) -> bool:
        return self.tensorboard

    def build_manifest(self, task_identity: dict[str, str] | None, try_number: int | None) -> dict[str, Any]:
        """The typed operator's manifest, with the TensorBoard over this try's log directory when asked."""
        body = super().build_manifest(task_identity, try_number)
        if not self.tensorboard:
            return body
        from t9k_provider.decorators import tensorboard

        where = tensorboard.log_dir(self.checkpoint_volume, self.instance_key(task_identity), try_number)
        try:
            body = tensorboard.with_tensorboard(body, where)
        except tensorboard.Clash as exc:
            raise AirflowFailException(str(exc)) from exc
        (self.log.info if where.scratch is None else self.log.warning)("%s", where.note)
        return body

    # -- the call ---------------------------------------------------------------------------------------

    def _do_render_template_fields(
        self, parent: Any, template_fields: Any, context: Any, jinja_env: Any, seen_oids: set[int]
    ) -> None:
        """Once Jinja and XComArgs are resolved, put the call in the manifest (never through Jinja itself)."""
        super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
        if parent is not self:
            return
        from t9k_provider.decorators import transport

        try:
            call = transport.encode_call(
                ship(self.python_callable), self.serializer, self.op_args, self.op_kwargs
            )
        except ValueError as exc:  # a function that cannot stand alone, arguments that cannot be shipped
            raise AirflowFailException(str(exc)) from exc
        self.manifest = manifests.with_call(self.manifest, transport.packed_runner(), call)

    # -- the result ---------------------------------------------------------------------------------------

    def job_result(self, outcome: Outcome) -> Any:
        """The function's return value on global rank 0, from that replica's log (read before the finish
        action may delete the job's pods)."""
        from t9k_provider.decorators import transport
        from t9k_provider.kube.podlogs import parse_lines

        ref = outcome.ref
        pod = f"{ref.name}-{self.recipe.leader}-0"
        try:
            text = self._client.replica_log(
                ref, pod, self.recipe.container, tail_lines=RESULT_TAIL_LINES, limit_bytes=LOG_READ_BYTES
            )
            return transport.decode_result((line.text for line in parse_lines(text)), self.serializer)
        except Exception as exc:
            function = self.python_callable.__name__
            raise AirflowException(
                f"job {ref.namespace}/{ref.name} succeeded, but the result of {function}() cannot be read "
                f"from the log of {pod} (rank 0): {exc}"
            ) from exc

    def failure_lead(self, outcome: Outcome) -> FailureLead | None:
        """The function's remote traceback on the replica that failed first (the earliest traceback where no
        replica's end is known), retryable unless retrying cannot help. Where that replica left none (killed,
        out of memory), its end leads and the earliest traceback follows."""
        from t9k_provider.operators.outcome import FailureLead

        errors = self._remote_errors(outcome)
        if not errors:
            return None
        earliest = min((e for _, e in errors), key=lambda e: e.timestamp_ns)
        first = outcome.failed_first
        lead = (
            min((e for pod, e in errors if pod == first), key=lambda e: e.timestamp_ns, default=None)
            if first
            else earliest
        )
        if lead is None:
            text = f"the function's first error, on a replica that failed after it:\n{earliest.text}"
            return FailureLead(text, earliest.retryable, after=True)
        return FailureLead(lead.text, lead.retryable)

    def _remote_errors(self, outcome: Outcome) -> list[tuple[str, RemoteError]]:
        """The failure reports in the logs of the job's pods (as the conclusion listed them), each with the
        pod it names (``(replica <host>)``; launchers gather other hosts' reports), else the pod whose log
        holds it."""
        from t9k_provider.decorators import transport
        from t9k_provider.kube.podlogs import parse_lines

        names = {pod["metadata"]["name"] for pod in outcome.pods or ()}
        errors = []
        for name in sorted(names):
            try:
                text = self._client.replica_log(
                    outcome.ref, name, self.recipe.container, tail_lines=ERROR_TAIL_LINES,
                    limit_bytes=LOG_READ_BYTES,
                )  # fmt: skip
            except Exception as exc:
                self.log.warning("cannot read the log of %s: %s", name, exc)
                continue
            for error in transport.remote_errors(parse_lines(text)):
                named = REPLICA.search(error.text.partition("\n")[0])
                errors.append((named.group(1) if named and named.group(1) in names else name, error))
        return errors


def _gpus(decorator: str, gpus: Any, resources: Any) -> None:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"{decorator}: gpus must be a whole number of GPUs per replica, got {gpus!r}")
    listed = [key for key in ("limits", "requests") if GPU in ((resources or {}).get(key) or {})]
    if gpus and listed:
        raise TypeError(
            f"{decorator}: gpus={gpus} and container_resources.{listed[0]}[{GPU}] both ask for "
            "GPUs: use one of them"
        )


def _positive(decorator: str, option: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{decorator}: {option} must be a positive integer, got {value!r}")
    return value


def decorated_operator(decorator: str) -> type[T9kDecoratedOperator]:
    """The operator of ``@task.<decorator>``, ``<Kind>DecoratedOperator``: ``T9kDecoratedOperator`` for the
    recipe's kind. Built on first use, like the kind operators (and not on top of one: in the DAG processor's
    forked parsing process each operator class costs a quarter of a millisecond), so a DAG file pays only for
    the decorators it uses."""
    recipe = manifests.RECIPES[decorator]
    name = f"{recipe.kind}DecoratedOperator"
    built = globals().get(name)
    if built is None:

        def body(namespace: dict[str, object]) -> None:
            namespace.update(__module__=__name__, recipe=recipe, job_kind=recipe.kind)

        built = globals()[name] = types.new_class(name, (T9kDecoratedOperator,), exec_body=body)
    return built


def __getattr__(name: str) -> type[T9kDecoratedOperator]:
    for decorator, recipe in manifests.RECIPES.items():
        if name == f"{recipe.kind}DecoratedOperator":
            return decorated_operator(decorator)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
