"""Every API served for the install beyond the core kinds (apps/v1 workloads, ReplicationControllers,
ServiceAccounts, RBAC, APIServices), through both real clients' typed API classes (``kubernetes`` and
``kubernetes_asyncio``): create, read, replace (and its 409 on a stale resourceVersion), merge patch, list,
watch (ADDED/MODIFIED/DELETED of the object), a 422 naming the field, the status and scale subresources
where the kind has them, and delete. One table row per kind, one scenario for all of them, so that a kind
or a client cannot silently miss a verb.

The cluster is the module's API-only one (no node agents): workloads start at 0 replicas and no pod runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as kclient
from kubernetes import watch as kwatch
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import watch as awatch

from t9k_provider.testing import LocalCluster

pytestmark = pytest.mark.cluster

MERGE_PATCH = "application/merge-patch+json"
RBAC = "rbac.authorization.k8s.io"
API_ERRORS = (kclient.ApiException, aclient.ApiException)
WATCH_SECONDS = 20  # the server ends a watch after this: the bound of a watch that misses DELETED
Path = tuple[str | int, ...]


def template(labels: dict[str, str]) -> dict[str, Any]:
    """A pod template whose pods would be a short host process (none runs here: no node agents)."""
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1", "command": ["sleep", "1"]}]},
    }


def workload(name: str, replicas: bool = True, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {"selector": {"matchLabels": labels}, "template": template(labels), **spec}
    if replicas:
        body["replicas"] = 0
    return {"metadata": {"name": name}, "spec": body}


def replication_controller(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": labels, "template": template(labels)},
    }


def role(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }


def binding(role_kind: str) -> Callable[[str], dict[str, Any]]:
    def make(name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": "view-anything"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
        }

    return make


def api_service(name: str) -> dict[str, Any]:
    version, group = name.split(".", 1)
    return {
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": 100,
            "versionPriority": 10,
            "insecureSkipTLSVerify": True,
            "service": {"namespace": "default", "name": "nowhere"},
        },
    }


def put(obj: Any, path: Path, value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def get(obj: Any, path: Path) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def nested(path: Path, value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for ``("a", "b")``: a merge patch setting one field (string keys only)."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out


def set_field(path: Path, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda body: put(body, path, value)


@dataclass(frozen=True)
class Kind:
    """One served kind: how the typed clients name it and what the scenario sends."""

    kind: str
    api: str  # the API class, same name in both clients
    method: str  # the operations' suffix: create_<method>, read_<method>_scale, ...
    namespaced: bool
    make: Callable[[str], dict[str, Any]]
    update: tuple[Path, Any, Any]  # replace sets path to value; a /status write trying other is ignored
    invalid: Callable[[dict[str, Any]], None]  # makes a valid body invalid ...
    invalid_field: str  # ... with this field named in the 422's causes
    status: tuple[dict[str, Any], Path, Any] | None = None  # status merge patch, a path it sets, its value
    status_ignored: dict[str, Any] = field(default_factory=dict)  # a status the main resource must drop
    scale: bool = False
    prefix: str = ""  # an APIService's name is <version>.<group>: the test's unique part follows this

    @property
    def model(self) -> str:
        return f"V1{self.kind}"


OBSERVED = ({"observedGeneration": 7}, ("status", "observedGeneration"), 7)
PROBE = {
    "type": "Probe",
    "status": "True",
    "reason": "Matrix",
    "message": "set through /status",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
NEGATIVE_REPLICAS = set_field(("spec", "replicas"), -1)
MIN_READY = (("spec", "minReadySeconds"), 5, 9)

APPS_STATUS = {"status": OBSERVED, "status_ignored": {"observedGeneration": 8}}
KINDS = [
    Kind("Deployment", "AppsV1Api", "namespaced_deployment", True, workload, MIN_READY,
         NEGATIVE_REPLICAS, "spec.replicas", **APPS_STATUS, scale=True),
    Kind("ReplicaSet", "AppsV1Api", "namespaced_replica_set", True, workload, MIN_READY,
         NEGATIVE_REPLICAS, "spec.replicas", **APPS_STATUS, scale=True),
    Kind("StatefulSet", "AppsV1Api", "namespaced_stateful_set", True,
         lambda name: workload(name, serviceName=name), MIN_READY,
         NEGATIVE_REPLICAS, "spec.replicas", **APPS_STATUS, scale=True),
    Kind("DaemonSet", "AppsV1Api", "namespaced_daemon_set", True,
         lambda name: workload(name, replicas=False), MIN_READY,
         set_field(("spec", "template", "spec", "restartPolicy"), "Never"),
         "spec.template.spec.restartPolicy", **APPS_STATUS),
    Kind("ReplicationController", "CoreV1Api", "namespaced_replication_controller", True,
         replication_controller, MIN_READY, NEGATIVE_REPLICAS, "spec.replicas", **APPS_STATUS, scale=True),
    Kind("ServiceAccount", "CoreV1Api", "namespaced_service_account", True,
         lambda name: {"metadata": {"name": name}}, (("automountServiceAccountToken",), False, True),
         set_field(("metadata", "name"), "Not_A_Name"), "metadata.name"),
    Kind("Role", "RbacAuthorizationV1Api", "namespaced_role", True,
         role, (("rules", 0, "verbs"), ["watch"], None),
         set_field(("rules", 0, "verbs"), []), "rules[0].verbs"),
    Kind("ClusterRole", "RbacAuthorizationV1Api", "cluster_role", False,
         role, (("rules", 0, "resources"), ["configmaps"], None),
         set_field(("rules", 0, "apiGroups"), []), "rules[0].apiGroups"),
    Kind("RoleBinding", "RbacAuthorizationV1Api", "namespaced_role_binding", True,
         binding("ClusterRole"), (("subjects", 0, "name"), "robot-2", None),
         set_field(("roleRef", "kind"), "Secret"), "roleRef.kind"),
    Kind("ClusterRoleBinding", "RbacAuthorizationV1Api", "cluster_role_binding", False,
         binding("ClusterRole"), (("subjects", 0, "name"), "robot-2", None),
         set_field(("roleRef", "kind"), "Role"), "roleRef.kind"),
    Kind("APIService", "ApiregistrationV1Api", "api_service", False,
         api_service, (("spec", "versionPriority"), 50, 60),
         set_field(("spec", "versionPriority"), 0), "spec.versionPriority",
         status=({"conditions": [PROBE]}, ("status", "conditions", 0, "reason"), "Matrix"),
         status_ignored={"conditions": []}, prefix="v1."),
]  # fmt: skip


async def call(api: Any, operation: str, *args: Any, **kwargs: Any) -> Any:
    """One typed operation of either client: the sync one answers at once, the asyncio one when awaited."""
    result = getattr(api, operation)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def error_status(exc: Exception) -> tuple[int, dict[str, Any]]:
    assert isinstance(exc, API_ERRORS), f"not an API error: {exc!r}"
    return exc.status, json.loads(exc.body)


class Scenario:
    """The verbs of one kind through one client, in the order a user would meet them."""

    def __init__(self, kind: Kind, api_client: Any, ns: str) -> None:
        self.kind, self.client, self.ns = kind, api_client, ns
        module = aclient if isinstance(api_client, aclient.ApiClient) else kclient
        self.api = getattr(module, kind.api)(api_client)
        self.name = self.named(kind.kind.lower())
        self.scope: tuple[str, ...] = (ns,) if kind.namespaced else ()

    def named(self, stem: str) -> str:
        """Unique per test (cluster-scoped kinds share the module's cluster); an APIService's name is
        ``<version>.<group>``."""
        return f"{self.kind.prefix}{stem}-{self.ns}" + (".example.com" if self.kind.prefix else "")

    def dict_of(self, model: Any) -> dict[str, Any]:
        assert type(model).__name__ == self.kind.model, f"{type(model).__name__} is not {self.kind.model}"
        return self.client.sanitize_for_serialization(model)

    async def op(self, verb: str, *args: Any, sub: str = "", **kwargs: Any) -> Any:
        """``<verb>_<method>[_<sub>](name?, namespace?, body?)``."""
        operation = f"{verb}_{self.kind.method}" + (f"_{sub}" if sub else "")
        return await call(self.api, operation, *args, **kwargs)

    async def expect_error(self, status: int, verb: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        with pytest.raises(API_ERRORS) as raised:
            await self.op(verb, *args, **kwargs)
        code, body = error_status(raised.value)
        assert (code, body["kind"], body["status"]) == (status, "Status", "Failure"), body
        return body

    def body(self, name: str = "") -> dict[str, Any]:
        body = self.kind.make(name or self.name)
        body["metadata"]["labels"] = {"matrix": self.ns, "drop": "me"}
        return body

    async def run(self, watched: Callable[[str], Any]) -> list[tuple[str, dict[str, Any]]]:
        """Every verb; ``watched(start)`` starts a watch from the list's resourceVersion before the create and
        is awaited for its events after the delete. A failed step still deletes the object, which ends the
        watch and leaves nothing behind in the module's cluster."""
        start = (await self.op("list", *self.scope)).metadata.resource_version
        events = watched(start)
        try:
            await self.verbs()
        except BaseException:
            with contextlib.suppress(*API_ERRORS):
                await self.op("delete", self.name, *self.scope)
            raise
        return await events

    async def verbs(self) -> None:
        kind, name, scope = self.kind, self.name, self.scope
        created = self.dict_of(await self.op("create", *scope, self.body()))
        assert created["metadata"]["name"] == name and created["metadata"]["uid"]
        path, value, other = kind.update
        for attempt in range(5):  # the server's own controllers (Deployment, APIService...) may write between
            read = self.dict_of(await self.op("read", name, *scope))
            assert read["metadata"]["uid"] == created["metadata"]["uid"]
            put(read, path, value)
            try:
                replaced = self.dict_of(await self.op("replace", name, *scope, read))
                break
            except API_ERRORS as conflict:  # read-modify-write again, as clients do on 409
                assert conflict.status == 409 and attempt < 4, conflict
        assert get(replaced, path) == value
        assert int(replaced["metadata"]["resourceVersion"]) > int(read["metadata"]["resourceVersion"])
        conflict = await self.expect_error(409, "replace", name, *scope, read)  # read's version is stale
        assert conflict["reason"] == "Conflict"

        patch = {"metadata": {"labels": {"drop": None, "patched": "yes"}}}
        patched = self.dict_of(await self.op("patch", name, *scope, patch, _content_type=MERGE_PATCH))
        assert patched["metadata"]["labels"] == {"matrix": self.ns, "patched": "yes"}
        assert get(patched, path) == value

        listed = await self.op("list", *scope, label_selector=f"matrix={self.ns},patched=yes")
        assert [self.dict_of(i)["metadata"]["name"] for i in listed.items] == [name]
        if kind.namespaced:
            everywhere = await call(
                self.api, f"list_{kind.method.removeprefix('namespaced_')}_for_all_namespaces"
            )
            assert (self.ns, name) in {(i.metadata.namespace, i.metadata.name) for i in everywhere.items}

        bad = self.body(self.named("bad"))
        kind.invalid(bad)
        invalid = await self.expect_error(422, "create", *scope, bad)
        assert invalid["reason"] == "Invalid"
        assert (invalid["details"]["kind"], invalid["details"]["name"]) == (
            kind.kind,
            bad["metadata"]["name"],
        )
        assert kind.invalid_field in [c["field"] for c in invalid["details"]["causes"]], invalid

        if kind.status is not None:
            await self.status_subresource(path, value, other)
        if kind.scale:
            await self.scale_subresource()

        await self.op("delete", name, *scope)
        deadline = time.monotonic() + 10
        while True:
            try:
                await self.op("read", name, *scope)
            except API_ERRORS as gone:
                assert gone.status == 404
                break
            assert time.monotonic() < deadline, f"{name} still readable after its delete"
            await asyncio.sleep(0.05)

    async def status_subresource(self, path: Path, value: Any, other: Any) -> None:
        """/status writes the status and keeps the spec; the main resource keeps the status."""
        assert self.kind.status is not None
        status, status_path, status_value = self.kind.status
        name, scope = self.name, self.scope
        body = {**nested(path, other), "status": status}
        written = self.dict_of(
            await self.op("patch", name, *scope, body, sub="status", _content_type=MERGE_PATCH)
        )
        assert get(written, status_path) == status_value
        assert get(written, path) == value, "a /status write changed the spec"
        read = self.dict_of(await self.op("read", name, *scope, sub="status"))
        assert get(read, status_path) == status_value
        ignored = {"status": self.kind.status_ignored}
        main = self.dict_of(await self.op("patch", name, *scope, ignored, _content_type=MERGE_PATCH))
        assert get(main, status_path) == status_value, "the main resource wrote the status"

    async def scale_subresource(self) -> None:
        """autoscaling/v1 Scale: read, patch, a 422, replace; the main resource follows."""
        name, scope = self.name, self.scope
        scale = await self.op("read", name, *scope, sub="scale")
        assert type(scale).__name__ == "V1Scale"
        assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (0, 0, f"app={name}")
        generation = (await self.op("read", name, *scope)).metadata.generation
        scaled = await self.op(
            "patch", name, *scope, {"spec": {"replicas": 2}}, sub="scale", _content_type=MERGE_PATCH
        )
        assert scaled.spec.replicas == 2
        after = await self.op("read", name, *scope)
        assert (after.spec.replicas, after.metadata.generation) == (2, generation + 1)
        bad = await self.expect_error(422, "patch", name, *scope, {"spec": {"replicas": -1}}, sub="scale",
                                      _content_type=MERGE_PATCH)  # fmt: skip
        assert "spec.replicas" in [c["field"] for c in bad["details"]["causes"]], bad
        back = {"metadata": {"name": name, "namespace": self.ns}, "spec": {"replicas": 0}}
        assert (await self.op("replace", name, *scope, back, sub="scale")).spec.replicas == 0
        assert (await self.op("read", name, *scope)).spec.replicas == 0


def summary(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Event types with runs of MODIFIED folded into one: how many updates a watch shows is not fixed."""
    kinds: list[str] = []
    for event_type, _ in events:
        if not (kinds and kinds[-1] == event_type == "MODIFIED"):
            kinds.append(event_type)
    return kinds


def check_watch(scenario: Scenario, events: list[tuple[str, dict[str, Any]]]) -> None:
    assert summary(events) == ["ADDED", "MODIFIED", "DELETED"], [t for t, _ in events]
    assert {o["metadata"]["name"] for _, o in events} == {scenario.name}
    labels = [o["metadata"].get("labels") for t, o in events if t == "MODIFIED"]
    assert {"matrix": scenario.ns, "patched": "yes"} in labels, "the watch missed the patch"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_kubernetes_client(cluster: LocalCluster, ns: str, kind: Kind) -> None:
    """The sync client; its ``watch.Watch`` runs in a thread while the scenario writes (a failed scenario
    waits for the watch's server-side timeout as ``asyncio.run`` ends)."""
    api_client = cluster.api_client()
    scenario = Scenario(kind, api_client, ns)

    def collect(start: str) -> list[tuple[str, dict[str, Any]]]:
        events: list[tuple[str, dict[str, Any]]] = []
        watch = kwatch.Watch()
        for event in watch.stream(
            getattr(scenario.api, f"list_{kind.method}"),
            *scenario.scope,
            resource_version=start,
            field_selector=f"metadata.name={scenario.name}",
            timeout_seconds=WATCH_SECONDS,
        ):
            events.append((event["type"], scenario.dict_of(event["object"])))
            if event["type"] == "DELETED":
                watch.stop()
        return events

    def watched(start: str) -> Any:
        return asyncio.ensure_future(asyncio.to_thread(collect, start))

    async def main() -> list[tuple[str, dict[str, Any]]]:
        return await asyncio.wait_for(scenario.run(watched), 60)

    try:
        check_watch(scenario, asyncio.run(main()))
    finally:
        api_client.close()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_kubernetes_asyncio_client(cluster: LocalCluster, ns: str, kind: Kind) -> None:
    """kubernetes_asyncio; its ``watch.Watch`` is a task of the same loop as the scenario."""

    async def main() -> tuple[Scenario, list[tuple[str, dict[str, Any]]]]:
        async with cluster.async_api_client() as api_client:
            scenario = Scenario(kind, api_client, ns)

            async def collect(start: str) -> list[tuple[str, dict[str, Any]]]:
                events: list[tuple[str, dict[str, Any]]] = []
                async with awatch.Watch().stream(
                    getattr(scenario.api, f"list_{kind.method}"),
                    *scenario.scope,
                    resource_version=start,
                    field_selector=f"metadata.name={scenario.name}",
                    timeout_seconds=WATCH_SECONDS,
                ) as stream:
                    async for event in stream:
                        events.append((event["type"], scenario.dict_of(event["object"])))
                        if event["type"] == "DELETED":
                            break
                return events

            def watched(start: str) -> Any:
                return asyncio.ensure_future(collect(start))

            return scenario, await asyncio.wait_for(scenario.run(watched), 60)

    scenario, events = asyncio.run(main())
    check_watch(scenario, events)
