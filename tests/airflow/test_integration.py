"""End to end: DAGs run with ``dag.test()`` against the local cluster running the real T9k controller.

One cluster serves the whole module. Replica pods are local processes, so their output really flows through
the kubelet's log files, the API server's pods/log endpoint and the operator into the task log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from t9k_provider.local.flink.dist import flink_home
from t9k_provider.testing import LocalCluster, require_limits
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.airflow.cluster import DAGS, deferrals, result_of, run, why_failed
from tests.airflow.versions import airflow2_only, stored_xcoms

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

DAG_ID = "airflow.apache.org/dag-id"


@pytest.fixture(autouse=True)
def streams_stopped() -> Any:
    """However a task's wait ended, its live log streams stopped: no thread (nor its client) outlives it."""
    yield
    from t9k_provider.operators.worker_wait import THREAD_NAME

    assert [t for t in threading.enumerate() if t.name == THREAD_NAME] == []


def jobs(cluster: LocalCluster, plural: str) -> list[dict[str, Any]]:
    from kubernetes import client

    return client.CustomObjectsApi(cluster.api_client()).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", "default", plural
    )["items"]


def jobs_of(cluster: LocalCluster, dag_id: str) -> list[dict[str, Any]]:
    return [j for j in jobs(cluster, "genericjobs") if j["metadata"]["annotations"].get(DAG_ID) == dag_id]


@pytest.mark.parametrize(
    ("dag_id", "plural", "leader_line"),
    [
        ("it_generic", "genericjobs", "-worker-0/main] hello-from"),
        ("it_generic_deferrable", "genericjobs", "-worker-0/main] hello-from"),
        ("it_pytorch", "pytorchtrainingjobs", "-master-0/pytorch] hello-from 0"),
        ("it_tensorflow", "tensorflowtrainingjobs", "-chief-0/tensorflow] hello-from"),
        ("it_xgboost", "xgboosttrainingjobs", "-master-0/xgboost] hello-from 0"),
        ("it_mpi", "mpijobs", "-launcher/worker] fake mpirun: 2 hosts"),
        ("it_colossalai", "colossalaijobs", "-launcher/launcher] fake colossalai: run --hostfile"),
    ],
)
def test_kind_dag_succeeds_with_replica_logs(
    cluster: LocalCluster,
    dags: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
    dag_id: str,
    plural: str,
    leader_line: str,
) -> None:
    state, tasks, run_id = run(dags, dag_id)
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    result = result_of(dag_id, run_id)
    assert result["phase"] == "Succeeded" and result["namespace"] == "default"
    assert leader_line in output
    (job,) = [j for j in jobs(cluster, plural) if j["metadata"]["name"] == result["name"]]
    assert job["metadata"]["annotations"]["airflow.apache.org/dag-id"] == dag_id
    assert job["metadata"]["annotations"]["airflow.apache.org/checked"] == "true"


def test_extra_link_is_the_jobs_after_deferral(cluster: LocalCluster, dags: dict[str, Any]) -> None:
    """Airflow 3 stores what the link says when the task defers and again when it ends (in a new process);
    Airflow 2's webserver reads what the operator stored before it deferred."""
    state, tasks, run_id = run(dags, "it_link_deferrable")
    assert state == "success", tasks
    result = result_of("it_link_deferrable", run_id)
    (link,) = stored_xcoms("it_link_deferrable", run_id, "job", "_link_T9kJobLink")
    assert link == f"https://t9k.example/default/GenericJob/{result['name']}?uid={result['uid']}"
    if not AIRFLOW_V_3_0_PLUS:  # the webserver asks the serialized DAG's operator, which never ran
        from airflow.models.taskinstance import TaskInstance
        from airflow.serialization.serialized_objects import SerializedDAG
        from airflow.utils.session import create_session
        from sqlalchemy import select

        served = SerializedDAG.from_dict(SerializedDAG.to_dict(dags["it_link_deferrable"])).get_task("job")
        with create_session() as session:
            ti = session.scalars(select(TaskInstance).where(TaskInstance.run_id == run_id)).one()
        assert served.get_extra_links(ti, "T9k Job") == link


async def run_then_clean_up(trigger: Any) -> None:
    """What the triggerer does when it stops a trigger: it ran, it is cancelled, ``cleanup`` follows."""
    waiting = asyncio.ensure_future(trigger.run().__anext__())
    await asyncio.sleep(0.5)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await trigger.cleanup()


@airflow2_only("the triggerer's cleanup reads the task's state from the metadata database")
def test_user_kill_of_a_deferred_task_deletes_the_job(
    cluster: LocalCluster, dags: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before Airflow 3.3 a trigger learns of a user kill only in ``cleanup``: the job goes once the task left
    the deferred state, and stays when the triggerer merely restarts (the task is still deferred)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    monkeypatch.syspath_prepend(str(DAGS))  # the DAG module also holds the test manifests
    from t9k_it_dags import SLEEPER

    from t9k_provider.hooks.t9k import T9kHook
    from t9k_provider.triggers.job import T9kJobTrigger

    state, _, run_id = run(dags, "it_generic")  # a real task instance row to point the trigger at
    assert state == "success"
    hook = T9kHook(conn_id="kubernetes_default")
    body = {**SLEEPER, "metadata": {"name": "it-af2-cleanup", "annotations": {DAG_ID: "it_af2_cleanup"}}}
    uid = hook.create_job("genericjobs", "default", body)["metadata"]["uid"]

    def cleanup_with_task(task_state: TaskInstanceState) -> dict[str, Any] | None:
        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance).where(TaskInstance.dag_id == "it_generic", TaskInstance.run_id == run_id)
            ).one()
            ti.state = task_state
            session.commit()
            session.expunge(ti)
        trigger = T9kJobTrigger(
            credentials=hook.credentials,
            kind="GenericJob",
            plural="genericjobs",
            name="it-af2-cleanup",
            namespace="default",
            uid=uid,
        )
        trigger.task_instance = ti
        asyncio.run(run_then_clean_up(trigger))
        mine = [j for j in jobs(cluster, "genericjobs") if j["metadata"]["name"] == "it-af2-cleanup"]
        return mine[0] if mine else None

    kept = cleanup_with_task(TaskInstanceState.DEFERRED)  # a triggerer restart
    assert kept is not None and not kept["metadata"].get("deletionTimestamp")
    gone = cleanup_with_task(TaskInstanceState.FAILED)  # the user marked the deferred task failed
    assert gone is None or gone["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize("dag_id", ["it_failing", "it_failing_deferrable"])
def test_failing_job_fails_the_task_with_the_replica_reason(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str], dag_id: str
) -> None:
    state, tasks, _ = run(dags, dag_id)
    output = capfd.readouterr().out
    assert state == "failed" and tasks == {"job": "failed"}
    assert "T9kJobFailed" in output
    assert "cannot open dataset shard-7: permission denied" in output
    assert "failed" in output.lower()


@pytest.mark.parametrize("dag_id", ["it_unplaceable", "it_unplaceable_deferrable"])
def test_a_job_no_node_can_take_fails_early_with_the_schedulers_reason(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str], dag_id: str
) -> None:
    """A replica asking for a GPU on a cluster with none fails the task at pod_error_timeout (2 s here), not
    at startup_timeout (180 s), with the scheduler's reason."""
    state, tasks, _ = run(dags, dag_id)
    output = capfd.readouterr().out
    assert state == "failed" and tasks == {"job": "failed"}, why_failed(output)
    assert "can never be scheduled: it asks for 1 nvidia.com/gpu and no node has more than 0" in output
    assert "Insufficient nvidia.com/gpu" in output and "for pod_error_timeout=2s" in output


def test_oom_killed_replica_fails_the_task_naming_oomkilled(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """Past limits.memory the replica is OOMKilled; ExitCode retries it once (backoffLimit 1), then the job
    fails and the task's failure message says OOMKilled. Checked before the run: without cgroups the DAG
    would only waste its time (a skip on a laptop, a failure on CI)."""
    require_limits(cluster.limits_verdict())
    state, tasks, _ = run(dags, "it_oom")
    output = capfd.readouterr().out
    assert state == "failed" and tasks == {"job": "failed"}
    failure = next(line for line in output.splitlines() if "T9kJobFailed: " in line)
    assert "OOMKilled (exit code 137)" in failure, output[-3000:]
    assert "restart budget is exhausted" in output


def test_retry_adopts_the_running_job(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, _ = run(dags, "it_adopt")
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    assert "simulated worker loss after submission" in output
    assert "adopting job default/adopted-" in output  # an explicit name is kept across tries
    mine = [
        j
        for j in jobs(cluster, "genericjobs")
        if j["metadata"]["annotations"].get("airflow.apache.org/dag-id") == "it_adopt"
    ]
    assert len(mine) == 1
    assert mine[0]["metadata"]["annotations"]["airflow.apache.org/try-number"] == "1"  # the first try's job
    assert mine[0]["status"]["phase"] == "Succeeded"


@pytest.mark.skipif(
    flink_home() is None,
    reason="no Flink jars: apache-flink-libraries is in requirements/dev.lock (the main suite runs this DAG) "
    "not in the Airflow 2.11 lock",
)
def test_beam_dag_succeeds(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """The local flink-operator runs the FlinkCluster (a real Flink JobManager and TaskManager)."""
    state, tasks, run_id = run(dags, "it_beam")
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    result = result_of("it_beam", run_id)
    assert result["kind"] == "BeamJob" and result["phase"] == "Succeeded"
    # the submit pod (from the batch/v1 Job) is the one whose log reaches the task log
    assert (
        "-batchjob-" in output
        and f"/submit] beam pipeline for {result['name']}-flinkcluster-jobmanager:8081" in output
    )


def test_sensor_waits_for_a_job_submitted_upstream(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, _ = run(dags, "it_sensor")
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    assert tasks == {"submit": "success", "wait_deferred": "success", "wait_poke": "success"}


def test_execution_timeout_is_enforced_while_deferred(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, _ = run(dags, "it_timeout_deferrable")
    output = capfd.readouterr().out
    assert state == "failed" and tasks == {"job": "failed"}, output[-3000:]
    assert "execution_timeout reached" in output and "T9kJobTimeout" in output
    left = [
        j
        for j in jobs(cluster, "genericjobs")
        if j["metadata"]["annotations"].get("airflow.apache.org/dag-id") == "it_timeout_deferrable"
    ]
    assert all(j["metadata"].get("deletionTimestamp") for j in left)  # deleted (foreground: maybe finishing)


def test_deferred_log_hand_backs_print_every_line_once(
    cluster: LocalCluster,
    dags: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="airflow.models.dag")
    state, tasks, _ = run(dags, "it_logging_interval")
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    ticks = re.findall(r"-worker-0/main\] (tick \d)", output)
    assert ticks == [f"tick {i}" for i in range(8)]
    assert deferrals(output, caplog) >= 2  # it really came back to the worker in between


def test_kill_while_running_deletes_the_job_and_fails(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_kill from another thread (as the task runner's SIGTERM handler does) against the real cluster."""
    from airflow.providers.common.compat.sdk import AirflowException

    from tests.airflow.fakes import FakeTI

    monkeypatch.syspath_prepend(str(DAGS))  # the DAG module also holds the test manifests
    from t9k_it_dags import SLEEPER

    from t9k_provider.operators import GenericJobOperator

    op = GenericJobOperator(task_id="killme", manifest=SLEEPER, poll_interval=0.5, deferrable=False)
    ti = FakeTI(dag_id="it_kill", task_id="killme")
    saw_running = threading.Event()

    def kill_once_running() -> None:
        """Kills the task once its job runs, or after 60 s (then the test fails: it never ran)."""
        for _ in range(120):
            mine = (
                [j for j in jobs(cluster, "genericjobs") if j["metadata"]["name"] == op._job.name]
                if op._job
                else []
            )
            if mine and (mine[0].get("status") or {}).get("phase") == "Running":
                saw_running.set()
                break
            threading.Event().wait(0.5)
        op.on_kill()

    # execute() stays on the main thread, as in a task process (Airflow 2 refuses it on another thread)
    killer = threading.Thread(target=kill_once_running, daemon=True)
    killer.start()
    with pytest.raises(AirflowException, match="killed"):
        op.execute({"ti": ti})
    killer.join(60)
    assert saw_running.is_set(), "the job never ran"
    left = [j for j in jobs(cluster, "genericjobs") if j["metadata"]["name"] == op._job.name]
    assert all(j["metadata"].get("deletionTimestamp") for j in left)


def test_short_deferrable_task_ends_in_the_worker(
    cluster: LocalCluster,
    dags: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A job that ends within ``wait_before_defer`` costs no deferral round trip."""
    caplog.set_level(logging.INFO, logger="airflow.models.dag")
    state, tasks, _ = run(dags, "it_no_deferral")
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    assert "-worker-0/main] hello-from" in output
    assert deferrals(output, caplog) == 0


def test_the_wait_in_the_worker_sees_the_end_at_once(cluster: LocalCluster, dags: dict[str, Any]) -> None:
    """poll_interval=60: polling would sleep at least 48 s after the job's first (Pending) state."""
    started = time.monotonic()
    state, tasks, _ = run(dags, "it_watched")
    assert state == "success", tasks
    assert time.monotonic() - started < 40


def test_retry_after_a_lost_success_reports_it_instead_of_running_it_again(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks, _ = run(dags, "it_lost_result")
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    assert "simulated: Airflow lost the result of try 1" in output
    assert "Airflow retried the task: reporting it again" in output and "replacing job" not in output
    (job,) = jobs_of(cluster, "it_lost_result")
    assert job["metadata"]["annotations"]["airflow.apache.org/try-number"] == "1"  # the first try's job
    assert job["status"]["phase"] == "Succeeded"


def test_mapped_instances_of_one_explicit_name_get_their_own_jobs(
    cluster: LocalCluster, dags: dict[str, Any]
) -> None:
    state, tasks, run_id = run(dags, "it_mapped_names")
    assert state == "success", tasks
    names = {result["name"] for result in stored_xcoms("it_mapped_names", run_id, "job", "return_value")}
    assert len(names) == 3 and all(name.startswith("sweep-") for name in names)
    assert names == {j["metadata"]["name"] for j in jobs_of(cluster, "it_mapped_names")}


def test_explicit_name_on_two_logical_dates(cluster: LocalCluster, dags: dict[str, Any]) -> None:
    """Yesterday's job keeps its name (on_finish_action="keep"): today's run still gets its own."""
    first = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for day in (first, first + timedelta(days=1)):
        state, tasks, _ = run(dags, "it_named_daily", logical_date=day)
        assert state == "success", (day, tasks)
    names = [j["metadata"]["name"] for j in jobs_of(cluster, "it_named_daily")]
    assert len(set(names)) == 2 and all(name.startswith("nightly-") for name in names)


#: The time a task log line was logged: Airflow 3 ``2026-01-01T00:00:00.123456Z [info ...``, Airflow 2
#: ``[2026-01-01 00:00:00,123] {...}`` (local time).
LOGGED_AT = re.compile(r"\[?(\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?)")
REPLICA_LINE = re.compile(r"\[[\w.-]+-worker-(\d)/main\] (rank \d (?:line \d+|last)) at ([\d.]+)")


@pytest.mark.parametrize("dag_id", ["it_live_logs", "it_live_logs_deferrable"])
def test_every_replica_line_reaches_the_task_log_once_while_the_job_runs(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str], dag_id: str
) -> None:
    """Both workers print a line every 0.2 s and a last one right before they exit; ``cleanUpPolicy: All``
    deletes their pods (and logs) once the job succeeded, and ``poll_interval`` is 3 s. Every line is in the
    task log once, in order, and the first was logged while its worker was still printing (before it printed
    its last line, about 6 s later): live, not collected at the end. How fast is measured in `make bench`."""
    state, tasks, _ = run(dags, dag_id)
    output = capfd.readouterr().out
    assert state == "success", (tasks, output[-3000:])
    got: dict[str, list[str]] = {"0": [], "1": []}
    logged_at: dict[str, float] = {}
    printed_at: dict[str, float] = {}
    for line in output.splitlines():
        if (m := REPLICA_LINE.search(line)) is None:
            continue
        got[m[1]].append(m[2])
        stamp = LOGGED_AT.match(line)
        assert stamp is not None, line
        logged_at[m[2]] = datetime.fromisoformat(
            stamp[1].replace("Z", "+00:00").replace(",", ".")
        ).timestamp()
        printed_at[m[2]] = float(m[3])
    for rank in ("0", "1"):
        expected = [f"rank {rank} line {i}" for i in range(30)] + [f"rank {rank} last"]
        assert got[rank] == expected, output[-4000:]
        first, last = f"rank {rank} line 0", f"rank {rank} last"
        lag, span = logged_at[first] - printed_at[first], printed_at[last] - printed_at[first]
        assert lag < span, (
            f"rank {rank}'s first line was logged {lag:.1f} s late, after its last ({span:.1f} s)"
        )


@pytest.mark.parametrize("dag_id", ["it_first_failure", "it_first_failure_deferrable"])
def test_the_failure_message_leads_with_the_replica_that_failed_first(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str], dag_id: str
) -> None:
    """worker-1 fails at once with a distinctive error (exit 3), worker-0 two seconds later with a connection
    error (exit 1): the message names worker-1 first, with its exit code and last line, then worker-0. The
    task's usage is logged and in XCom ``t9k_usage``, failed or not."""
    state, tasks, run_id = run(dags, dag_id)
    output = capfd.readouterr().out
    assert state == "failed" and tasks == {"job": "failed"}, why_failed(output)
    at = output.index("T9kJobFailed: ")
    failure = output[at:].splitlines()[0]
    assert re.search(r"failed: [\w-]+-worker-1 failed first, at [\dTZ:-]+: exit code 3$", failure), failure
    message = output[at:]
    distinctive = message.index("rank 1: ValueError: shard 7 of the dataset holds no samples")
    assert distinctive < message.index("connection reset by peer"), why_failed(output)
    assert re.search(
        r"then, after it:\n +[\w-]+-worker-0, \d s later: exit code 1; last line: rank 0", message
    )
    assert "usage: 2 replicas, " in output
    (used,) = stored_xcoms(dag_id, run_id, "job", "t9k_usage")
    assert used["replica_seconds"]["total"] >= 2 and set(used["replica_seconds"]) == {"worker", "total"}
    assert used["gpu_seconds"] == {"worker": 0.0, "total": 0.0}


def test_a_succeeded_task_reports_its_usage_after_deferral(
    cluster: LocalCluster, dags: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """The ticker's one worker prints for 8 s: replica-seconds from its pod's own start and finish."""
    state, _, run_id = run(dags, "it_logging_interval")
    output = capfd.readouterr().out
    assert state == "success", why_failed(output)
    assert re.search(r"usage: 1 replica, [\d.]+ replica-seconds \(worker [\d.]+\), 0 GPU-seconds", output)
    (used,) = stored_xcoms("it_logging_interval", run_id, "job", "t9k_usage")
    assert set(used) == {"replica_seconds", "gpu_seconds"} and used["replica_seconds"]["total"] >= 7
