"""T9kHook: connection resolution, client isolation, error classification, API calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_provider.hooks import errors
from t9k_provider.hooks.t9k import T9kHook
from t9k_provider.kube.api import ApiError
from tests.airflow.fakes import api_error, kube_error

pytestmark = pytest.mark.timeout(60)


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


def test_clients_of_two_connections_never_share_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes import client

    connection(monkeypatch, "a", {"kube_config": json.dumps(kubeconfig("http://127.0.0.1:1001", "ta"))})
    connection(monkeypatch, "b", {"kube_config": json.dumps(kubeconfig("http://127.0.0.1:1002", "tb"))})
    default_host = client.Configuration.get_default_copy().host
    a, b = T9kHook(conn_id="a"), T9kHook(conn_id="b")
    assert a.custom_object_client.api_client.configuration.host == "http://127.0.0.1:1001"
    assert b.core_v1_client.api_client.configuration.host == "http://127.0.0.1:1002"
    assert "ta" in str(a.api_client.configuration.api_key)
    assert client.Configuration.get_default_copy().host == default_host


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (api_error(429), True),
        (api_error(503), True),
        (api_error(409), False),
        (api_error(403), False),
        (kube_error(429), True),
        (kube_error(503), True),
        (kube_error(409), False),
        (kube_error(410), False),
        (kube_error(403), False),
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
@pytest.mark.parametrize("answer", [api_error, kube_error], ids=["sync ApiException", "kube ApiError"])
def test_classify(status: int, fatal: bool, text: str, answer: Any) -> None:
    """Both clients' errors are one classifier's: the same answer gives the same outcome."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    exc = answer(status, "server says no")
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
    assert errors.api_status(kube_error(404)) == 404


@pytest.mark.parametrize("status", [404, 403, 409, 422, 500])
def test_the_clients_per_status_exceptions_are_answers(status: int) -> None:
    """The sync client raises ``NotFoundException`` and its siblings, subclasses of ``ApiException``, for
    these statuses: a 404 read of a deleted job is an answer (the job is gone), not a transient failure."""
    from kubernetes.client import exceptions

    raised = {404: exceptions.NotFoundException, 403: exceptions.ForbiddenException}.get(status)
    exc = (raised or exceptions.ApiException)(status=status, reason="x")
    assert errors.api_status(exc) == status
    assert errors.is_transient(exc) is (status == 500)


def _hook_with_custom_client(monkeypatch: pytest.MonkeyPatch, custom: Any) -> T9kHook:
    connection(monkeypatch, "k6", {"kube_config": json.dumps(kubeconfig())})
    hook = T9kHook(conn_id="k6")
    hook.__dict__["custom_object_client"] = custom
    return hook


def test_create_missing_crd_is_fatal_with_hint(monkeypatch: pytest.MonkeyPatch, mocker: Any) -> None:
    custom = mocker.Mock()
    custom.create_namespaced_custom_object.side_effect = api_error(
        404, "the server could not find the resource"
    )
    hook = _hook_with_custom_client(monkeypatch, custom)
    with pytest.raises(errors.T9kFatalApiError, match="Is the T9k CRD installed"):
        hook.create_job("genericjobs", "ns", {"metadata": {"name": "x"}})


def test_create_forbidden_is_fatal(monkeypatch: pytest.MonkeyPatch, mocker: Any) -> None:
    custom = mocker.Mock()
    custom.create_namespaced_custom_object.side_effect = api_error(403, "cannot create genericjobs")
    hook = _hook_with_custom_client(monkeypatch, custom)
    with pytest.raises(errors.T9kFatalApiError, match="permission denied"):
        hook.create_job("genericjobs", "ns", {"metadata": {"name": "x"}})
    assert custom.create_namespaced_custom_object.call_count == 1  # a POST is never blindly repeated


def test_delete_uses_foreground_and_uid_precondition(monkeypatch: pytest.MonkeyPatch, mocker: Any) -> None:
    custom = mocker.Mock()
    hook = _hook_with_custom_client(monkeypatch, custom)
    assert hook.delete_job("genericjobs", "ns", "x", uid="u1") is True
    options = custom.delete_namespaced_custom_object.call_args.kwargs["body"]
    assert options.propagation_policy == "Foreground" and options.preconditions.uid == "u1"
    custom.delete_namespaced_custom_object.side_effect = api_error(409, "precondition failed")
    assert hook.delete_job("genericjobs", "ns", "x", uid="u1") is False


def test_a_401_reloads_credentials_once(monkeypatch: pytest.MonkeyPatch, mocker: Any) -> None:
    connection(monkeypatch, "k7", {"kube_config": json.dumps(kubeconfig())})
    hook = T9kHook(conn_id="k7")
    first, second = mocker.Mock(), mocker.Mock()
    first.get_namespaced_custom_object.side_effect = api_error(401, "token expired")
    second.get_namespaced_custom_object.return_value = {"metadata": {"name": "x"}}
    hook.__dict__["custom_object_client"] = first
    rebuilt = mocker.patch("kubernetes.client.CustomObjectsApi", return_value=second)
    assert hook.get_job("genericjobs", "ns", "x") == {"metadata": {"name": "x"}}
    assert first.get_namespaced_custom_object.call_count == 1  # a 401 is not retried on the stale client
    assert second.get_namespaced_custom_object.call_count == 1
    assert rebuilt.call_count == 1  # a new client, on a new ApiClient from freshly resolved credentials


def test_detached_twin_is_built_now_with_its_own_client(monkeypatch: pytest.MonkeyPatch, mocker: Any) -> None:
    """What on_kill uses from a signal handler: no connection lookup, no client to build, no reload."""
    connection(monkeypatch, "k8", {"kube_config": json.dumps(kubeconfig())})
    hook = T9kHook(conn_id="k8")
    twin = hook.detached()
    assert "custom_object_client" in twin.__dict__  # built already
    assert twin.api_client is not hook.api_client  # its own connection pool
    monkeypatch.delenv("AIRFLOW_CONN_K8")  # the connection is not looked up again
    stale = mocker.Mock()
    stale.get_namespaced_custom_object.side_effect = api_error(401, "token expired")
    twin.__dict__["custom_object_client"] = stale
    with pytest.raises(Exception, match="token expired"):
        twin.get_job("genericjobs", "ns", "x")
    assert twin.__dict__["custom_object_client"] is stale  # nothing was rebuilt


def test_delete_can_require_the_version_read(monkeypatch: pytest.MonkeyPatch, mocker: Any) -> None:
    custom = mocker.Mock()
    hook = _hook_with_custom_client(monkeypatch, custom)
    hook.delete_job("genericjobs", "ns", "x", uid="u1", resource_version="42")
    options = custom.delete_namespaced_custom_object.call_args.kwargs["body"]
    assert options.preconditions.uid == "u1" and options.preconditions.resource_version == "42"
