"""XCom ``t9k_disruptions``: the try's disruptions in the documented shape (docs/airflow.md#how-a-task-ends),
also for a task resumed after a deferral whose ``start_date`` is the resumption's (``dag.test()`` on Airflow
3), and only the try's own for a job adopted from an earlier try; nothing for a try without any."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from t9k_provider.jobclient import identity as ident
from t9k_provider.operators.outcome import DISRUPTIONS_XCOM_KEY, report_disruptions
from tests.airflow.fakes import FakeTI

LOG = logging.getLogger(__name__)
EVICTED = {
    "replicaType": "worker", "replicaIndex": 1, "pod": "j-worker-1", "uid": "u1", "node": "n1",
    "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting", "time": "2026-11-29T10:42:03Z",
    "action": "RestartJob", "restart": 1,
}  # fmt: skip
LOST = {
    **EVICTED,
    "uid": "u2",
    "reason": "DeletionByTaintManager",
    "time": "2026-11-29T11:00:00Z",
    "restart": 2,
}


def job(created_by_try: int, *entries: dict[str, Any]) -> dict[str, Any]:
    annotations = {ident.TRY_NUMBER: str(created_by_try)}
    return {"metadata": {"name": "j", "annotations": annotations}, "status": {"disruptions": list(entries)}}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def test_the_tries_own_job_reports_every_disruption_in_the_documented_shape() -> None:
    ti = FakeTI(try_number=1, start_date=at("2026-11-29T10:50:00Z"))  # resumed after a deferral: later
    report_disruptions(job(1, EVICTED), ti, LOG)
    assert ti.xcoms[DISRUPTIONS_XCOM_KEY] == [
        {
            "time": "2026-11-29T10:42:03Z", "replica": "worker-1", "pod": "j-worker-1", "node": "n1",
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting", "restart": 1,
        }
    ]  # fmt: skip


def test_an_adopted_job_reports_only_the_disruptions_since_the_try_started() -> None:
    ti = FakeTI(try_number=2, start_date=at("2026-11-29T10:50:00Z"))
    report_disruptions(job(1, EVICTED, LOST), ti, LOG)
    assert [(d["reason"], d["restart"]) for d in ti.xcoms[DISRUPTIONS_XCOM_KEY]] == [
        ("DeletionByTaintManager", 2)
    ]


def test_a_recreated_replica_has_no_restart() -> None:
    ti = FakeTI(try_number=1)
    report_disruptions(job(1, {**EVICTED, "action": "RecreateReplica", "restart": None}), ti, LOG)
    (entry,) = ti.xcoms[DISRUPTIONS_XCOM_KEY]
    assert entry["restart"] is None


def test_a_try_without_disruptions_pushes_nothing() -> None:
    ti = FakeTI(try_number=2, start_date=at("2026-11-29T10:50:00Z"))
    report_disruptions(job(1, EVICTED), ti, LOG)  # adopted: the one disruption was the earlier try's
    report_disruptions(job(2), ti, LOG)
    assert DISRUPTIONS_XCOM_KEY not in ti.xcoms
