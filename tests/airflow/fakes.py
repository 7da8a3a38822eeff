"""In-memory stand-ins for the cluster API used by the Airflow unit tests: the sync hook (``FakeHook``), the
async client lease and ``KubeApi`` over its store (``StoreApi``), a task instance, an operator bound to a
fake hook (``make``)."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

from t9k_provider.kube.api import ApiError
from t9k_provider.operators import T9kJobOperator
from tests.support.builders import generic_manifest, with_status


def api_error(status: int, message: str = "") -> ApiError:
    """What ``KubeApi`` (the hook's and the waits' client) raises for an API server's answer."""
    return ApiError(status, {"kind": "Status", "message": message or f"HTTP {status}", "code": status})


class FakeTI:
    def __init__(self, **overrides: Any) -> None:
        self.dag_id = "dag"
        self.task_id = "train"
        self.run_id = "manual__2026-01-01T00:00:00+00:00"
        self.map_index = -1
        self.try_number = 1
        self.max_tries = 0
        self.start_date = datetime.now(timezone.utc)
        self.xcoms: dict[str, Any] = {}
        self.__dict__.update(overrides)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def get_first_reschedule_date(self, context: Any) -> None:
        return None  # first poke of a rescheduled sensor


class FakeHook:
    """The ``T9kHook`` surface the operator and sensor use, over an in-memory store.

    ``phases`` is a script: each ``get_job`` pops the next status to show (the last one sticks), standing in
    for the controller. ``failures`` maps a method name to exceptions raised by its next calls.
    """

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.script: list[tuple[str, tuple[tuple[str, str, str], ...]]] = []
        self.calls: list[tuple[str, Any]] = []
        self.failures: dict[str, list[BaseException]] = {}
        self.pods: list[dict[str, Any]] = []
        self.logs: dict[tuple[str, str], str] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.nodes: list[dict[str, Any]] = []
        self.default_namespace = "conn-ns"
        self.link_templates: dict[str, str] = {}  # the connection's extras of the links' templates
        self.credentials = {"in_cluster": False, "kubeconfig": {"clusters": []}, "context": None}
        self._uid = 0

    def link_template(self, option: str) -> str | None:
        return self.link_templates.get(option)

    def _maybe_fail(self, method: str) -> None:
        queue = self.failures.get(method)
        if queue:
            raise queue.pop(0)

    def put(self, job: dict[str, Any]) -> dict[str, Any]:
        self._uid += 1
        job = copy.deepcopy(job)
        meta = job.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{self._uid}")
        meta.setdefault("creationTimestamp", datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.jobs[(meta["namespace"], meta["name"])] = job
        return job

    def create_job(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", body))
        self._maybe_fail("create_job")
        if (namespace, body["metadata"]["name"]) in self.jobs:
            raise api_error(409, "already exists")
        return copy.deepcopy(self.put(body))

    def get_job(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("get", name))
        self._maybe_fail("get_job")
        if (namespace, name) not in self.jobs:
            raise api_error(404, "not found")
        job = self.jobs[(namespace, name)]
        if self.script:
            phase, conditions = self.script[0] if len(self.script) == 1 else self.script.pop(0)
            job.update(with_status(job, phase, *conditions))
        return copy.deepcopy(job)

    def detached(self) -> FakeHook:
        return self

    def async_client(self) -> StoreApi:
        return StoreApi(self)

    def patch_job_annotations(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        self.calls.append(("annotate", annotations))
        self.jobs[(namespace, name)]["metadata"].setdefault("annotations", {}).update(annotations)

    def delete_job(self, plural: str, namespace: str, name: str, uid: str | None = None, **_: Any) -> bool:
        self.calls.append(("delete", name))
        job = self.jobs.get((namespace, name))
        if job is None or (uid and job["metadata"]["uid"] != uid):
            return False
        del self.jobs[(namespace, name)]
        return True

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self.calls.append(("list_pods", label_selector))
        key, _, value = label_selector.partition("=")
        return [copy.deepcopy(p) for p in self.pods if p["metadata"]["labels"].get(key) == value]

    def read_pod_log(self, namespace: str, pod: str, container: str, **kwargs: Any) -> str:
        self.calls.append(("log", (pod, container, kwargs)))
        text = self.logs.get((pod, container), "")
        if kwargs.get("tail_lines"):
            text = "\n".join(text.splitlines()[-kwargs["tail_lines"] :])
        if kwargs.get("limit_bytes"):
            text = text.encode()[: kwargs["limit_bytes"]].decode(errors="ignore")
        return text

    def list_events(self, namespace: str, involved_name: str) -> list[dict[str, Any]]:
        return self.events.get(involved_name, [])

    def list_nodes(self) -> list[dict[str, Any]]:
        self.calls.append(("list_nodes", None))
        return copy.deepcopy(self.nodes)

    def deletes(self) -> list[str]:
        return [arg for call, arg in self.calls if call == "delete"]


class StoreApi:
    """``FakeHook.async_client()``: the client lease and ``KubeApi`` a wait reads through (in the worker and
    in the trigger), over the hook's store, scripts and failures; its calls are the hook's, so a test that
    wraps a hook method sees them. It refuses watches (as a proxy that cannot stream): a wait then reads its
    job every poll, so a script plays out one state per read. ``follow_log`` streams what the store holds
    of a container's log, then ends (as when the container stopped)."""

    def __init__(self, hook: FakeHook) -> None:
        self.hook = hook
        self.api = self

    async def __aenter__(self) -> StoreApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def reauthenticate(self) -> None:
        self.hook.calls.append(("reauthenticate", None))

    async def get(self, rt: Any, namespace: str, name: str) -> dict[str, Any]:
        return self.hook.get_job(rt.plural, namespace, name)

    async def list(self, rt: Any, namespace: str | None, **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        if rt.plural == "pods":
            return self.hook.list_pods(str(namespace), kwargs["label_selector"]), "1"
        if rt.plural == "nodes":
            return self.hook.list_nodes(), "1"
        return [], "1"  # a watch's starting version

    async def watch(self, rt: Any, namespace: str, version: str, timeout: int, **kwargs: Any) -> Any:
        self.hook.calls.append(("watch", kwargs.get("field_selector")))
        self.hook._maybe_fail("watch_job")
        raise api_error(405, "watch is not supported")
        yield  # an async generator, as KubeApi.watch is

    async def delete(self, rt: Any, namespace: str, name: str, **kwargs: Any) -> dict[str, Any]:
        self.hook.delete_job(rt.plural, namespace, name, uid=kwargs.get("uid"))
        return {}

    async def read_log(self, namespace: str, pod: str, container: str, **kwargs: Any) -> str:
        limit = kwargs.get("limit_bytes")
        return self.hook.read_pod_log(namespace, pod, container, limit_bytes=limit)

    async def follow_log(self, namespace: str, pod: str, container: str, **kwargs: Any) -> Any:
        self.hook.calls.append(("follow", (pod, container)))
        for line in self.hook.logs.get((pod, container), "").splitlines():
            yield line


def make(hook: FakeHook, cls: type[T9kJobOperator] = T9kJobOperator, **kwargs: Any) -> T9kJobOperator:
    """An operator (``cls``) of a GenericJob, bound to ``hook``; it waits in the worker, polling fast."""
    kwargs.setdefault("manifest", generic_manifest())
    kwargs.setdefault("poll_interval", 0.01)
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("wait_before_defer", 0)  # deferrable tests defer at once unless they test that wait
    op = cls(task_id="train", **kwargs)
    op.__dict__["hook"] = hook
    return op
