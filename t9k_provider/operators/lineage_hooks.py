"""The methods Airflow's OpenLineage provider calls on an operator (docs/airflow.md#lineage).

Kept apart from ``lineage``, which builds the facets and imports the OpenLineage client: this module is
built into the operator's class at DAG parse, so it imports nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from t9k_provider.operators.outcome import Outcome


class JobLineage:
    """An operator's lineage: its manifest, its job once submitted, how the job ended once concluded."""

    manifest: Any
    namespace: str | None
    inlets: Any
    outlets: Any
    _job: Any  # the operator's JobRef
    _outcome: Outcome | None = None

    def concluded(self, outcome: Outcome) -> None:
        """How the job ended, kept for the lineage Airflow asks for once the task ends."""
        self._outcome = outcome

    def get_openlineage_facets_on_start(self, task_instance: Any = None) -> OperatorLineage:
        """Called when the task starts, and the same as ``..._on_complete`` and ``..._on_failure`` when it
        ended: the lineage of what the task holds then (``lineage``)."""
        from t9k_provider.operators import lineage

        return lineage.facets(
            self.manifest, self.namespace, self._job, self._outcome, self.inlets, self.outlets
        )

    get_openlineage_facets_on_complete = get_openlineage_facets_on_failure = get_openlineage_facets_on_start
