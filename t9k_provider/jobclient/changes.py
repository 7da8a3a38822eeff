"""The next state of one job for a wait in the worker: one watch per poll interval instead of one read.

A wait in the worker (the whole wait, or the short one before deferring) thus sees the job end within
milliseconds for the same number of requests as polling. A watch that expires (410), fails or ends early is
answered by a read; an API that refuses watches (RBAC without ``watch``, a proxy that cannot stream) is read
every poll interval instead, for the rest of the wait.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from t9k_provider.hooks.errors import api_status, describe, is_transient
from t9k_provider.waiting import status as job_status

#: A watch that ends this much before its window ran out was cut short (a proxy): read the job instead.
EARLY_END_SECONDS = 0.5


def resource_version(job: dict[str, Any]) -> str | None:
    value = (job.get("metadata") or {}).get("resourceVersion")
    return str(value) if value else None


class JobChanges:
    def __init__(self, hook: Any, plural: str, namespace: str, name: str, uid: str | None,
                 log: logging.Logger | Any) -> None:  # fmt: skip
        self.hook = hook
        self.plural = plural
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.log = log
        self.watching = True

    def next_state(
        self, job: dict[str, Any], window: float, stop: Callable[[], bool]
    ) -> dict[str, Any] | None:
        """The job after ``window`` seconds, or as soon as it ends or ``stop()`` holds at a change.

        None means the job must be read: the watch failed or ended early, or the job was deleted or replaced
        (the read tells which).
        """
        deadline = time.monotonic() + window
        if not self.watching:
            time.sleep(max(0.0, window))
            return None
        latest = job
        try:
            version = resource_version(job)
            events = self.hook.watch_job(self.plural, self.namespace, self.name, version, window)
            with contextlib.closing(events):
                for kind, obj in events:
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED" or (self.uid and (obj.get("metadata") or {}).get("uid") != self.uid):
                        return None
                    latest = obj
                    if job_status.outcome(obj) in ("succeeded", "failed") or stop():
                        return latest
        except Exception as exc:
            if not self._read_at_once(exc):
                time.sleep(max(0.0, deadline - time.monotonic()))
            return None
        if deadline - time.monotonic() > EARLY_END_SECONDS:
            time.sleep(max(0.0, deadline - time.monotonic()))
            return None
        return latest

    def _read_at_once(self, exc: BaseException) -> bool:
        """After a failed watch: True to read the job now (expired version, expired credentials), False to
        wait out the window first (trouble that a moment may fix, or no watch at all)."""
        status = api_status(exc)
        self.log.debug("watch on job %s ended: %s", self.name, exc)
        if status in (401, 410):
            return True
        if is_transient(exc):
            return False
        self.watching = False
        self.log.warning("cannot watch job %s (%s); reading it every poll interval instead", self.name,
                         describe(exc))  # fmt: skip
        return False
