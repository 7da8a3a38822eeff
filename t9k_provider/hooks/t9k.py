"""``T9kHook``: how operators, sensors and (through its credentials) triggers talk to a cluster.

It reads the cncf ``kubernetes`` connection's fields (users keep ``kubernetes_default``) and never touches a
process-global client configuration: ``credentials`` resolves the connection on the worker into a
self-contained dict (kubeconfig contents, context, in-cluster flag) that the trigger receives as kwargs, so
the triggerer needs neither the connection nor the kubeconfig file. Its calls block, and are made with the
waits' own async client on the process's ``portal``: neither the generated Kubernetes clients nor the cncf
hook is imported on a task's way
(docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook, Connection

from t9k_provider.hooks import portal
from t9k_provider.hooks.async_t9k import AsyncT9kClient
from t9k_provider.hooks.errors import T9kFatalApiError, api_status, call_with_retry, classify, describe
from t9k_provider.jobs.constants import API_VERSION, KIND_NAMES
from t9k_provider.kube import kubeconfig
from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.kube.resources import EVENTS, NODES, PODS, ResourceType

if TYPE_CHECKING:
    from t9k_provider.kube.api import KubeApi

#: The templates of the task's extra links (``links.job``) a connection may carry, with their form labels.
LINK_FIELDS = {
    "job_url_template": "T9k Job link template",
    "tensorboard_url_template": "TensorBoard link template",
}
#: Connection extras this hook reads; the ``t9k`` connection type declares exactly these.
CONNECTION_FIELDS = (
    "in_cluster",
    "kube_config_path",
    "kube_config",
    "namespace",
    "cluster_context",
    "disable_verify_ssl",
    *LINK_FIELDS,
)
T = TypeVar("T")
#: The T9k Job kinds by plural (the hook is called with plurals, as the Kubernetes API's paths are).
KINDS_BY_PLURAL = {f"{kind.lower()}s": kind for kind in KIND_NAMES}


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"} if value is not None else False


def job_type(plural: str) -> ResourceType:
    return ResourceType(API_VERSION, KINDS_BY_PLURAL.get(plural, ""), plural)


class T9kHook(BaseHook):
    """Custom-object CRUD for T9k Jobs, their pods' logs and events, over a ``kubernetes`` connection."""

    conn_name_attr = "kubernetes_conn_id"
    default_conn_name = "kubernetes_default"
    #: Its own connection type (the ``kubernetes`` fields it reads); any ``kubernetes`` connection works too.
    conn_type = "t9k"
    hook_name = "TensorStack T9k"
    DEFAULT_NAMESPACE = "default"
    #: Set on the twin ``detached`` builds: its credentials are fixed.
    _detached = False

    def __init__(
        self,
        conn_id: str | None = None,
        kubernetes_conn_id: str | None = default_conn_name,
        cluster_context: str | None = None,
        config_file: str | None = None,
        config_dict: dict[str, Any] | None = None,
        in_cluster: bool | None = None,
        disable_verify_ssl: bool | None = None,
    ) -> None:
        super().__init__()
        self.conn_id = conn_id or kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.config_dict = config_dict
        self.in_cluster = in_cluster
        self.disable_verify_ssl = disable_verify_ssl

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:
        """The connection; a missing ``kubernetes_default`` is an empty one (the default kubeconfig or the
        pod's service account), as the cncf hook has it."""
        try:
            return super().get_connection(conn_id)  # type: ignore[return-value]
        except AirflowNotFoundException:
            if conn_id == cls.default_conn_name:
                return Connection(conn_id=cls.default_conn_name)
            raise

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Airflow < 3.2 form: the kubernetes fields this hook reads, and the links' templates."""
        from flask_appbuilder.fieldwidgets import BS3PasswordFieldWidget, BS3TextFieldWidget
        from flask_babel import lazy_gettext
        from wtforms import BooleanField, PasswordField, StringField

        def text(label: str) -> Any:
            return StringField(lazy_gettext(label), widget=BS3TextFieldWidget())

        return {
            "in_cluster": BooleanField(lazy_gettext("In cluster configuration")),
            "kube_config_path": text("Kube config path"),
            "kube_config": PasswordField(
                lazy_gettext("Kube config (JSON format)"), widget=BS3PasswordFieldWidget()
            ),
            "namespace": text("Namespace"),
            "cluster_context": text("Cluster context"),
            "disable_verify_ssl": BooleanField(lazy_gettext("Disable SSL")),
            **{name: text(label) for name, label in LINK_FIELDS.items()},
        }

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {"hidden_fields": ["host", "schema", "login", "password", "port", "extra"], "relabeling": {}}

    @cached_property
    def conn_extras(self) -> dict[str, Any]:
        return dict(self.get_connection(self.conn_id).extra_dejson) if self.conn_id else {}

    def _get_field(self, name: str) -> Any:
        """An extra, also under its pre-2.3 name ``extra__kubernetes__<name>``."""
        extras = self.conn_extras
        if name in extras:
            return extras[name] or None
        return extras.get(f"extra__kubernetes__{name}") or None

    @staticmethod
    def _coalesce_param(*params: Any) -> Any:
        return next((p for p in params if p is not None), None)

    def link_template(self, option: str) -> str | None:
        """The connection's template of an extra link (``LINK_FIELDS``), None when it has none."""
        value = self._get_field(option)
        return str(value) if value else None

    @cached_property
    def credentials(self) -> dict[str, Any]:
        """The connection resolved into JSON-safe data: what the triggerer needs to open its own client."""
        in_cluster = self._coalesce_param(self.in_cluster, _truthy(self._get_field("in_cluster")) or None)
        context = self._coalesce_param(self.cluster_context, self._get_field("cluster_context"))
        path = self._coalesce_param(self.config_file, self._get_field("kube_config_path"))
        inline = self._get_field("kube_config")
        chosen = [
            name
            for name, value in (
                ("in_cluster", in_cluster),
                ("kube_config", inline),
                ("kube_config_path", path),
                ("config_dict", self.config_dict),
            )
            if value
        ]
        if len(chosen) > 1:
            raise T9kFatalApiError(
                f"connection {self.conn_id!r}: {', '.join(chosen)} are mutually exclusive; set only one"
            )
        disable_verify_ssl = self._coalesce_param(
            self.disable_verify_ssl, _truthy(self._get_field("disable_verify_ssl"))
        )
        base: dict[str, Any] = {"context": context, "disable_verify_ssl": bool(disable_verify_ssl)}
        if in_cluster:
            return {**base, "in_cluster": True}
        if inline:
            return {**base, "in_cluster": False, "kubeconfig": _parse_kubeconfig(inline, "kube_config")}
        if path:
            return {**base, "in_cluster": False, "kubeconfig": _read_kubeconfig(str(path))}
        if self.config_dict:
            return {**base, "in_cluster": False, "kubeconfig": dict(self.config_dict)}
        if kubeconfig.in_a_pod():
            return {**base, "in_cluster": True}
        return {**base, "in_cluster": False, "kubeconfig": _read_kubeconfig(kubeconfig.default_kubeconfig())}

    def async_client(self) -> AsyncT9kClient:
        """A lease on the shared async client for these credentials, on the running event loop (the
        worker's wait and its log streams; the triggers lease it from their credentials alike)."""
        return AsyncT9kClient(self.credentials)

    def get_conn(self) -> dict[str, Any]:
        """The resolved credentials (``credentials``): what a client of this connection is built from."""
        return self.credentials

    @cached_property
    def default_namespace(self) -> str:
        """Connection namespace, else the in-cluster service account's namespace, else ``default``."""
        explicit = self._get_field("namespace")
        if explicit:
            return str(explicit)
        namespace_file = kubeconfig.SERVICE_ACCOUNT / "namespace"
        if self.credentials.get("in_cluster") and namespace_file.exists():
            return namespace_file.read_text().strip() or self.DEFAULT_NAMESPACE
        return self.DEFAULT_NAMESPACE

    def detached(self) -> T9kHook:
        """A second hook on these resolved credentials, its client built now.

        For ``on_kill``: a signal handler must neither look up a connection nor build a client. The twin
        never reloads credentials after a 401.
        """
        twin = type(self)(conn_id=self.conn_id)
        twin.__dict__["credentials"] = self.credentials
        twin._detached = True
        portal.PORTAL.call(self.credentials, _nothing)
        return twin

    def _request(self, request: Callable[[KubeApi], Awaitable[T]]) -> T:
        return portal.PORTAL.call(self.credentials, request)

    def _call(self, what: str, request: Callable[[KubeApi], Awaitable[T]]) -> T:
        """``call_with_retry``, plus one fresh login after a 401 (expired exec-plugin or rotated token)."""
        try:
            return call_with_retry(what, lambda: self._request(request))
        except Exception as exc:
            if api_status(exc) != 401 or self._detached:
                raise
            self.log.info("%s: 401 from the API server, reloading the connection's credentials", what)
            portal.PORTAL.retire(self.credentials)
            self.__dict__.pop("credentials", None)
            return call_with_retry(what, lambda: self._request(request))

    # -- T9k Jobs (custom objects) -------------------------------------------------------------------

    def create_job(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create once (no retry of the POST itself, whose outcome may be unknown); 409 is the caller's."""
        try:
            return self._request(lambda api: api.create(job_type(plural), namespace, body))
        except Exception as exc:
            status = api_status(exc)
            if status == 404:
                raise T9kFatalApiError(
                    f"cannot create {plural}.{API_VERSION} in namespace {namespace!r}: {describe(exc)}. "
                    "Is the T9k CRD installed and does the namespace exist?"
                ) from exc
            if status == 409:
                raise
            raise classify(exc, f"create {plural}/{body.get('metadata', {}).get('name')}") from exc

    def get_job(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """Read a job; the API's 404 propagates so callers can tell "gone" from "unreachable"."""
        return self._call(f"get {plural}/{name}", lambda api: api.get(job_type(plural), namespace, name))

    def patch_job_annotations(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        body = {"metadata": {"annotations": annotations}}
        self._call(
            f"annotate {plural}/{name}", lambda api: api.patch(job_type(plural), namespace, name, body)
        )

    def delete_job(
        self,
        plural: str,
        namespace: str,
        name: str,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete with foreground propagation; ``uid`` guards against deleting a newer job of the same name,
        ``resource_version`` against deleting one that changed since it was read.

        Returns False when there was nothing (or only a different or changed job) to delete.
        """

        async def delete(api: KubeApi) -> bool:
            try:
                await api.delete(
                    job_type(plural), namespace, name, uid=uid, resource_version=resource_version,
                    propagation="Foreground",
                )  # fmt: skip
            except Exception as exc:
                if api_status(exc) in (404, 409):  # gone, or a precondition failed
                    return False
                raise
            return True

        return self._call(f"delete {plural}/{name}", delete)

    # -- pods, logs, events -----------------------------------------------------------------------------

    def list_nodes(self) -> list[dict[str, Any]]:
        """The cluster's nodes (the wait asks which GPUs one node can give: ``waiting.placement``)."""
        return self._call("list nodes", lambda api: _items(api.list(NODES, None)))

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        return self._call(
            f"list pods {label_selector}",
            lambda api: _items(api.list(PODS, namespace, label_selector=label_selector)),
        )

    def read_pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        limit_bytes: int = pod_logs.READ_LIMIT_BYTES,
    ) -> str:
        """One bounded, timestamped read of a container's log (callers resume from the last timestamp)."""

        def read(api: KubeApi) -> Awaitable[str]:
            return api.read_log(
                namespace, pod, container, limit_bytes=limit_bytes, since_seconds=since_seconds,
                tail_lines=tail_lines,
            )  # fmt: skip

        return self._call(f"read log of {pod}/{container}", read)

    def list_events(self, namespace: str, involved_name: str) -> list[dict[str, Any]]:
        selector = f"involvedObject.name={involved_name}"
        return self._call(
            f"list events of {involved_name}",
            lambda api: _items(api.list(EVENTS, namespace, field_selector=selector, resource_version="0")),
        )

    def test_connection(self) -> tuple[bool, str]:
        try:
            self._request(lambda api: api.list(job_type("genericjobs"), self.default_namespace, limit=1))
        except Exception as exc:
            return False, describe(exc)
        return True, "Connection successfully tested: T9k Job API reachable"


async def _nothing(api: KubeApi) -> None:
    return None


async def _items(listing: Awaitable[tuple[list[dict[str, Any]], str]]) -> list[dict[str, Any]]:
    items, _ = await listing
    return items


def _parse_kubeconfig(value: Any, source: str) -> dict[str, Any]:
    try:
        return kubeconfig.parse_kubeconfig(value, source)
    except kubeconfig.KubeconfigError as exc:
        raise T9kFatalApiError(str(exc)) from exc


def _read_kubeconfig(path: str) -> dict[str, Any]:
    try:
        return kubeconfig.read_kubeconfig(path)
    except kubeconfig.KubeconfigError as exc:
        raise T9kFatalApiError(str(exc)) from exc
