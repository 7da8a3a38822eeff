"""Operators for T9k Jobs. Importing this package is cheap: no Kubernetes client, no job models, and no
module at all until a name is used.

``T9kJobOperator`` runs any kind; ``GenericJobOperator``, ``PyTorchTrainingJobOperator``, ... one kind each
(`operators.kinds`).
"""

from __future__ import annotations

import importlib
from typing import Any

from t9k_provider.jobs.constants import KIND_NAMES

_JOB_NAMES = ("T9kJobFailed", "T9kJobOperator", "T9kJobTimeout")
_KIND_NAMES = tuple(f"{kind}Operator" for kind in KIND_NAMES)

__all__ = sorted((*_JOB_NAMES, *_KIND_NAMES))


def __getattr__(name: str) -> Any:
    if name in _JOB_NAMES:
        module = "job"
    elif name in _KIND_NAMES:
        module = "kinds"
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
