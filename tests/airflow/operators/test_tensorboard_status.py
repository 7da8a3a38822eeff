"""The task log says how the job's TensorBoard stands when the task ends (``outcome.report_tensorboard``),
from the job's ``status.tensorboard`` as the controller mirrors it."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.operators.outcome import report_tensorboard


class Said:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, fmt: str, *args: Any) -> None:
        self.lines.append(("info", fmt % args))

    def warning(self, fmt: str, *args: Any) -> None:
        self.lines.append(("warning", fmt % args))


@pytest.mark.parametrize(
    ("mirror", "said"),
    [
        (
            {"ready": True, "type": "Normal", "note": "TensorBoard [t] is ready"},
            [("info", "TensorBoard [t] is ready")],
        ),
        (
            {
                "ready": False,
                "type": "Normal",
                "note": 'TensorBoard [t] is not ready yet: persistentvolumeclaim "x" not found',
            },
            [("info", 'TensorBoard [t] is not ready yet: persistentvolumeclaim "x" not found')],
        ),
        (
            {
                "ready": False,
                "type": "Warning",
                "note": "TensorBoard [t] is not ready yet: s3://b: unsupported",
            },
            [("warning", "TensorBoard [t] is not ready yet: s3://b: unsupported")],
        ),
        (None, []),
    ],
)
def test_the_job_s_tensorboard_in_the_task_log(
    mirror: dict[str, Any] | None, said: list[tuple[str, str]]
) -> None:
    log = Said()
    report_tensorboard({"status": {"phase": "Succeeded", "tensorboard": mirror}}, log)
    assert log.lines == said
