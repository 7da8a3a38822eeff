"""The triggers' and the worker's wait's async client (``hooks.async_t9k``): bound to its own configuration,
one per event loop and credentials, retired after a 401."""

from __future__ import annotations

from typing import Any

import pytest


async def test_real_async_client_is_bound_to_its_own_configuration() -> None:
    from t9k_provider.hooks.async_t9k import AsyncT9kClient

    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    async with AsyncT9kClient({"in_cluster": False, "kubeconfig": kubeconfig}) as lease:
        endpoint = lease.api._session.endpoint
        assert endpoint.host == "http://127.0.0.1:1"
        assert endpoint.authorization() == {"Authorization": "Bearer secret-token"}


async def test_leases_share_one_client_until_a_401_retires_it() -> None:
    from t9k_provider.hooks.async_t9k import AsyncT9kClient, shared_clients

    def creds(token: str) -> dict[str, Any]:
        return {"in_cluster": False, "kubeconfig": {
            "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]}}  # fmt: skip

    async with AsyncT9kClient(creds("a")) as one, AsyncT9kClient(creds("a")) as two:
        assert one.api is two.api and shared_clients() == 1
        async with AsyncT9kClient(creds("b")) as other:
            assert other.api is not one.api and shared_clients() == 2
        assert shared_clients() == 1  # its last lease closed it
        first = one.api
        one.reauthenticate()
        two.reauthenticate()  # the same 401 seen twice retires the client once
        async with AsyncT9kClient(creds("a")) as three:
            assert three.api is not first
            assert not first._session.http.closed  # still leased by one and two
        assert shared_clients() == 0  # the retired client is no longer handed out
    assert first._session.http.closed
    with pytest.raises(RuntimeError, match="outside"):
        one.api  # noqa: B018 - a lease that ended holds no client
