"""Names of the T9k Job API group shared by every component."""

from __future__ import annotations

GROUP = "batch.tensorstack.dev"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

# Every kind, in the order the T9k docs list them: `jobs.KINDS` maps each to its model, and the operators
# (`t9k_provider.operators.kinds`) have one class per name without loading the models.
KIND_NAMES = (
    "GenericJob",
    "PyTorchTrainingJob",
    "TensorFlowTrainingJob",
    "XGBoostTrainingJob",
    "MPIJob",
    "ColossalAIJob",
    "DeepSpeedJob",
    "BeamJob",
)

# Old `kind` spellings seen in the T9k docs, accepted on read and never written.
KIND_ALIASES = {"DeepspeedJob": "DeepSpeedJob"}

# Container exit codes that `restartPolicy: ExitCode` treats as retryable (T9k docs).
RETRYABLE_EXIT_CODES = frozenset({130, 137, 138, 143})

# Longest Kubernetes object name that is also a DNS-1035 label (pods, services).
MAX_NAME_LENGTH = 63
