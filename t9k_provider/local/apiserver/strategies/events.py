"""Events: core/v1 and events.k8s.io/v1 serve the same stored events under different field names."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.apiserver.generic.validation import as_map, as_text, invalid
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause
from t9k_provider.local.machinery.names import is_qualified_name
from t9k_provider.local.machinery.printing import age, column
from t9k_provider.local.machinery.selectors import field_getter

_FIELD_SELECTORS = {
    f"involvedObject.{f}": field_getter("involvedObject", f)
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
}
_FIELD_SELECTORS.update(
    {
        "reason": field_getter("reason"),
        "reportingComponent": field_getter("reportingComponent"),
        "source": field_getter("source", "component"),
        "type": field_getter("type"),
    }
)


class EventStrategy(Strategy):
    """core/v1 Events, as stored."""

    times = ("firstTimestamp", "lastTimestamp")
    micro_times = ("eventTime", "series.lastObservedTime")
    field_selectors = _FIELD_SELECTORS
    columns = [
        column("Last Seen"),
        column("Type"),
        column("Reason"),
        column("Object"),
        column("Message"),
        column("Name", priority=1),
    ]

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        """Legacy (core/v1) event rules; events.k8s.io's stricter ones are the server's events view."""
        namespace = as_text(as_map(obj.get("metadata")).get("namespace"))
        involved = decoding.object_field(obj, "involvedObject", "involvedObject", out)
        involved_ns = decoding.text_field(involved, "namespace", "involvedObject.namespace", out)
        mismatch = fe.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
        if not obj.get("eventTime"):
            if namespace != involved_ns and not (not involved_ns and namespace == "default"):
                out.append(mismatch)
            return
        if not involved_ns and namespace not in ("default", "kube-system"):
            out.append(mismatch)
        component = decoding.required_text(obj, "reportingComponent", "reportingComponent", out)
        out += [fe.invalid("reportingComponent", component, m) for m in is_qualified_name(component)]
        for key in ("reportingInstance", "action", "reason"):
            value = decoding.required_text(obj, key, key, out)
            if len(value) > 128:
                out.append(fe.invalid(key, "", "can have at most 128 characters"))
        if len(decoding.text_field(obj, "message", "message", out)) > 1024:
            out.append(fe.invalid("message", "", "can have at most 1024 characters"))

    def cells(self, event: dict[str, Any]) -> list[Any]:
        involved = event.get("involvedObject") or {}
        last = (
            event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
        )
        subject = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
        return [
            age(_whole_seconds(last)),
            event.get("type", ""),
            event.get("reason", ""),
            subject,
            event.get("message", ""),
            event["metadata"]["name"],
        ]


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1: stricter on create, renamed fields in and out, and kubectl's default columns."""

    columns = Strategy.columns
    cells = Strategy.cells

    def to_version(self, obj: dict[str, Any], res: Resource) -> dict[str, Any]:
        return event_to_v1(obj)

    def from_version(self, body: dict[str, Any], res: Resource) -> dict[str, Any]:
        causes = _v1_causes(body)
        if causes:
            raise invalid(res, body["metadata"].get("name", ""), causes)
        return event_from_v1(body)


def _whole_seconds(stamp: Any) -> str | None:
    return stamp[:19] + "Z" if isinstance(stamp, str) and len(stamp) >= 19 else None


_EVENT_RENAMES = [  # (core field, events.k8s.io field)
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
]


def event_to_v1(core: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in core.items() if k not in {c for c, _ in _EVENT_RENAMES}}
    for c, e in _EVENT_RENAMES:
        if core.get(c) not in (None, "", {}, 0):
            out[e] = core[c]
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    return out


def event_from_v1(event: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in event.items() if k not in {e for _, e in _EVENT_RENAMES}}
    for c, e in _EVENT_RENAMES:
        if e in event:
            out[c] = event[e]
    out["apiVersion"] = "v1"
    out["kind"] = "Event"
    return out


def _v1_causes(event: dict[str, Any]) -> list[Cause]:
    """The strict checks events.k8s.io/v1 adds on create."""
    causes = []
    if not event.get("eventTime"):
        causes.append(Cause("FieldValueRequired", "Required value", "eventTime"))
    kind = event.get("type", "")
    if kind not in ("Normal", "Warning"):
        causes.append(
            Cause("FieldValueInvalid", f'Invalid value: "{kind}": has invalid value: {kind}', "type")
        )
    unset = ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedSource", "deprecatedCount")
    for f in unset:
        if event.get(f):
            causes.append(Cause("FieldValueInvalid", 'Invalid value: "": needs to be unset', f))
    return causes


CORE = Resource.builtin("", "Event", EventStrategy(), short_names=["ev"])
V1 = Resource.builtin(
    "events.k8s.io", "Event", EventsV1Strategy(), short_names=["ev"], stored_as=("", "events")
)
