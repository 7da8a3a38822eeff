"""The pod directory layout, and that `local.kubelet.poddir` is the only module that spells it."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import t9k_provider
from t9k_provider.local.kubelet import poddir
from t9k_provider.local.kubelet.poddir import AttemptFiles, ContainerDir, PodDir

POD = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-1"}}

# What a module building pod-directory paths itself would have to write.
ATTEMPT_SUFFIXES = (poddir.EXIT, poddir.SPEC, poddir.STATE, "spec.json", "state.json")
EXACT_NAMES = {poddir.LOG, poddir.PID, "etc-hosts", "resolv.conf", "network.json", "shim.log"}
JOINED_DIRS = {"pods", poddir.VOLUMES}  # as `path / "pods"`


def test_every_file_of_a_pod_directory(tmp_path: Path) -> None:
    pod = PodDir.of(tmp_path, POD)
    root = tmp_path / "pods" / "ns_p_u-1"
    assert pod.path == root and pod.uid == "u-1"
    files = pod.container("main").attempt(2)
    assert [files.log, files.exit, files.spec, files.state, files.pid, files.shim_log] == [
        root / "main" / name
        for name in ("2.log", "2.exit", "2.spec.json", "2.state.json", "2.pid", "shim.log")
    ]
    assert [pod.etc_hosts, pod.resolv_conf, pod.network, pod.volumes] == [
        root / name for name in ("etc-hosts", "resolv.conf", "network.json", "volumes")
    ]
    assert pod.claim("ns", "data") == tmp_path / "volumes" / "ns" / "data"
    assert AttemptFiles.of_log(files.log) == files


def test_attempts_are_the_launched_ones_and_containers_skip_volumes(tmp_path: Path) -> None:
    pod = PodDir.of(tmp_path, POD)
    main = pod.container("main")
    main.path.mkdir(parents=True)
    for name in ("0.spec.json", "10.spec.json", "2.spec.json", "3.spec.json.tmp", "4.log", "x.spec.json"):
        (main.path / name).touch()
    pod.volumes.mkdir()
    assert [a.n for a in main.attempts()] == [0, 2, 10]
    assert pod.containers() == [main]
    assert PodDir.all(tmp_path) == [pod]
    assert ContainerDir(tmp_path / "absent").attempts() == [] and PodDir.all(tmp_path / "absent") == []


def test_exit_code_and_json_are_replaced_whole(tmp_path: Path) -> None:
    files = AttemptFiles(tmp_path, 0)
    assert not files.finished and files.exit_code() is None
    files.write_exit_code(3)
    assert files.finished and files.exit_code() == 3
    assert poddir.read_json(files.state) == {}
    files.state.write_text("{trunc")
    assert poddir.read_json(files.state) == {}
    poddir.write_json(files.state, {"exitCode": 3})
    assert poddir.read_json(files.state) == {"exitCode": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.exit", "0.state.json"]  # no temporary left


def _spellings(source: str) -> list[str]:
    """String constants and `/ "name"` joins that name a part of the pod directory."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in EXACT_NAMES or text.endswith(ATTEMPT_SUFFIXES):
                found.append(f"line {node.lineno}: {text!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            if isinstance(right, ast.Constant) and right.value in JOINED_DIRS:
                found.append(f"line {node.lineno}: / {right.value!r}")
    return found


def test_only_poddir_spells_the_layout() -> None:
    package = Path(t9k_provider.__file__).parent
    owner = Path(poddir.__file__)
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path != owner:
            offenders += [f"{os.path.relpath(path, package)} {hit}" for hit in _spellings(path.read_text())]
    assert offenders == [], "pod-directory paths belong in t9k_provider.local.kubelet.poddir"


@pytest.mark.parametrize(
    "source",
    [
        'log = container_dir / f"{n}.log"',
        'exit_path = log.with_suffix(".exit")',
        'hosts = pod_dir / "etc-hosts"',
        'root = state_dir / "pods"',
        'head, _, rest = name.partition("."); launched = rest == "spec.json"',
    ],
)
def test_the_check_finds_a_spelled_out_path(source: str) -> None:
    assert _spellings(source)
    assert _spellings(Path(poddir.__file__).read_text())
