"""T9kHook: connection resolution, client isolation, error classification, API calls."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_provider.hooks import errors
from t9k_provider.hooks.t9k import CONNECTION_FIELDS, T9kHook
from t9k_provider.kube import podlogs as pod_logs
from t9k_provider.kube.api import ApiError
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.airflow.fakes import api_error
from tests.support.scripted_server import ScriptedServer as FakeApiServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def api_server() -> Iterator[Callable[[], FakeApiServer]]:
    started: list[FakeApiServer] = []

    def start() -> FakeApiServer:
        started.append(FakeApiServer())
        return started[-1]

    yield start
    for server in started:
        server.stop()


def kubeconfig(server: str = "http://127.0.0.1:6443", token: str = "tok") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [
            {"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "ignored"}},
            {"name": "other", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "ctx",
    }


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, extra: dict[str, Any]) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )


def test_kube_config_path_is_read_on_the_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig()))
    connection(
        monkeypatch, "k1", {"kube_config_path": str(path), "namespace": "team", "cluster_context": "other"}
    )
    hook = T9kHook(conn_id="k1")
    assert hook.credentials == {
        "context": "other",
        "disable_verify_ssl": False,
        "in_cluster": False,
        "kubeconfig": kubeconfig(),
    }
    assert hook.default_namespace == "team"


def test_inline_kube_config_and_prefixed_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "k2", {"extra__kubernetes__kube_config": json.dumps(kubeconfig(token="inline"))})
    hook = T9kHook(conn_id="k2")
    assert hook.credentials["kubeconfig"]["users"][0]["user"]["token"] == "inline"
    assert hook.default_namespace == "default"


def test_in_cluster_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "k3", {"in_cluster": True})
    assert T9kHook(conn_id="k3").credentials["in_cluster"] is True


def test_mutually_exclusive_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    connection(monkeypatch, "k4", {"in_cluster": True, "kube_config_path": str(tmp_path / "x")})
    with pytest.raises(errors.T9kFatalApiError, match="mutually exclusive"):
        _ = T9kHook(conn_id="k4").credentials


def test_missing_kubeconfig_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    connection(monkeypatch, "k5", {"kube_config_path": str(tmp_path / "missing")})
    with pytest.raises(errors.T9kFatalApiError, match="cannot read kubeconfig"):
        _ = T9kHook(conn_id="k5").credentials


def test_clients_of_two_connections_never_share_configuration(
    monkeypatch: pytest.MonkeyPatch, api_server: Callable[[], FakeApiServer]
) -> None:
    """Each hook talks to its connection's server with its connection's token, in one process."""
    one, two = api_server(), api_server()
    one.answer("GET", 200, {"metadata": {"name": "x"}})
    two.answer("GET", 200, {"metadata": {"name": "x"}})
    connection(monkeypatch, "a", {"kube_config": json.dumps(kubeconfig(one.url, "ta"))})
    connection(monkeypatch, "b", {"kube_config": json.dumps(kubeconfig(two.url, "tb"))})
    T9kHook(conn_id="a").get_job("genericjobs", "ns", "x")
    T9kHook(conn_id="b").get_job("genericjobs", "ns", "x")
    assert [r.token for r in one.requests] == ["ta"] and [r.token for r in two.requests] == ["tb"]
    assert one.requests[0].path == "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/x"


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (api_error(429), True),
        (api_error(503), True),
        (api_error(409), False),
        (api_error(410), False),
        (api_error(403), False),
        (ConnectionResetError(), True),
        (ValueError("bug"), False),
    ],
)
def test_is_transient(exc: BaseException, transient: bool) -> None:
    assert errors.is_transient(exc) is transient


@pytest.mark.parametrize(
    ("status", "fatal", "text"),
    [
        (400, True, "rejected"),
        (422, True, "rejected"),
        (403, True, "RBAC"),
        (401, False, "unauthorized"),
        (500, False, ""),
    ],
)
def test_classify(status: int, fatal: bool, text: str) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    exc = api_error(status, "server says no")
    assert errors.api_status(exc) == status
    result = errors.classify(exc, "create job")
    assert isinstance(result, AirflowFailException) is fatal
    assert text in str(result) and "server says no" in str(result)


def test_call_with_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors.time, "sleep", lambda _: None)
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise api_error(503)
        return "ok"

    assert errors.call_with_retry("get", flaky) == "ok" and len(attempts) == 3
    with pytest.raises(errors.T9kApiError, match="unavailable after 5 attempts"):
        errors.call_with_retry("get", lambda: (_ for _ in ()).throw(api_error(502)))
    with pytest.raises(type(api_error(404))):
        errors.call_with_retry("get", lambda: (_ for _ in ()).throw(api_error(404)))


def test_retry_after_is_honoured() -> None:
    exc = api_error(429)
    exc.headers = {"Retry-After": "3"}
    assert errors.backoff_seconds(0, exc) == 3.0
    throttled = ApiError.from_answer(429, '{"kind":"Status","code":429}', {"Retry-After": "4"})
    assert errors.backoff_seconds(0, throttled) == 4.0


def test_failures_below_http_have_no_status() -> None:
    """Only an API server's answer has a status, whatever attributes another exception carries."""
    odd = ConnectionResetError("reset")
    odd.status = 404  # type: ignore[attr-defined]
    assert errors.api_status(odd) is None and errors.is_transient(odd)
    assert errors.api_status(api_error(404)) == 404


def test_create_missing_crd_is_fatal_with_hint(
    monkeypatch: pytest.MonkeyPatch, api_server: Callable[[], FakeApiServer]
) -> None:
    server = api_server()
    server.answer("POST", 404, {"kind": "Status", "message": "the server could not find the resource"})
    hook = hook_of(monkeypatch, server, "k6")
    with pytest.raises(errors.T9kFatalApiError, match="Is the T9k CRD installed"):
        hook.create_job("genericjobs", "ns", {"metadata": {"name": "x"}})


def test_create_forbidden_is_fatal(
    monkeypatch: pytest.MonkeyPatch, api_server: Callable[[], FakeApiServer]
) -> None:
    server = api_server()
    server.answer("POST", 403, {"kind": "Status", "message": "cannot create genericjobs"})
    hook = hook_of(monkeypatch, server, "k6")
    with pytest.raises(errors.T9kFatalApiError, match="permission denied"):
        hook.create_job("genericjobs", "ns", {"metadata": {"name": "x"}})
    assert len(server.requests) == 1  # a POST is never blindly repeated


def test_delete_uses_foreground_and_guards(
    monkeypatch: pytest.MonkeyPatch, api_server: Callable[[], FakeApiServer]
) -> None:
    server = api_server()
    server.answer("DELETE", 200, {"kind": "Status"})
    server.answer("DELETE", 409, {"kind": "Status", "reason": "Conflict", "message": "precondition failed"})
    hook = hook_of(monkeypatch, server, "k6")
    assert hook.delete_job("genericjobs", "ns", "x", uid="u1", resource_version="42") is True
    options = server.requests[0].body
    assert options["propagationPolicy"] == "Foreground"
    assert options["preconditions"] == {"uid": "u1", "resourceVersion": "42"}
    assert hook.delete_job("genericjobs", "ns", "x", uid="u1") is False
    assert server.requests[1].body["preconditions"] == {"uid": "u1"}


def test_a_401_reloads_credentials_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, api_server: Callable[[], FakeApiServer]
) -> None:
    """A rotated kubeconfig file (or an exec plugin's new token) is read again after a 401."""
    server = api_server()
    server.answer("GET", 401, {"kind": "Status", "message": "token expired"})
    server.answer("GET", 200, {"kind": "GenericJob", "metadata": {"name": "x"}})
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(server.url, "old")))
    connection(monkeypatch, "k7", {"kube_config_path": str(path)})
    hook = T9kHook(conn_id="k7")
    assert hook.credentials["kubeconfig"]["users"][0]["user"]["token"] == "old"
    path.write_text(yaml.safe_dump(kubeconfig(server.url, "new")))
    assert hook.get_job("genericjobs", "ns", "x")["metadata"] == {"name": "x"}
    assert [r.token for r in server.requests] == ["old", "new"]  # once on the stale token, once fresh


def test_detached_twin_is_built_now_and_never_reloads(
    monkeypatch: pytest.MonkeyPatch, api_server: Callable[[], FakeApiServer]
) -> None:
    """What on_kill uses from a signal handler: no connection lookup, no client to build, no reload."""
    server = api_server()
    hook = hook_of(monkeypatch, server, "k8")
    twin = hook.detached()
    assert "credentials" in twin.__dict__
    monkeypatch.delenv("AIRFLOW_CONN_K8")  # the connection is not looked up again
    server.answer("GET", 401, {"kind": "Status", "message": "token expired"})
    with pytest.raises(Exception, match="token expired"):
        twin.get_job("genericjobs", "ns", "x")
    assert len(server.requests) == 1  # nothing reloaded, nothing retried


def test_logs_events_and_pods_are_read_with_their_options(
    monkeypatch: pytest.MonkeyPatch, api_server: Callable[[], FakeApiServer]
) -> None:
    server = api_server()
    server.answer("GET", 200, "2026-11-30T00:00:00Z hello\n")
    server.answer("GET", 200, {"items": [{"metadata": {"name": "e"}}], "metadata": {}})
    server.answer("GET", 200, {"items": [{"metadata": {"name": "p"}}], "metadata": {}})
    hook = hook_of(monkeypatch, server, "k9")
    assert (
        hook.read_pod_log("ns", "p", "main", since_seconds=5, tail_lines=3) == "2026-11-30T00:00:00Z hello\n"
    )
    assert hook.list_events("ns", "job") == [{"metadata": {"name": "e"}, "apiVersion": "v1", "kind": "Event"}]
    assert hook.list_pods("ns", "a=b")[0]["metadata"]["name"] == "p"
    log, events, pods = server.requests
    assert log.path == "/api/v1/namespaces/ns/pods/p/log"
    assert log.query == {
        "container": "main",
        "timestamps": "true",
        "limitBytes": str(pod_logs.READ_LIMIT_BYTES),
        "sinceSeconds": "5",
        "tailLines": "3",
    }
    assert events.query == {"fieldSelector": "involvedObject.name=job", "resourceVersion": "0"}
    assert pods.query == {"labelSelector": "a=b"}


def hook_of(
    monkeypatch: pytest.MonkeyPatch, server: FakeApiServer, conn_id: str, token: str = "tok"
) -> T9kHook:
    connection(monkeypatch, conn_id, {"kube_config": json.dumps(kubeconfig(server.url))})
    return T9kHook(conn_id=conn_id)


@pytest.mark.skipif(AIRFLOW_V_3_0_PLUS, reason="Airflow 3 reads the form from provider_info's conn-fields")
def test_the_airflow_2_connection_form_has_the_fields_the_hook_reads() -> None:
    """The webserver of Airflow 2 builds the t9k connection's form from these (make test-airflow2)."""
    assert set(T9kHook.get_connection_form_widgets()) == set(CONNECTION_FIELDS)
    hidden = T9kHook.get_ui_field_behaviour()["hidden_fields"]
    assert {"host", "login", "password", "extra"} <= set(hidden)


def test_the_airflow_3_connection_fields_are_the_hooks() -> None:
    from t9k_provider.provider_info import get_provider_info

    (connection_type,) = get_provider_info()["connection-types"]
    assert connection_type["hook-class-name"] == "t9k_provider.hooks.t9k.T9kHook"
    assert set(connection_type["conn-fields"]) == set(CONNECTION_FIELDS)
