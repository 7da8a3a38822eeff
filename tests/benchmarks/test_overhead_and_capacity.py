"""The arithmetic of the per-task overhead and controller-at-scale benchmarks, without a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.controller_capacity import HISTOGRAM, histogram_percentile
from benchmarks.overhead_dag import AGENT, client_env, plan
from benchmarks.task_overhead import (
    STEPS,
    Stamps,
    parse_seconds,
    pod_discovery_failures,
    round_ratios,
    step_rows,
    summarize,
)


def test_every_round_runs_each_variant_once_in_a_rotated_order() -> None:
    spec = {"variants": ["a", "b", "c"], "works": ["pass"], "rounds": {"pass": 4}}
    order = plan(spec)
    assert len(order) == 12 and len({task for task, _, _ in order}) == 12
    rounds = [[variant for _, variant, _ in order[i : i + 3]] for i in range(0, 12, 3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_a_work_with_fewer_rounds_stops_taking_part_after_them() -> None:
    spec = {"variants": ["a", "b"], "works": ["pass", "sleep20"], "rounds": {"pass": 3, "sleep20": 1}}
    order = [(variant, work) for _, variant, work in plan(spec)]
    assert order == [
        ("a", "pass"), ("b", "pass"), ("a", "sleep20"), ("b", "sleep20"),
        ("b", "pass"), ("a", "pass"),  # rotated by one per round
        ("a", "pass"), ("b", "pass"),
    ]  # fmt: skip
    assert plan(spec)[0][0] == "r0_a_pass"


def test_the_ratio_is_taken_within_each_round_against_the_best_other_variant() -> None:
    def task(r: int, variant: str, seconds: float, state: str = "success") -> dict:
        return {
            "task": f"r{r}_{variant}_pass",
            "variant": variant,
            "start": 0.0,
            "end": seconds,
            "state": state,
        }

    tasks = [task(0, "t9k", 1.1), task(0, "pod", 5.1), task(0, "job", 10.1)]
    tasks += [task(1, "t9k", 2.1), task(1, "pod", 4.1), task(1, "job", 3.1)]
    tasks += [task(2, "t9k", 0.6), task(2, "pod", 5.1, state="failed"), task(2, "job", 10.1)]
    tasks += [task(3, "t9k", 0.6, state="failed"), task(3, "pod", 5.1), task(3, "job", 10.1)]
    ratios = round_ratios(tasks, 0.1, "t9k", ["pod", "job"])
    # round 2: the best of those that succeeded; round 3: ours failed, no ratio
    assert [round(r, 6) for r in ratios] == [0.2, round(2.0 / 3.0, 6), 0.05]
    for t in tasks:
        t["parse"] = 0.5
    less = round_ratios(tasks, 0.1, "t9k", ["pod", "job"], less_parse=True)
    assert [round(r, 6) for r in less] == [round(0.5 / 4.5, 6), 0.6, 0.0]


def test_the_parse_time_is_read_from_each_try_s_log_and_not_from_the_trigger_s(tmp_path: Path) -> None:
    logs = tmp_path / "task_id=r0_t9k_pass"
    logs.mkdir()
    line = {"event": "Worker startup parse complete", "dag_file_parse_ms": 1200}
    (logs / "attempt=1.log").write_text(f'{{"event": "x"}}\n{json.dumps(line)}\n')
    (logs / "attempt=1.log.trigger.2.log").write_text(json.dumps(dict(line, dag_file_parse_ms=999)) + "\n")
    (logs / "attempt=2.log").write_text(json.dumps(dict(line, dag_file_parse_ms=300)) + "\n")
    assert parse_seconds(logs) == 1.5
    assert parse_seconds(tmp_path / "task_id=none") == 0.0


def test_a_job_operator_task_that_found_no_pods_is_named_from_its_label_selector() -> None:
    error = (
        '{"event": "Task failed with exception", "error_detail": [{"exc_value": "No pods running with labels '
        "airflow_kpo_in_cluster=False,dag_id=t9k_bench_overhead,kubernetes_pod_operator=True,"
        'run_id=manual__2026-11-30T14_00_00,task_id=r0_cncf_job_pass,try_number=1,already_checked!=True"}]}\n'
    )
    assert pod_discovery_failures(error + "No pods here\n") == {"r0_cncf_job_pass"}


def test_overhead_is_wall_time_minus_the_works_own_time_and_requests_are_the_airflow_clients() -> None:
    def task(variant: str, seconds: float, ours: int, theirs: int) -> dict:
        requests = {AGENT: ours, "OpenAPI-Generator/33.3.0+snapshot/python": theirs}
        return {
            "work": "pass",
            "variant": variant,
            "state": "success",
            "start": 100.0,
            "end": 100.0 + seconds,
            "requests": requests,
        }

    failed = dict(task("t9k", 99.0, 40, 40), state="failed")  # left out, not counted as an overhead
    tasks = [task("t9k", s, 9, 14) for s in (1.1, 1.3, 1.2, 5.1)] + [task("cncf-pod", 5.1, 14, 7), failed]
    result = summarize(tasks, {"pass": 0.1})
    t9k = result[("pass", "t9k")]
    assert [round(x, 6) for x in t9k["overhead"]] == [1.0, 1.2, 1.1, 5.0]  # the failed task is left out
    assert (t9k["airflow_requests"], t9k["all_requests"]) == ([9] * 4, [23] * 4)
    assert result[("pass", "cncf-pod")]["airflow_requests"] == [14]


def test_the_t9k_tasks_steps_follow_the_watch_stamps_in_order() -> None:
    stamps = Stamps()
    job = {"metadata": {"name": "j1", "labels": {"benchmark.t9k/task": "t1"}}}
    stamps.on_job("ADDED", job, 0.0)
    pod = {"metadata": {"name": "j1-worker-0", "labels": {"tensorstack.dev/owner-name": "j1"}}}
    stamps.on_pod("ADDED", pod, 0.0)
    steps = stamps.steps("t1", start=stamps.seen["t1"]["job"] - 0.5, end=stamps.seen["t1"]["pod"] + 9.0)
    assert steps is None  # not bound, not done: the task's steps are incomplete
    stamps.seen["t1"].update(bound=1.0, pod_done=2.0, job_done=3.0)
    stamps.seen["t1"].update(job=0.2, pod=0.5)
    assert stamps.steps("t1", start=0.0, end=4.0) == [0.2, 0.3, 0.5, 1.0, 1.0, 1.0]
    assert len(STEPS) == 6


def test_a_variant_whose_every_task_failed_has_no_step_rows_and_one_without_stamps_has_empty_ones() -> None:
    """A T9k task lost to Airflow's stale-event race leaves its variant out of the step figures (the report
    counts it as failed) instead of failing the run with figures of no sample; a successful task whose steps
    were not all seen still gives an empty row list, which the plausibility check rejects."""
    stamps = Stamps()
    stamps.seen["r0_t9k_pass"] = {"job": 0.2, "pod": 0.5, "bound": 1.0, "pod_done": 2.0, "job_done": 3.0}

    def task(variant: str, state: str) -> dict:
        label = f"r0_{variant.replace('-', '_')}_pass"
        return {"task": label, "variant": variant, "work": "pass", "state": state, "start": 0.0, "end": 4.0}

    tasks = [task("t9k", "success"), task("t9k-deferrable", "success"), task("t9k-defer-at-once", "failed")]
    tasks.append(task("cncf-job", "success"))
    rows = step_rows(stamps, tasks, ("t9k", "t9k-deferrable", "t9k-defer-at-once", "cncf-job"))
    assert rows == {"t9k": [[0.2, 0.3, 0.5, 1.0, 1.0, 1.0]], "t9k-deferrable": []}


def test_reconcile_percentile_interpolates_within_the_histogram_bucket() -> None:
    def scrape(counts: dict[str, float]) -> dict:
        return {
            (f"{HISTOGRAM}_bucket", frozenset({("kind", "GenericJob"), ("le", le)})): n
            for le, n in counts.items()
        }

    before = scrape({"0.01": 10, "0.1": 10, "1.0": 10, "+Inf": 10})
    after = scrape({"0.01": 60, "0.1": 100, "1.0": 110, "+Inf": 110})  # 100 reconciles: 50, 40, 10 per bucket
    assert abs(histogram_percentile(after, before, 0.5) - 0.01) < 1e-9
    assert abs(histogram_percentile(after, before, 0.7) - (0.01 + 0.09 * 20 / 40)) < 1e-9
    assert abs(histogram_percentile(after, before, 0.99) - (0.1 + 0.9 * 9 / 10)) < 1e-9


def test_stamps_out_of_order_or_from_an_earlier_run_give_no_steps() -> None:
    stamps = Stamps()
    stamps.seen["t1"].update(job=0.2, pod=0.5, bound=1.0, pod_done=2.0, job_done=3.0)
    assert stamps.steps("t1", start=10.0, end=14.0) is None  # the stamps predate the task: another run's
    stamps.clear()
    assert stamps.steps("t1", start=0.0, end=4.0) is None


def test_a_job_seen_done_a_moment_before_its_pod_is_the_watch_streams_skew() -> None:
    """The job and pod stamps come from two watch streams: the job's Succeeded seen 1 ms before the pod's
    (in a parallel test run, where the variant then had no steps at all) is a step of 0; 0.2 s is no skew."""
    stamps = Stamps()
    stamps.seen["t1"].update(job=0.2, pod=0.5, bound=1.0, pod_done=2.001, job_done=2.0)
    assert stamps.steps("t1", start=0.0, end=4.0) == [0.2, 0.3, 0.5, 1.001, 0.0, 2.0]
    stamps.seen["t1"]["job_done"] = 1.8
    assert stamps.steps("t1", start=0.0, end=4.0) is None


CLIENTS = """
import asyncio
import kubernetes.client
import kubernetes_asyncio.client
import t9k_provider.kube.api

async def agent():
    async with kubernetes_asyncio.client.ApiClient() as client:
        return client.user_agent

print(kubernetes.client.ApiClient().user_agent)
print(asyncio.run(agent()))
print(t9k_provider.kube.api.USER_AGENT)
"""


def test_every_kubernetes_client_of_a_process_started_with_the_client_env_sends_the_agent() -> None:
    """Set from interpreter start (a triggerer parses no DAG file), for the provider's client and the cncf
    operators' sync and async ones."""

    def agents(env: dict[str, str]) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-c", CLIENTS], env=env, capture_output=True, text=True, timeout=120, check=True
        )
        return proc.stdout.split()

    assert agents(os.environ | client_env()) == [AGENT, AGENT, AGENT]
    untagged = agents(
        os.environ | {"PYTHONPATH": client_env()["PYTHONPATH"]}
    )  # the folder alone changes nothing
    assert len(untagged) == 3 and AGENT not in untagged
