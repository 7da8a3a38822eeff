"""What the controller's end-to-end modules share: ``jobs``, over the module's own ``cluster`` and
``controller`` fixtures (each module says which cluster it needs)."""

from __future__ import annotations

import pytest

from t9k_provider.testing import ControllerProcess, LocalCluster
from tests.controller.e2e_support import Jobs


@pytest.fixture(scope="module")
def jobs(cluster: LocalCluster, controller: ControllerProcess) -> Jobs:
    """The T9k jobs of the module's cluster, once its controller runs."""
    return Jobs(cluster.api_client())
