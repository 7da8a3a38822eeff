"""Operators for T9k Jobs. Importing this package is cheap: no Kubernetes client, no job models.

``T9kJobOperator`` runs any kind; ``GenericJobOperator``, ``PyTorchTrainingJobOperator``, ... one kind each
(`operators.kinds`).
"""

from __future__ import annotations

from t9k_provider.operators.job import T9kJobFailed, T9kJobOperator, T9kJobTimeout
from t9k_provider.operators.kinds import KIND_OPERATORS

globals().update({cls.__name__: cls for cls in KIND_OPERATORS.values()})

__all__ = [
    "T9kJobFailed",
    "T9kJobOperator",
    "T9kJobTimeout",
    *sorted(cls.__name__ for cls in KIND_OPERATORS.values()),
]
