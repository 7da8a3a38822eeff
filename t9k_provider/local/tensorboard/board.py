"""What the local TensorBoard operator makes of a T9k TensorBoard, as pure functions: where its logs are, its
pod and Service, and its status (docs/local-cluster.md#tensorboard).

A file set ``t9k://pvc/<claim>/<path>`` (``spec.trainingLogFilesets``) or a ``spec.logDir.pvc`` entry is
mounted read-only from its claim at ``/t9k/tensorboard/<claim>/<path>`` (a persistentVolumeClaim volume with
that ``subPath``), and ``tensorboard --logdir /t9k/tensorboard`` serves them all: its runs are named
``<claim>/<path>/...``. The status has the T9k fields (``phase``, ``pod``, ``url``) and a ``Ready``
condition whose reason and message say what keeps the TensorBoard from serving.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from t9k_provider.kube.resources import ResourceType
from t9k_provider.local.machinery.names import is_dns1035_label, is_dns1123_subdomain

TENSORBOARDS = ResourceType("tensorstack.dev/v1beta1", "TensorBoard", "tensorboards")
PORT = 6006
LOG_ROOT = "/t9k/tensorboard"
CONTAINER = "tensorboard"
#: The T9k docs' example image; a local pod runs this machine's `tensorboard` whatever the image says.
DEFAULT_IMAGE = "t9kpublic/tensorboard:2.11.0"
#: Seconds between two scans of the log directories (TensorBoard's default: 5).
RELOAD_INTERVAL = 2
UID_LABEL = "tensorstack.dev/tensorboard-uid"
SPEC_HASH = "tensorstack.dev/tensorboard-spec-hash"
FILESET_SCHEME = "t9k://"

# Status phases and the Ready condition's reasons.
PENDING, RUNNING, FAILED, SUSPENDED = "Pending", "Running", "Failed", "Suspended"
READY = "Ready"
INVALID_FILESET, UNSUPPORTED_FILESET, NO_LOGS = "InvalidFileset", "UnsupportedFileset", "NoLogs"
CLAIM_NOT_FOUND, UNAVAILABLE = "ClaimNotFound", "TensorBoardUnavailable"
POD_CREATING, POD_NOT_READY = "PodCreating", "PodNotReady"
#: Reasons that need a change of the spec or of the machine: the TensorBoard is Failed, not Pending.
PERMANENT = (INVALID_FILESET, UNSUPPORTED_FILESET, NO_LOGS, UNAVAILABLE)
#: Reasons that say something is wrong (a Warning event); the others are steps on the way to Ready.
PROBLEMS = (*PERMANENT, CLAIM_NOT_FOUND)


class InvalidSpec(ValueError):
    """A spec the operator cannot serve; ``reason`` is the Ready condition's, the message names the entry."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class LogSource:
    """One directory of a claim to show; ``path`` is relative ('' for the whole claim)."""

    claim: str
    path: str
    written: str  # the entry as the spec has it, for messages

    @property
    def mount_path(self) -> str:
        return "/".join(part for part in (LOG_ROOT, self.claim, self.path) if part)


def _relative(path: str, written: str) -> str:
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidSpec(INVALID_FILESET, f"{written}: the path must stay inside the claim (no '..')")
    return "/".join(parts)


def _claim(name: str, written: str) -> str:
    if not name:
        raise InvalidSpec(INVALID_FILESET, f"{written}: names no claim (t9k://pvc/<claim>/<path>)")
    errors = is_dns1123_subdomain(name)
    if errors:
        raise InvalidSpec(INVALID_FILESET, f"{written}: invalid claim name {name!r}: {errors[0]}")
    return name


def parse_fileset(fileset: Any) -> LogSource:
    """``t9k://pvc/<claim>/<path>``; MinIO file sets and other schemes are not served here."""
    if not isinstance(fileset, str):
        raise InvalidSpec(INVALID_FILESET, f"spec.trainingLogFilesets: {fileset!r} is not a string")
    if not fileset.startswith(FILESET_SCHEME):
        raise InvalidSpec(
            UNSUPPORTED_FILESET,
            f"{fileset}: unsupported file set scheme (the local cluster serves t9k://pvc/<claim>/<path>)",
        )
    storage, _, rest = fileset[len(FILESET_SCHEME) :].partition("/")
    if storage == "minio":
        raise InvalidSpec(
            UNSUPPORTED_FILESET, f"{fileset}: MinIO file sets are not supported by the local cluster"
        )
    if storage != "pvc":
        raise InvalidSpec(UNSUPPORTED_FILESET, f"{fileset}: unsupported storage type {storage!r} (only pvc)")
    claim, _, path = rest.partition("/")
    return LogSource(_claim(claim, fileset), _relative(path, fileset), fileset)


def _log_dir_sources(log_dir: Any) -> list[LogSource]:
    """``spec.logDir``: its ``pvc`` entries (``name``, ``subPath`` list); S3 and HTTP sources are refused."""
    if not isinstance(log_dir, dict):
        raise InvalidSpec(INVALID_FILESET, "spec.logDir: must be an object")
    for kind in ("s3", "http"):
        if log_dir.get(kind):
            raise InvalidSpec(
                UNSUPPORTED_FILESET, f"spec.logDir.{kind}: {kind.upper()} log sources are not supported here"
            )
    sources = []
    for i, entry in enumerate(log_dir.get("pvc") or []):
        where = f"spec.logDir.pvc[{i}]"
        entry = entry if isinstance(entry, dict) else {}
        claim = _claim(str(entry.get("name") or ""), where)
        for sub in entry.get("subPath") or [""]:
            sources.append(LogSource(claim, _relative(str(sub), where), f"{where} ({claim}/{sub})"))
    return sources


def log_sources(spec: dict[str, Any]) -> list[LogSource]:
    """Every directory to show, each once, in the spec's order; InvalidSpec names the first bad entry."""
    filesets = spec.get("trainingLogFilesets") or []
    if not isinstance(filesets, list):
        raise InvalidSpec(INVALID_FILESET, "spec.trainingLogFilesets: must be a list of file sets")
    sources = [parse_fileset(f) for f in filesets]
    if spec.get("logDir"):
        sources += _log_dir_sources(spec["logDir"])
    if not sources:
        raise InvalidSpec(
            NO_LOGS, "neither spec.trainingLogFilesets nor spec.logDir.pvc names a log directory"
        )
    unique: dict[tuple[str, str], LogSource] = {}
    for source in sources:
        unique.setdefault((source.claim, source.path), source)
    return list(unique.values())


def workload_name(board: str) -> str:
    """The pod's and the Service's name: ``<board>-tensorboard`` when that is a Service name (a DNS-1035
    label), else one derived from a hash of the TensorBoard's name."""
    name = f"{board}-tensorboard"
    errors = is_dns1035_label(name)
    return f"tensorboard-{hashlib.sha256(board.encode()).hexdigest()[:12]}" if errors else name


def _owner(tb: dict[str, Any]) -> list[dict[str, Any]]:
    meta = tb["metadata"]
    ref = {"apiVersion": TENSORBOARDS.api_version, "kind": TENSORBOARDS.kind, "name": meta["name"]}
    return [{**ref, "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]


def _meta(tb: dict[str, Any]) -> dict[str, Any]:
    meta = tb["metadata"]
    return {
        "name": workload_name(meta["name"]),
        "namespace": meta.get("namespace", "default"),
        "labels": {UID_LABEL: meta["uid"]},
        "ownerReferences": _owner(tb),
    }


def pod(tb: dict[str, Any], sources: list[LogSource]) -> dict[str, Any]:
    """The pod that runs ``tensorboard`` over ``sources``; its annotation ``SPEC_HASH`` tells a pod made for
    another spec."""
    spec = tb.get("spec") or {}
    claims = list(dict.fromkeys(source.claim for source in sources))
    volumes = [
        {"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        for i, claim in enumerate(claims)
    ]
    mounts = []
    for source in sources:
        mount = {
            "name": f"claim-{claims.index(source.claim)}",
            "mountPath": source.mount_path,
            "readOnly": True,
        }
        mounts.append({**mount, "subPath": source.path} if source.path else mount)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.get("image") or DEFAULT_IMAGE,
        "command": ["tensorboard", "--logdir", LOG_ROOT, "--host", "$(POD_IP)", "--port", str(PORT)],
        "args": ["--reload_interval", str(RELOAD_INTERVAL)],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/data/environment", "port": PORT}, "periodSeconds": 2},
        "volumeMounts": mounts,
    }
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    pod_spec = {"restartPolicy": "Always", "containers": [container], "volumes": volumes}
    digest = hashlib.sha256(json.dumps(pod_spec, sort_keys=True).encode()).hexdigest()[:16]
    meta = _meta(tb) | {"annotations": {SPEC_HASH: digest}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def service(tb: dict[str, Any]) -> dict[str, Any]:
    meta = _meta(tb)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": dict(meta["labels"]),
            "ports": [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
        },
    }


@dataclass
class Observed:
    """What the operator saw of one TensorBoard: its pod (None: none yet) and what keeps it from serving."""

    board: dict[str, Any]
    pod: dict[str, Any] | None
    problem: InvalidSpec | None = None


def _pod_ready(p: dict[str, Any]) -> bool:
    status = p.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _pod_waiting(p: dict[str, Any]) -> str:
    """Why the pod does not serve yet, as its status says it."""
    status = p.get("status") or {}
    name = p["metadata"]["name"]
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            detail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"pod {name}: {waiting['reason']}{detail}"
    if status.get("phase") == "Running":
        return f"pod {name}: waiting for tensorboard to answer on port {PORT}"
    return f"pod {name} is {status.get('phase') or 'Pending'}"


def url(p: dict[str, Any]) -> str | None:
    """Where a person on the host opens it: the pod IP is reachable from the host (the pod bridge)."""
    ip = (p.get("status") or {}).get("podIP")
    return f"http://{ip}:{PORT}/" if ip else None


def derive_status(obs: Observed, now: str) -> dict[str, Any]:
    """The status the operator writes: every key, None where it has nothing (a merge patch removes it)."""
    tb, p = obs.board, obs.pod
    address = url(p) if p is not None and _pod_ready(p) else None
    if (tb.get("spec") or {}).get("suspend"):
        phase, reason, message = SUSPENDED, SUSPENDED, "spec.suspend is true: the pod is deleted"
    elif obs.problem is not None:
        reason, message = obs.problem.reason, str(obs.problem)
        phase = FAILED if reason in PERMANENT else PENDING
    elif p is None:
        phase, reason, message = (
            PENDING,
            POD_CREATING,
            f"creating pod {workload_name(tb['metadata']['name'])}",
        )
    elif address is not None:
        phase, reason, message = RUNNING, READY, f"serving at {address}"
    else:
        phase, reason, message = PENDING, POD_NOT_READY, _pod_waiting(p)
    ready = "True" if reason == READY else "False"
    recorded = tb.get("status") or {}
    old = next((c for c in recorded.get("conditions") or [] if c.get("type") == READY), {})
    since = old.get("lastTransitionTime") if old.get("status") == ready else None
    condition = {"type": READY, "status": ready, "reason": reason, "message": message}
    pod_status = None
    if p is not None:
        reference = {"name": p["metadata"]["name"], "uid": p["metadata"].get("uid")}
        pod_status = {"reference": reference, "phase": (p.get("status") or {}).get("phase") or PENDING}
    return {
        "phase": phase,
        "pod": pod_status,
        "conditions": [{**condition, "lastTransitionTime": since or now}],
        "url": address if reason == READY else None,
    }
