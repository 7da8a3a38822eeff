"""wait_for / wait_for_async: the one way tests and benchmarks wait for eventual state."""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes.client.rest import ApiException

from t9k_provider.kube.api import ApiError
from t9k_provider.testing import none_left, wait_for, wait_for_async


def test_the_first_truthy_result_is_returned() -> None:
    answers = iter([None, 0, "", {"phase": "Running"}])
    assert wait_for("a phase", lambda: next(answers), timeout=5, interval=0) == {"phase": "Running"}


def test_a_timeout_names_what_was_awaited_and_what_was_last_seen() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"after 0.2s waiting for the pod to run; last: \[\]"):
        wait_for("the pod to run", lambda: [], timeout=0.2)
    assert time.monotonic() - started < 5


def test_a_wait_for_none_left_says_what_was_still_there() -> None:
    left = iter([["pod-a", "pod-b"], ["pod-b"], []])
    assert wait_for("the pods gone", none_left(lambda: next(left)), timeout=5, interval=0) is True
    with pytest.raises(TimeoutError, match=r"the pods gone; last: still there: \['pod-b'\]"):
        wait_for("the pods gone", none_left(lambda: ["pod-b"]), timeout=0.2)


def test_an_api_error_of_any_client_counts_as_not_yet() -> None:
    errors = iter([ApiException(status=404), ApiError(404, {"message": "not found"}), "there"])

    def probe() -> str:
        value = next(errors)
        if isinstance(value, Exception):
            raise value
        return value

    assert wait_for("the object", probe, timeout=5, interval=0) == "there"


def test_other_errors_are_raised_at_once() -> None:
    def broken() -> None:
        raise KeyError("status")

    with pytest.raises(KeyError):
        wait_for("a broken probe", broken, timeout=5)


def test_the_last_error_is_what_a_timeout_shows() -> None:
    def missing() -> None:
        raise ApiException(status=404, reason="Not Found")

    with pytest.raises(TimeoutError, match=r"last: .*ApiException"):
        wait_for("the object", missing, timeout=0.1, interval=0.01)


async def test_the_async_wait_takes_a_coroutine_or_a_plain_probe_and_lets_the_loop_run() -> None:
    ticks: list[int] = []

    async def ticker() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        assert await wait_for_async("ticks", lambda: len(ticks) >= 3, timeout=5, interval=0.01)

        async def enough() -> bool:
            return len(ticks) >= 6

        assert await wait_for_async("more ticks", enough, timeout=5, interval=0.01)
    finally:
        task.cancel()
    with pytest.raises(TimeoutError, match="waiting for never"):
        await wait_for_async("never", lambda: False, timeout=0.05, interval=0.01)
