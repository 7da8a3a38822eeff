"""Sensors for T9k Jobs. Importing this package is cheap: no Kubernetes client, no job models."""

from __future__ import annotations

from t9k_provider.sensors.job import T9kJobSensor

__all__ = ["T9kJobSensor"]
