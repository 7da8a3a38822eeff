"""securityContext identity: what the kubelet computes, and what the shim makes of it (a real process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from t9k_provider.local.kubelet import logs
from t9k_provider.local.kubelet.identity import (
    CAPABILITIES,
    Identity,
    capability_numbers,
    container_identity,
    runtime_paths,
)
from t9k_provider.local.kubelet.podenv import ContainerConfigError
from t9k_provider.local.kubelet.shim import ShimSpec

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="changing credentials needs root")


def _pod(pod_sc: dict | None = None, container_sc: dict | None = None) -> tuple[dict, dict]:
    container = {"name": "main", **({"securityContext": container_sc} if container_sc else {})}
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "spec": {"containers": [container], **({"securityContext": pod_sc} if pod_sc else {})},
    }
    return pod, container


def test_no_security_context_keeps_the_shims_identity() -> None:
    assert container_identity(*_pod()) == (None, None)


@root_only
def test_run_as_non_root_without_a_user_is_refused_with_the_kubelets_message() -> None:
    with pytest.raises(ContainerConfigError) as err:
        container_identity(*_pod({"runAsNonRoot": True}))
    assert str(err.value) == (
        'container has runAsNonRoot and image will run as root (pod: "p_ns(u-1)", container: main)'
    )
    with pytest.raises(ContainerConfigError, match="container's runAsUser breaks non-root policy"):
        container_identity(*_pod({"runAsNonRoot": True}, {"runAsUser": 0}))
    identity, _ = container_identity(*_pod({"runAsNonRoot": True, "runAsUser": 1000}))
    assert identity is not None and identity.uid == 1000


@root_only
def test_container_context_overrides_the_pods_and_groups_add_up() -> None:
    pod_sc = {"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000], "fsGroup": 2000}
    identity, not_applied = container_identity(*_pod(pod_sc, {"runAsUser": 1001}))
    assert not_applied is None
    assert identity == Identity(uid=1001, gid=3000, groups=[3000, 4000, 2000], exposed=runtime_paths())
    identity, _ = container_identity(
        *_pod(None, {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW", "CAP_CHOWN"]}})
    )
    assert identity == Identity(no_new_privs=True, drop_caps=[0, 13])


def test_capability_names() -> None:
    assert capability_numbers(["net_raw"]) == [CAPABILITIES.index("NET_RAW")]
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    assert capability_numbers(["ALL"]) == list(range(last + 1))
    with pytest.raises(ContainerConfigError, match="unknown capability"):
        capability_numbers(["NOT_A_CAP"])


def _status_fields(text: str) -> dict[str, str]:
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


def _tmpfs_mounts() -> set[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return {line.split()[4] for line in lines if " - tmpfs " in line}


@root_only
def test_shim_runs_the_process_with_the_identity(tmp_path: Path) -> None:
    """uid/gid/groups, no_new_privs and a dropped capability, as /proc/self/status of the container shows;
    the interpreter is reachable although it may live under a directory uid 1000 cannot search."""
    log = tmp_path / "0.log"
    identity = Identity(
        uid=1000, gid=3000, groups=[3000, 2000], no_new_privs=True, drop_caps=[13], exposed=runtime_paths()
    )
    script = "print(open('/proc/self/status').read())"
    spec = ShimSpec(
        argv=[sys.executable, "-c", script],
        env={"PATH": os.environ["PATH"]},
        log_path=str(log),
        hostname="pod-a",
        identity=identity,
    )
    spec.dump(tmp_path / "0.spec.json")
    host_tmpfs = _tmpfs_mounts()
    shim = [sys.executable, "-m", "t9k_provider.local.kubelet.shim", str(tmp_path / "0.spec.json")]
    assert subprocess.run(shim, timeout=30).returncode == 0
    records = [logs.LogRecord.parse(line) for line in log.read_bytes().splitlines()]
    fields = _status_fields("\n".join(r.text.decode() for r in records if r))
    assert fields["Uid"].split() == ["1000"] * 4
    assert fields["Gid"].split() == ["3000"] * 4
    assert sorted(fields["Groups"].split()) == ["2000", "3000"]
    assert fields["NoNewPrivs"] == "1"
    assert not int(fields["CapBnd"], 16) & (1 << 13)
    assert int(fields["CapEff"], 16) == 0
    assert _tmpfs_mounts() == host_tmpfs  # the covering tmpfs exists in the container's namespace only


def test_without_root_the_container_runs_as_the_kubelet_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from t9k_provider.local.kubelet import identity

    monkeypatch.setattr(identity.os, "geteuid", lambda: 1500)
    monkeypatch.setattr(identity.os, "getegid", lambda: 1500)
    monkeypatch.setattr(identity.os, "getgroups", lambda: [1500])
    applied, why = container_identity(
        *_pod({"runAsUser": 1000, "runAsNonRoot": True}, {"allowPrivilegeEscalation": False})
    )
    assert applied == Identity(no_new_privs=True)  # no_new_privs needs no privilege
    assert why is not None and "not root" in why and "runs as uid 1500" in why
    assert container_identity(*_pod({"runAsNonRoot": True})) == (None, None)  # the "image user" is not root
    assert container_identity(*_pod({"runAsUser": 1500})) == (None, None)  # already that user: nothing to say
    assert container_identity(*_pod(None, {"capabilities": {"drop": ["ALL"]}})) == (None, None)
