"""GenericJob variable substitution in container command, args and env values
(docs/controller.md#genericjob-variable-substitution).

Tokens outside the GenericJob grammar (e.g. Kubernetes' own `$(MASTER_ADDR)`) are left untouched;
tokens inside it that name an unknown type, rank or port are a spec error.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .plan import SpecError

_TOKEN = re.compile(
    r"\$\((?:(?P<type>type)|(?P<rank>rank)|replicas\[(?P<replicas>[^\]]*)\]"
    r"|service\.port\[(?P<port>[^\]]*)\]|service\.(?P<svc>[^\[\]().]+)\[(?P<svc_rank>[^\]]*)\]\.host)\)"
)


@dataclass(frozen=True)
class Variables:
    job: str
    replicas: Mapping[str, int]  # type -> replicas
    ports: Mapping[str, int] | None  # spec.service.ports by name; None when spec.service is absent


def _resolve(match: re.Match[str], vs: Variables, replica_type: str, rank: int, path: str) -> str:
    if match.group("type"):
        return replica_type
    if match.group("rank"):
        return str(rank)
    if match.group("replicas") is not None:
        wanted = match.group("replicas")
        if wanted not in vs.replicas:
            raise SpecError(path, f"{match.group(0)} names unknown replica type {wanted!r}")
        return str(vs.replicas[wanted])
    if vs.ports is None:
        raise SpecError(path, f"{match.group(0)} needs spec.service.ports")
    if match.group("port") is not None:
        port = match.group("port")
        if port not in vs.ports:
            raise SpecError(path, f"{match.group(0)} names unknown port {port!r} (not in spec.service.ports)")
        return str(vs.ports[port])
    svc_type, svc_rank = match.group("svc"), match.group("svc_rank")
    if svc_type not in vs.replicas:
        raise SpecError(path, f"{match.group(0)} names unknown replica type {svc_type!r}")
    if not svc_rank.isdigit() or int(svc_rank) >= vs.replicas[svc_type]:
        raise SpecError(path, f"{match.group(0)}: rank {svc_rank!r} is out of range for {svc_type!r}")
    return f"{vs.job}-{svc_type}-{int(svc_rank)}".lower()


def substitute_text(text: str, vs: Variables, replica_type: str, rank: int, path: str) -> str:
    return _TOKEN.sub(lambda m: _resolve(m, vs, replica_type, rank, path), text)


def substitute_template(
    template: dict[str, Any], vs: Variables, replica_type: str, rank: int, path: str
) -> dict[str, Any]:
    """A copy of `template` with every variable in command, args and env[].value expanded."""
    out = copy.deepcopy(template)
    spec = out.get("spec") or {}
    for field in ("initContainers", "containers"):
        for ci, container in enumerate(spec.get(field) or []):
            cpath = f"{path}.spec.{field}[{ci}]"
            for key in ("command", "args"):
                if isinstance(container.get(key), list):
                    container[key] = [
                        substitute_text(str(item), vs, replica_type, rank, f"{cpath}.{key}[{i}]")
                        for i, item in enumerate(container[key])
                    ]
            for ei, env in enumerate(container.get("env") or []):
                if isinstance(env.get("value"), str):
                    env["value"] = substitute_text(
                        env["value"], vs, replica_type, rank, f"{cpath}.env[{ei}].value"
                    )
    return out
