"""Names of the T9k Job API group shared by every component."""

from __future__ import annotations

GROUP = "batch.tensorstack.dev"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

# Old `kind` spellings seen in the T9k docs, accepted on read and never written.
KIND_ALIASES = {"DeepspeedJob": "DeepSpeedJob"}

# Container exit codes that `restartPolicy: ExitCode` treats as retryable (T9k docs).
RETRYABLE_EXIT_CODES = frozenset({130, 137, 138, 143})

# Longest Kubernetes object name that is also a DNS-1035 label (pods, services).
MAX_NAME_LENGTH = 63
