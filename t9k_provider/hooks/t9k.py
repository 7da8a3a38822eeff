"""``T9kHook``: how operators, sensors and (through its credentials) triggers talk to a cluster.

It reuses the cncf ``kubernetes`` connection type (users keep ``kubernetes_default``) but never touches the
process-global ``kubernetes.client.Configuration``: every hook builds its own Configuration and ApiClient,
so two connections in one worker cannot leak into each other. ``credentials`` resolves the connection on
the worker into a self-contained dict (kubeconfig contents, context, in-cluster flag) that the trigger
receives as kwargs; the triggerer needs neither the connection nor the kubeconfig file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes import client, config

from t9k_provider.hooks.errors import T9kFatalApiError, call_with_retry, classify, describe
from t9k_provider.jobs.constants import GROUP, VERSION
from t9k_provider.kube import podlogs as pod_logs

if TYPE_CHECKING:
    from t9k_provider.hooks.async_t9k import AsyncT9kClient

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
#: Seconds to open a connection; a watch's read waits for its own timeout plus this.
CONNECT_TIMEOUT_SECONDS = 10.0
IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"} if value is not None else False


def build_sync_client(credentials: dict[str, Any]) -> client.ApiClient:
    """An ApiClient bound to its own Configuration (the global default is never read or written)."""
    configuration = client.Configuration()
    if credentials.get("in_cluster"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config_from_dict(
            credentials["kubeconfig"],
            context=credentials.get("context"),
            client_configuration=configuration,
            persist_config=False,
        )
    if credentials.get("disable_verify_ssl"):
        configuration.verify_ssl = False
    return client.ApiClient(configuration=configuration)


class T9kHook(KubernetesHook):
    """Custom-object CRUD for T9k Jobs, their pods' logs and events, over a ``kubernetes`` connection."""

    #: Its own connection type (same fields as ``kubernetes``); any ``kubernetes`` connection works too.
    conn_type = "t9k"
    hook_name = "TensorStack T9k"
    #: Set on the twin ``detached`` builds: its credentials are fixed.
    _detached = False

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Airflow < 3.2 form: the kubernetes fields this hook reads (no XCom-sidecar fields), and the links'
        templates."""
        from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
        from flask_babel import lazy_gettext
        from wtforms import StringField

        widgets = super().get_connection_form_widgets()
        kept = {name: widget for name, widget in widgets.items() if name in CONNECTION_FIELDS}
        links = {
            name: StringField(lazy_gettext(label), widget=BS3TextFieldWidget())
            for name, label in LINK_FIELDS.items()
        }
        return {**kept, **links}

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
        if (
            os.environ.get("KUBERNETES_SERVICE_HOST")
            and Path(config.incluster_config.SERVICE_TOKEN_FILENAME).exists()
        ):
            return {**base, "in_cluster": True}
        default = os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0]
        return {**base, "in_cluster": False, "kubeconfig": _read_kubeconfig(default)}

    def async_client(self) -> AsyncT9kClient:
        """A lease on the shared async client for these credentials, on the running event loop (the
        worker's wait and its log streams; the triggers lease it from their credentials alike)."""
        from t9k_provider.hooks.async_t9k import AsyncT9kClient

        return AsyncT9kClient(self.credentials)

    def get_conn(self) -> client.ApiClient:
        self._is_in_cluster = bool(self.credentials.get("in_cluster"))
        return build_sync_client(self.credentials)

    @cached_property
    def default_namespace(self) -> str:
        """Connection namespace, else the in-cluster service account's namespace, else ``default``."""
        explicit = self._get_field("namespace")
        if explicit:
            return str(explicit)
        if self.credentials.get("in_cluster") and IN_CLUSTER_NAMESPACE_FILE.exists():
            return IN_CLUSTER_NAMESPACE_FILE.read_text().strip() or self.DEFAULT_NAMESPACE
        return self.DEFAULT_NAMESPACE

    def detached(self) -> T9kHook:
        """A second hook on these resolved credentials with its own client and connection pool, built now.

        For ``on_kill``: a signal handler may interrupt a request of this hook (and hold its pool), and must
        neither look up a connection nor build a client. The twin never reloads credentials after a 401.
        """
        twin = type(self)(conn_id=self.conn_id)
        twin.__dict__["credentials"] = self.credentials
        twin._detached = True
        _ = twin.custom_object_client  # builds the ApiClient
        return twin

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """``call_with_retry``, plus one fresh login after a 401 (expired exec-plugin or rotated token)."""
        try:
            return call_with_retry(what, fn)
        except client.ApiException as exc:
            if exc.status != 401 or self._detached:
                raise
            self.log.info("%s: 401 from the API server, reloading the connection's credentials", what)
            for cached in ("credentials", "api_client", "core_v1_client", "custom_object_client"):
                self.__dict__.pop(cached, None)
            return call_with_retry(what, fn)

    def _to_dict(self, obj: Any) -> Any:
        return obj if isinstance(obj, dict) else self.api_client.sanitize_for_serialization(obj)

    # -- T9k Jobs (custom objects) -------------------------------------------------------------------

    def create_job(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create once (no retry of the POST itself, whose outcome may be unknown); 409 is the caller's."""
        try:
            return self.custom_object_client.create_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, body
            )
        except client.ApiException as exc:
            if exc.status == 404:
                raise T9kFatalApiError(
                    f"cannot create {plural}.{GROUP}/{VERSION} in namespace {namespace!r}: {describe(exc)}. "
                    "Is the T9k CRD installed and does the namespace exist?"
                ) from exc
            if exc.status == 409:
                raise
            raise classify(exc, f"create {plural}/{body.get('metadata', {}).get('name')}") from exc

    def get_job(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """Read a job; ``ApiException`` 404 propagates so callers can tell "gone" from "unreachable"."""
        return self._call(
            f"get {plural}/{name}",
            lambda: self.custom_object_client.get_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name
            ),
        )

    def watch_job(
        self, plural: str, namespace: str, name: str, resource_version: str | None, timeout: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(type, job)`` events of one job after ``resource_version`` (bookmarks included) until the server
        ends the watch after ``timeout`` seconds (at least one). An ERROR event (410 Expired) raises
        ``ApiException``; a failure is raised as is (the caller decides whether to read instead)."""
        from kubernetes.watch.watch import iter_resp_lines

        seconds = max(1, math.ceil(timeout))
        response = self.custom_object_client.list_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            plural,
            field_selector=f"metadata.name={name}",
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=seconds,
            watch=True,
            _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT_SECONDS, seconds + CONNECT_TIMEOUT_SECONDS),
        )
        try:
            for line in iter_resp_lines(response):
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    exc = client.ApiException(status=int(obj.get("code") or 500), reason=obj.get("reason"))
                    exc.body = json.dumps(obj)
                    raise exc
                yield str(event.get("type")), obj
        finally:
            response.close()
            response.release_conn()

    def patch_job_annotations(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        body = {"metadata": {"annotations": annotations}}
        self._call(
            f"annotate {plural}/{name}",
            lambda: self.custom_object_client.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, body
            ),
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
        guarded = uid or resource_version
        preconditions = (
            client.V1Preconditions(uid=uid, resource_version=resource_version) if guarded else None
        )
        options = client.V1DeleteOptions(propagation_policy="Foreground", preconditions=preconditions)

        def call() -> bool:
            try:
                self.custom_object_client.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, body=options
                )
            except client.ApiException as exc:
                if exc.status in (404, 409):  # gone, or a precondition failed
                    return False
                raise
            return True

        return self._call(f"delete {plural}/{name}", call)

    # -- pods, logs, events -----------------------------------------------------------------------------

    def list_nodes(self) -> list[dict[str, Any]]:
        """The cluster's nodes (the wait asks which GPUs one node can give: ``waiting.placement``)."""
        result = self._call("list nodes", lambda: self.core_v1_client.list_node())
        return [self._to_dict(n) for n in result.items]

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        result = self._call(
            f"list pods {label_selector}",
            lambda: self.core_v1_client.list_namespaced_pod(namespace, label_selector=label_selector),
        )
        return [self._to_dict(p) for p in result.items]

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
        kwargs: dict[str, Any] = {"container": container, "timestamps": True, "limit_bytes": limit_bytes}
        if since_seconds:
            kwargs["since_seconds"] = since_seconds
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines

        def call() -> str:
            response = self.core_v1_client.read_namespaced_pod_log(
                pod, namespace, _preload_content=False, **kwargs
            )
            return response.data.decode("utf-8", errors="replace")

        return self._call(f"read log of {pod}/{container}", call)

    def list_events(self, namespace: str, involved_name: str) -> list[dict[str, Any]]:
        result = self._call(
            f"list events of {involved_name}",
            lambda: self.core_v1_client.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={involved_name}", resource_version="0"
            ),
        )
        return [self._to_dict(e) for e in result.items]

    def test_connection(self) -> tuple[bool, str]:
        try:
            self.custom_object_client.list_namespaced_custom_object(
                GROUP, VERSION, self.default_namespace, "genericjobs", limit=1
            )
        except Exception as exc:
            return False, describe(exc)
        return True, "Connection successfully tested: T9k Job API reachable"


def _parse_kubeconfig(value: Any, source: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        parsed = yaml.safe_load(value)
    if not isinstance(parsed, dict):
        raise T9kFatalApiError(f"{source}: not a kubeconfig document")
    return parsed


def _read_kubeconfig(path: str) -> dict[str, Any]:
    file = Path(path).expanduser()
    try:
        return _parse_kubeconfig(file.read_text(), str(file))
    except OSError as exc:
        raise T9kFatalApiError(f"cannot read kubeconfig {file}: {exc}") from exc
