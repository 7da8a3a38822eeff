"""The exceptions a task fails with beyond Airflow's own, so a DAG can tell why (``on_failure_callback``,
retries): importable at DAG parse, as they load nothing else."""

from __future__ import annotations

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException


class T9kJobFailed(AirflowFailException):
    """The job ended Failed: retrying the task would rerun the same spec into the same failure."""


class T9kJobTimeout(AirflowException):
    """A wait limit was reached; the job was stopped per ``on_kill_action`` and the task may retry."""
