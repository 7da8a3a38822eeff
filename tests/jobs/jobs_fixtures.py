"""Shared helpers for the T9k Job API tests."""

from __future__ import annotations

from pathlib import Path

import yaml

FIXTURES = Path(__file__).parent / "fixtures"


def valid_fixtures() -> list[Path]:
    return sorted(p for p in (FIXTURES / "valid").glob("*.yaml") if not p.name.endswith(".expected.yaml"))


def expected_manifest(path: Path) -> dict:
    """The canonical manifest a fixture must round-trip to (itself unless it uses old spellings)."""
    expected = path.with_name(path.name[: -len(".yaml")] + ".expected.yaml")
    return yaml.safe_load((expected if expected.exists() else path).read_text(encoding="utf-8"))
