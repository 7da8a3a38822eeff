"""``T9kJobLink``: a button on the task that opens the job (e.g. in the T9k console).

The URL is rendered from a template (``{namespace}``, ``{name}``, ``{kind}``, ``{plural}``, ``{uid}``) once
the job exists and stored in XCom right away (``persist``), so the link works while the job is still running
and no cluster access is needed to serve it.

Airflow 3 calls ``get_link`` in the worker, on the operator that just ran (when the task ends or defers), and
stores the answer under ``xcom_key`` itself: the operator knows its job, so no XCom is read (reading the one a
task that failed before submission never wrote logs an error). Airflow 2 calls it in the webserver, on the
serialized operator (which keeps no ``job_url_template``): there only XCom knows the URL, and a task that
stored none has no link.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom, conf

from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS

RENDERED_IN_WORKER = AIRFLOW_V_3_0_PLUS


class T9kJobLink(BaseOperatorLink):
    name = "T9k Job"

    @property
    def xcom_key(self) -> str:
        """Airflow 3's key for the URL (its task runner stores ``get_link``'s answer there); Airflow 2's
        ``BaseOperatorLink`` has none, and its webserver reads the URL ``persist`` stored under this key."""
        return f"_link_{type(self).__name__}"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        if RENDERED_IN_WORKER:
            return getattr(operator, "job_url", None) or ""
        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""

    @staticmethod
    def url(job: dict[str, Any], template: str | None) -> str | None:
        """The URL for ``job`` (its ``JobRef`` fields) from ``template``, else ``[t9k] job_url_template``
        (read here, in the worker, not for every operator a DAG file's parse builds); None without one."""
        template = template or conf.get("t9k", "job_url_template", fallback=None)
        return template.format(**job) if template else None

    @classmethod
    def persist(cls, context: Any, url: str | None) -> None:
        """Store the URL where Airflow looks for the link (nothing when no template is configured)."""
        if url:
            context["ti"].xcom_push(key=cls().xcom_key, value=url)
