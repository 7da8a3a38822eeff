"""GenericJob variables (the guide's 变量替换): `$(type)`, `$(rank)`, `$(replicas[<type>])`,
`$(service.<type>[<rank>].host)` and `$(service.port[<name>])` in container command, args and env values.

The grammar and its checks live with the model, so a job whose variables cannot be expanded is refused
where every manifest is checked (the operators before they submit, the controller as `InvalidSpec`); the
controller expands them (`controller/engine/substitution.py`). Tokens outside the grammar (Kubernetes' own
`$(MASTER_ADDR)`) are left alone (docs/controller.md#genericjob-variable-substitution).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from t9k_provider.jobs.podtemplates import Issues

TOKEN = re.compile(
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


def fields(template: Any, path: str) -> Iterator[tuple[str, str]]:
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


def variable_issues(templates: Sequence[tuple[str, Any]], vs: Variables) -> Issues:
    """The first variable of the (path, template) pairs that cannot be expanded, as an issue: an unknown
    type, a rank out of range, a port spec.service.ports does not declare, or service variables without
    spec.service.ports (one message for the whole job, naming every port to add)."""
    found = [field for path, template in templates for field in fields(template, path)]
    uses: dict[str, None] = {}  # service variables, in order of first use
    wanted: dict[str, None] = {}  # port names they refer to
    for _, text in found:
        for match in TOKEN.finditer(text):
            if match.group("port") is not None or match.group("svc") is not None:
                uses.setdefault(match.group(0))
            if match.group("port") is not None:
                wanted.setdefault(match.group("port"))
    for path, text in found:
        for match in TOKEN.finditer(text):
            if not vs.ports and match.group(0) in uses:
                return [(path, _missing_service(vs, list(uses), list(wanted)))]
            problem = token_problem(match, vs)
            if problem:
                return [(path, problem)]
    return []


def token_problem(match: re.Match[str], vs: Variables) -> str | None:
    """Why a variable cannot be expanded, or None."""
    token = match.group(0)
    if match.group("type") or match.group("rank"):
        return None
    if match.group("replicas") is not None:
        wanted = match.group("replicas")
        return None if wanted in vs.replicas else f"{token} names unknown replica type {wanted!r}"
    if not vs.ports:  # no port: no Service is created, so a host name would not resolve either
        return f"{token} needs spec.service.ports"
    if match.group("port") is not None:
        port = match.group("port")
        if port in vs.ports:
            return None
        return (
            f"{token} names unknown port {port!r} (spec.service.ports has {', '.join(vs.ports)}): "
            f"add `{{name: {port}, port: {_PORT_HINT}}}` to spec.service.ports"
        )
    svc_type, svc_rank = match.group("svc"), match.group("svc_rank")
    if svc_type not in vs.replicas:
        return f"{token} names unknown replica type {svc_type!r}"
    if not svc_rank.isdigit() or int(svc_rank) >= vs.replicas[svc_type]:
        have = f"{vs.replicas[svc_type]} replica(s)"
        return f"{token}: rank {svc_rank!r} is out of range for {svc_type!r} ({have})"
    return None


def expand(match: re.Match[str], vs: Variables, replica_type: str, rank: int) -> str:
    """The value of a variable that `variable_issues` accepted, for replica `rank` of `replica_type`."""
    if match.group("type"):
        return replica_type
    if match.group("rank"):
        return str(rank)
    if match.group("replicas") is not None:
        return str(vs.replicas[match.group("replicas")])
    if match.group("port") is not None:
        assert vs.ports is not None
        return str(vs.ports[match.group("port")])
    return f"{vs.job}-{match.group('svc')}-{int(match.group('svc_rank'))}".lower()
