"""The production install rehearsed on a local cluster (docs/install.md, "Rehearse the install locally"):
``kubectl apply -k deploy/`` on a cluster without its own controller runs the controller as the shipped
2-replica Deployment under its ServiceAccount and ClusterRole with in-cluster credentials, the example
GenericJob succeeds, and killing the leader hands over to the other replica without duplicate pods or lost
status updates."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from benchmarks.failover import DEPLOY, NAME, SYSTEM, Install, JobLoad, lease_settings, run_handovers
from t9k_provider.testing import LocalCluster, wait_for

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(480),
    pytest.mark.usefixtures("kubectl_binary"),
]

WHOAMI = (
    "from kubernetes import client, config; config.load_incluster_config(); "
    "print(client.AuthenticationV1Api().create_self_subject_review({}).status.user_info.username)"
)
AS_CONTROLLER = f"--as=system:serviceaccount:{SYSTEM}:{NAME}"


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """``t9k-local up --no-controller`` then ``kubectl apply -k deploy/``, both replicas ready."""
    with LocalCluster(tmp_path_factory.mktemp("install"), controller=False) as cluster:
        installed = Install(cluster, tmp_path_factory.mktemp("kubectl-cache"))
        try:
            installed.apply()
            yield installed
        finally:
            installed.close()


def test_the_controller_runs_as_the_shipped_deployment_with_in_cluster_credentials(install: Install) -> None:
    pods = install.pods()
    assert len(pods) == 2
    for pod in pods:
        spec = pod["spec"]
        assert spec["serviceAccountName"] == NAME
        container = spec["containers"][0]
        assert container["command"] == ["t9k-controller"]
        assert not any("kubeconfig" in arg for arg in container["args"])
        assert "KUBECONFIG" not in {e["name"] for e in container.get("env") or []}
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts
    # Only the in-cluster credentials could have taken the Lease: the leader is one of the pods, and those
    # credentials are the shipped ServiceAccount's.
    leader = install.holder()
    assert leader in {p["metadata"]["name"] for p in pods}
    whoami = install.kubectl("-n", SYSTEM, "exec", leader, "--", "python", "-c", WHOAMI)
    assert whoami.stdout.strip() == f"system:serviceaccount:{SYSTEM}:{NAME}", whoami.stderr
    lines = [json.loads(line) for line in install.log(leader).splitlines() if line.startswith("{")]
    assert "acquired leader lease t9k-system/t9k-controller" in [line["msg"] for line in lines]
    # The shipped role is enough for what the controller did: no request was refused.
    assert not [line for line in lines if "403" in line["msg"] or "forbidden" in line["msg"].lower()], lines


def test_the_example_genericjob_succeeds(install: Install) -> None:
    example = DEPLOY.parent / "docs" / "examples" / "genericjob.yaml"
    assert install.kubectl("apply", "-f", str(example)).returncode == 0
    waited = install.kubectl(
        "wait", "gj/example", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", timeout=130
    )
    assert waited.returncode == 0, waited.stderr
    completed = '{.status.conditions[?(@.type=="Completed")].status}'
    assert install.kubectl("get", "gj/example", "-o", f"jsonpath={completed}").stdout == "True"
    assert install.kubectl("delete", "-f", str(example)).returncode == 0


@pytest.mark.parametrize(
    ("verb", "resource", "expected"),
    [
        (["create"], "pods", "yes"),
        (["patch", "--subresource=status"], "genericjobs.batch.tensorstack.dev", "yes"),
        (["update"], "genericjobs.batch.tensorstack.dev", "no"),  # only its status is the controller's
        (["create"], "deployments.apps", "no"),
        (["delete"], "nodes", "no"),
    ],
)
def test_auth_can_i_as_the_controller(
    install: Install, verb: list[str], resource: str, expected: str
) -> None:
    asked = install.kubectl("auth", "can-i", AS_CONTROLLER, verb[0], resource, *verb[1:], "-A")
    assert asked.stdout.strip() == expected, asked.stderr


def test_auth_can_i_leases_only_in_the_controller_namespace(install: Install) -> None:
    def can(namespace: str) -> str:
        return install.kubectl("auth", "can-i", AS_CONTROLLER, "update", "leases", "-n", namespace).stdout

    assert can(SYSTEM).strip() == "yes"
    assert can("default").strip() == "no"


def test_port_forward_to_the_metrics_service(install: Install) -> None:
    """``kubectl port-forward svc/t9k-controller-metrics``: the Service's named port reaches a replica."""
    proc = subprocess.Popen(
        install.kubectl_argv("-n", SYSTEM, "port-forward", "svc/t9k-controller-metrics", ":8080"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "Forwarding from 127.0.0.1:PORT -> 8080"
        port = int(first.split("127.0.0.1:")[1].split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            text = response.read().decode()
        assert "t9k_controller_leader " in text
    finally:
        proc.terminate()
        proc.wait(10)


def test_rolling_restart_keeps_a_leader_and_jobs_run(install: Install) -> None:
    """The upgrade path (docs/install.md): the replicas are replaced one at a time, the Lease ends with a new
    pod, and jobs still reconcile."""
    before = {p["metadata"]["name"] for p in install.pods()}
    assert install.kubectl("-n", SYSTEM, "rollout", "restart", f"deploy/{NAME}").returncode == 0
    status = install.kubectl(
        "-n", SYSTEM, "rollout", "status", f"deploy/{NAME}", "--timeout=180s", timeout=190
    )
    assert status.returncode == 0, status.stdout + status.stderr + install.cluster.report(SYSTEM)
    install.wait_replicas()
    after = {p["metadata"]["name"] for p in install.pods() if not p["metadata"].get("deletionTimestamp")}
    assert not before & after
    assert wait_for("a new replica to lead", lambda: install.holder() in after, 60, 0.05)
    load = JobLoad(install)
    load.start()
    load.submit(2)
    assert load.finish().problems == []


def test_failover_on_delete_and_on_kill(install: Install) -> None:
    """One leader deleted (it releases the Lease: the standby takes over in about a retry period) and one
    SIGKILLed (the Lease must expire first); jobs in flight end Succeeded with no duplicate pod and a status
    that matches their pods."""
    settings = lease_settings()
    handovers, outcome = run_handovers(install, ["delete", "kill"], jobs_per_kill=2)
    assert outcome.problems == []
    assert sum(outcome.duplicates) == 0 and len(outcome.duplicates) == 4
    deleted, killed = handovers
    assert deleted.new != deleted.old and killed.new != killed.old
    # Waiting for expiry takes at least the lease duration minus the age of the last renewal the standby saw
    # (about a retry period, two with jitter and a slow poll): released on SIGTERM, the handover is faster.
    expiry_floor = settings["lease_duration"] - 3 * settings["retry_period"]
    assert deleted.acquired - deleted.gone < expiry_floor, deleted
    assert killed.acquired - killed.gone > expiry_floor, killed
    for handover in handovers:
        assert handover.acquired <= handover.first_reconcile < handover.acquired + 30, handover
