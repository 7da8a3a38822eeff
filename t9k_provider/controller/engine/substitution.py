"""GenericJob variable substitution in container command, args and env values
(docs/controller.md#genericjob-variable-substitution). The grammar and its checks are the model's
(`jobs/variables.py`): a job that reaches the engine has variables that all expand."""

from __future__ import annotations

import copy
from typing import Any

from t9k_provider.jobs.variables import TOKEN, Variables, expand


def substitute_text(text: str, vs: Variables, replica_type: str, rank: int) -> str:
    return TOKEN.sub(lambda m: expand(m, vs, replica_type, rank), text)


def substitute_template(
    template: dict[str, Any], vs: Variables, replica_type: str, rank: int
) -> dict[str, Any]:
    """A copy of `template` with every variable in command, args and env[].value expanded."""
    out = copy.deepcopy(template)
    spec = out.get("spec") or {}
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            for key in ("command", "args"):
                if isinstance(container.get(key), list):
                    container[key] = [
                        substitute_text(str(item), vs, replica_type, rank) for item in container[key]
                    ]
            for env in container.get("env") or []:
                if isinstance(env.get("value"), str):
                    env["value"] = substitute_text(env["value"], vs, replica_type, rank)
    return out
