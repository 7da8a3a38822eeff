"""scheduling.k8s.io/v1 PriorityClasses, and the Priority admission of a new pod: its
``priorityClassName`` (else the class marked ``globalDefault``, else 0) sets ``spec.priority`` and, unless
the pod says, ``spec.preemptionPolicy``; a missing class is refused (403), as kube-apiserver refuses it. The
scheduler orders and preempts by that priority. The two system classes exist from boot."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.printing import AGE_COLUMN, NAME_COLUMN, age, column
from t9k_provider.local.storage.store import Store

GROUP = "scheduling.k8s.io"
HIGHEST_USER_PRIORITY = 1_000_000_000
POLICIES = ("PreemptLowerPriority", "Never")
SYSTEM_CLASSES = (
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if "
        "necessary.",
    ),
)


class PriorityClassStrategy(Strategy):
    namespaced = False
    columns = [NAME_COLUMN, column("Value", "integer"), column("Global-Default", "boolean"), AGE_COLUMN]

    def cells(self, obj: dict[str, Any]) -> list[Any]:
        meta = obj["metadata"]
        return [
            meta["name"],
            obj.get("value"),
            bool(obj.get("globalDefault")),
            age(meta.get("creationTimestamp")),
        ]

    def prepare_for_create(self, obj: dict[str, Any], store: Store) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        value = decoding.int_field(obj, "value", "value", out)
        name = str(obj["metadata"].get("name", ""))
        if "value" not in obj:
            out.append(fe.required("value"))
        elif value is not None and value > HIGHEST_USER_PRIORITY and not name.startswith("system-"):
            most = f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
            out.append(fe.forbidden("value", most))
        policy = obj.get("preemptionPolicy")
        if policy is not None and policy not in POLICIES:
            out.append(fe.not_supported("preemptionPolicy", policy, list(POLICIES)))
        if "globalDefault" in obj and not isinstance(obj["globalDefault"], bool):
            decoding.type_error("globalDefault", obj["globalDefault"], "boolean", out)
        decoding.text_field(obj, "description", "description", out)

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], out: list[Cause]) -> None:
        for key in ("value", "preemptionPolicy"):
            if old.get(key) != new.get(key):
                out.append(fe.invalid(key, new.get(key), "field is immutable"))


RESOURCE = Resource(
    GROUP,
    "v1",
    "priorityclasses",
    "priorityclass",
    "PriorityClass",
    PriorityClassStrategy(),
    short_names=["pc"],
)


def system_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": description,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        for name, value, description in SYSTEM_CLASSES
    ]


def admit_priority(pod: dict[str, Any], store: Store) -> None:
    """Priority admission: raises a 403 ApiError for a class that does not exist, or a priority the pod set
    itself that its class does not give."""
    spec = pod["spec"]
    name = spec.get("priorityClassName")
    if name:
        chosen = store.get((GROUP, "priorityclasses", "", str(name)))
        if chosen is None:
            who = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
            missing = f"no PriorityClass with name {name} was found"
            raise errors.forbidden(f'pods "{who}" is forbidden: {missing}', kind="pods")
    else:
        chosen = next((c for c in store.list(GROUP, "priorityclasses") if c.get("globalDefault")), None)
    value = int((chosen or {}).get("value", 0))
    given = spec.get("priority")
    if given is not None and given != value:
        raise errors.forbidden(
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {value} from the given PriorityClass name",
            kind="pods",
        )
    spec["priority"] = value
    if chosen is not None:
        spec.setdefault("priorityClassName", chosen["metadata"]["name"])
        spec.setdefault("preemptionPolicy", chosen.get("preemptionPolicy", "PreemptLowerPriority"))
