"""`load` accepts every documented source form and rejects bad ones with a clear ManifestError."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import t9k_provider.jobs as jobs
from t9k_provider.jobs import API_VERSION, GROUP, KINDS, VERSION, GenericJob, ManifestError, load
from tests.jobs.jobs_fixtures import valid_fixtures

BASIC = next(p for p in valid_fixtures() if p.name == "seed-genericjob-basic.yaml")


def test_sources_dict_text_json_and_paths_give_the_same_job() -> None:
    text = BASIC.read_text(encoding="utf-8")
    manifest = yaml.safe_load(text)
    jobs_loaded = [load(manifest), load(text), load(json.dumps(manifest)), load(BASIC), load(str(BASIC))]
    assert all(isinstance(j, GenericJob) for j in jobs_loaded)
    assert all(j == jobs_loaded[0] for j in jobs_loaded)
    assert jobs_loaded[0].name == "generic-example"


def test_public_names() -> None:
    assert (GROUP, VERSION, API_VERSION) == (
        "batch.tensorstack.dev",
        "v1beta1",
        "batch.tensorstack.dev/v1beta1",
    )
    assert list(KINDS) == [
        "GenericJob",
        "PyTorchTrainingJob",
        "TensorFlowTrainingJob",
        "XGBoostTrainingJob",
        "MPIJob",
        "ColossalAIJob",
        "DeepSpeedJob",
        "BeamJob",
    ]
    for kind, cls in KINDS.items():
        assert (kind, f"{kind.lower()}s", kind.lower()) == (cls.KIND, cls.PLURAL, cls.SINGULAR)
        assert cls.SHORT_NAMES
    assert issubclass(ManifestError, ValueError)
    assert set(jobs.__all__) <= set(dir(jobs))


@pytest.mark.parametrize(
    ("source", "path", "words"),
    [
        ("- a\n- b\n", "", "must be a mapping"),
        ("kind: GenericJob\n---\nkind: GenericJob\n", "", "exactly one YAML document"),
        ("a: [1\n", "", "not valid YAML"),
        ({"apiVersion": API_VERSION, "spec": {}}, "kind", "field required"),
        ({"apiVersion": API_VERSION, "kind": "TFJob", "spec": {}}, "kind", "unknown kind 'TFJob'"),
        (
            {"apiVersion": "kubeflow.org/v1", "kind": "GenericJob", "spec": {}},
            "apiVersion",
            "batch.tensorstack.dev",
        ),
        ({"apiVersion": API_VERSION, "kind": "GenericJob"}, "spec", "field required"),
        ({**yaml.safe_load(BASIC.read_text(encoding="utf-8")), "extra": 1}, "extra", "unknown field"),
        (
            {"apiVersion": API_VERSION, "kind": "GenericJob", "metadata": {"name": 3}, "spec": {}},
            "metadata",
            "name must be a string",
        ),
    ],
)
def test_bad_sources(source: object, path: str, words: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load(source)  # type: ignore[arg-type]
    assert caught.value.path == path
    assert words in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load(tmp_path / "absent.yaml")
    assert "cannot read" in str(caught.value)
    with pytest.raises(ManifestError, match="neither a file nor a manifest"):
        load(str(tmp_path / "absent.yaml"))


def test_manifest_error_survives_pickling() -> None:
    error = ManifestError([("spec.a", "bad"), ("spec.b", "worse")])
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.issues, str(copy)) == (error.path, error.issues, str(error))


def test_not_a_source() -> None:
    with pytest.raises(ManifestError, match="expected a dict, YAML text or a path"):
        load(42)  # type: ignore[arg-type]


def test_importing_the_job_api_imports_no_airflow() -> None:
    code = (
        "import sys, t9k_provider.jobs, t9k_provider.jobs.crds\n"
        "bad = sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""
    # The check itself must be able to fail: importing Airflow is seen.
    probe = code.replace("import sys,", "import sys, airflow,")
    seen = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert "airflow" in seen.stdout
