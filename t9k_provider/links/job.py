"""The extra links of a task's T9k Job: ``T9kJobLink`` ("T9k Job", the job in a console) and
``T9kTensorBoardLink`` ("TensorBoard", the job's TensorBoard, when its spec has a ``tensorboardSpec``).

Each URL is rendered from a template (``{namespace}``, ``{name}``, ``{kind}``, ``{plural}``, ``{uid}``: the
job's; a job's TensorBoard bears the job's name) once the job exists, and stored in XCom right away
(``persist``), so the link works while the job is still running and no cluster access is needed to serve it.
The template is the operator's argument, else the connection's extra, else the ``[t9k]`` option of the same
name (``job_url_template``, ``tensorboard_url_template``): a real cluster's console (T9k's), or the embedded
cluster's console, whose pages and TensorBoard redirects ``t9k-local connection`` puts into the connection.

Airflow 3 calls ``get_link`` in the worker, on the operator that just ran (when the task ends or defers), and
stores the answer under ``xcom_key`` itself: the operator knows its job, so no XCom is read (reading the one a
task that failed before submission never wrote logs an error). Airflow 2 calls it in the webserver, on the
serialized operator (which keeps no templates): there only XCom knows the URL, and a task that stored none
has no link.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom, conf

from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

RENDERED_IN_WORKER = AIRFLOW_V_3_0_PLUS


class TemplatedLink(BaseOperatorLink):
    """A link whose URL the operator renders (its property ``attribute``) from the template ``option``."""

    #: The template's name: the operator's argument, the connection's extra and the ``[t9k]`` option.
    option: ClassVar[str]
    #: The operator's property that holds the URL for the job it submitted or adopted (None: no link).
    attribute: ClassVar[str]

    @property
    def xcom_key(self) -> str:
        """Airflow 3's key for the URL (its task runner stores ``get_link``'s answer there); Airflow 2's
        ``BaseOperatorLink`` has none, and its webserver reads the URL ``persist`` stored under this key."""
        return f"_link_{type(self).__name__}"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        if RENDERED_IN_WORKER:
            return getattr(operator, self.attribute, None) or ""
        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""

    @classmethod
    def url(cls, job: dict[str, Any], *templates: str | None) -> str | None:
        """The URL for ``job`` (its ``JobRef`` fields) from the first of ``templates`` that is set (the
        operator's, the connection's), else the ``[t9k]`` option (read here, in the worker, not for every
        operator a DAG file's parse builds); None without any."""
        template = next((t for t in templates if t), None) or conf.get("t9k", cls.option, fallback=None)
        return template.format(**job) if template else None

    def persist(self, context: Any, operator: Any) -> None:
        """Store the operator's URL where Airflow looks for the link (nothing when it has none)."""
        url = getattr(operator, self.attribute, None)
        if url:
            context["ti"].xcom_push(key=self.xcom_key, value=url)


class T9kJobLink(TemplatedLink):
    name = "T9k Job"
    option = "job_url_template"
    attribute = "job_url"


class T9kTensorBoardLink(TemplatedLink):
    name = "TensorBoard"
    option = "tensorboard_url_template"
    attribute = "tensorboard_url"


class JobLinks:
    """The operator's side of its links: their URLs for the job it submitted or adopted (None before)."""

    manifest: Any
    job_url_template: str | None
    tensorboard_url_template: str | None
    _job: Any  # the operator's JobRef
    hook: Any  # the operator's T9kHook: the connection's templates

    @property
    def job_url(self) -> str | None:
        """The "T9k Job" link's URL."""
        return self._link_url(T9kJobLink, self.job_url_template)

    @property
    def tensorboard_url(self) -> str | None:
        """The "TensorBoard" link's URL, when the job has a TensorBoard (None otherwise)."""
        if not self.has_tensorboard():
            return None
        return self._link_url(T9kTensorBoardLink, self.tensorboard_url_template)

    def has_tensorboard(self) -> bool:
        """Hook point: whether the job gets a TensorBoard (read from the rendered manifest, so that an
        operator resumed after a deferral knows it too)."""
        return declares_tensorboard(self.manifest)

    def _link_url(self, link: type[TemplatedLink], template: str | None) -> str | None:
        if self._job is None:
            return None
        return link.url(self._job._asdict(), template, self.hook.link_template(link.option))


def declares_tensorboard(manifest: Any) -> bool:
    """Whether a rendered manifest (a dict, or YAML/JSON text) asks for a TensorBoard
    (``spec.tensorboardSpec``, which the controller turns into a TensorBoard named after the job); False for
    one that cannot be read."""
    if isinstance(manifest, str):
        import yaml

        try:
            manifest = yaml.safe_load(manifest)
        except yaml.YAMLError:
            return False
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    return isinstance(spec, dict) and bool(spec.get("tensorboardSpec"))
