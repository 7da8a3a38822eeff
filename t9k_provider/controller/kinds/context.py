"""What a kind may know of its job besides the typed spec: the second argument of every compiler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from t9k_provider.controller.engine.names import child_metadata

# (OpenSSH private key, public key); the only randomness of the controller, injected.
Keygen = Callable[[], tuple[str, str]]


@dataclass(frozen=True)
class JobContext:
    """The raw job (identity and owner of every child) and the SSH key generator (None: fresh ed25519)."""

    job: dict[str, Any]
    keygen: Keygen | None = None

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.job["metadata"]["uid"])

    def meta(self, child: str) -> dict[str, Any]:
        """Metadata of the child named `child`: namespace, the job's labels and its owner reference."""
        return child_metadata(self.job, child)
