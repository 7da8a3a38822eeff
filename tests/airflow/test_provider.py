"""Provider registration: metadata schema, entry point, and ``airflow providers list`` in a fresh home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from t9k_provider.provider_info import get_provider_info


def test_provider_info_matches_airflow_schema() -> None:
    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_every_declared_module_and_class_imports() -> None:
    import importlib

    info = get_provider_info()
    for section in ("operators", "sensors", "hooks", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    declared = [
        *info["extra-links"],
        *(c["hook-class-name"] for c in info["connection-types"]),
        *(d["class-name"] for d in info["task-decorators"]),
    ]
    for path in declared:
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), path


def test_entry_point_is_installed() -> None:
    from importlib.metadata import entry_points

    found = [
        ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("t9k_provider")
    ]
    assert found and found[0].load() is get_provider_info


@pytest.mark.timeout(180)
def test_airflow_providers_list_shows_the_provider(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    airflow_cli = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow_cli), "providers", "list", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        check=True,
    )
    listed = json.loads(result.stdout[result.stdout.index("[") :])
    ours = [p for p in listed if p["package_name"] == "t9k-airflow-provider"]
    assert ours and ours[0]["version"] == "0.1.0"


def test_connection_type_declares_exactly_the_fields_the_hook_reads() -> None:
    from t9k_provider.hooks.t9k import CONNECTION_FIELDS, T9kHook

    (declared,) = get_provider_info()["connection-types"]
    assert declared["connection-type"] == T9kHook.conn_type
    assert set(declared["conn-fields"]) == set(CONNECTION_FIELDS)
