"""Killing a task at the earliest moment (while its process still imports the provider) and at the latest
(its job has succeeded and the task is concluding): the kill path never crashes, never leaves the job
running, and a killed task never ends in success.

The earliest kills run in a fresh interpreter against the local cluster (without the controller: a job stays
unfinished until deleted), so the import really is half done when SIGTERM arrives; the handler does what
Airflow's task runners do (``on_kill``, then return on Airflow 3, raise on Airflow 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred

from t9k_provider.jobclient import identity as ident
from t9k_provider.testing import LocalCluster
from tests.airflow.fakes import FakeHook, FakeTI, make
from tests.support.builders import RUNNING, SLEEPER, SUCCEEDED, our_job, replica_pod
from tests.support.clusters import cluster_fixture

pytestmark = pytest.mark.timeout(120)

#: Without the controller: a job stays unfinished until deleted.
local_cluster = cluster_fixture()

#: Runs in a fresh interpreter: argv = mode (execute | resume), flavour (returns | raises), moment (import |
#: create), job name (resume).
KILLED_TASK = r"""
import json, os, signal, sys

mode, flavour, moment, name = sys.argv[1:5]
from t9k_provider.operators import GenericJobOperator

op = GenericJobOperator(task_id="killme", manifest=json.loads(os.environ["MANIFEST"]), deferrable=False,
                        poll_interval=0.5, startup_timeout=60)

class Terminated(BaseException):
    pass

def on_term(signum, frame):  # Airflow's task runners: on_kill, then return (3.x) or raise (2.x)
    op.on_kill()
    if flavour == "raises":
        raise Terminated("SIGTERM")

signal.signal(signal.SIGTERM, on_term)

class KillMidImport:
    # SIGTERM while the provider's hook module is half imported: the earliest moment a kill can find the
    # task doing provider work in a fresh process
    fired = False

    def find_spec(self, fullname, path=None, target=None):
        hook = sys.modules.get("t9k_provider.hooks.t9k")
        if not KillMidImport.fired and hook is not None and getattr(hook.__spec__, "_initializing", False):
            KillMidImport.fired = True
            os.kill(os.getpid(), signal.SIGTERM)
        return None

if moment == "import":
    sys.meta_path.insert(0, KillMidImport())
else:  # as the create's answer arrives: the job exists, the task does not know its uid yet
    from t9k_provider.hooks.t9k import T9kHook

    create = T9kHook.create_job

    def create_then_kill(self, *args):
        created = create(self, *args)
        KillMidImport.fired = True
        os.kill(os.getpid(), signal.SIGTERM)
        return created

    T9kHook.create_job = create_then_kill

class TI:
    dag_id, task_id, run_id, map_index, try_number, max_tries, start_date = (
        "it_kill_early", "killme", "manual__" + mode + flavour, -1, 1, 0, None)

    def xcom_push(self, key, value):
        pass

try:
    if mode == "execute":
        op.execute({"ti": TI()})
    else:
        event = {"status": "succeeded", "message": "", "resume": {
            "job": {"kind": "GenericJob", "plural": "genericjobs", "name": name, "namespace": "default",
                    "uid": os.environ["UID"]},
            "log_targets": [], "limits": {}}}
        op.execute_complete({"ti": TI()}, event)
    outcome = "returned"
except BaseException as exc:
    outcome = type(exc).__name__ + ": " + str(exc)
print(json.dumps({"outcome": outcome, "fired": KillMidImport.fired}))
"""


def _hook(cluster: LocalCluster) -> Any:
    import yaml

    from t9k_provider.hooks.t9k import T9kHook

    hook = T9kHook(conn_id="unused")
    hook.__dict__["credentials"] = {"kubeconfig": yaml.safe_load(Path(cluster.kubeconfig).read_text())}
    return hook


def _jobs_of(cluster: LocalCluster, run_id: str) -> list[dict[str, Any]]:
    from kubernetes import client

    items = client.CustomObjectsApi(cluster.api_client()).list_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", "default", "genericjobs"
    )["items"]
    return [j for j in items if (j["metadata"].get("annotations") or {}).get(ident.RUN_ID) == run_id]


def _killed_task(
    cluster: LocalCluster, mode: str, flavour: str, moment: str = "import", name: str = "-", uid: str = ""
) -> dict:
    env = {
        **os.environ,
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(cluster.kubeconfig)}}
        ),
        "MANIFEST": json.dumps(SLEEPER),
        "UID": uid,
    }
    done = subprocess.run(
        [sys.executable, "-c", KILLED_TASK, mode, flavour, moment, name],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["fired"], f"the kill never came during the {moment}"
    assert "ImportError" not in result["outcome"] and result["outcome"] != "returned", result
    return result


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("flavour", "moment"),
    [("returns", "import"), ("raises", "create")],
    ids=["airflow3-handler-while-importing", "airflow2-handler-while-creating"],
)
def test_kill_during_startup_of_execute_leaves_no_job(
    local_cluster: LocalCluster, flavour: str, moment: str
) -> None:
    """Airflow 3 carries on after on_kill (the task must not create its job then), Airflow 2 raises from
    wherever the task was (a job whose creation was under way must still be deleted)."""
    result = _killed_task(local_cluster, "execute", flavour, moment)
    jobs = _jobs_of(local_cluster, f"manual__execute{flavour}")
    assert all(j["metadata"].get("deletionTimestamp") for j in jobs), (result, jobs)
    if flavour == "returns":
        assert result["outcome"].startswith("AirflowException: task killed")


@pytest.mark.cluster
@pytest.mark.parametrize("flavour", ["returns", "raises"], ids=["airflow3-handler", "airflow2-handler"])
def test_kill_during_startup_of_a_resumed_task_stops_its_job(
    local_cluster: LocalCluster, flavour: str
) -> None:
    """The resumed try (after deferral) is a new process: its first use of the hook imports it."""
    hook = _hook(local_cluster)
    body = {
        **SLEEPER,
        "metadata": {"name": f"resumed-{flavour}", "annotations": {ident.RUN_ID: f"manual__resume{flavour}"}},
    }
    uid = hook.create_job("genericjobs", "default", body)["metadata"]["uid"]
    result = _killed_task(local_cluster, "resume", flavour, "import", f"resumed-{flavour}", uid)
    (job,) = _jobs_of(local_cluster, f"manual__resume{flavour}") or [None]
    assert job is None or job["metadata"].get("deletionTimestamp"), result


# -- the latest moment: the job succeeded and the task is concluding ----------------------------------------


def _kill_when(hook: FakeHook, method: str, kill: Callable[[], None]) -> None:
    original = getattr(hook, method)

    def killing(*args: Any, **kwargs: Any) -> Any:
        kill()
        return original(*args, **kwargs)

    setattr(hook, method, killing)


@pytest.mark.parametrize("deferred", [False, True], ids=["in-worker", "resumed"])
def test_kill_while_concluding_a_success_fails_the_task_and_keeps_the_job(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, deferred: bool
) -> None:
    op = make(fake_hook, deferrable=deferred)
    name = ident.job_name(ident.task_identity(ti))
    fake_hook.pods = [replica_pod(f"{name}-worker-0", "worker", 0, name)]
    if deferred:
        fake_hook.script = [RUNNING]
        with pytest.raises(TaskDeferred) as deferral:
            op.execute(context)
        op = make(fake_hook, deferrable=True)  # the resumed try: a new operator in a new process
        event = {"status": "succeeded", "message": "", "resume": deferral.value.trigger.resume}
        run = lambda: op.execute_complete(context, event)  # noqa: E731
    else:
        run = lambda: op.execute(context)  # noqa: E731
    fake_hook.script = [SUCCEEDED]
    _kill_when(fake_hook, "patch_job_annotations", op.on_kill)  # as the result is being recorded
    with pytest.raises(AirflowException, match="task killed"):
        run()
    assert fake_hook.deletes() == []  # it had ended: nothing to stop, and a retry reports it
    assert fake_hook.jobs[("conn-ns", name)]["status"]["phase"] == "Succeeded"


def test_kill_of_a_task_whose_job_already_ended_keeps_the_job(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI
) -> None:
    """Deleting a finished job stops nothing and would only destroy the result a retry can report."""
    fake_hook.put(our_job(ti, SUCCEEDED))
    ti.try_number, ti.max_tries = 2, 1
    fake_hook.script = [SUCCEEDED]
    op = make(fake_hook, retries=1)
    _kill_when(fake_hook, "list_pods", op.on_kill)  # while it prints the adopted job's logs
    with pytest.raises(AirflowException, match="task killed"):
        op.execute(context)
    assert fake_hook.deletes() == [] and len(fake_hook.jobs) == 1
