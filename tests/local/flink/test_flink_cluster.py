"""The local flink-operator's objects and status (pure), and the Flink container's entrypoint helpers."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_provider.local.flink import cluster, dist, entrypoint
from t9k_provider.local.flink.cluster import Observed

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:00:05Z"


def flinkcluster(replicas: Any = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "flinkoperator.k8s.io/v1beta1",
        "kind": "FlinkCluster",
        "metadata": {"name": "wc", "namespace": "team", "uid": "uid-1"},
        "spec": {
            "image": {"name": "flink:2.3"},
            "jobManager": {"accessScope": "Cluster"},
            "taskManager": {"replicas": replicas},
            **spec,
        },
    }


def running_pod(name: str, phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase, **status}}


def healthy(fc: dict[str, Any], registered: int = 2) -> Observed:
    pods = {n: running_pod(n) for n in ("wc-jobmanager-0", "wc-taskmanager-0", "wc-taskmanager-1")}
    return Observed(fc, pods, service=True, configmap=True, registered_taskmanagers=registered)


def test_configmap_points_at_the_jobmanager_service_and_user_properties_win() -> None:
    fc = flinkcluster(flinkProperties={"taskmanager.numberOfTaskSlots": "4", "state.backend.type": "hashmap"})
    cm = cluster.configmap(fc)
    assert cm["metadata"]["name"] == "wc-configmap" and cm["metadata"]["namespace"] == "team"
    assert cm["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "flinkoperator.k8s.io/v1beta1",
            "kind": "FlinkCluster",
            "name": "wc",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["jobmanager.rpc.address"] == "wc-jobmanager"
    assert (config["jobmanager.rpc.port"], config["rest.port"], config["blob.server.port"]) == (
        "6123",
        "8081",
        "6124",
    )
    assert config["taskmanager.numberOfTaskSlots"] == "4" and config["state.backend.type"] == "hashmap"
    assert config["jobmanager.memory.process.size"] == "768m"
    assert "rootLogger.level = INFO" in cm["data"]["log4j-console.properties"]


def test_logconfig_replaces_the_console_log4j_properties() -> None:
    fc = flinkcluster(logConfig={"log4j-console.properties": "rootLogger.level = WARN\n"})
    assert cluster.configmap(fc)["data"]["log4j-console.properties"] == "rootLogger.level = WARN\n"


def test_the_rest_port_is_the_ui_port_unless_flink_properties_move_it() -> None:
    assert cluster.rest_port(flinkcluster(jobManager={"ports": {"ui": 18081}})) == 18081
    assert cluster.rest_port(flinkcluster(flinkProperties={"rest.port": "9081"})) == 9081


def test_jobmanager_service_ports_and_selector() -> None:
    svc = cluster.jobmanager_service(
        flinkcluster(jobManager={"accessScope": "Cluster", "ports": {"ui": 18081}})
    )
    assert svc["metadata"]["name"] == "wc-jobmanager"
    assert svc["spec"]["selector"] == {"app": "flink", "cluster": "wc", "component": "jobmanager"}
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {
        "rpc": 6123,
        "blob": 6124,
        "query": 6125,
        "ui": 18081,
    }


def test_pods_run_the_entrypoint_with_the_configmap_and_the_users_pod_settings() -> None:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "beam-data"}}
    mount = {"name": "data", "mountPath": "/data"}
    fc = flinkcluster(
        taskManager={"replicas": 2, "volumes": [volume], "volumeMounts": [mount], "podLabels": {"team": "a"}},
        envVars=[{"name": "EXTRA", "value": "1"}],
    )
    host = {"FLINK_HOME": "/opt/flink", "JAVA_HOME": "/opt/jdk"}
    jm = cluster.pod(fc, "jobmanager", 0, host)
    tm = cluster.pod(fc, "taskmanager", 1, host)
    assert jm["metadata"]["name"] == "wc-jobmanager-0" and tm["metadata"]["name"] == "wc-taskmanager-1"
    assert tm["metadata"]["labels"] == {
        "team": "a",
        "app": "flink",
        "cluster": "wc",
        "component": "taskmanager",
    }
    (container,) = tm["spec"]["containers"]
    assert container["command"] == [sys.executable, "-m", "t9k_provider.local.flink.entrypoint"]
    assert container["args"] == ["taskmanager"] and container["image"] == "flink:2.3"
    env = {e["name"]: e for e in container["env"]}
    assert env["FLINK_HOME"]["value"] == "/opt/flink" and env["JAVA_HOME"]["value"] == "/opt/jdk"
    assert env["EXTRA"]["value"] == "1"
    assert env["FLINK_PROPERTIES"]["valueFrom"] == {
        "configMapKeyRef": {"name": "wc-configmap", "key": "config.yaml"}
    }
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert container["volumeMounts"] == [mount] and tm["spec"]["volumes"] == [volume]
    assert tm["spec"]["restartPolicy"] == "Never" and "volumes" not in jm["spec"]
    assert {p["name"]: p["containerPort"] for p in jm["spec"]["containers"][0]["ports"]}["ui"] == 8081


@pytest.mark.parametrize(
    ("fc", "message"),
    [
        (flinkcluster(replicas=None), "spec.taskManager.replicas: must be an integer >= 1 (got None)"),
        (flinkcluster(replicas="2"), "spec.taskManager.replicas: must be an integer >= 1 (got '2')"),
        (
            flinkcluster(jobManager={"ports": {"ui": 70000}}),
            "spec.jobManager.ports.ui: must be a port number (got 70000)",
        ),
        (flinkcluster(flinkProperties={"parallelism.default": 2}), "spec.flinkProperties: must map"),
        (flinkcluster(job={"jarFile": "/wc.jar"}), "spec.job: the local flink-operator runs session"),
        (flinkcluster(flinkProperties={"rest.port": "80-90"}), 'spec.flinkProperties["rest.port"]: must'),
    ],
)
def test_invalid_specs_name_the_field(fc: dict[str, Any], message: str) -> None:
    with pytest.raises(cluster.InvalidSpec, match="^" + re.escape(message)):
        cluster.validate(fc)


def test_creating_until_the_rest_api_lists_every_taskmanager_then_running() -> None:
    fc = flinkcluster()
    waiting = cluster.derive_status(healthy(fc, registered=None), NOW)  # type: ignore[arg-type]
    assert waiting["state"] == "Creating"
    assert waiting["conditions"][0]["message"] == "waiting for the JobManager REST API"
    assert waiting["components"]["jobManagerStatefulSet"] == {"name": "wc-jobmanager", "state": "NotReady"}
    fc["status"] = waiting
    partial = cluster.derive_status(healthy(fc, registered=1), LATER)
    assert partial["state"] == "Creating"
    assert partial["conditions"][0]["message"] == "waiting for TaskManagers to register (1/2 registered)"
    assert partial["conditions"][0]["lastTransitionTime"] == NOW  # still not ready: no transition
    fc["status"] = partial
    up = cluster.derive_status(healthy(fc), LATER)
    assert up["state"] == "Running" and up["lastUpdateTime"] == LATER
    assert {c["state"] for c in up["components"].values()} == {"Ready"}
    assert up["conditions"][0] == {
        "type": "Ready",
        "status": "True",
        "reason": "Running",
        "message": "JobManager up, 2 TaskManager(s) registered",
        "lastTransitionTime": LATER,
    }


def test_a_running_cluster_that_loses_a_taskmanager_is_reconciling() -> None:
    fc = flinkcluster()
    fc["status"] = cluster.derive_status(healthy(fc), NOW)
    status = cluster.derive_status(healthy(fc, registered=1), LATER)
    assert status["state"] == "Reconciling"
    assert status["components"]["taskManagerStatefulSet"]["state"] == "NotReady"


def test_an_exited_component_stops_the_cluster_for_good() -> None:
    fc = flinkcluster()
    observed = healthy(fc)
    terminated = {"name": "taskmanager", "state": {"terminated": {"exitCode": 1}}}
    observed.pods["wc-taskmanager-1"] = running_pod(
        "wc-taskmanager-1", "Failed", containerStatuses=[terminated]
    )
    stopped = cluster.derive_status(observed, NOW)
    assert stopped["state"] == "Stopped"
    assert stopped["conditions"][0]["reason"] == "ComponentExited"
    assert stopped["conditions"][0]["message"] == "wc-taskmanager-1: container taskmanager exited with code 1"
    fc["status"] = stopped
    assert cluster.derive_status(healthy(fc), LATER)["state"] == "Stopped"


def test_a_cluster_that_cannot_run_here_stops_with_the_reason() -> None:
    observed = Observed(
        flinkcluster(), {}, service=False, configmap=False, problem="java not found (install it)"
    )
    status = cluster.derive_status(observed, NOW)
    assert status["state"] == "Stopped"
    assert status["conditions"][0] | {"lastTransitionTime": None} == {
        "type": "Ready",
        "status": "False",
        "reason": "CannotRun",
        "message": "java not found (install it)",
        "lastTransitionTime": None,
    }


def test_configuration_binds_to_the_pod_ip_unless_told_otherwise() -> None:
    written = "jobmanager.rpc.address: wc-jobmanager\nrest.bind-address: 0.0.0.0\n"
    text = entrypoint.configuration("jobmanager", written, "10.251.0.7")
    assert yaml.safe_load(text) == {
        "jobmanager.rpc.address": "wc-jobmanager",
        "rest.bind-address": "0.0.0.0",
        "jobmanager.bind-host": "10.251.0.7",
    }
    tm = yaml.safe_load(entrypoint.configuration("taskmanager", "a: b", "10.251.0.8"))
    assert tm == {"a": "b", "taskmanager.bind-host": "10.251.0.8", "taskmanager.host": "10.251.0.8"}


def test_java_options_for_all_processes_and_for_the_role() -> None:
    config = cluster.flink_config(flinkcluster(flinkProperties={"env.java.opts.taskmanager": "-Dx='a b'"}))
    assert entrypoint.java_options(config, "taskmanager") == [
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Dx=a b",
    ]
    assert entrypoint.java_options(config, "jobmanager") == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def test_missing_java_and_flink_are_named_with_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("FLINK_HOME", str(tmp_path))
    problem = dist.missing_prerequisites()
    assert problem is not None
    assert "java not found" in problem and "openjdk-17-jre-headless" in problem
    assert (
        f"FLINK_HOME={tmp_path} has no lib/flink-dist*.jar" in problem and "apache-flink-libraries" in problem
    )
    assert entrypoint.main(["taskmanager"]) == 1
    assert f"cannot start the Flink taskmanager: {problem}" in capsys.readouterr().err


def test_the_flink_libraries_wheel_is_found_without_flink_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINK_HOME", raising=False)
    home = dist.flink_home()
    assert home is not None and list(home.glob("lib/flink-dist*.jar"))


def test_properties_that_are_not_a_yaml_mapping_are_refused() -> None:
    with pytest.raises(entrypoint.EntrypointError, match="FLINK_PROPERTIES must be a YAML mapping"):
        entrypoint.configuration("jobmanager", "- a\n- b\n", "10.251.0.7")


def test_java_errors_are_reduced_to_their_root_cause() -> None:
    trace = (
        'Exception in thread "main" org.apache.flink.X: outer problem\n\tat a.b(C.java:1)\n'
        "Caused by: org.apache.flink.configuration.IllegalConfigurationException: the real cause: 64m\n"
        "\tat d.e(F.java:2)\n"
    )
    assert entrypoint.java_error(trace) == "the real cause: 64m"
    assert entrypoint.java_error('Exception in thread "main" java.lang.Error: boom\n') == "boom"
    assert entrypoint.java_error("a\nb\n") == "a\nb"
