"""The long-running components start with the collector's server pace (``kube.collector``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from t9k_provider.kube.collector import SERVER_THRESHOLDS

PROBE = """
import gc, sys
from unittest import mock
import t9k_provider.{module} as cli
with mock.patch.object(cli, "{stop}", side_effect=SystemExit(0)):
    try:
        cli.main({argv})
    except SystemExit:
        pass
print(gc.get_threshold())
"""


@pytest.mark.parametrize(
    ("module", "stop", "argv"),
    [
        ("controller.cli", "run", "[]"),
        ("local.cli", "cmd_status", "['status']"),
    ],
)
def test_the_components_collect_at_the_server_pace(module: str, stop: str, argv: str) -> None:
    code = PROBE.format(module=module, stop=stop, argv=argv)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == str(SERVER_THRESHOLDS)
    assert SERVER_THRESHOLDS != (700, 10, 10)  # Python's defaults: the probe would not tell
