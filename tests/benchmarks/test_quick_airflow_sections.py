"""Quick runs of the sections that run Airflow itself (the per-task overhead under dag.test() and in a real
deployment, the triggerer's capacity), through the real command; a module of their own so that the test
workers share the quick runs' minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.benchmarks.quick import quick_report

pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
def test_quick_run_of_the_per_task_overhead(tmp_path: Path) -> None:
    """Every operator variant once under dag.test() and once in a real deployment on one local cluster,
    through the real command.

    A task may be lost to a known upstream bug, which the report must then name: in a real deployment, a task
    that defers to Airflow's stale-event race (apache/airflow#72716; the T9k operator at its defaults does not
    defer a job that ends within ``wait_before_defer``); in either half, a KubernetesJobOperator task to its
    pod discovery, four lists without a pause (apache/airflow#70585). Any other failure, or a lost T9k task
    that did not defer, fails this test."""
    text = quick_report(tmp_path, "overhead")

    def lost_upstream(half: str, title: str) -> bool:
        row = rf"\| {re.escape(half)}, `python3 -c pass`, {re.escape(title)}: tasks failed, of 1 \(1 of them"
        raced = half == "deployment" and re.search(f"{row} by Airflow's stale executor event", text)
        job = title.startswith("KubernetesJobOperator")
        undiscovered = job and re.search(f"{row} by KubernetesJobOperator's pod discovery", text)
        return bool(raced or undiscovered)

    for half in ("dag.test()", "deployment"):
        for operator in ("GenericJobOperator", "KubernetesJobOperator", "KubernetesPodOperator"):
            title = f"{operator}, deferrable"
            if operator == "GenericJobOperator" or not lost_upstream(half, title):
                assert f"{half}, `python3 -c pass`, {title}: overhead per task (1 tasks)" in text
            plain = f"{operator}, non-deferrable"
            if not lost_upstream(half, plain):
                assert f"{half}, `python3 -c pass`, {plain}: API requests per task by" in text
        at_once = "GenericJobOperator, deferrable, wait_before_defer=0"
        if not lost_upstream(half, at_once):
            assert f"{half}, {at_once}, `python3 -c pass`: job " in text
        cncf = ("KubernetesJobOperator", "KubernetesPodOperator")
        if not all(lost_upstream(half, f"{operator}, deferrable") for operator in cncf):
            ratio = f"{half}, `python3 -c pass`, GenericJobOperator, deferrable: T9k overhead / best cncf"
            assert ratio in text


@pytest.mark.timeout(900)
def test_quick_run_of_the_triggerer_capacity(tmp_path: Path) -> None:
    """A real `airflow triggerer` runs 3 deferred T9k tasks per mode and phase, and 3 bare triggers (Airflow's
    floor) at one moment, fed the T9k burst's arrivals and at a T9k trigger's sizes, through the real
    command."""
    text = quick_report(tmp_path, "triggerer")
    assert "## 12. Triggerer capacity" in text
    for mode in ("off", "on"):
        assert f"live logs {mode}: all 3 at once: job Succeeded -> trigger event, p99" in text
        assert f"live logs {mode}: 3 over 1 s: job Succeeded -> task instance rescheduled in the DB" in text
    assert "live logs on: replica lines in the trigger logs / lines written (burst phase) | 1.00 |" in text
    assert "bare trigger (Airflow's floor): all 3 at once: the moment -> trigger event, p99" in text
    assert "live logs off: all 3 at once: trigger event p99, T9kJobTrigger / bare trigger, per run" in text
    assert "bare trigger (Airflow's floor): whole triggerer CPU (supervisor, runner, log server)" in text
    assert "live logs off: all 3 at once: status write sent -> acknowledged, p99" in text
    assert "bare trigger fed the T9k burst's arrivals: each moment -> trigger event, p99" in text
    assert "trigger event p99, T9kJobTrigger / bare trigger fed the same arrivals, per run" in text
    assert "bare trigger at a T9k trigger's sizes: all 3 at once: the moment -> trigger event, p99" in text
    assert "trigger event p99, T9kJobTrigger / bare trigger at a T9k trigger's sizes, per run" in text
