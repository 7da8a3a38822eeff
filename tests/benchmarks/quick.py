"""``quick_report``: a quick run of the benchmarks through the real command (``python -m benchmarks
--quick``), for the tests that smoke-run each section."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_report(tmp_path: Path, *only: str) -> str:
    """The report of ``python -m benchmarks --quick [--only NAME...]``, run as a user would."""
    output = tmp_path / "report.md"
    selected = [arg for name in only for arg in ("--only", name)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "--quick", *selected, "--output", str(output), "--work-dir",
         str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        # SIGINT: its with-blocks stop the clusters and Airflow components it started (a SIGKILL would leave
        # them running, loading the other tests), then SIGKILL if it does not end
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"the quick run took over 840 s:\n{out[-3000:]}{err[-3000:]}") from None
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    return output.read_text()
