"""The wait for a job in the worker: each state the watch brings goes through ``waiting.step``, the decision
the trigger takes too; the replica logs are printed meanwhile, and the task ends by ``outcome.conclude`` on
a fresh read. A kill is checked before every look, so a killed task never reports a success."""

from __future__ import annotations

import logging
import time
from typing import Any

from t9k_provider.jobclient.changes import JobChanges
from t9k_provider.jobclient.client import JobClient, JobGone
from t9k_provider.jobclient.identity import JobRef
from t9k_provider.operators.kill import KillSwitch
from t9k_provider.operators.outcome import Finish, conclude
from t9k_provider.replicalogs.waitlogs import WaitLogs
from t9k_provider.replicalogs.worker import STARTING_LOOK_SECONDS
from t9k_provider.waiting import status as job_status
from t9k_provider.waiting.limits import WaitLimits
from t9k_provider.waiting.step import WaitMemory, next_look, step


class WorkerWait:
    def __init__(
        self,
        client: JobClient,
        ref: JobRef,
        limits: WaitLimits,
        logs: WaitLogs | None,
        *,
        poll_interval: float,
        finish: Finish,
        kill: KillSwitch,
        log: logging.Logger | Any,
    ) -> None:
        self.client = client
        self.ref = ref
        self.limits = limits
        self.logs = logs
        self.poll_interval = poll_interval
        self.finish = finish
        self.kill = kill
        self.log = log

    def follow(self, job: dict[str, Any], until: float | None) -> dict[str, Any] | None:
        """Follow the job until ``step`` concludes, then conclude (return the result or raise); None once
        ``until`` (epoch seconds: the wait before deferring) passed.

        ``job`` is a fresh state (the create or read answer); later ones come from a watch per poll interval.
        Replica lines are printed as they are written, every line of a finished replica before the verdict.
        """
        ref, logs = self.ref, self.logs
        changes = JobChanges(self.client.hook, ref.plural, ref.namespace, ref.name, ref.uid, self.log)
        memory = WaitMemory(time.time(), hand_back_at=until)
        while True:
            self._check_killed()
            if logs is not None:
                logs.look(job)
            now = time.time()
            progress = logs.lines.progress if logs is not None else None
            decided = step(job, self.limits, now, memory, uid=ref.uid, progress=progress)
            if decided.action == "read_progress":  # stalled? first read what the streams may not have yet
                read_at, since = time.time(), self.limits.reports_since(job, progress, memory.first_seen, now)
                if logs is None or logs.read_recent_reports(since, self.log):
                    memory.progress_read_at = read_at
                progress = logs.lines.progress if logs is not None else None
                decided = step(job, self.limits, now, memory, uid=ref.uid, progress=progress)
            if decided.action == "read_pods":
                pods, largest = self.client.pods(ref), self.client.largest_node()
                decided = step(
                    job, self.limits, now, memory, uid=ref.uid, pods=pods, largest=largest, progress=progress
                )
            if decided.note:
                self.log.info("%s", decided.note)
            if decided.action == "conclude":
                if logs is not None and job_status.outcome(job) in ("succeeded", "failed"):
                    logs.finish(drain=True)  # every line of the ended replicas before the verdict
                return self.conclude(decided._asdict())
            if decided.action == "hand_back":
                return None
            window = next_look(now, self.poll_interval, self.limits, memory)
            if logs is not None and logs.starting:
                window = min(window, STARTING_LOOK_SECONDS)
            job = changes.next_state(job, window, lambda: self.kill.killed) or self.read()

    def read(self) -> dict[str, Any]:
        try:
            return self.client.read(self.ref)
        except JobGone:
            self._check_killed()  # deleted by the kill's own stop: report the kill
            raise

    def conclude(self, why: dict[str, Any] | None) -> dict[str, Any]:
        """Decide from a fresh read of the job; ``why`` only explains why waiting stopped early."""
        job = self.read()
        if self.logs is not None:
            self.logs.print_new()
        progress = self.logs.lines.progress if self.logs is not None else None
        result = conclude(self.client, self.ref, job, why, self.finish, self.log, progress)
        self._check_killed()  # a kill even now is no success
        return result

    def _check_killed(self) -> None:
        self.kill.check(lambda: self.client)
