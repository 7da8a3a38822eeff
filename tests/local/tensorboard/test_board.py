"""The local TensorBoard operator's reading of a TensorBoard (pure): file sets, pod, Service, status."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.local.tensorboard import board
from t9k_provider.local.tensorboard.board import InvalidSpec, LogSource, Observed

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:00:05Z"


def tensorboard(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "metadata": {"name": "mnist", "namespace": "team", "uid": "uid-1"},
        "spec": spec or {"trainingLogFilesets": ["t9k://pvc/logs/train"]},
    }


def pod(phase: str = "Running", ready: bool = True, **status: Any) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": "mnist-tensorboard", "uid": "pod-uid"},
        "status": {"phase": phase, "podIP": "10.251.3.7", "conditions": conditions, **status},
    }


def test_filesets_resolve_to_claim_directories() -> None:
    spec = {
        "trainingLogFilesets": ["t9k://pvc/logs/train/", "t9k://pvc/logs", "t9k://pvc/logs/./train"],
        "logDir": {"pvc": [{"name": "other", "subPath": ["a/b", "c"]}, {"name": "whole"}]},
    }
    assert [(s.claim, s.path) for s in board.log_sources(spec)] == [
        ("logs", "train"),
        ("logs", ""),
        ("other", "a/b"),
        ("other", "c"),
        ("whole", ""),
    ]
    assert LogSource("logs", "train", "").mount_path == "/t9k/tensorboard/logs/train"
    assert LogSource("logs", "", "").mount_path == "/t9k/tensorboard/logs"


@pytest.mark.parametrize(
    ("spec", "reason", "named"),
    [
        ({"trainingLogFilesets": ["s3://bucket/log"]}, board.UNSUPPORTED_FILESET, "s3://bucket/log"),
        ({"trainingLogFilesets": ["t9k://minio/secret/bucket/log"]}, board.UNSUPPORTED_FILESET, "MinIO"),
        ({"trainingLogFilesets": ["t9k://nfs/x/log"]}, board.UNSUPPORTED_FILESET, "'nfs'"),
        ({"trainingLogFilesets": ["t9k://pvc/"]}, board.INVALID_FILESET, "names no claim"),
        ({"trainingLogFilesets": ["t9k://pvc/Bad_Claim/x"]}, board.INVALID_FILESET, "'Bad_Claim'"),
        ({"trainingLogFilesets": ["t9k://pvc/logs/../../etc"]}, board.INVALID_FILESET, "no '..'"),
        ({"trainingLogFilesets": [7]}, board.INVALID_FILESET, "7 is not a string"),
        ({"logDir": {"s3": {"uri": ["s3://b"]}}}, board.UNSUPPORTED_FILESET, "spec.logDir.s3"),
        ({"logDir": {"pvc": [{"subPath": ["x"]}]}}, board.INVALID_FILESET, "spec.logDir.pvc[0]"),
        ({"image": "tb"}, board.NO_LOGS, "spec.logDir.pvc"),
    ],
)
def test_a_fileset_it_cannot_serve_is_named(spec: dict[str, Any], reason: str, named: str) -> None:
    with pytest.raises(InvalidSpec) as raised:
        board.log_sources(spec)
    assert raised.value.reason == reason
    assert named in str(raised.value)


def test_pod_mounts_each_fileset_read_only_from_its_claim() -> None:
    tb = tensorboard(
        trainingLogFilesets=["t9k://pvc/logs/train", "t9k://pvc/logs/eval", "t9k://pvc/more"],
        image="tb:2",
        resources={"limits": {"memory": "1Gi"}},
    )
    p = board.pod(tb, board.log_sources(tb["spec"]))
    assert p["metadata"]["name"] == "mnist-tensorboard"
    assert (
        p["metadata"]["ownerReferences"][0] | {"kind": "TensorBoard", "uid": "uid-1", "controller": True}
        == (p["metadata"]["ownerReferences"][0])
    )
    spec = p["spec"]
    assert spec["volumes"] == [
        {"name": "claim-0", "persistentVolumeClaim": {"claimName": "logs", "readOnly": True}},
        {"name": "claim-1", "persistentVolumeClaim": {"claimName": "more", "readOnly": True}},
    ]
    (container,) = spec["containers"]
    assert container["volumeMounts"] == [
        {"name": "claim-0", "mountPath": "/t9k/tensorboard/logs/train", "readOnly": True, "subPath": "train"},
        {"name": "claim-0", "mountPath": "/t9k/tensorboard/logs/eval", "readOnly": True, "subPath": "eval"},
        {"name": "claim-1", "mountPath": "/t9k/tensorboard/more", "readOnly": True},
    ]
    assert container["command"][:3] == ["tensorboard", "--logdir", "/t9k/tensorboard"]
    assert (container["image"], container["resources"]) == ("tb:2", {"limits": {"memory": "1Gi"}})
    # Another spec, another pod: the hash tells them apart.
    other = board.pod(tb, board.log_sources({"trainingLogFilesets": ["t9k://pvc/logs/train"]}))
    assert other["metadata"]["annotations"] != p["metadata"]["annotations"]
    service = board.service(tb)
    assert service["spec"]["selector"] == p["metadata"]["labels"] == {board.UID_LABEL: "uid-1"}


def test_workload_name_is_a_service_name_whatever_the_tensorboard_is_called() -> None:
    assert board.workload_name("mnist") == "mnist-tensorboard"
    for name in ("a" * 60, "dotted.name", "9lives"):
        derived = board.workload_name(name)
        assert derived.startswith("tensorboard-") and len(derived) <= 63
        assert derived == board.workload_name(name) != board.workload_name(name + "x")


def test_status_says_where_it_is_served_once_the_pod_is_ready() -> None:
    tb = tensorboard()
    status = board.derive_status(Observed(tb, pod()), NOW)
    assert status == {
        "phase": "Running",
        "pod": {"reference": {"name": "mnist-tensorboard", "uid": "pod-uid"}, "phase": "Running"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "serving at http://10.251.3.7:6006/",
                "lastTransitionTime": NOW,
            }
        ],
        "url": "http://10.251.3.7:6006/",
    }
    tb["status"] = status
    assert board.derive_status(Observed(tb, pod()), LATER)["conditions"][0]["lastTransitionTime"] == NOW
    # Not ready any more: no URL, and the transition is dated.
    waiting = board.derive_status(Observed(tb, pod(ready=False)), LATER)
    assert (waiting["phase"], waiting["url"]) == ("Pending", None)
    assert waiting["conditions"][0]["lastTransitionTime"] == LATER
    assert waiting["conditions"][0]["message"] == (
        "pod mnist-tensorboard: waiting for tensorboard to answer on port 6006"
    )


@pytest.mark.parametrize(
    ("observed", "phase", "reason", "message"),
    [
        (Observed(tensorboard(), None), "Pending", "PodCreating", "creating pod mnist-tensorboard"),
        (
            Observed(
                tensorboard(),
                pod(
                    "Pending",
                    ready=False,
                    containerStatuses=[{"state": {"waiting": {"reason": "ContainerCreating"}}}],
                ),
            ),
            "Pending",
            "PodNotReady",
            "pod mnist-tensorboard: ContainerCreating",
        ),
        (
            Observed(tensorboard(), None, InvalidSpec(board.CLAIM_NOT_FOUND, 'persistentvolumeclaim "x"')),
            "Pending",
            "ClaimNotFound",
            'persistentvolumeclaim "x"',
        ),
        (
            Observed(tensorboard(), None, InvalidSpec(board.UNSUPPORTED_FILESET, "s3://x: unsupported")),
            "Failed",
            "UnsupportedFileset",
            "s3://x: unsupported",
        ),
        (
            Observed(tensorboard(suspend=True, trainingLogFilesets=["t9k://pvc/a"]), None),
            "Suspended",
            "Suspended",
            "spec.suspend is true: the pod is deleted",
        ),
    ],
)
def test_status_says_why_it_is_not_ready(observed: Observed, phase: str, reason: str, message: str) -> None:
    status = board.derive_status(observed, NOW)
    assert (status["phase"], status["url"]) == (phase, None)
    assert (
        status["conditions"][0] | {"status": "False", "reason": reason, "message": message}
        == (status["conditions"][0])
    )
