"""Health and metrics endpoints: probe answers carry the reason, metrics are Prometheus text."""

from __future__ import annotations

import aiohttp

from t9k_provider.controller.runtime.health import health_app, metrics_app, serve
from t9k_provider.controller.runtime.metrics import Metrics


async def test_probes_report_the_problem_with_503() -> None:
    problems: dict[str, str | None] = {"live": None, "ready": "caches not synced: pods"}
    runner, port = await serve(
        health_app(lambda: problems["live"], lambda: problems["ready"]), "127.0.0.1", 0
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def get(path: str) -> tuple[int, str]:
                async with session.get(f"http://127.0.0.1:{port}{path}") as response:
                    return response.status, await response.text()

            assert await get("/healthz") == (200, "ok\n")
            assert await get("/readyz") == (503, "caches not synced: pods\n")
            problems["ready"] = None
            problems["live"] = "an informer stopped"
            assert await get("/readyz") == (200, "ok\n")
            assert await get("/healthz") == (503, "an informer stopped\n")
    finally:
        await runner.cleanup()


async def test_metrics_endpoint_counts_reads_and_writes_apart() -> None:
    metrics = Metrics()
    metrics.api_request("list", "pods", 200)
    metrics.api_request("watch", "pods", 200)
    metrics.api_request("create", "pods", 201)
    metrics.api_request("patch", "genericjobs", 409)
    runner, port = await serve(metrics_app(metrics), "127.0.0.1", 0)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            text = await response.text()
    finally:
        await runner.cleanup()
    assert (
        't9k_controller_api_requests_total{access="read",code="200",resource="pods",verb="list"} 1.0' in text
    )
    assert (
        't9k_controller_api_requests_total{access="write",code="409",resource="genericjobs",verb="patch"} 1.0'
        in text
    )
