"""The arithmetic of the `make demo` benchmark: milestones from `airflow dags test`'s log, the breakdown."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks.demo_pipeline import SPANS, WORKS, DemoRun, _airflow_milestones, figures

T0 = datetime.fromisoformat("2026-11-25T04:10:00+00:00").timestamp()


def line(second: float, text: str) -> str:
    stamp = datetime.fromtimestamp(T0 + second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return f"{stamp}Z [info     ] {text} [airflow] loc=x.py:1"


def test_milestones_cover_every_try_of_a_rescheduled_task(tmp_path: Path) -> None:
    log = tmp_path / "dags-test.log"
    events = [
        (1.0, "Filling up the DagBag"),
        (2.0, "[DAG TEST] starting task_id=prepare_data map_index=-1"),
        (5.0, "Task started"),
        (6.0, "[DAG TEST] end task task_id=prepare_data map_index=-1"),
        (6.1, "[DAG TEST] starting task_id=train map_index=-1"),
        (6.2, "Task started"),
        (9.0, "[DAG TEST] end task task_id=train map_index=-1"),
        (9.1, "[DAG TEST] starting task_id=evaluate map_index=-1"),
        (9.2, "[DAG TEST] end task task_id=evaluate map_index=-1"),
        (9.3, "[DAG TEST] starting task_id=wait_for_evaluation map_index=-1"),
        (9.4, "[DAG TEST] end task task_id=wait_for_evaluation map_index=-1"),
        (10.4, "[DAG TEST] starting task_id=wait_for_evaluation map_index=-1"),
        (10.5, "[DAG TEST] end task task_id=wait_for_evaluation map_index=-1"),
        (10.6, "[DAG TEST] starting task_id=report map_index=-1"),
        (10.8, "[DAG TEST] end task task_id=report map_index=-1"),
        (10.9, "DagRun Finished: dag_id=t9k_training_pipeline"),
    ]
    log.write_text("\n".join(line(t, text) for t, text in events) + "\nnot a log line\n")
    found = _airflow_milestones(log)
    assert found["airflow_first_log"] == pytest.approx(T0 + 1.0)
    assert found["first_task"] == pytest.approx(T0 + 2.0)
    assert found["api_ready"] == pytest.approx(T0 + 5.0)  # the first "Task started" only
    assert found["run_finished"] == pytest.approx(T0 + 10.9)
    assert found["tasks"]["wait_for_evaluation"] == pytest.approx((T0 + 9.3, T0 + 10.5))


def test_the_breakdown_adds_up_to_the_wall_time() -> None:
    demo = DemoRun(
        started=0.0,
        ended=30.0,
        cluster_requested=0.5,
        cluster_up=1.5,
        airflow_launched=1.5,
        airflow_first_log=3.0,
        first_task=4.0,
        api_ready=7.0,
        run_finished=26.0,
        airflow_exited=26.5,
        cluster_stopping=26.6,
        training=3.0,
        tasks={
            "prepare_data": (4.0, 9.0),
            "train": (9.1, 20.0),
            "evaluate": (20.1, 20.2),
            "wait_for_evaluation": (20.3, 24.0),
            "report": (24.1, 25.9),
        },
    )
    works = {"prepare_data": 0.5, "train": 8.0, "evaluate": 1.0}
    by_name = {f.name: f.median for f in figures([(demo, works)])}
    assert by_name["`make demo` wall time"] == 30.0
    assert by_name["the work's own time (the three workloads run directly)"] == 9.5
    assert by_name["task prepare_data: wall"] == pytest.approx(2.0)  # less the execution API's start
    assert by_name["task train: overhead (wall - work)"] == pytest.approx(2.9)
    assert by_name["gaps between tasks (dag.test's loop)"] == pytest.approx(0.4)
    parts = [name for name in by_name if name.endswith(": wall")]
    assert len(parts) == len(SPANS) and set(WORKS) < {t for span in SPANS for t in span}
    steps = (
        "demo start-up (make, the script's imports)",
        "cluster start (`t9k-local up`)",
        "cluster up -> `airflow dags test` launched",
        "Airflow start: CLI import",
        "Airflow start: DAG parse, DAG run created",
        "Airflow start: in-process execution API (in the first task)",
        *parts,
        "gaps between tasks (dag.test's loop)",
        "DAG run finished -> Airflow exited",
        "summary (reads the pods' logs)",
        "cluster stop (`t9k-local down`)",
    )
    assert sum(by_name[step] for step in steps) == pytest.approx(30.0)
