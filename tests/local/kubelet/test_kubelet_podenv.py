"""Environment and argv of pod processes, checked against Kubernetes' documented rules."""

from __future__ import annotations

import base64
import os
import sys

import pytest

from t9k_provider.local.kubelet import podenv
from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.podenv import ContainerConfigError, PodContext, container_argv, container_env

VARS = {"A": "x", "EMPTY": ""}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("$(A)", "x"),
        ("pre-$(A)-post", "pre-x-post"),
        ("$(MISSING)", "$(MISSING)"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$x"),
        ("$(A", "$(A"),
        ("$A", "$A"),
        ("tail$", "tail$"),
        ("$(EMPTY)!", "!"),
        ("$()", "$()"),
    ],
)
def test_expand_follows_kubernetes_rules(template: str, expected: str) -> None:
    assert podenv.expand(template, VARS.get) == expected


POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "a", "b": "2"}},
    "spec": {"nodeName": "t9k-local-node", "serviceAccountName": "default"},
}
CTX = PodContext(
    configmaps={"cm": {"data": {"K": "cmval", "bad key": "skipped"}, "binaryData": {"B": "Ymlu"}}},
    secrets={"sec": {"data": {"PASS": base64.b64encode(b"s3cret").decode()}}},
    pod_ip="10.251.0.7",
    host_ip="10.251.0.1",
)


def test_env_value_from_sources_and_ordered_expansion() -> None:
    container = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}, {"secretRef": {"name": "sec"}}],
        "env": [
            {"name": "FIRST", "value": "1"},
            {"name": "SECOND", "value": "$(FIRST)-$(LATER)-$(CM_K)"},
            {"name": "LATER", "value": "l"},
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "LABELS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}},
            {"name": "CMK", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "K"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "PASS"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}}},
        ],
    }
    env = container_env(POD, container, CTX)
    assert env["CM_K"] == "cmval" and env["CM_B"] == "bin" and "CM_bad key" not in env
    assert env["PASS"] == "s3cret"
    assert env["SECOND"] == "1-$(LATER)-cmval"  # only variables defined earlier are expanded
    assert (env["NAME"], env["NS"], env["UID"], env["IP"], env["NODE"]) == (
        "p",
        "ns",
        "u1",
        "10.251.0.7",
        "t9k-local-node",
    )
    assert env["APP"] == "a"
    assert env["LABELS"] == 'app="a"\nb="2"'
    assert env["CMK"] == "cmval" and env["PW"] == "s3cret"
    assert "OPT" not in env


@pytest.mark.parametrize(
    ("env_item", "message"),
    [
        (
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "missing", "key": "k"}}},
            'configmap "missing"',
        ),
        (
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "nokey"}}},
            "couldn't find key nokey",
        ),
        ({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}, "spec.bogus"),
    ],
)
def test_bad_references_are_container_config_errors(env_item: dict, message: str) -> None:
    with pytest.raises(ContainerConfigError, match=message):
        container_env(POD, {"name": "c", "env": [env_item]}, CTX)


def test_argv_is_command_plus_args_expanded() -> None:
    container = {"command": ["sh", "-c"], "args": ["echo $(MSG) $$(MSG) $(NOPE)"]}
    assert container_argv(container, {"MSG": "hi"}) == ["sh", "-c", "echo hi $(MSG) $(NOPE)"]


def test_pod_path_puts_the_cluster_interpreter_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(podenv.POD_PATH_ENV, raising=False)
    assert podenv.pod_path().split(":")[0] == sys.executable.rsplit("/", 1)[0]
    monkeypatch.setenv(podenv.POD_PATH_ENV, "/opt/env/bin:/bin")
    assert podenv.pod_path() == "/opt/env/bin:/bin"


def test_referenced_names_cover_env_envfrom_and_volumes() -> None:
    pod = {
        "spec": {
            "initContainers": [{"envFrom": [{"secretRef": {"name": "s1"}}]}],
            "containers": [
                {"env": [{"name": "a", "valueFrom": {"configMapKeyRef": {"name": "c1", "key": "k"}}}]}
            ],
            "volumes": [
                {"name": "v", "configMap": {"name": "c2"}},
                {"name": "w", "secret": {"secretName": "s2"}},
            ],
        }
    }
    assert podenv.referenced_names(pod) == ({"c1", "c2"}, {"s1", "s2"})


def test_volumes_materialise_items_modes_and_subpaths(tmp_path) -> None:
    from t9k_provider.local.kubelet import volumes

    host = tmp_path / "host" / "data"
    pod = {
        "spec": {
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "cm", "items": [{"key": "K", "path": "sub/k.txt"}]}},
                {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}},
                {"name": "host", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}},
            ]
        }
    }
    paths = volumes.materialize(pod, PodDir(tmp_path / "pod"), dict(CTX.configmaps), dict(CTX.secrets))
    assert (paths["cfg"] / "sub" / "k.txt").read_text() == "cmval"
    assert not (paths["cfg"] / "B").exists()  # items select keys
    assert (paths["sec"] / "PASS").read_bytes() == b"s3cret"
    assert (paths["sec"] / "PASS").stat().st_mode & 0o777 == 0o400
    assert paths["scratch"].is_dir() and paths["host"] == host and host.is_dir()
    container = {
        "volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/app/k.txt", "subPath": "sub/k.txt", "readOnly": True},
            {"name": "scratch", "mountPath": "/work", "subPathExpr": "$(POD)"},
        ]
    }
    mounts = volumes.container_mounts(container, paths, {"POD": "p1"}.get)
    assert [(m.source, m.target, m.read_only) for m in mounts] == [
        (str(paths["cfg"] / "sub" / "k.txt"), "/etc/app/k.txt", True),
        (str(paths["scratch"] / "p1"), "/work", False),
    ]
    with pytest.raises(ContainerConfigError, match="relative path"):
        volumes.container_mounts(
            {"volumeMounts": [{"name": "cfg", "mountPath": "/x", "subPath": "../e"}]}, paths, {}.get
        )
    with pytest.raises(ContainerConfigError, match="unsupported volume type"):
        volumes.materialize(
            {"spec": {"volumes": [{"name": "x", "nfs": {}}]}}, PodDir(tmp_path / "p2"), {}, {}
        )


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        ({"configMap": {"name": "absent"}}, 'configmap "absent" not found'),
        ({"secret": {"secretName": "absent"}}, 'secret "absent" not found'),
        (
            {"configMap": {"name": "cm", "items": [{"key": "NOPE", "path": "n"}]}},
            "configmap references non-existent config key: NOPE",
        ),
        (
            {"projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
            'configmap "kube-root-ca.crt" not found',
        ),
    ],
)
def test_a_missing_volume_source_is_a_mount_error(tmp_path, volume: dict, message: str) -> None:
    """Not a container config error: the real kubelet waits in ContainerCreating and retries the mount."""
    from t9k_provider.local.kubelet import volumes

    pod = {"spec": {"volumes": [{"name": "v", **volume}]}}
    with pytest.raises(volumes.MountError) as raised:
        volumes.materialize(pod, PodDir(tmp_path / "pod"), dict(CTX.configmaps), dict(CTX.secrets))
    assert (raised.value.volume, str(raised.value)) == ("v", message)
    optional = {"spec": {"volumes": [{"name": "v", "configMap": {"name": "absent", "optional": True}}]}}
    assert volumes.materialize(optional, PodDir(tmp_path / "p2"), {}, {})["v"].is_dir()


def test_persistent_volume_claims_are_shared_namespace_directories(tmp_path) -> None:
    from t9k_provider.local.kubelet import volumes

    def pod(ns: str) -> dict:
        return {
            "metadata": {"namespace": ns},
            "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
        }

    state = tmp_path / "state"
    a = volumes.materialize(pod("ns1"), PodDir(state / "pods" / "ns1_a_1"), {}, {})["d"]
    b = volumes.materialize(pod("ns1"), PodDir(state / "pods" / "ns1_b_2"), {}, {})["d"]
    other = volumes.materialize(pod("ns2"), PodDir(state / "pods" / "ns2_c_3"), {}, {})["d"]
    assert a == b == state / "volumes" / "ns1" / "data" and a.is_dir()
    assert other == state / "volumes" / "ns2" / "data"
    bad = {
        "metadata": {},
        "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "../x"}}]},
    }
    with pytest.raises(ContainerConfigError, match="claimName"):
        volumes.materialize(bad, PodDir(state / "pods" / "x"), {}, {})


def test_projected_service_account_token_and_fs_group_ownership(tmp_path) -> None:
    from t9k_provider.local.kubelet import volumes

    token = {"serviceAccountToken": {"path": "sa/token", "audience": "vault", "expirationSeconds": 600}}
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "securityContext": {"fsGroup": 2000},
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "api", "projected": {"sources": [{"configMap": {"name": "cm"}}, token]}},
            ],
        },
    }
    sources = volumes.token_sources(pod)
    assert sources == [volumes.TokenSource("api", 1, "sa/token", "vault", 600)]
    paths = volumes.materialize(
        pod, PodDir(tmp_path / "pod"), dict(CTX.configmaps), {}, {sources[0].key: "tok-123"}
    )
    assert (paths["api"] / "sa" / "token").read_text() == "tok-123"
    assert (paths["api"] / "K").read_text() == "cmval"
    if os.geteuid() != 0:
        return  # ownership changes need root
    scratch, token_file = paths["scratch"].stat(), (paths["api"] / "sa" / "token").stat()
    assert (scratch.st_gid, scratch.st_mode & 0o7777) == (2000, 0o2777)  # emptyDir: anyone, setgid group
    assert (token_file.st_gid, token_file.st_mode & 0o777) == (2000, 0o644 | 0o440)
