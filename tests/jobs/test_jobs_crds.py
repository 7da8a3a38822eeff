"""The CRDs are generated from the models, structural, committed, and agree with the models."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t9k_provider.jobs import KINDS, ManifestError, load
from t9k_provider.jobs.crds import all_crds, crd, main, render
from tests.jobs.job_strategies import STRATEGIES
from tests.jobs.jobs_fixtures import valid_fixtures

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def _schema(kind: str) -> dict[str, Any]:
    return crd(KINDS[kind])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _as_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """CRD schema -> JSON Schema; undeclared fields become errors, since an API server would prune them."""
    if node.get("x-kubernetes-int-or-string"):
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return {"type": node["type"]} if "type" in node else {}
    out = {k: v for k, v in node.items() if k not in ("properties", "items", "additionalProperties")}
    if "items" in node:
        out["items"] = _as_json_schema(node["items"])
    if "additionalProperties" in node:
        out["additionalProperties"] = _as_json_schema(node["additionalProperties"])
    if "properties" in node:
        out["properties"] = {k: _as_json_schema(v) for k, v in node["properties"].items()}
        out["additionalProperties"] = False
    return out


def _validator(kind: str) -> jsonschema.Draft7Validator:
    schema = _as_json_schema(_schema(kind))
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


VALIDATORS = {kind: _validator(kind) for kind in KINDS}


def _structural_problems(node: dict[str, Any], path: str, in_junctor: bool = False) -> list[str]:
    problems: list[str] = []
    special = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    if not in_junctor and "type" not in node and not special:
        problems.append(f"{path}: no type")
    for forbidden in ("$ref", "default", "anyOf", "oneOf", "allOf", "not", "title", "const"):
        if forbidden in node:
            problems.append(f"{path}: {forbidden}")
    if node.get("additionalProperties") is not None and "properties" in node:
        problems.append(f"{path}: properties and additionalProperties")
    for name, sub in node.get("properties", {}).items():
        problems += _structural_problems(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += _structural_problems(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _structural_problems(node["additionalProperties"], f"{path}{{}}")
    return problems


def test_committed_crds_match_generation() -> None:
    generated = all_crds()
    committed = sorted(p.name for p in DEPLOY.glob("*.batch.tensorstack.dev.yaml"))
    assert committed == sorted(generated), "run `make crds`"
    for name, document in generated.items():
        assert (DEPLOY / name).read_text(encoding="utf-8") == render(document), (
            f"{name} is stale: run `make crds`"
        )


def test_generator_writes_every_file(tmp_path: Path) -> None:
    assert main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(all_crds())
    assert main([]) == 2


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_is_structural_and_complete(kind: str) -> None:
    document = crd(KINDS[kind])
    cls = KINDS[kind]
    assert document["metadata"]["name"] == f"{cls.PLURAL}.batch.tensorstack.dev"
    names = document["spec"]["names"]
    assert (names["kind"], names["plural"], names["listKind"]) == (kind, cls.PLURAL, f"{kind}List")
    assert names["categories"] == ["t9k-jobs"]
    version = document["spec"]["versions"][0]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {"Phase": ".status.phase", "Age": ".metadata.creationTimestamp"}
    schema = version["schema"]["openAPIV3Schema"]
    assert _structural_problems(schema, kind) == []
    assert schema["required"] == ["spec"]


def test_short_names() -> None:
    short = {kind: crd(cls)["spec"]["names"]["shortNames"] for kind, cls in KINDS.items()}
    assert short == {
        "GenericJob": ["gj"],
        "PyTorchTrainingJob": ["pj"],
        "TensorFlowTrainingJob": ["tj"],
        "XGBoostTrainingJob": ["xgbj"],
        "MPIJob": ["mj"],
        "ColossalAIJob": ["caij"],
        "DeepSpeedJob": ["dj"],
        "BeamJob": ["bj"],
    }


def test_pod_templates_and_int_or_string_are_marked() -> None:
    spec = _schema("GenericJob")["properties"]["spec"]["properties"]
    template = spec["replicaSpecs"]["items"]["properties"]["template"]
    assert template["type"] == "object" and template["x-kubernetes-preserve-unknown-fields"] is True
    assert "properties" not in template
    rank = spec["successRules"]["items"]["additionalProperties"]["items"]
    assert rank == {"x-kubernetes-int-or-string": True}


def test_status_schema_declares_what_the_controller_writes() -> None:
    status = _schema("PyTorchTrainingJob")["properties"]["status"]["properties"]
    assert {
        "phase",
        "conditions",
        "tasks",
        "aggregate",
        "backoffCount",
        "tensorboard",
        "startTime",
        "completionTime",
        "observedGeneration",
    } <= set(status)
    replica = status["tasks"]["items"]["properties"]["replicas"]["items"]["properties"]
    assert {"name", "uid", "phase", "restartCount", "containers"} <= set(replica)
    beam = _schema("BeamJob")["properties"]["status"]["properties"]
    assert {"phase", "conditions", "jobURL", "flinkClusterStatus", "jobStatus"} <= set(beam)


def test_old_spellings_survive_pruning() -> None:
    debug = _schema("GenericJob")["properties"]["spec"]["properties"]["runMode"]["properties"]["debug"]
    assert {"enabled", "enable"} <= set(debug["properties"])
    config = _schema("DeepSpeedJob")["properties"]["spec"]["properties"]["config"]["properties"]
    assert {"slotsPerWorker", "slotPerWorker"} <= set(config)


@pytest.mark.parametrize("path", valid_fixtures(), ids=lambda p: p.stem)
def test_documented_examples_pass_the_crd_schema(path: Path) -> None:
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    canonical = load(manifest).to_manifest()
    VALIDATORS[canonical["kind"]].validate(canonical)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("GenericJob", ("spec", "replicaSpecs", 0, "replicas"), 0),
        ("GenericJob", ("spec", "replicaSpecs", 0, "restartPolicy"), {"policy": "ExitCode"}),
        ("GenericJob", ("spec", "cleanUpPolicy"), "Some"),
        ("GenericJob", ("spec", "replicaSpecs"), []),
        ("GenericJob", ("spec", "scheduler"), {"t9kScheduler": {"queue": "q", "priority": 101}}),
        ("GenericJob", ("spec", "replicaSpecs", 0, "replicas"), "2"),
        ("TensorFlowTrainingJob", ("spec", "replicaSpecs", 0, "restartPolicy"), "Sometimes"),
        ("TensorFlowTrainingJob", ("spec", "runPolicy"), {"backoffLimit": -1}),
    ],
)
def test_crd_rejects_what_the_models_reject(kind: str, path: tuple, value: Any) -> None:
    fixture = {
        "GenericJob": "seed-genericjob-basic.yaml",
        "TensorFlowTrainingJob": "seed-tensorflowtrainingjob-basic.yaml",
    }[kind]
    manifest = yaml.safe_load((valid_fixtures()[0].parent / fixture).read_text(encoding="utf-8"))
    node = manifest
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(ManifestError):
        load(manifest)
    assert list(VALIDATORS[kind].iter_errors(manifest)), "the CRD schema accepted it"


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_jobs_agree_with_the_crd(kind: str, data: st.DataObject) -> None:
    manifest = data.draw(STRATEGIES[kind])
    original = copy.deepcopy(manifest)
    job = load(manifest)
    written = job.to_manifest()
    assert written == original
    VALIDATORS[kind].validate(written)
    assert load(written) == job
