"""resourceVersion ordering: numbers compare by value, anything else is unknown (never older, never newer)."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_provider.kube.versions import compare, resource_version


def obj(version: Any) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}} if version is not None else {"metadata": {}}


@pytest.mark.parametrize(
    ("value", "number"),
    [(obj("12"), 12), ("12", 12), (12, 12), (obj(None), None), ({}, None), (None, None), ("abc", None),
     (obj("1.5"), None), ("", None)],
)  # fmt: skip
def test_resource_version(value: Any, number: int | None) -> None:
    assert resource_version(value) == number


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        (obj("9"), obj("10"), -1),  # by value, not as text
        (obj("10"), "10", 0),
        ("11", 10, 1),
        (obj("x"), obj("10"), None),  # opaque (not etcd's counter): not comparable
        (obj("10"), None, None),
        (None, None, None),
    ],
)
def test_compare(a: Any, b: Any, order: int | None) -> None:
    assert compare(a, b) == order
    assert compare(b, a) == (-order if order is not None else None)
