"""The real launchers start training over real SSH on the local cluster; the training on a worker that is not
the launcher sees that worker's container env: a plain `value`, a Secret through `secretKeyRef`, the pod's
own name through `fieldRef` and a value full of shell metacharacters, exactly.

ColossalAIJob: the launcher runs the real `colossalai run`, which starts torchrun on each worker over SSH
(fabric). DeepSpeedJob: worker-0 runs the real `deepspeed`, which starts its launch on every worker over
pdsh/ssh. The workers run the real sshd (as root: each pod has its own network namespace). Each training
process prints the variables it got; the launchers forward that output to their log.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from t9k_provider.testing import wait_for
from tests.controller.e2e_support import NS, TERMINAL, Jobs
from tests.support.builders import make_job
from tests.support.clusters import cluster_fixture, controller_fixture
from tests.support.sshd import prepare_sshd

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SECRET = "s3cr3t 'single' \"double\" $HOME `id` \\ %h"
NASTY = ' it\'s "quoted" $HOME $(id) `id` \\ ;|&<> *\nsecond line\tü '
MARK = "T9K-SESSION-ENV "
NAMES = ("ENV_DIRECT", "ENV_REFERENCED", "NASTY", "POD_NAME")
# Each rank writes its report to a file of its own beside the script (pods see the host's files): the
# launcher's log merges the ranks' SSH streams, where two ranks' lines can run into each other.
SHOW_ENV = f"""
import json, os, socket, sys
report = {{"host": socket.gethostname(), "env": {{k: os.environ.get(k) for k in {NAMES!r}}}}}
folder = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), os.environ["REPORTS"])
with open(os.path.join(folder, report["host"] + ".json"), "w") as f:
    json.dump(report, f)
print({MARK!r} + report["host"], flush=True)
"""

cluster = cluster_fixture()
controller = controller_fixture()


@pytest.fixture(scope="module")
def sshd_ready() -> None:
    """sshd in the workers (the host is their image)."""
    prepare_sshd()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The training script, on every worker (pods see the host's files) at the launcher's working dir."""
    path = tmp_path_factory.mktemp("session-env")
    (path / "show_env.py").write_text(SHOW_ENV)
    for job in ("cai", "ds"):
        (path / job).mkdir()
    path.chmod(0o755)
    return path


def worker_env(secret: str, reports: str) -> list[dict[str, Any]]:
    return [
        {"name": "REPORTS", "value": reports},
        {"name": "ENV_DIRECT", "value": "env-value"},
        {"name": "ENV_REFERENCED", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}},
        {"name": "NASTY", "value": NASTY},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]


def create_secret(jobs: Jobs, name: str) -> None:
    data = {"token": base64.b64encode(SECRET.encode()).decode()}
    jobs.core.create_namespaced_secret(
        NS, client.V1Secret(metadata=client.V1ObjectMeta(name=name), data=data)
    )


def reports(folder: Path) -> dict[str, dict[str, Any]]:
    """The training processes' reports, by host."""
    found = [json.loads(path.read_text()) for path in folder.glob("*.json")]
    return {r["host"]: r["env"] for r in found}


def wait_terminal(jobs: Jobs, kind: str, name: str, timeout: float = 300) -> dict[str, Any]:
    wait_for(f"{kind} {name} terminal", lambda: jobs.phase(kind, name) in TERMINAL, timeout)
    return jobs.get(kind, name)


def expected(pod: str) -> dict[str, str]:
    return {"ENV_DIRECT": "env-value", "ENV_REFERENCED": SECRET, "NASTY": NASTY, "POD_NAME": pod}


def test_colossalai_training_on_a_worker_sees_its_containers_env(
    jobs: Jobs, sshd_ready: None, workdir: Path
) -> None:
    if importlib.util.find_spec("colossalai") is None:
        pytest.skip("colossalai is not installed in this environment: run `make env`")
    create_secret(jobs, "cai-env-secret")
    jobs.create(make_job("ColossalAIJob", "cai-env", {
        "ssh": {"authMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
        "launcher": {"image": "colossalai:x", "workingDir": str(workdir)},
        "worker": {"replicas": 2, "procPerWorker": 1, "command": ["show_env.py"],
                   "template": {"spec": {"containers": [{"name": "worker", "image": "colossalai:x",
                                                         "env": worker_env("cai-env-secret", "cai")}]}}},
    }, namespace=NS))  # fmt: skip
    obj = wait_terminal(jobs, "ColossalAIJob", "cai-env")
    log = jobs.log("cai-env-launcher")
    assert obj["status"]["phase"] == "Succeeded", (obj["status"], log[-3000:])
    seen = reports(workdir / "cai")
    assert seen.get("cai-env-worker-1") == expected("cai-env-worker-1"), log[-3000:]
    assert seen.get("cai-env-worker-0") == expected("cai-env-worker-0"), log[-3000:]
    assert SECRET not in log  # the training printed it JSON-escaped; nothing else printed it


def test_deepspeed_training_on_another_worker_sees_its_containers_env(
    jobs: Jobs, sshd_ready: None, workdir: Path
) -> None:
    if importlib.util.find_spec("deepspeed") is None or not shutil.which("pdsh"):
        pytest.skip("deepspeed or pdsh is not installed in this environment: run `make env`")
    create_secret(jobs, "ds-env-secret")
    container = {"name": "worker", "image": "deepspeed:x", "workingDir": str(workdir),
                 "env": worker_env("ds-env-secret", "ds")}  # fmt: skip
    jobs.create(make_job("DeepSpeedJob", "ds-env", {
        "config": {"slotsPerWorker": 1, "localRank": False,
                   "run": {"python": [str(workdir / "show_env.py")]}},
        "worker": {"replicas": 2, "restartPolicy": "Never",
                   "template": {"spec": {"containers": [container]}}},
    }, namespace=NS))  # fmt: skip
    obj = wait_terminal(jobs, "DeepSpeedJob", "ds-env")
    log = jobs.log("ds-env-worker-0")
    assert obj["status"]["phase"] == "Succeeded", (obj["status"], log[-3000:])
    seen = reports(workdir / "ds")
    assert seen.get("ds-env-worker-1") == expected("ds-env-worker-1"), log[-3000:]
    assert seen.get("ds-env-worker-0") == expected("ds-env-worker-0"), log[-3000:]
    # the Secret's value is in no object the controller wrote
    data = jobs.core.read_namespaced_config_map("ds-env-hostfile", NS).data
    assert data["deepspeed_env"] == "REPORTS=ds\nENV_DIRECT=env-value\n"
