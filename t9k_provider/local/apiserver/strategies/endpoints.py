"""Endpoints: no behaviour of their own (nothing here maintains them)."""

from __future__ import annotations

from t9k_provider.local.apiserver.resources import Resource
from t9k_provider.local.apiserver.strategies.base import Strategy

RESOURCE = Resource("", "v1", "endpoints", "endpoints", "Endpoints", Strategy(), short_names=["ep"])
