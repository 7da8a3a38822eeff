"""Kubernetes resource quantities (``apimachinery/pkg/api/resource``): the format the API validates; the
parser is ``kube.resources.parse_quantity``, shared with the provider's wait."""

from __future__ import annotations

from t9k_provider.kube.resources import parse_quantity

__all__ = ["QUANTITY_ERROR", "QUANTITY_FORMAT", "parse_quantity"]

QUANTITY_FORMAT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_ERROR = f"quantities must match the regular expression '{QUANTITY_FORMAT}'"
