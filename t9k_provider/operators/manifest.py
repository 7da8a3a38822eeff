"""The operators' ``manifest`` field: a template rendered once, then validated by the job models before any
API call, named for the task instance and annotated so a retry finds its job again (``jobclient.identity``).

Imported at DAG parse with the operator: the job models load only when a manifest is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException

if TYPE_CHECKING:
    from t9k_provider.replicalogs.targets import Followed


class TemplatedManifest:
    """What ``T9kJobOperator`` does with its ``manifest`` (a dict, YAML/JSON text, a file path or a model)."""

    manifest: Any
    namespace: str | None
    exact_name: bool
    checkpoint_volume: dict[str, Any] | None
    log_replicas: Any
    progress_timeout: float | None
    job_kind: str | None
    template_ext: Sequence[str]
    dag_id: str
    task_id: str

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        # Jinja's loader only searches the DAG folder and template_searchpath; an absolute file path is read
        # here so it is rendered exactly once like any other template.
        if isinstance(self.manifest, str) and self.manifest.endswith(tuple(self.template_ext)):
            path = Path(self.manifest)
            if path.is_absolute() and path.is_file():
                self.manifest = path.read_text()
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]

    def render_template(
        self, content: Any, context: Any, jinja_env: Any = None, seen_oids: set[int] | None = None
    ) -> Any:
        """Only the ``manifest`` field itself may name a template file: Airflow would load any string ending
        in ``template_ext``, a path in a dict manifest's ``args`` or ``env`` too, or ``config_file``."""
        names_file = isinstance(content, str) and content.endswith(tuple(self.template_ext))
        if names_file and content is not self.manifest:
            env = jinja_env or self.get_template_env()  # type: ignore[attr-defined]
            return self._render(env.from_string(content), context)  # type: ignore[attr-defined]
        return super().render_template(content, context, jinja_env, seen_oids)  # type: ignore[misc]

    def build_manifest(self, task_identity: dict[str, str] | None, try_number: int | None) -> dict[str, Any]:
        """Validate with the job models (before any API call) and add name, namespace, annotations and the
        checkpoint volume; without a ``task_identity`` (a dry run) the name is derived from the dag and task
        ids."""
        from t9k_provider.jobclient import identity as ident
        from t9k_provider.jobs import ManifestError, load
        from t9k_provider.operators import checkpoints

        key = self.instance_key(task_identity)
        try:
            model = load(self.manifest)
            if self.checkpoint_volume is not None:
                body = model.to_manifest()
                model = load(checkpoints.with_checkpoints(body, self.checkpoint_volume, key, try_number))
        except ManifestError as exc:
            raise AirflowFailException(f"invalid T9k Job manifest:\n{exc}") from exc
        except checkpoints.Clash as exc:
            raise AirflowFailException(str(exc)) from exc
        except (OSError, ValueError) as exc:
            raise AirflowFailException(f"cannot read the T9k Job manifest: {exc}") from exc
        if self.job_kind is not None and self.job_kind != model.KIND:
            raise AirflowFailException(
                f"kind: {type(self).__name__} runs {self.job_kind} jobs, the manifest is a {model.KIND}; "
                "use T9kJobOperator or the matching operator"
            )
        body = model.to_manifest()
        meta = body.setdefault("metadata", {})
        stated = meta.get("namespace")
        if self.namespace and stated and stated != self.namespace:
            raise AirflowFailException(
                f"metadata.namespace: {stated!r} disagrees with the operator's namespace={self.namespace!r}"
            )
        if not (meta.get("name") and self.exact_name):
            prefix = meta.get("name") or meta.get("generateName")
            meta.pop("generateName", None)
            meta["name"] = ident.job_name(key, prefix=prefix)
        if task_identity is not None:
            annotations = ident.annotations(task_identity, try_number)
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        return body

    def instance_key(self, task_identity: dict[str, str] | None) -> dict[str, str]:
        """The task instance the manifest is built for: ``task_identity``, or a dry run's placeholder."""
        from t9k_provider.jobclient import identity as ident

        placeholder = {ident.DAG_ID: self.dag_id, ident.TASK_ID: self.task_id, ident.RUN_ID: "dry-run"}
        return task_identity or {**placeholder, ident.MAP_INDEX: "-1"}

    def followed(self, body: dict[str, Any]) -> Followed:
        """Whose logs the task follows and whose progress reports count; checked before any API call."""
        from t9k_provider.replicalogs.targets import Followed

        try:
            return Followed.for_job(body["kind"], body, self.log_replicas, self.progress_timeout is not None)
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from exc

    def dry_run(self) -> None:
        """Print the manifest that would be submitted; needs neither credentials nor a cluster."""
        import yaml

        body = self.build_manifest(None, None)
        body["metadata"].setdefault("namespace", self.namespace or "<connection namespace>")
        print(yaml.safe_dump(body, sort_keys=False))
