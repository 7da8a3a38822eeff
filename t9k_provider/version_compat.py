"""Which Airflow runs the provider: one wheel serves Airflow 2.11 and 3.x, and these flags gate what differs.

Computed once at import from the installed ``airflow.__version__`` (pre-release and local tags are ignored,
so ``3.3.0rc1`` counts as 3.3). The controller and local cluster never import this module.
"""

from __future__ import annotations

from airflow import __version__
from packaging.version import Version


def airflow_version_tuple(version_string: str = __version__) -> tuple[int, int, int]:
    """The release (major, minor, micro) of the installed Airflow, or of ``version_string``."""
    version = Version(version_string)
    return version.major, version.minor, version.micro


#: Task SDK (``airflow.sdk``), links rendered by the worker, task states read through the execution API.
AIRFLOW_V_3_0_PLUS = airflow_version_tuple() >= (3, 0, 0)
#: ``BaseTrigger.on_kill`` is called when a user kills a deferred task.
AIRFLOW_V_3_3_PLUS = airflow_version_tuple() >= (3, 3, 0)
