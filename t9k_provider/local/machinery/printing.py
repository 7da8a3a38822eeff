"""What kubectl's tables show: column definitions and the ages it prints (apimachinery's
``duration.HumanDuration``); each resource's strategy names its columns and cells with these."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from t9k_provider.kube.timestamps import parse_timestamp


def column(name: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": kind, "format": "", "description": name, "priority": priority}


NAME_COLUMN = {**column("Name"), "format": "name", "description": "Name must be unique within a namespace."}
AGE_COLUMN = {**column("Age"), "description": "CreationTimestamp is the time the object was created."}


def human_duration(seconds: float) -> str:
    """The short ages kubectl prints (apimachinery ``duration.HumanDuration``)."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        created = parse_timestamp(timestamp)
    except ValueError:
        return "<invalid>"
    return human_duration((datetime.now(timezone.utc) - created).total_seconds())
