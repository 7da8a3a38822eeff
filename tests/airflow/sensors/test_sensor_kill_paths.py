"""The sensor's kill and timeout paths: they import nothing, build nothing and never crash, and a killed
sensor never reports success.

Each case runs in a fresh interpreter (a task's process, or the one that resumes a deferred try), so an import
left for these paths really would happen there. Kills come at the earliest moment (SIGTERM while the first
poke imports the provider's hook) and at the latest (the job has succeeded and the sensor is concluding); the
handler does what Airflow's task runners do (``on_kill``, then return on Airflow 3, raise on Airflow 2). For
the timeout paths, every import of the provider or the Kubernetes client and every new hook or API client is
refused once the wait has begun: the timeout must still end in ``AirflowSensorTimeout`` (or the failure the
trigger's event names).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.testing import LocalCluster
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.support.builders import SLEEPER as JOB
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.timeout(120)

#: Without the controller: a job stays unfinished until deleted.
local_cluster = cluster_fixture()

#: Runs in a fresh interpreter: argv = case, flavour (returns | raises: how the SIGTERM handler ends), job.
SENSOR_TASK = r"""
import json, os, signal, sys

case, flavour, name = sys.argv[1:4]
from t9k_provider.sensors import T9kJobSensor

deferrable = case == "resumed"
op = T9kJobSensor(task_id="waitme", kind="GenericJob", name=name, namespace="default", mode="poke",
                  poke_interval=0.1, timeout=0.5 if case == "poke-timeout" else 30, deferrable=deferrable)

class Terminated(BaseException):
    pass

def on_term(signum, frame):  # Airflow's task runners: on_kill, then return (3.x) or raise (2.x)
    op.on_kill()
    if flavour == "raises":
        raise Terminated("SIGTERM")

signal.signal(signal.SIGTERM, on_term)
fired = False

def kill():
    global fired
    fired = True
    os.kill(os.getpid(), signal.SIGTERM)

FROZEN = ("t9k_provider", "kubernetes", "kubernetes_asyncio", "yaml")

class Frozen:
    # once the wait has begun, the kill and timeout paths may load nothing more
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in FROZEN:
            raise ImportError(f"{fullname} imported after the wait began")
        return None

def refuse(*args, **kwargs):
    raise RuntimeError("a hook or API client built after the wait began")

def freeze():
    sys.meta_path.insert(0, Frozen())
    if "t9k_provider.hooks.t9k" in sys.modules:
        sys.modules["t9k_provider.hooks.t9k"].T9kHook.__init__ = refuse
    if "kubernetes.client" in sys.modules:
        sys.modules["kubernetes.client"].ApiClient.__init__ = refuse

class KillMidImport:
    # SIGTERM while the provider's hook module is half imported: the earliest provider work of the task
    def find_spec(self, fullname, path=None, target=None):
        hook = sys.modules.get("t9k_provider.hooks.t9k")
        if not fired and hook is not None and getattr(hook.__spec__, "_initializing", False):
            kill()
        return None

def run(call):
    try:
        value = call()
        return "returned " + repr(value)
    except BaseException as exc:
        return type(exc).__name__ + ": " + str(exc)

context = {"ti": None}
outcomes = {}
if case == "import":
    sys.meta_path.insert(0, KillMidImport())
    outcomes["execute"] = run(lambda: op.execute(context))
elif case == "concluding":  # as the poke reads the succeeded job
    from t9k_provider.hooks.t9k import T9kHook

    get_job = T9kHook.get_job

    def get_then_kill(self, *args):
        job = get_job(self, *args)
        kill()
        return job

    T9kHook.get_job = get_then_kill
    outcomes["execute"] = run(lambda: op.execute(context))
elif case == "poke-timeout":  # the job never ends; from the second poke on, nothing may load or be built
    poke = op.poke

    def poke_then_freeze(ctx):
        done = poke(ctx)
        freeze()
        return done

    op.poke = poke_then_freeze
    outcomes["execute"] = run(lambda: op.execute(context))
    outcomes["on_kill"] = run(op.on_kill)
else:  # resumed: the process that resumes a deferred try, frozen from the start
    freeze()
    try:
        from airflow.sdk.bases.operator import TriggerFailureReason
        timed_out = {"error": TriggerFailureReason.TRIGGER_TIMEOUT.value}  # as the scheduler stores it
    except ImportError:  # Airflow 2's scheduler stores a plain message
        timed_out = {"error": "Trigger/execution timeout"}
    outcomes["deferral timeout"] = run(lambda: op.resume_execution("__fail__", timed_out, context))
    paused = {"status": "timeout", "message": "job paused for more than 60 s (paused_timeout)"}
    outcomes["trigger timeout"] = run(lambda: op.execute_complete(context, paused))
    outcomes["on_kill"] = run(op.on_kill)
    fired = True
    outcomes["succeeded after kill"] = run(lambda: op.execute_complete(context, {"status": "succeeded"}))
print(json.dumps({"outcomes": outcomes, "fired": fired}))
"""


def _hook(cluster: LocalCluster) -> Any:
    import yaml

    from t9k_provider.hooks.t9k import T9kHook

    hook = T9kHook(conn_id="unused")
    hook.__dict__["credentials"] = {"kubeconfig": yaml.safe_load(Path(cluster.kubeconfig).read_text())}
    return hook


def _job(cluster: LocalCluster, name: str, phase: str | None) -> Any:
    """A job no controller touches (the cluster runs none): its status is what the test writes."""
    hook = _hook(cluster)
    hook.create_job("genericjobs", "default", {**JOB, "metadata": {"name": name}})
    if phase:
        from kubernetes import client

        client.CustomObjectsApi(cluster.api_client()).patch_namespaced_custom_object_status(
            "batch.tensorstack.dev", "v1beta1", "default", "genericjobs", name, {"status": {"phase": phase}}
        )
    return hook


def _sensor_task(case: str, flavour: str, name: str, cluster: LocalCluster | None = None) -> dict[str, str]:
    env = {**os.environ}
    if cluster is not None:
        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(cluster.kubeconfig)}}
        env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(conn)
    done = subprocess.run(
        [sys.executable, "-c", SENSOR_TASK, case, flavour, name],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["fired"] or case == "poke-timeout", f"the kill never came ({case})"
    outcomes: dict[str, str] = result["outcomes"]
    for what, outcome in outcomes.items():
        assert "ImportError" not in outcome and "after the wait began" not in outcome, (what, outcomes)
    return outcomes


def _kept(hook: Any, name: str) -> bool:
    """The sensor never owns the job: a kill leaves it alone."""
    job = hook.get_job("genericjobs", "default", name)
    return not job["metadata"].get("deletionTimestamp")


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("moment", "flavour"),
    [
        ("import", "returns"),
        ("import", "raises"),
        ("concluding", "returns"),
        ("concluding", "raises"),
    ],
    ids=[
        "earliest-airflow3-handler",
        "earliest-airflow2-handler",
        "latest-airflow3-handler",
        "latest-airflow2-handler",
    ],
)
def test_killed_sensor_never_succeeds_and_keeps_the_job(
    local_cluster: LocalCluster, moment: str, flavour: str
) -> None:
    """The job has succeeded, yet a sensor killed while it starts or concludes fails: on Airflow 3 the
    handler returns and the poke would otherwise go on to report the success."""
    name = f"sensed-{moment}-{flavour}"
    hook = _job(local_cluster, name, "Succeeded")
    outcomes = _sensor_task(moment, flavour, name, local_cluster)
    expected = "Terminated: SIGTERM" if flavour == "raises" else "AirflowException: task killed"
    assert outcomes["execute"].startswith(expected), outcomes
    assert _kept(hook, name)


@pytest.mark.cluster
def test_poke_mode_timeout_loads_nothing(local_cluster: LocalCluster) -> None:
    """The job never ends: the sensor's own timeout fails it once the first poke has loaded all it needs."""
    hook = _job(local_cluster, "sensed-forever", None)
    outcomes = _sensor_task("poke-timeout", "returns", "sensed-forever", local_cluster)
    assert outcomes["execute"].startswith("AirflowSensorTimeout: Sensor has timed out"), outcomes
    assert outcomes["on_kill"] == "returned None", outcomes
    assert _kept(hook, "sensed-forever")


def test_resumed_sensor_times_out_and_is_killed_without_loading_anything() -> None:
    """The try that resumes after the deferral timed out, after the trigger's own limit fired, or after a
    kill, needs no hook, client or further import: no cluster is given, and none is reached."""
    outcomes = _sensor_task("resumed", "returns", "sensed-deferred")
    # Airflow's own failure for a deferral past its timeout (the sensor adds nothing to it)
    timeout = (
        "AirflowSensorTimeout: Trigger timeout"
        if AIRFLOW_V_3_0_PLUS
        else "TaskDeferralError: Trigger/execution"
    )
    assert outcomes["deferral timeout"].startswith(timeout), outcomes
    assert outcomes["trigger timeout"].startswith("AirflowFailException: job sensed-deferred: job paused")
    assert outcomes["on_kill"] == "returned None", outcomes
    assert outcomes["succeeded after kill"].startswith("AirflowException: task killed"), outcomes
