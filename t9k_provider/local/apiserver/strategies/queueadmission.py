"""The T9k Scheduler's admission of a new T9k Job into its Queue (docs/local-cluster.md#queues): a job that
names a Queue which does not exist, or one that is closed, is refused when it is created.

T9k's user manual says a closed Queue accepts no new workload ("no new workloads will be accepted") and that
who may create a workload using a Queue is decided when it is created (the Queue's usage permission), so a
job naming a Queue that is not there is refused at creation too, rather than left to wait for a Queue that
may never come. A Queue deleted or closed after its jobs were created does not touch them: they wait (the
scheduler says why), and what runs goes on. Only the T9k Jobs are checked here; the PodGroups their
controller creates are the scheduler's to hold back.
"""

from __future__ import annotations

from typing import Any

from t9k_provider.jobs.constants import GROUP
from t9k_provider.jobs.contract import QUEUE_FIELD, job_queue
from t9k_provider.kube.resources import QUEUES
from t9k_provider.local.apiserver.generic import errors
from t9k_provider.local.storage.store import Store


def admit(job: dict[str, Any], api_version: str, kind: str, store: Store) -> None:
    """Refuse (400, as a webhook's denial) a new T9k Job whose Queue is missing or closed."""
    name = job_queue(job) if api_version.split("/")[0] == GROUP else None
    if name is None:
        return
    group_of_queues = QUEUES.api_version.split("/")[0]
    queue = store.get((group_of_queues, QUEUES.plural, "", name))
    if queue is None:
        why = f"queue {name} does not exist"
    elif (queue.get("spec") or {}).get("closed"):
        why = f"queue {name} is closed: it accepts no new job"
    else:
        return
    who = job["metadata"].get("name") or job["metadata"].get("generateName", "")
    raise errors.bad_request(f'{kind} "{who}" is refused: {why} ({QUEUE_FIELD})')
