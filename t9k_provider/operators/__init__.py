"""Operators for T9k Jobs. Importing this package is cheap: no Kubernetes client, no job models, and no
module at all until a name is used.

``T9kJobOperator`` runs any kind; ``GenericJobOperator``, ``PyTorchTrainingJobOperator``, ... one kind each
(`operators.kinds`). The kind names (and so ``__all__``) are read from `jobs.constants` only when asked for:
a DAG of ``@task.t9k*`` tasks imports ``operators.job`` through this package and needs none of them.
"""

from __future__ import annotations

import importlib
from typing import Any

_JOB_NAMES = ("T9kJobFailed", "T9kJobOperator", "T9kJobTimeout")


def _kind_names() -> tuple[str, ...]:
    from t9k_provider.jobs.constants import KIND_NAMES

    return tuple(f"{kind}Operator" for kind in KIND_NAMES)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        value: Any = sorted((*_JOB_NAMES, *_kind_names()))
    elif name in _JOB_NAMES:
        value = getattr(importlib.import_module(f"{__name__}.job"), name)
    elif name.endswith("Operator") and name in _kind_names():
        value = getattr(importlib.import_module(f"{__name__}.kinds"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})
