"""Acceptance: kubectl against the local cluster (apply, get tables, label/patch, wait, delete)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from t9k_provider.testing import LocalCluster
from tests.support.builders import make_container, make_job, make_template

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("kubectl_binary")]


@pytest.fixture(scope="module")
def kubectl(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 60) -> str:
        proc = subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir", str(cache), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc.stdout + proc.stderr if not check else proc.stdout

    return run


def test_apply_get_and_reapply_a_pod(kubectl, tmp_path: Path) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kp", "labels": {"app": "a"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1",
                    "command": ["sleep", "1"],
                    "env": [{"name": "A", "value": "1"}],
                }
            ]
        },
    }
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert "pod/kp created" in kubectl("apply", "-f", str(path), "--validate=false")
    table = kubectl("get", "pods")
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["kp", "0/1", "Pending", "0"]
    manifest["metadata"]["labels"]["tier"] = "x"
    manifest["spec"]["containers"][0]["image"] = "busybox:2"
    path.write_text(yaml.safe_dump(manifest))
    assert "pod/kp configured" in kubectl("apply", "-f", str(path), "--validate=false")
    assert (
        kubectl("get", "pod", "kp", "-o", "jsonpath={.spec.containers[0].image} {.metadata.labels.tier}")
        == "busybox:2 x"
    )
    assert "pod/kp unchanged" in kubectl("apply", "-f", str(path), "--validate=false")


def test_apply_validates_on_the_server_by_default(kubectl, tmp_path: Path) -> None:
    worker = {"type": "worker", "replicas": 1, "template": make_template(make_container("w", py="print(1)"))}
    job = make_job("GenericJob", "strict", {"replicaSpecs": [worker]})
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    assert "genericjob.batch.tensorstack.dev/strict created" in kubectl("apply", "-f", str(path))
    job["spec"]["replicaSpec"] = []  # a typo of replicaSpecs
    path.write_text(yaml.safe_dump(job))
    failed = kubectl("apply", "-f", str(path), check=False)
    assert 'strict decoding error: unknown field "spec.replicaSpec"' in failed


def configmap(name: str) -> str:
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}
    )


def test_label_patch_and_selectors(kubectl) -> None:
    kubectl("create", "--validate=false", "-f", "-", stdin=configmap("kc"))
    kubectl("label", "configmap", "kc", "team=ml")
    kubectl("patch", "configmap", "kc", "--type=merge", "-p", '{"data":{"b":"2"}}')
    kubectl("patch", "configmap", "kc", "--type=json", "-p", '[{"op":"add","path":"/data/c","value":"3"}]')
    assert kubectl("get", "cm", "-l", "team in (ml,x)", "-o", "jsonpath={.items[*].metadata.name}") == "kc"
    assert kubectl("get", "cm", "kc", "-o", "jsonpath={.data}") == '{"a":"1","b":"2","c":"3"}'
    assert kubectl("get", "cm", "--field-selector", "metadata.name=kc", "-o", "name") == "configmap/kc\n"


def test_crd_apply_wait_established_and_custom_resource_columns(kubectl, tmp_path: Path) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.kubectl.t9k.dev"},
        "spec": {
            "group": "kubectl.t9k.dev",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    kubectl("apply", "-f", str(path), "--validate=false")
    kubectl("wait", "--for", "condition=established", "crd/gadgets.kubectl.t9k.dev", "--timeout=20s")
    gadget = tmp_path / "gadget.yaml"
    gadget.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubectl.t9k.dev/v1",
                "kind": "Gadget",
                "metadata": {"name": "g1"},
                "spec": {"size": 3},
            }
        )
    )
    assert "gadget.kubectl.t9k.dev/g1 created" in kubectl("apply", "-f", str(gadget), "--validate=false")
    table = kubectl("get", "gd").splitlines()
    assert table[0].split() == ["NAME", "SIZE", "AGE"] and table[1].split()[:2] == ["g1", "3"]
    gadget.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubectl.t9k.dev/v1",
                "kind": "Gadget",
                "metadata": {"name": "g1"},
                "spec": {"size": 4},
            }
        )
    )
    assert "configured" in kubectl("apply", "-f", str(gadget), "--validate=false")  # merge patch for CRs
    bad = kubectl("patch", "gd", "g1", "-p", '{"spec":{"size":5}}', check=False)  # strategic -> 415
    assert "the body of the request was in an unknown format" in bad
    invalid = kubectl("patch", "gd", "g1", "--type=merge", "-p", '{"spec":{"size":"big"}}', check=False)
    assert "Invalid value" in invalid and "spec.size" in invalid


def test_wait_for_delete_and_delete_of_finalized_object(cluster: LocalCluster, kubectl) -> None:
    kubectl("create", "--validate=false", "-f", "-", stdin=configmap("held"))
    kubectl(
        "patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":["example.com/x"]}}'
    )
    out = kubectl("delete", "configmap", "held", "--wait=false")
    assert 'configmap "held" deleted' in out

    def release() -> None:
        time.sleep(1)
        cluster.request(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/held",
            {"metadata": {"finalizers": None}},
            headers={"Content-Type": "application/merge-patch+json"},
        )

    thread = threading.Thread(target=release)
    thread.start()
    kubectl("wait", "--for=delete", "configmap/held", "--timeout=20s")
    thread.join()
    gone = kubectl("get", "configmap", "held", check=False)
    assert "NotFound" in gone


def test_get_watch_streams_table_rows(cluster: LocalCluster, kubectl) -> None:
    proc = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "get",
            "configmaps",
            "-w",
            "--request-timeout=4s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    kubectl("create", "--validate=false", "-f", "-", stdin=configmap("watched"))
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    assert "watched" in out


def test_create_generators_send_protobuf(kubectl) -> None:
    kubectl("create", "namespace", "gen")
    kubectl("create", "configmap", "cfg", "-n", "gen", "--from-literal=a=1")
    kubectl("create", "secret", "generic", "sec", "-n", "gen", "--from-literal=pw=s3cret")
    kubectl("create", "serviceaccount", "robot", "-n", "gen")
    assert kubectl("get", "cm", "cfg", "-n", "gen", "-o", "jsonpath={.data.a}") == "1"
    assert kubectl("get", "secret", "sec", "-n", "gen", "-o", "jsonpath={.data.pw}") == "czNjcmV0"
    assert "robot" in kubectl("get", "sa", "-n", "gen", "-o", "name")
    assert kubectl("create", "job", "j", "-n", "gen", "--image=busybox", "--", "true").strip() == (
        "job.batch/j created"
    )
    assert (
        kubectl(
            "get",
            "job",
            "j",
            "-n",
            "gen",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].command} {.spec.template.spec.restartPolicy}",
        )
        == '["true"] Never'
    )
    kubectl("create", "deployment", "d", "-n", "gen", "--image=busybox:1", "--replicas=0", "--port=80")
    assert (
        kubectl(
            "get",
            "deploy",
            "d",
            "-n",
            "gen",
            "-o",
            "jsonpath={.spec.replicas} "
            "{.spec.template.spec.containers[0].ports[0].containerPort} {.spec.template.metadata}",
        )
        == '0 80 {"labels":{"app":"d"}}'
    )
    kubectl("create", "service", "clusterip", "s", "-n", "gen", "--tcp=80:http")
    assert kubectl("get", "svc", "s", "-n", "gen", "-o", "jsonpath={.spec.ports[0].targetPort}") == "http"


def test_auth_can_i_and_crd_table(kubectl) -> None:
    assert kubectl("auth", "can-i", "create", "pods").strip() == "yes"
    header = kubectl("get", "crd").splitlines()[0].split()
    assert header == ["NAME", "CREATED", "AT"]


def test_server_side_apply(kubectl, tmp_path: Path) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa", "labels": {"a": "1"}},
        "data": {"k": "v1"},
    }
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(cm))
    assert "configmap/ssa serverside-applied" in kubectl("apply", "--server-side", "-f", str(path))
    cm["data"]["k"] = "v2"
    path.write_text(yaml.safe_dump(cm))
    kubectl("apply", "--server-side", "-f", str(path))
    assert kubectl("get", "cm", "ssa", "-o", "jsonpath={.data.k} {.metadata.labels.a}") == "v2 1"
    gadgetless = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "ssa"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"name": "w", "image": "python", "command": ["true"]}]}
                    },
                }
            ]
        },
    }
    path.write_text(yaml.safe_dump(gadgetless))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(path))


def test_replication_controller_and_api_service_tables(kubectl) -> None:
    kubectl("create", "namespace", "rcs")
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "front", "namespace": "rcs"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "front"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1", "command": ["sleep", "9"]}]},
            },
        },
    }
    assert "replicationcontroller/front created" in kubectl("apply", "-f", "-", stdin=yaml.safe_dump(rc))
    header, row = kubectl("get", "rc", "-n", "rcs", "-o", "wide").splitlines()
    assert " ".join(header.split()) == "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"
    cells = row.split()
    assert cells[:4] == ["front", "2", "0", "0"] and cells[5:] == ["c", "busybox:1", "app=front"]
    assert "scaled" in kubectl("scale", "rc/front", "-n", "rcs", "--replicas=0")
    assert kubectl("get", "rc", "front", "-n", "rcs", "-o", "jsonpath={.spec.replicas}") == "0"

    lines = kubectl("get", "apiservices").splitlines()
    assert lines[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert ["v1.apps", "Local", "True"] in [line.split()[:3] for line in lines[1:]]
