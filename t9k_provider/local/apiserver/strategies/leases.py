"""Leases: an update must name the resourceVersion it replaces, and a PUT creates a missing one."""

from __future__ import annotations

from typing import Any

from t9k_provider.local.apiserver.generic.resources import Resource, Strategy
from t9k_provider.local.machinery import decoding
from t9k_provider.local.machinery import fielderrors as fe
from t9k_provider.local.machinery.fielderrors import Cause


class LeaseStrategy(Strategy):
    allow_create_on_update = True
    allow_unconditional_update = False
    micro_times = ("spec.acquireTime", "spec.renewTime")

    def validate(self, obj: dict[str, Any], out: list[Cause]) -> None:
        spec = decoding.object_field(obj, "spec", "spec", out)
        decoding.text_field(spec, "holderIdentity", "spec.holderIdentity", out)
        duration = decoding.int_field(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", out)
        if duration is not None and duration <= 0:
            out.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
        transitions = decoding.int_field(spec, "leaseTransitions", "spec.leaseTransitions", out)
        if transitions is not None and transitions < 0:
            out.append(fe.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))


RESOURCE = Resource.builtin("coordination.k8s.io", "Lease", LeaseStrategy())
