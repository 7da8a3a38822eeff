"""Which replica of a failed job failed first, and how each ended (``operators.diagnostics``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from t9k_provider.operators.diagnostics import failed_pods, failure_report, how_it_ended, in_failure_order
from tests.airflow.fakes import FakeHook
from tests.support.builders import replica_pod, stamp, terminated

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ({"exitCode": 3, "reason": "Error"}, "exit code 3"),
        ({"exitCode": 137, "reason": "OOMKilled"}, "OOMKilled (exit code 137)"),
        ({"exitCode": 137, "reason": "Error"}, "signal 9 (SIGKILL), exit code 137"),
        ({"exitCode": 143}, "signal 15 (SIGTERM), exit code 143"),
        ({"exitCode": 2, "signal": 6, "reason": "Error"}, "signal 6 (SIGABRT), exit code 2"),
        ({"exitCode": 1, "reason": "Error", "message": "loss is NaN\nat step 7"}, "exit code 1: at step 7"),
        ({"exitCode": 128, "reason": "StartError"}, "StartError (exit code 128)"),
    ],
)
def test_how_a_container_ended(state: dict[str, Any], said: str) -> None:
    assert how_it_ended(state) == said


def test_failed_pods_in_the_order_they_ended() -> None:
    """By their failed container's termination; one waiting to restart by its last one; a pod that failed
    without a container exit (evicted) last; succeeded and running pods are no failures."""
    crashed_before_restart = replica_pod("j-worker-4", "worker", 4, "j")
    crashed_before_restart["status"]["containerStatuses"] = [
        {
            "name": "main",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": stamp(2)}},
        }
    ]
    evicted = replica_pod("j-worker-3", "worker", 3, "j")
    evicted["status"] = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}
    pods = [
        terminated(replica_pod("j-worker-0", "worker", 0, "j"), 0, 3, 1),
        terminated(replica_pod("j-worker-1", "worker", 1, "j"), 0, 1, 3),
        terminated(replica_pod("j-worker-2", "worker", 2, "j"), 0, 1, 0),
        evicted,
        crashed_before_restart,
        replica_pod("j-worker-5", "worker", 5, "j"),
    ]
    assert [(e.pod, e.how) for e in failed_pods(pods)] == [
        ("j-worker-1", "exit code 3"),
        ("j-worker-4", "OOMKilled (exit code 137)"),
        ("j-worker-0", "exit code 1"),
        ("j-worker-3", "Evicted: The node was low on memory."),
    ]


def test_replicas_that_ended_in_the_same_second_are_ordered_by_their_last_log_line(
    fake_hook: FakeHook,
) -> None:
    """Kubelets write whole seconds: rank 1 crashed, rank 0's collective broke a few ms later. The last line
    that says something is shown (the TaskFlow runner's end marker is passed over)."""
    fake_hook.logs[("j-worker-0", "main")] = (
        "2026-01-01T00:00:01.100Z step 7\n2026-01-01T00:00:01.950Z RuntimeError: connection reset by peer\n"
    )
    fake_hook.logs[("j-worker-1", "main")] = (
        "2026-01-01T00:00:01.200Z ValueError: shard 7 is corrupt\n"
        "2026-01-01T00:00:01.210Z T9K_TASKFLOW_ERROR_END\n"
    )
    pods = [terminated(replica_pod(f"j-worker-{i}", "worker", i, "j"), 0, 1, 1) for i in range(2)]
    ordered = in_failure_order(fake_hook, "ns", failed_pods(pods))
    assert [(e.pod, line) for e, line in ordered] == [
        ("j-worker-1", "ValueError: shard 7 is corrupt"),
        ("j-worker-0", "RuntimeError: connection reset by peer"),
    ]


def report(hook: FakeHook, pods: Any, job: dict[str, Any] | None = None) -> Any:
    return failure_report(hook, "GenericJob", "ns", "j", job or {}, 5, logging.getLogger(__name__), pods)


def test_a_failed_init_container_leads_with_its_own_log(fake_hook: FakeHook) -> None:
    fetched = replica_pod("j-worker-0", "worker", 0, "j")
    fetched["status"] = {
        "phase": "Failed",
        "initContainerStatuses": [
            {"name": "fetch", "state": {"terminated": {"exitCode": 22, "finishedAt": stamp(4)}}}
        ],
        "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "PodInitializing"}}}],
    }
    fake_hook.logs[("j-worker-0", "fetch")] = "2026-01-01T00:00:04Z curl: (22) 404 Not Found"
    got = report(fake_hook, [fetched])
    assert (got.lead, got.first) == (f"j-worker-0 failed, at {stamp(4)}: exit code 22", "j-worker-0")
    assert got.text.startswith("last 5 log lines of j-worker-0:\n[j-worker-0/fetch] curl: (22) 404 Not Found")


def test_many_replicas_that_failed_after_the_first_are_counted_not_listed(fake_hook: FakeHook) -> None:
    pods = [terminated(replica_pod(f"j-worker-{i}", "worker", i, "j"), 0, 10 + i, 143) for i in range(8)]
    text = report(fake_hook, pods).text
    assert "  j-worker-1, 1 s later: signal 15 (SIGTERM), exit code 143\n" in text
    assert "  j-worker-5, 5 s later" in text and "j-worker-6, " not in text and "  and 2 more\n" in text


def test_without_pods_the_report_names_the_replica_the_jobs_status_names(fake_hook: FakeHook) -> None:
    replicas = [{"name": "j-worker-1", "phase": "Failed"}]
    job = {"status": {"phase": "Failed", "tasks": [{"type": "worker", "status": replicas}]}}
    fake_hook.events["j-worker-1"] = [{"type": "Warning", "reason": "BackOff", "message": "crashed"}]
    got = report(fake_hook, RuntimeError("pods is forbidden"), job)
    assert (got.lead, got.first) == (None, None)
    assert "pods unavailable: pods is forbidden" in got.text and "last 5 log lines of j-worker-1:" in got.text
    assert "event j-worker-1: Warning BackOff: crashed" in got.text
