"""Async access to T9k Jobs for triggers, built from ``T9kHook.credentials`` (never from a connection lookup).

One ApiClient per trigger run, bound to its own Configuration. Exec-plugin credentials are loaded when the
client opens, so a long wait re-reads them on every reconnect rather than caching an expiring token.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from kubernetes_asyncio import client, config, watch

from t9k_provider.jobs.constants import GROUP, VERSION


class AsyncT9kClient:
    """``async with AsyncT9kClient(credentials) as api: await api.get_job(...)``."""

    def __init__(self, credentials: dict[str, Any]) -> None:
        self._credentials = credentials
        self._api_client: client.ApiClient | None = None

    async def __aenter__(self) -> AsyncT9kClient:
        configuration = client.Configuration()
        if self._credentials.get("in_cluster"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            await config.load_kube_config_from_dict(
                self._credentials["kubeconfig"],
                context=self._credentials.get("context"),
                client_configuration=configuration,
            )
        if self._credentials.get("disable_verify_ssl"):
            configuration.verify_ssl = False
        self._api_client = client.ApiClient(configuration=configuration)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._api_client is not None:
            await self._api_client.close()
            self._api_client = None

    @property
    def _custom(self) -> client.CustomObjectsApi:
        if self._api_client is None:
            raise RuntimeError("AsyncT9kClient used outside 'async with'")
        return client.CustomObjectsApi(api_client=self._api_client)

    async def get_job(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        return await self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)

    async def wait_for_change(
        self, plural: str, namespace: str, name: str, resource_version: str, timeout: float
    ) -> bool:
        """Long-poll: True as soon as the job changes after ``resource_version``, False after ``timeout``.

        A watch on the one object (``metadata.name`` field selector) from the version last read, closed by
        the server after ``timeoutSeconds``; callers re-read the job rather than trusting the event.
        """
        stream = watch.Watch()
        async with stream.stream(
            self._custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            field_selector=f"metadata.name={name}",
            resource_version=resource_version,
            timeout_seconds=max(1, round(timeout)),
        ) as events:
            async for event in events:
                if event.get("type") != "BOOKMARK":
                    return True
        return False

    async def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        if self._api_client is None:
            raise RuntimeError("AsyncT9kClient used outside 'async with'")
        core = client.CoreV1Api(api_client=self._api_client)
        result = await core.list_namespaced_pod(namespace, label_selector=label_selector)
        return [self._api_client.sanitize_for_serialization(pod) for pod in result.items]

    async def delete_job(self, plural: str, namespace: str, name: str, uid: str | None = None) -> bool:
        """Foreground delete guarded by ``uid``; False when the job (or that incarnation) is already gone."""
        options = client.V1DeleteOptions(
            propagation_policy="Foreground", preconditions=client.V1Preconditions(uid=uid) if uid else None
        )
        try:
            await self._custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, body=options
            )
        except client.ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True
