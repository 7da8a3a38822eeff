"""An HTTP server on loopback that answers each request with the next scripted answer for its method and
records what it was sent: the unit tests of a client's requests (paths, queries, bodies, credentials) and of
its reaction to answers that a real API server gives only under faults (401 after a token expired)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    token: str | None
    body: Any


class ScriptedServer:
    """``answer(method, status, body)`` queues an answer; unscripted requests get 500."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._answers: dict[str, deque[tuple[int, Any]]] = defaultdict(deque)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner, self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def answer(self, method: str, status: int, body: Any) -> None:
        self._answers[method].append((status, body))

    async def _start(self) -> tuple[web.AppRunner, str]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return runner, f"http://127.0.0.1:{port}"

    async def _handle(self, request: web.Request) -> web.Response:
        text = await request.text()
        auth = request.headers.get("Authorization", "")
        self.requests.append(
            Request(
                request.method,
                request.path,
                dict(request.query),
                auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None,
                json.loads(text) if text else None,
            )
        )
        answers = self._answers[request.method]
        status, body = answers.popleft() if answers else (500, {"kind": "Status", "message": "unscripted"})
        if isinstance(body, str):
            return web.Response(status=status, text=body)
        return web.json_response(body, status=status)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
