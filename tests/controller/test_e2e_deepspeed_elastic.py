"""An elastic DeepSpeedJob scaled up on the local cluster: the training reaches the new worker.

worker-0 runs the real `deepspeed`, which reads /t9k/hostfile once and starts a rank on every host listed over
pdsh/ssh (the workers run the real sshd, as root: each pod has its own network namespace). Raising
`spec.elastic.expectedReplicas` adds a worker and rewrites the hostfile; once that worker runs, the controller
relaunches worker-0 (docs/controller.md#elastic-relaunch), whose new `deepspeed` starts ranks on all three.

Each rank writes a file named after its launch (the world size it was started in) and its host into a folder
every pod sees (pods are host processes), then keeps running, as training would, until the test tells it to
stop; a rank stopped by a signal says so in a second file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.testing import wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs
from tests.support.builders import make_job
from tests.support.clusters import cluster_fixture, controller_fixture
from tests.support.sshd import prepare_sshd

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NAME = "ds-grow"
LAUNCHED = "batch.tensorstack.dev/launched-workers"
TRAIN = """
import json, os, signal, socket, sys, time
folder = os.path.dirname(os.path.abspath(sys.argv[0]))
world, host = os.environ["WORLD_SIZE"], socket.gethostname()
report = {"host": host, "world": int(world), "rank": int(os.environ["RANK"]), "pid": os.getpid()}
name = os.path.join(folder, "reports", f"world{world}-{host}")
def stopped(signum, frame):
    open(name + ".stopped", "w").close()
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stopped)
with open(name + ".part", "w") as f:
    json.dump(report, f)
os.replace(name + ".part", name + ".json")  # the test polls the folder: never a half-written report
print("rank", report["rank"], "of", world, "on", host, flush=True)
while not os.path.exists(os.path.join(folder, "stop")):
    time.sleep(0.2)
"""

cluster = cluster_fixture()
controller = controller_fixture()


@pytest.fixture(scope="module")
def sshd_ready() -> None:
    """sshd in the workers (the host is their image)."""
    prepare_sshd("pdsh", modules=("deepspeed",))


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "reports").mkdir()
    tmp_path.chmod(0o755)
    return tmp_path


def launches(folder: Path) -> dict[int, set[str]]:
    """The hosts a rank ran on, by the world size of its launch."""
    found: dict[int, set[str]] = {}
    for path in folder.glob("*.json"):
        report = json.loads(path.read_text())
        found.setdefault(report["world"], set()).add(report["host"])
    return found


def events(jobs: Jobs, reason: str) -> list[str]:
    items = jobs.core.list_namespaced_event(NS, field_selector=f"involvedObject.name={NAME}").items
    return [e.message for e in items if e.reason == reason]


def status(jobs: Jobs) -> dict[str, Any]:
    return jobs.get("DeepSpeedJob", NAME).get("status") or {}


def test_scaling_up_relaunches_deepspeed_on_every_worker(jobs: Jobs, sshd_ready: None, workdir: Path) -> None:
    container = {"name": "worker", "image": "deepspeed:x", "workingDir": str(workdir)}
    jobs.create(make_job("DeepSpeedJob", NAME, {
        "config": {"slotsPerWorker": 1, "localRank": False, "run": {"python": [str(workdir / "train.py")]}},
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 2},
        "worker": {"replicas": 2, "restartPolicy": "Never",
                   "template": {"spec": {"containers": [container]}}},
    }, namespace=NS))  # fmt: skip
    reports = workdir / "reports"
    hosts = [f"{NAME}-worker-{i}" for i in range(3)]

    def log() -> str:
        try:
            return jobs.log(hosts[0])[-3000:]
        except Exception as exc:  # only for the failure message
            return repr(exc)

    def ranks_on(world: int) -> bool:
        phase = status(jobs).get("phase")
        assert phase not in TERMINAL, (status(jobs), log())
        return launches(reports).get(world) == set(hosts[:world])

    wait_for("ranks on 2 workers", lambda: ranks_on(2), 180)
    first = jobs.core.read_namespaced_pod(hosts[0], NS)
    assert first.metadata.annotations[LAUNCHED] == "2"
    assert not [a for a in first.spec.containers[0].command if "elastic" in a]  # DeepSpeed 0.19 refuses them

    jobs.patch("DeepSpeedJob", NAME, {"spec": {"elastic": {"expectedReplicas": 3}}})
    wait_for("ranks on 3 workers", lambda: ranks_on(3), 240)
    # The first launch's ranks were stopped (SIGTERM) before the second one started: its deepspeed, told to
    # stop with its pod, stops its ranks on every host over pdsh.
    assert sorted(p.name for p in reports.glob("*.stopped")) == [f"world2-{h}.stopped" for h in hosts[:2]]
    (workdir / "stop").touch()
    wait_for("the job to end", lambda: status(jobs).get("phase") in TERMINAL, 120)

    final = status(jobs)
    assert final["phase"] == "Succeeded", (final, log())
    assert launches(reports) == {2: set(hosts[:2]), 3: set(hosts)}
    relaunched = jobs.core.read_namespaced_pod(hosts[0], NS)
    assert relaunched.metadata.uid != first.metadata.uid and relaunched.metadata.annotations[LAUNCHED] == "3"
    hostfile = jobs.core.read_namespaced_config_map(f"{NAME}-hostfile", NS).data["hostfile"]
    assert hostfile == "".join(f"{h} slots=1\n" for h in hosts)
    why = f"Pod {hosts[0]} is relaunching on 3 worker replicas: the job was resized from 2."
    assert events(jobs, "Relaunching") == [why]
    assert final["backoffCount"] == 0 and all(t["restartCount"] == 0 for t in final["tasks"])
