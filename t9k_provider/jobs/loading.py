"""`load`: any manifest source -> the typed job of its kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from t9k_provider.jobs.beam import BeamJob
from t9k_provider.jobs.colossalai import ColossalAIJob
from t9k_provider.jobs.constants import API_VERSION, KIND_ALIASES
from t9k_provider.jobs.deepspeed import DeepSpeedJob
from t9k_provider.jobs.envelope import T9kJob
from t9k_provider.jobs.errors import ManifestError, from_validation_error
from t9k_provider.jobs.generic import GenericJob
from t9k_provider.jobs.mpi import MPIJob
from t9k_provider.jobs.training import PyTorchTrainingJob, TensorFlowTrainingJob, XGBoostTrainingJob

KINDS: dict[str, type[T9kJob]] = {
    cls.KIND: cls
    for cls in (
        GenericJob,
        PyTorchTrainingJob,
        TensorFlowTrainingJob,
        XGBoostTrainingJob,
        MPIJob,
        ColossalAIJob,
        DeepSpeedJob,
        BeamJob,
    )
}


def load(source: dict[str, Any] | str | Path) -> T9kJob:
    """A typed job from a manifest dict, YAML/JSON text, or the path of a file holding one."""
    data = _read(source)
    if isinstance(data, str) and "\n" not in data and not isinstance(source, dict):
        raise ManifestError([("", f"{data!r} is neither a file nor a manifest")])
    if not isinstance(data, dict):
        raise ManifestError([("", f"a manifest must be a mapping, got {type(data).__name__}")])
    kind = data.get("kind")
    if kind is None:
        raise ManifestError([("kind", f"field required (one of {', '.join(KINDS)})")])
    cls = KINDS.get(KIND_ALIASES.get(kind, kind)) if isinstance(kind, str) else None
    if cls is None:
        raise ManifestError([("kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")])
    if data.get("apiVersion") != API_VERSION:
        raise ManifestError([("apiVersion", f"must be {API_VERSION!r}, got {data.get('apiVersion')!r}")])
    try:
        return cls.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise from_validation_error(exc, data) from None


def _read(source: dict[str, Any] | str | Path) -> Any:
    if isinstance(source, dict):
        return source
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and _is_file(source)):
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise ManifestError([("", f"cannot read {source}: {exc.strerror}")]) from None
    elif isinstance(source, str):
        text = source
    else:
        raise ManifestError([("", f"expected a dict, YAML text or a path, got {type(source).__name__}")])
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError([("", f"not valid YAML: {exc}")]) from None
    if len(documents) != 1:
        raise ManifestError([("", f"expected exactly one YAML document, found {len(documents)}")])
    return documents[0]


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False
