"""Provider metadata that Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

_BOOL = {"type": ["boolean", "null"]}
_STRING = {"type": ["string", "null"]}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "t9k-airflow-provider",
        "name": "TensorStack T9k",
        "description": "Submit, watch and manage TensorStack T9k Jobs from Airflow.",
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "TensorStack T9k",
                "external-doc-url": "https://t9k.github.io/user-manuals/latest/modules/jobs/index.html",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "TensorStack T9k",
                "python-modules": ["t9k_provider.operators.job", "t9k_provider.operators.kinds"],
            }
        ],
        "sensors": [{"integration-name": "TensorStack T9k", "python-modules": ["t9k_provider.sensors.job"]}],
        "hooks": [{"integration-name": "TensorStack T9k", "python-modules": ["t9k_provider.hooks.t9k"]}],
        "triggers": [
            {"integration-name": "TensorStack T9k", "python-modules": ["t9k_provider.triggers.job"]}
        ],
        "extra-links": ["t9k_provider.links.job.T9kJobLink", "t9k_provider.links.job.T9kTensorBoardLink"],
        "task-decorators": [
            {"name": name, "class-name": f"t9k_provider.decorators.tasks.{name}_task"}
            for name in ("t9k", "t9k_pytorch", "t9k_tensorflow", "t9k_xgboost", "t9k_deepspeed")
        ],
        "connection-types": [
            {
                "hook-class-name": "t9k_provider.hooks.t9k.T9kHook",
                "hook-name": "TensorStack T9k",
                "connection-type": "t9k",
                "conn-fields": {
                    "in_cluster": {"label": "In cluster configuration", "schema": _BOOL},
                    "kube_config_path": {"label": "Kube config path", "schema": _STRING},
                    "kube_config": {
                        "label": "Kube config (JSON or YAML)",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                    "namespace": {"label": "Namespace", "schema": _STRING},
                    "cluster_context": {"label": "Cluster context", "schema": _STRING},
                    "disable_verify_ssl": {"label": "Disable SSL", "schema": _BOOL},
                    "job_url_template": {"label": "T9k Job link template", "schema": _STRING},
                    "tensorboard_url_template": {"label": "TensorBoard link template", "schema": _STRING},
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "password", "port", "extra"]
                },
            }
        ],
        "config": {
            "t9k": {
                "description": "Defaults for the TensorStack T9k operators.",
                "options": {
                    "job_url_template": {
                        "description": "URL of the 'T9k Job' extra link; placeholders {namespace}, {name}, "
                        "{kind}, {plural} and {uid}. The operator's job_url_template and the connection's "
                        "extra of that name come first. Empty hides the link.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "https://t9k.example.com/t9k/jobs/{namespace}/{kind}/{name}",
                        "default": "",
                    },
                    "tensorboard_url_template": {
                        "description": "URL of the 'TensorBoard' extra link of a job with a tensorboardSpec; "
                        "the placeholders of job_url_template ({name}: the job's, which its TensorBoard "
                        "bears). The operator's tensorboard_url_template and the connection's extra of that "
                        "name come first. Empty hides the link.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "https://t9k.example.com/t9k/tensorboards/{namespace}/{name}",
                        "default": "",
                    },
                },
            }
        },
    }
