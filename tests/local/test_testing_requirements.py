"""``testing.unavailable``: a missing kernel mechanism skips on a developer's machine, fails on CI as root."""

from __future__ import annotations

import pytest

from t9k_provider.testing import cluster as testing


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setattr(testing.os, "geteuid", lambda: 0)
    return monkeypatch


@pytest.mark.parametrize("ci", ["", "false", "0"])
def test_skips_off_ci(as_root: pytest.MonkeyPatch, ci: str) -> None:
    as_root.setenv("CI", ci)
    with pytest.raises(
        pytest.skip.Exception, match=r"resource limits \(cgroups\) not available here: not enforced"
    ):
        testing.require_limits("not enforced: no cgroup v1 memory")


@pytest.mark.parametrize("ci", ["true", "TRUE", "1"])
def test_fails_on_ci_as_root(as_root: pytest.MonkeyPatch, ci: str) -> None:
    """A silent skip there would hide a regression of the mechanism."""
    as_root.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=r"EACCES \(CI=true as root: CI must exercise it"):
        testing.unavailable("writable cgroups", "EACCES")
    with pytest.raises(pytest.fail.Exception, match="the kubelet recorded no verdict"):
        testing.require_limits(None)


def test_skips_on_ci_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only root is promised the mechanisms: an unprivileged CI job skips as a laptop does."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(testing.os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception):
        testing.unavailable("pod network namespaces")


def test_enforced_limits_go_on(as_root: pytest.MonkeyPatch) -> None:
    as_root.setenv("CI", "true")
    testing.require_limits("enforced: cgroup v1 (memory, cpu, pids)")
