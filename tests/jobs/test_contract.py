"""The controller/Airflow contract is spelled once, in `t9k_provider.jobs.contract`; each kind has a leader.

The scan reads every module of the package outside `t9k_provider/jobs/` and fails on:
- a string equal to a T9k label or annotation key of the contract (or the T9k scheduler's name), anywhere;
- a string that is, or ends in `-<suffix>`, a child-name suffix the contract owns (BeamJob's `batchjob`);
- in the modules that read or write a T9k Job's status, a module- or class-level constant holding a phase name
  or a condition type. `local/` is left out of this rule only: it runs Kubernetes itself, whose pod phases
  and batch/v1 Job conditions are the same words.
Docstrings are prose and never count.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

import t9k_provider
from t9k_provider.jobs import KINDS, contract
from t9k_provider.jobs.constants import KIND_NAMES
from t9k_provider.jobs.contract import Leader

PACKAGE = Path(t9k_provider.__file__).parent
# Kubernetes' own `batch.kubernetes.io/job-name` is left out: local/'s batch/v1 Job controller writes it.
NAMES = {
    value
    for key, value in vars(contract).items()
    if key.startswith(("LABEL_", "ANNOTATION_")) or key == "T9K_SCHEDULER_NAME"
} - {contract.LABEL_BATCH_JOB_NAME}
SUFFIXES = (contract.BATCH_JOB_SUFFIX,)
STATUS_WORDS = {
    *get_args(contract.JobPhase),
    *get_args(contract.BeamJobPhase),
    *contract.CONDITION_TYPES,
    *get_args(contract.BeamConditionType),
    *contract.OLD_CONDITION_TYPES,
}
STATUS_SIDES = ("controller", "hooks", "operators", "sensors", "triggers", "links")


def _docstrings(tree: ast.Module) -> set[int]:
    nodes = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)),
    ]
    return {
        id(node.body[0].value)
        for node in nodes
        if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }


def _strings(node: ast.AST, skip: set[int]) -> list[ast.Constant]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def _constant_values(body: list[ast.stmt]) -> list[ast.AST]:
    """Values assigned at module or class level (not inside functions)."""
    values: list[ast.AST] = []
    for stmt in body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            values.append(stmt.value)
        elif isinstance(stmt, ast.ClassDef):
            values += _constant_values(stmt.body)
        elif isinstance(stmt, ast.If | ast.Try):  # `if TYPE_CHECKING:` and import fallbacks
            values += _constant_values([*stmt.body, *stmt.orelse])
    return values


def offences(source: str, status_side: bool) -> list[str]:
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in _strings(tree, skip):
        if node.value in NAMES:
            found.append(f"line {node.lineno}: label key {node.value!r}")
        elif any(node.value == s or node.value.endswith(f"-{s}") for s in SUFFIXES):
            found.append(f"line {node.lineno}: child name {node.value!r}")
    if status_side:
        for value in _constant_values(tree.body):
            for node in _strings(value, skip):
                if node.value in STATUS_WORDS:
                    found.append(f"line {node.lineno}: status word {node.value!r} as a constant")
    return found


def test_no_module_outside_jobs_spells_the_contract() -> None:
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "jobs")
    assert len(modules) > 100, "the scan must see the whole package"
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in modules
        if (hits := offences(path.read_text(), path.relative_to(PACKAGE).parts[0] in STATUS_SIDES))
    }
    assert found == {}, "import these from t9k_provider.jobs.contract"


@pytest.mark.parametrize(
    ("source", "status_side", "hit"),
    [
        ('OWNER = "tensorstack.dev/owner-name"', False, "label key"),
        (
            'def f(pod):\n    return pod["labels"].get("batch.tensorstack.dev/replica-index")',
            False,
            "label key",
        ),
        ('def name(job):\n    return f"{job}-batchjob"', False, "child name"),
        ('TERMINAL = ("Succeeded", "Failed")', True, "status word"),
        ('class Reader:\n    PENDING = frozenset({"Pending", "Initializing"})', True, "status word"),
        ('ORDER = ["Initialized", "ReplicaFailure"]', True, "status word"),
    ],
)
def test_the_scan_finds_a_copy(source: str, status_side: bool, hit: str) -> None:
    found = offences(source, status_side)
    assert found and all(hit in f for f in found)


@pytest.mark.parametrize(
    ("source", "status_side"),
    [
        ('"""Pods are labelled tensorstack.dev/owner-name; the batch Job is <job>-batchjob."""', False),
        ('TERMINAL = ("Succeeded", "Failed")', False),  # outside the status readers: pod phases
        ('def f(job):\n    return job["status"]["phase"] == "Failed"', True),  # a use, not a definition
    ],
)
def test_the_scan_ignores_prose_and_uses(source: str, status_side: bool) -> None:
    assert offences(source, status_side) == []


def test_the_kinds_are_listed_once() -> None:
    assert tuple(KINDS) == KIND_NAMES


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_names_its_leader(kind: str) -> None:
    assert isinstance(vars(KINDS[kind]).get("LEADER"), Leader), f"{kind} must declare LEADER"


def test_leader_pick() -> None:
    assert Leader("launcher", index=None).pick([]) == ("launcher", None)
    assert Leader("worker").pick(["worker"]) == ("worker", 0)
    chief_first = Leader(preferred=("chief", "worker"))
    assert chief_first.pick(["ps", "worker", "chief"]) == ("chief", 0)
    assert chief_first.pick(["ps", "worker"]) == ("worker", 0)
    assert chief_first.pick(["ps"]) == ("ps", 0)
    assert Leader().pick(["a", "b"]) == ("a", 0)
    assert Leader().pick([]) == (None, None)


@pytest.mark.parametrize("key", ["queue", "Queue"])
def test_the_queue_a_job_names(key: str) -> None:
    assert contract.job_queue({"spec": {"scheduler": {"t9kScheduler": {key: "gpu"}}}}) == "gpu"


@pytest.mark.parametrize(
    "spec",
    [{}, 1, "x", [], None, {"scheduler": 1}, {"scheduler": {"t9kScheduler": "q"}}, {"scheduler": [{}]}],
)
def test_a_spec_of_another_shape_names_no_queue(spec: object) -> None:
    """The API server's Queue admission asks before the schema's validation (422 for these): never a 500."""
    assert contract.job_queue({"spec": spec}) is None
