"""The manifest envelope shared by every kind: apiVersion, kind, metadata, spec, status."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from t9k_provider.jobs.basemodel import KubeObject, Model, dns1035_problem
from t9k_provider.jobs.constants import API_VERSION, KIND_ALIASES, MAX_NAME_LENGTH
from t9k_provider.jobs.contract import Leader
from t9k_provider.jobs.errors import semantic_error
from t9k_provider.jobs.podtemplates import Issues
from t9k_provider.jobs.status import JobStatus

# Length of the random suffix the API server appends to `metadata.generateName`.
_GENERATED_SUFFIX = 5


class JobSpec(Model):
    """Base of every kind's spec: cross-field checks run on construction."""

    def issues(self) -> Issues:
        """Cross-field problems, as (path relative to spec, message) pairs."""
        return []

    def replica_counts(self) -> dict[str, int]:
        """Largest number of replicas per type, for child names `<job>-<type>-<rank>`."""
        return {}

    def extra_child_suffixes(self) -> list[str]:
        """Children named `<job>-<suffix>` besides the replicas (e.g. `launcher`)."""
        return []

    @model_validator(mode="after")
    def _check(self) -> JobSpec:
        found = self.issues()
        if found:
            raise semantic_error(found)
        return self


class T9kJob(Model):
    """A T9k Job manifest; subclasses fix the kind and the spec and status types."""

    KIND: ClassVar[str]
    #: The resource names, which T9k derives from the kind (set for each subclass).
    PLURAL: ClassVar[str]
    SINGULAR: ClassVar[str]
    SHORT_NAMES: ClassVar[tuple[str, ...]]
    #: Whose log the operator follows by default.
    LEADER: ClassVar[Leader]

    api_version: str = Field(API_VERSION, alias="apiVersion")
    # Left out of a Python-built job, it still reads as the class's kind.
    kind: str = Field("", validate_default=True)
    metadata: KubeObject = Field(default_factory=dict)
    spec: JobSpec
    status: JobStatus | None = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.SINGULAR = cls.KIND.lower()
        cls.PLURAL = f"{cls.SINGULAR}s"

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(f"must be {API_VERSION!r}, got {value!r}")
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        value = KIND_ALIASES.get(value, value)
        if value not in ("", cls.KIND):
            raise ValueError(f"must be {cls.KIND!r}, got {value!r}")
        return cls.KIND

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in ("name", "generateName", "namespace"):
            if key in value and not isinstance(value[key], str):
                raise ValueError(f"{key} must be a string")
        return value

    @model_validator(mode="after")
    def _names(self) -> T9kJob:
        found = self.name_issues()
        if found:
            raise semantic_error(found)
        return self

    @property
    def name(self) -> str | None:
        return self.metadata.get("name")

    @property
    def namespace(self) -> str | None:
        return self.metadata.get("namespace")

    def name_issues(self) -> Issues:
        """The job name and every child name must be DNS-1035 labels of at most 63 characters."""
        name = self.metadata.get("name")
        path = "metadata.name"
        if name is None:
            prefix = self.metadata.get("generateName")
            if not prefix:
                return []
            # Check with the longest name the server can generate.
            name, path = prefix + "x" * _GENERATED_SUFFIX, "metadata.generateName"
        problem = dns1035_problem(name, MAX_NAME_LENGTH)
        if problem:
            return [(path, problem)]
        children = [f"{name}-{suffix}" for suffix in self.spec.extra_child_suffixes()]
        children += [f"{name}-{t}-{n - 1}" for t, n in self.spec.replica_counts().items()]
        for child in children:
            problem = dns1035_problem(child, MAX_NAME_LENGTH)
            if problem:
                return [(path, f"child object name {problem}; shorten the job name or replica type")]
        return []

    def to_manifest(self) -> dict[str, Any]:
        """The manifest dict: as written on load, canonical spellings, unset defaults left out."""
        body = self.dump()
        manifest: dict[str, Any] = {"apiVersion": API_VERSION, "kind": self.KIND}
        if "metadata" in body:
            manifest["metadata"] = body["metadata"]
        manifest["spec"] = body["spec"]
        if "status" in body and body["status"] is not None:
            manifest["status"] = body["status"]
        return manifest
