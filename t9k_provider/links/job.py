"""``T9kJobLink``: a button on the task that opens the job (e.g. in the T9k console).

The URL is rendered from a template (``{namespace}``, ``{name}``, ``{kind}``, ``{plural}``, ``{uid}``) and
written to XCom during ``execute``, before the task defers, so the link works while the job is still running
and no cluster access is needed to serve it.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom


class T9kJobLink(BaseOperatorLink):
    name = "T9k Job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        if not getattr(operator, "job_url_template", None):
            return ""  # no console configured: nothing was persisted
        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""

    @classmethod
    def persist(cls, context: Any, template: str | None, job: dict[str, Any]) -> str | None:
        """Render and store the URL; returns it (None when no template is configured)."""
        if not template:
            return None
        url = template.format(**job)
        context["ti"].xcom_push(key=cls().xcom_key, value=url)
        return url
