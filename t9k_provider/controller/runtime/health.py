"""HTTP endpoints for the kubelet and Prometheus: /healthz (liveness), /readyz (readiness), /metrics."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from t9k_provider.controller.runtime.metrics import Metrics


def health_app(live: Callable[[], str | None], ready: Callable[[], str | None]) -> web.Application:
    """``live``/``ready`` return None when healthy, else the reason (sent with a 503)."""

    def probe(check: Callable[[], str | None]) -> Callable[[web.Request], web.StreamResponse]:
        async def handler(_request: web.Request) -> web.Response:
            problem = check()
            if problem is None:
                return web.Response(text="ok\n")
            return web.Response(status=503, text=f"{problem}\n")

        return handler

    app = web.Application()
    app.router.add_get("/healthz", probe(live))
    app.router.add_get("/readyz", probe(ready))
    return app


def metrics_app(metrics: Metrics) -> web.Application:
    async def handler(_request: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = metrics.content_type
        return response

    app = web.Application()
    app.router.add_get("/metrics", handler)
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start ``app``; returns the runner (for cleanup) and the bound port (``port`` 0 picks a free one)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner, int(runner.addresses[0][1])
