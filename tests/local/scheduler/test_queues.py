"""Queue admission, pure: whole PodGroups within the quota, in priority then arrival order with no overtaking,
a closed or missing Queue admitting nothing new, a namespace the Queue refuses never holding up the line, and
what was admitted staying admitted."""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal

import pytest
import yaml

from t9k_provider.local.scheduler import queues
from t9k_provider.local.scheduler.queues import Group, Queue, decide, parse_duration
from t9k_provider.local.serving import COMPANION_CRDS

GPU = "nvidia.com/gpu"


def gpus(n: int) -> Counter[str]:
    return Counter({GPU: Decimal(n), "cpu": Decimal(1)})


def queue(gpu: int | None = 2, **fields: object) -> Queue:
    return Queue("gpu", None if gpu is None else Counter({GPU: Decimal(gpu)}), **fields)  # type: ignore[arg-type]


def group(key: str, need: int = 2, priority: int = 0, created: str = "", **fields: object) -> Group:
    return Group(f"ns/{key}", priority, created or key, gpus(need), **fields)  # type: ignore[arg-type]


def test_groups_are_admitted_whole_within_the_quota_in_arrival_order_and_the_rest_wait_in_line() -> None:
    standing = decide("gpu", queue(), [group("a"), group("b"), group("c")])
    verdicts = {
        k.removeprefix("ns/"): (v.admitted, v.reason, v.position) for k, v in standing.verdicts.items()
    }
    assert verdicts == {
        "a": (True, queues.ADMITTED, None),
        "b": (False, queues.QUOTA_EXCEEDED, 1),
        "c": (False, queues.WAITING, 2),
    }
    assert standing.verdicts["ns/b"].message == f"queue gpu: quota exceeded: needs {GPU} 2, 0 of 2 free"
    assert standing.verdicts["ns/c"].message == "queue gpu: waiting behind 1 job(s), the first of them ns/b"
    assert standing.allocated[GPU] == 2


def test_a_higher_priority_group_goes_first_and_none_overtakes_the_head_of_the_line() -> None:
    standing = decide(
        "gpu", queue(3), [group("early", 2), group("urgent", 2, priority=80, created="z"), group("small", 1)]
    )
    assert standing.verdicts["ns/urgent"].admitted and standing.verdicts["ns/early"].position == 1
    # 1 GPU is free and "small" would fit, but it came after "early": strict order, no overtaking.
    assert not standing.verdicts["ns/small"].admitted and standing.verdicts["ns/small"].position == 2


def test_what_was_admitted_stays_admitted_and_counts_against_the_quota() -> None:
    standing = decide("gpu", queue(2, closed=True), [group("running", admitted=True), group("new")])
    assert standing.verdicts["ns/running"].admitted
    assert standing.verdicts["ns/new"].reason == queues.QUEUE_CLOSED
    assert standing.verdicts["ns/new"].message == "queue gpu is closed: it admits no new job"
    smaller = decide("gpu", queue(1), [group("running", admitted=True), group("new", 1)])
    assert (
        smaller.verdicts["ns/running"].admitted and smaller.verdicts["ns/new"].reason == queues.QUOTA_EXCEEDED
    )


def test_a_missing_queue_admits_nothing_and_an_unlimited_one_everything() -> None:
    missing = decide("gpu", None, [group("a"), group("b")])
    assert [(v.reason, v.position) for v in missing.verdicts.values()] == [
        (queues.QUEUE_NOT_FOUND, 1),
        (queues.QUEUE_NOT_FOUND, 2),
    ]
    assert missing.verdicts["ns/a"].message == "queue gpu does not exist: it admits no new job"
    assert all(v.admitted for v in decide("gpu", queue(None), [group("a"), group("b")]).verdicts.values())


def test_a_namespace_the_queue_refuses_waits_out_of_line() -> None:
    standing = decide("gpu", queue(), [group("refused", allowed=False), group("next")])
    assert standing.verdicts["ns/refused"].reason == queues.NAMESPACE_NOT_ALLOWED
    assert standing.verdicts["ns/refused"].position is None
    assert standing.verdicts["ns/next"].admitted


def test_selectors_and_durations_parse_as_the_schema_allows() -> None:
    q = Queue.of({"metadata": {"name": "q"}, "spec": {
        "quota": {"requests": {GPU: 2, "memory": "4Gi"}}, "maxDuration": "1h30m", "preemptible": False,
        "namespaceSelector": {"matchLabels": {"team": "a"}}, "nodeSelector": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["x"]}]},
    }})  # fmt: skip
    assert q.quota == Counter({GPU: Decimal(2), "memory": Decimal(4 * 2**30)})
    assert q.max_duration == 5400 and not q.preemptible
    assert q.allows_namespace({"team": "a"}) and not q.allows_namespace({"team": "b"})
    assert q.allows_node({"metadata": {"labels": {"zone": "x"}}}) and not q.allows_node({"metadata": {}})
    assert Queue.of({"metadata": {"name": "open"}}).quota is None
    assert parse_duration("2h45m") == 9900 and parse_duration("3w") == 21 * 86400
    assert parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5 and parse_duration("0") == 0
    for wrong in ("soon", "2.5h", "30m2h"):  # T9k's grammar: whole numbers, larger units first
        with pytest.raises(ValueError):
            parse_duration(wrong)


def test_the_duration_grammar_is_the_queue_schemas() -> None:
    crd = yaml.safe_load((COMPANION_CRDS / "scheduler-queues.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    pattern = spec["maxDuration"]["pattern"]
    for text in ("3w", "2h45m", "1y2d", "500ms", "5ms", "1m30s", "0", "2.5h", "30m2h", "1h1h", "soon", "-1s"):
        try:
            parse_duration(text)
            parsed = True
        except ValueError:
            parsed = False
        assert parsed == bool(re.fullmatch(pattern, text)), text
