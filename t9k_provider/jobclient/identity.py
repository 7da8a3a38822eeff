"""Who owns a job: the deterministic name and the Airflow annotations that let a retry find its job again.

The name depends only on dag_id/task_id/run_id/map_index (never on try_number), so every try of one task
instance targets the same object and a create conflict is answered by reading the annotations.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from t9k_provider.kube.resources import ResourceType

ANNOTATION_PREFIX = "airflow.apache.org/"
DAG_ID = ANNOTATION_PREFIX + "dag-id"
TASK_ID = ANNOTATION_PREFIX + "task-id"
RUN_ID = ANNOTATION_PREFIX + "run-id"
MAP_INDEX = ANNOTATION_PREFIX + "map-index"
TRY_NUMBER = ANNOTATION_PREFIX + "try-number"
#: Set once a try has reported the job's outcome, so later tries re-run instead of re-reporting it.
CHECKED = ANNOTATION_PREFIX + "checked"

#: Replica pods are ``<job>-<type>-<rank>`` and their Services reuse that as a DNS label (<= 63 chars):
#: a 40-character job name leaves room for the replica suffix.
MAX_GENERATED_NAME = 40
DIGEST_LENGTH = 10


class JobRef(NamedTuple):
    """Everything needed to find the job again: travels in defer kwargs and XCom as a dict."""

    kind: str
    plural: str
    name: str
    namespace: str
    uid: str | None

    @property
    def resource(self) -> ResourceType:
        """The job's resource type, for the async client."""
        from t9k_provider.jobs.constants import API_VERSION
        from t9k_provider.kube.resources import ResourceType

        return ResourceType(API_VERSION, self.kind, self.plural)


def task_identity(ti: Any) -> dict[str, str]:
    map_index = getattr(ti, "map_index", -1)
    return {
        DAG_ID: str(ti.dag_id),
        TASK_ID: str(ti.task_id),
        RUN_ID: str(ti.run_id),
        MAP_INDEX: str(-1 if map_index is None else map_index),
    }


def job_name(identity: dict[str, str], prefix: str | None = None) -> str:
    """``<prefix>-<digest>``: a DNS-1035 label, stable across tries, unique per task instance."""
    key = "\0".join(identity[k] for k in (DAG_ID, TASK_ID, RUN_ID, MAP_INDEX))
    digest = hashlib.sha256(key.encode()).hexdigest()[:DIGEST_LENGTH]
    stem = re.sub(r"[^a-z0-9-]+", "-", (prefix or identity[TASK_ID]).lower()).strip("-")
    if not stem or not stem[0].isalpha():
        stem = "t9k-" + stem
    stem = stem[: MAX_GENERATED_NAME - DIGEST_LENGTH - 1].rstrip("-")
    return f"{stem}-{digest}"


def annotations(identity: dict[str, str], try_number: int | None) -> dict[str, str]:
    result = dict(identity)
    if try_number is not None:
        result[TRY_NUMBER] = str(try_number)
    return result


def is_ours(job: dict[str, Any], identity: dict[str, str]) -> bool:
    found = (job.get("metadata") or {}).get("annotations") or {}
    return all(found.get(key) == value for key, value in identity.items())


def is_checked(job: dict[str, Any]) -> bool:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(CHECKED) == "true"
