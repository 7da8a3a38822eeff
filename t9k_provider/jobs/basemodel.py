"""Base model and field types shared by every T9k Job model.

Unknown fields: every spec model forbids them, so a typo such as `replica: 4` fails with its path
instead of being silently dropped. The exceptions are the places that hold Kubernetes objects
(pod templates, resources, env entries, FlinkCluster and batch/v1 Job templates), which are kept as
plain dicts exactly as written, and status models, which keep fields written by other controllers.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

# A Kubernetes object kept verbatim (PodTemplateSpec, ResourceRequirements, EnvVar, ...).
KubeObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


def _int_or_numeric_string(value: int | str) -> int | str:
    if (isinstance(value, str) and not value.isdigit()) or (isinstance(value, int) and value < 0):
        raise ValueError(f"must be a non-negative integer or a string of digits, got {value!r}")
    return value


# Kubernetes IntOrString restricted to non-negative numbers (replica ranks).
RankValue = Annotated[
    int | str,
    AfterValidator(_int_or_numeric_string),
    WithJsonSchema({"x-kubernetes-int-or-string": True}),
]

# Kubernetes IntOrString (service targetPort, torchrun procPerNode).
IntOrString = Annotated[int | str, WithJsonSchema({"x-kubernetes-int-or-string": True})]

# A command line written either as one string or as a list of arguments.
StringOrList = Annotated[
    str | list[str],
    WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True}),
]

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def dns1035_problem(name: str, max_length: int = 63) -> str | None:
    """Why `name` is not a DNS-1035 label of at most `max_length` characters, or None."""
    if len(name) > max_length:
        return f"{name!r} is {len(name)} characters long; the limit is {max_length}"
    if not _DNS1035.match(name):
        return (
            f"{name!r} is not a valid DNS-1035 label (lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit)"
        )
    return None


def _declare_old_spellings(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    """Old spellings stay in the schema, so an API server does not prune them before we read them."""
    properties = schema.get("properties", {})
    for old, new in getattr(cls, "RENAMED", {}).items():
        if new in properties:
            properties[old] = {**properties[new], "description": f"Old spelling of {new}."}


class Model(BaseModel):
    """snake_case attributes, camelCase manifest keys, unknown keys rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        # No coercion: `replicas: "3"` or `enabled: "yes"` is an error here, as in the CRD schema.
        strict=True,
        json_schema_extra=_declare_old_spellings,
    )

    # Old spelling -> canonical spelling of manifest keys, accepted on read only.
    RENAMED: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _accept_old_spellings(cls, data: Any) -> Any:
        if not cls.RENAMED or not isinstance(data, dict):
            return data
        out = dict(data)
        for old, new in cls.RENAMED.items():
            if old in out:
                if new in out:
                    raise ValueError(f"both {old!r} and {new!r} are set; keep only {new!r}")
                out[new] = out.pop(old)
        return out

    def dump(self) -> dict[str, Any]:
        """The manifest form: camelCase keys, fields never set left out."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class StatusModel(Model):
    """Status parts keep fields they do not know (written by other controller versions)."""

    model_config = ConfigDict(extra="allow")
