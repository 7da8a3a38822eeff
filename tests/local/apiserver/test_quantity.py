"""Resource quantity parsing (apimachinery ``resource.Quantity`` syntax)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from t9k_provider.local.machinery.quantity import parse_quantity


@pytest.mark.parametrize(
    "text,value",
    [
        ("1", "1"),
        ("500m", "0.5"),
        ("1.5", "1.5"),
        ("2k", "2000"),
        ("1Ki", "1024"),
        ("1.5Gi", str(3 * 1024**3 // 2)),
        ("100n", "0.0000001"),
        ("3u", "0.000003"),
        ("1e3", "1000"),
        ("1E-3", "0.001"),
        ("+4M", "4000000"),
        ("-1", "-1"),
        (".5", "0.5"),
        (2, "2"),
        (0.25, "0.25"),
    ],
)
def test_valid_quantities(text: str | int | float, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["", "1x", "1.2.3", "Gi", "1 Gi", "1GiB", "1e", "1kk", ".", "--1", True])
def test_malformed_quantities(text: object) -> None:
    assert parse_quantity(text) is None  # type: ignore[arg-type]


@given(st.integers(0, 10**6), st.sampled_from(["", "k", "M", "Ki", "Mi", "m"]))
def test_suffixes_scale_exactly(number: int, suffix: str) -> None:
    factor = {"": 1, "k": 10**3, "M": 10**6, "Ki": 1024, "Mi": 1024**2, "m": Decimal("0.001")}[suffix]
    assert parse_quantity(f"{number}{suffix}") == number * factor
