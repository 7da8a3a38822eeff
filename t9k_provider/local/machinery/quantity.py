"""Kubernetes resource quantities (``apimachinery/pkg/api/resource``): parsing to exact decimals."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

QUANTITY_FORMAT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_ERROR = f"quantities must match the regular expression '{QUANTITY_FORMAT}'"

_SHAPE = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)\Z")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"[eE]([-+]?[0-9]+)\Z")


def parse_quantity(value: str | int | float) -> Decimal | None:
    """The exact value of a quantity such as ``"500m"``, ``"1.5Gi"`` or ``2``; None if malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _SHAPE.match(value)
    if match is None:
        return None
    number, suffix = match.groups()
    if number.count(".") > 1 or number.strip("+-") in ("", "."):
        return None
    try:
        base = Decimal(number)
    except InvalidOperation:
        return None
    if suffix in _BINARY:
        return base * (Decimal(1024) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return base.scaleb(_DECIMAL[suffix])
    exponent = _EXPONENT.match(suffix)
    if exponent is None:
        return None
    return base.scaleb(int(exponent.group(1)))
