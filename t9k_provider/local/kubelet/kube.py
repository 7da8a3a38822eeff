"""A thin dict-level API client for the node agents, plus a list+watch informer.

The agents are ordinary API clients: `kubernetes_asyncio`'s `ApiClient`, bound to the cluster's
kubeconfig (never the global configuration), sends every request over HTTP. Objects stay plain dicts, as
they are on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import load_kube_config

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 290
RETRY_SECONDS = 1.0


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body.get('message', body)}")
        self.status = status
        self.body = body


class Kube:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    @classmethod
    async def from_kubeconfig(cls, path: Path) -> Kube:
        config = type.__call__(Configuration)
        await load_kube_config(config_file=str(path), client_configuration=config, persist_config=False)
        return cls(ApiClient(configuration=config))

    async def close(self) -> None:
        await self.api.close()

    @property
    def server(self) -> str:
        return self.api.configuration.host

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        return await self.api.call_api(
            path,
            method,
            query_params=list((params or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        resp = await self._send(method, path, params=params, body=body, content_type=content_type)
        async with resp:
            raw = await resp.read()
        data = json.loads(raw) if raw else {}
        if not 200 <= resp.status < 300:
            raise ApiError(resp.status, data if isinstance(data, dict) else {"message": str(data)})
        return data

    async def get(self, path: str) -> dict[str, Any]:
        return await self.request("GET", path)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body=body or {})

    async def watch(self, path: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Yield raw watch events; an ERROR event (e.g. 410 Gone) is raised as `ApiError`."""
        query = {
            **params,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": WATCH_TIMEOUT_SECONDS,
        }
        resp = await self._send("GET", path, params=query, timeout=None)
        async with resp:
            if resp.status != 200:
                raw = await resp.read()
                raise ApiError(resp.status, json.loads(raw) if raw else {})
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(int(status.get("code") or 500), status)
                yield event


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


class Informer:
    """Keeps a cache of one resource in sync by list+watch (resuming from the last resourceVersion,
    relisting on 410) and calls `on_change(key)` for every object that changed, appeared or went away."""

    def __init__(self, kube: Kube, path: str, on_change: Callable[[tuple[str, str]], None]) -> None:
        self.kube = kube
        self.path = path
        self.on_change = on_change
        self.cache: dict[tuple[str, str], dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self._rv = ""

    async def run(self) -> None:
        while True:
            try:
                if not self._rv:
                    await self._relist()
                await self._watch()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.status in (410, 504):
                    log.info("watch %s expired (%s); relisting", self.path, exc)
                    self._rv = ""
                    continue
                log.warning("watch %s failed: %s", self.path, exc)
                await asyncio.sleep(RETRY_SECONDS)
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, json.JSONDecodeError) as exc:
                log.warning("watch %s interrupted: %s", self.path, exc)
                await asyncio.sleep(RETRY_SECONDS)

    async def _relist(self) -> None:
        data = await self.kube.request("GET", self.path)
        fresh = {object_key(o): o for o in data.get("items") or []}
        gone = set(self.cache) - set(fresh)
        self.cache = fresh
        self._rv = data["metadata"]["resourceVersion"]
        self.synced.set()
        for key in list(fresh) + list(gone):
            self.on_change(key)

    async def _watch(self) -> None:
        async for event in self.kube.watch(self.path, {"resourceVersion": self._rv}):
            obj = event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if event["type"] == "BOOKMARK":
                self._rv = rv or self._rv
                continue
            key = object_key(obj)
            if event["type"] == "DELETED":
                self.cache.pop(key, None)
            else:
                self.cache[key] = obj
            self._rv = rv or self._rv
            self.on_change(key)

    def items(self) -> list[dict[str, Any]]:
        return list(self.cache.values())


class WorkQueue:
    """De-duplicating queue of keys, as in client-go: a key queued twice while pending is handled once."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], None] = {}
        self._wakeup = asyncio.Event()

    def add(self, key: tuple[str, str]) -> None:
        self._pending[key] = None
        self._wakeup.set()

    def add_after(self, key: tuple[str, str], delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def get_all(self) -> list[tuple[str, str]]:
        while not self._pending:
            self._wakeup.clear()
            await self._wakeup.wait()
        keys = list(self._pending)
        self._pending.clear()
        return keys


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
