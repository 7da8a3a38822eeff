"""What a kill of the task stops, made ready before there is anything to stop.

``on_kill`` runs in a signal handler wherever ``execute`` was: ``fire`` therefore imports nothing, builds
nothing and never raises. It stops the job when it can (the client and the job's name were set up by
``arm``); the task's own flow fails at its next ``check``, stopping the job first if ``fire`` could not (the
kill came before there was a client), and never reports a success after a kill.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException

if TYPE_CHECKING:  # built at DAG parse with the operator: nothing heavy
    from t9k_provider.jobclient.client import JobClient
    from t9k_provider.jobclient.identity import JobRef

SAID = {
    "gone": "task killed: job %s/%s already gone",
    "ended": "task killed: job %s/%s had already ended; kept",
    "deleted": "task killed: job %s/%s deleted",
}


class KillSwitch:
    def __init__(self, action: str) -> None:
        #: ``on_kill_action``: "delete" stops the job, "keep" leaves it running.
        self.action = action
        self.killed = False
        self.target: JobRef | None = None
        #: The task instance's annotations: a job killed while being created is ours only if it has them.
        self.identity: dict[str, str] | None = None
        self._client: JobClient | None = None
        self._log: logging.Logger | Any = logging.getLogger(__name__)
        self._stopped = False

    def arm(self, target: JobRef, make_client: Callable[[], JobClient], log: logging.Logger | Any) -> None:
        """Aim at ``target`` (its uid once it exists), with a client of its own built now: a kill must not
        build one. A kill that came earlier is acted on at once (``check``)."""
        self.target, self._log = target, log
        if self.action == "delete" and self._client is None:
            self._client = make_client()
        self.check(make_client)

    def fire(self) -> None:
        """``on_kill``: remember the kill and stop the job if the switch is armed."""
        self.killed = True
        if self._client is not None:
            self._stop(self._client)

    def check(self, fallback: Callable[[], JobClient]) -> None:
        """Fail the task if it was killed (Airflow 3's SIGTERM handler returns into the flow), stopping the
        job first with the armed client, or with ``fallback()`` when the kill came before arming."""
        if not self.killed:
            return
        self._stop(self._client or fallback())
        named = f" while job {self.target.name} ran" if self.target else ""
        raise AirflowException(f"task killed{named} (on_kill_action={self.action})")

    @contextlib.contextmanager
    def completing(self, fallback: Callable[[], JobClient]) -> Iterator[None]:
        """Airflow 2's SIGTERM handler raises after ``on_kill``, wherever the task was: a kill that came
        before there was a client to stop the job with is completed on the way out."""
        try:
            yield
        except BaseException:
            if self.killed:
                with contextlib.suppress(Exception):
                    self._stop(self._client or fallback())
            raise

    def _stop(self, client: JobClient) -> None:
        """Stop the job per ``on_kill_action`` and the stop policy; never raises. A job that kept changing
        under the stop is left to the task's own flow, which tries again."""
        ref = self.target
        if ref is None or self.action != "delete" or self._stopped:
            return
        try:
            stopped = client.stop(ref, self.identity)
        except Exception as exc:
            self._log.warning("task killed: could not stop job %s/%s: %s", ref.namespace, ref.name, exc)
            return
        if stopped in SAID:
            self._log.info(SAID[stopped], ref.namespace, ref.name)
            self._stopped = True
