"""GenericJob variable substitution in container command, args and env values
(docs/controller.md#genericjob-variable-substitution).

Tokens outside the GenericJob grammar (e.g. Kubernetes' own `$(MASTER_ADDR)`) are left untouched;
tokens inside it that cannot be expanded are a spec error (`check_variables`), whose message says what to
add where the guide's rule is that a variable exists only with a field the job lacks.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .plan import SpecError

_TOKEN = re.compile(
    r"\$\((?:(?P<type>type)|(?P<rank>rank)|replicas\[(?P<replicas>[^\]]*)\]"
    r"|service\.port\[(?P<port>[^\]]*)\]|service\.(?P<svc>[^\[\]().]+)\[(?P<svc_rank>[^\]]*)\]\.host)\)"
)
# What a message that says what to add writes for a port's number.
_PORT_HINT = "<the port the replicas listen on>"


@dataclass(frozen=True)
class Variables:
    job: str
    replicas: Mapping[str, int]  # type -> replicas
    # spec.service.ports by name; None when spec.service is absent. Services are created only for ports, so
    # the service variables need at least one (an empty spec.service exposes nothing).
    ports: Mapping[str, int] | None


def _fields(template: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, text) of each field whose variables are expanded: command, args and env[].value of the
    containers and init containers."""
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return
    for field in ("initContainers", "containers"):
        listed = spec.get(field)
        for ci, container in enumerate(listed if isinstance(listed, list) else []):
            if not isinstance(container, dict):
                continue
            cpath = f"{path}.spec.{field}[{ci}]"
            for key in ("command", "args"):
                items = container.get(key)
                for i, item in enumerate(items if isinstance(items, list) else []):
                    yield f"{cpath}.{key}[{i}]", str(item)
            env = container.get("env")
            for ei, var in enumerate(env if isinstance(env, list) else []):
                if isinstance(var, dict) and isinstance(var.get("value"), str):
                    yield f"{cpath}.env[{ei}].value", var["value"]


def _listed(tokens: Sequence[str]) -> str:
    if len(tokens) <= 2:
        return " and ".join(tokens)
    return f"{tokens[0]}, {tokens[1]} and {len(tokens) - 2} more"


def _missing_service(vs: Variables, uses: Sequence[str], port_names: Sequence[str]) -> str:
    """The message for service variables in a job without spec.service.ports. The guide (变量替换) makes
    `$(service.<type>[<rank>].host)` and `$(service.port[<name>])` available only when the replicas'
    services are exposed (暴露副本的服务: spec.service), and a port's number exists only in
    spec.service.ports, so no default can stand in: the message says what to add."""
    entries = ", ".join(f"{{name: {name}, port: {_PORT_HINT}}}" for name in port_names)
    ports = f"ports: [{entries or f'{{name: <name>, port: {_PORT_HINT}}}'}]"
    if vs.ports is None:
        where, add = "this job has no spec.service", f"Add to spec: `service: {{{ports}}}`"
    else:
        where, add = "spec.service has no ports", f"Add to spec.service: `{ports}`"
    return (
        f"{_listed(uses)}: a service variable needs spec.service.ports (a replica's host name and ports "
        f"exist only when spec.service exposes them), and {where}. {add} (the guide's example: "
        "`service: {ports: [{name: http, port: 2222}]}`)"
    )


def check_variables(templates: Sequence[tuple[str, Any]], vs: Variables) -> None:
    """Raise SpecError for the first variable of the (path, template) pairs that cannot be expanded: an
    unknown type, a rank out of range, a port spec.service.ports does not declare, or service variables
    without spec.service.ports (one message for the whole job, naming every port to add)."""
    fields = [field for path, template in templates for field in _fields(template, path)]
    uses: dict[str, None] = {}  # service variables, in order of first use
    wanted: dict[str, None] = {}  # port names they refer to
    for _, text in fields:
        for match in _TOKEN.finditer(text):
            if match.group("port") is not None or match.group("svc") is not None:
                uses.setdefault(match.group(0))
            if match.group("port") is not None:
                wanted.setdefault(match.group("port"))
    for path, text in fields:
        for match in _TOKEN.finditer(text):
            token = match.group(0)
            if not vs.ports and token in uses:
                raise SpecError(path, _missing_service(vs, list(uses), list(wanted)))
            _resolve(match, vs, "", 0, path)


def _resolve(match: re.Match[str], vs: Variables, replica_type: str, rank: int, path: str) -> str:
    token = match.group(0)
    if match.group("type"):
        return replica_type
    if match.group("rank"):
        return str(rank)
    if match.group("replicas") is not None:
        wanted = match.group("replicas")
        if wanted not in vs.replicas:
            raise SpecError(path, f"{token} names unknown replica type {wanted!r}")
        return str(vs.replicas[wanted])
    if not vs.ports:  # no port: no Service is created, so a host name would not resolve either
        raise SpecError(path, f"{token} needs spec.service.ports")
    if match.group("port") is not None:
        port = match.group("port")
        if port not in vs.ports:
            raise SpecError(
                path,
                f"{token} names unknown port {port!r} (spec.service.ports has {', '.join(vs.ports)}): "
                f"add `{{name: {port}, port: {_PORT_HINT}}}` to spec.service.ports",
            )
        return str(vs.ports[port])
    svc_type, svc_rank = match.group("svc"), match.group("svc_rank")
    if svc_type not in vs.replicas:
        raise SpecError(path, f"{token} names unknown replica type {svc_type!r}")
    if not svc_rank.isdigit() or int(svc_rank) >= vs.replicas[svc_type]:
        have = f"{vs.replicas[svc_type]} replica(s)"
        raise SpecError(path, f"{token}: rank {svc_rank!r} is out of range for {svc_type!r} ({have})")
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
