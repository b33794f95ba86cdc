"""The decision builders of ``kuota.core.fold.decisions``.

Each builder's output, completed with the four fields ``Fold.apply`` adds,
validates against the Decision schema, and ``trusted_decision`` (what the fold
uses) gives the same Decision as validation. A misspelt or positional argument
is a TypeError (and a mypy error at the call site). No module of the fold
writes a decision dict of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kuota.core.fold import decisions
from kuota.events.schema import DECISION_TYPES, parse_decision, trusted_decision

FLAVORS = {"main": {"nvidia.com/gpu": "h100"}}
USAGE = {"h100": {"nvidia.com/gpu": "2"}}
QUOTA = {"h100": {"nvidia.com/gpu": {"nominalQuota": "8", "borrowingLimit": "4"}}}
W = {"workload": "team-a/train", "uid": "u-1"}

# builder, its keyword arguments, the decision type, the fields it must set
CASES: list[tuple[Callable[..., dict[str, Any]], dict[str, Any], str, set[str]]] = [
    (
        decisions.admitted,
        {**W, "cluster_queue": "cq", "flavors": FLAVORS, "usage": USAGE},
        "Admitted",
        {"workload", "uid", "cluster_queue", "flavors", "usage"},
    ),
    (
        decisions.admitted,
        {**W, "cluster_queue": "cq", "flavors": FLAVORS, "usage": USAGE, "victims": ["a/b"]},
        "Admitted",
        {"workload", "uid", "cluster_queue", "flavors", "usage", "victims"},
    ),
    (
        decisions.admitted,
        {**W, "cluster_queue": "cq", "flavors": FLAVORS, "usage": USAGE, "generation": 7},
        "Admitted",
        {"workload", "uid", "cluster_queue", "flavors", "usage", "generation"},
    ),
    (
        decisions.inadmissible,
        {**W, "cluster_queue": None, "reason": "LocalQueueDoesNotExist", "message": "m"},
        "Inadmissible",
        {"workload", "uid", "cluster_queue", "reason", "message"},
    ),
    (
        decisions.preempted,
        {
            **W,
            "cluster_queue": "cq",
            "reason": "InClusterQueue",
            "message": "m",
            "preemptor": "team-a/big",
            "policy": "withinClusterQueue=LowerPriority",
        },
        "Preempted",
        {"workload", "uid", "cluster_queue", "reason", "message", "preemptor", "policy"},
    ),
    (
        decisions.evicted,
        {**W, "cluster_queue": "cq", "reason": "ClusterQueueStopped", "message": "m"},
        "Evicted",
        {"workload", "uid", "cluster_queue", "reason", "message"},
    ),
    (
        decisions.evicted,
        {
            **W,
            "cluster_queue": "cq",
            "reason": "PodsReadyTimeout",
            "message": "m",
            "requeue_at": 12.5,
        },
        "Evicted",
        {"workload", "uid", "cluster_queue", "reason", "message", "requeue_at"},
    ),
    (
        decisions.requeued,
        {**W, "cluster_queue": None, "reason": "PodsReadyTimeout"},
        "Requeued",
        {"workload", "uid", "cluster_queue", "reason"},
    ),
    (
        decisions.finished,
        {**W, "cluster_queue": "cq", "reason": "Deleted", "message": "m"},
        "Finished",
        {"workload", "uid", "cluster_queue", "reason", "message"},
    ),
    (
        decisions.deactivated,
        {**W, "reason": "InactiveWorkload", "message": "m"},
        "Deactivated",
        {"workload", "uid", "reason", "message"},
    ),
    (
        decisions.deactivated,
        {**W, "cluster_queue": "cq", "reason": "RequeuingLimitExceeded", "message": "m"},
        "Deactivated",
        {"workload", "uid", "cluster_queue", "reason", "message"},
    ),
    (
        decisions.suspended,
        {**W, "cluster_queue": "cq"},
        "Suspended",
        {"workload", "uid", "cluster_queue", "reason", "message"},
    ),
    (
        decisions.rejected,
        {"object": "ClusterQueue cq", "reason": "InvalidObject", "message": "m"},
        "Rejected",
        {"object", "reason", "message"},
    ),
    (
        decisions.quota_changed,
        {"cluster_queue": "cq", "cohort": "all", "quota": QUOTA},
        "QuotaChanged",
        {"cluster_queue", "object", "cohort", "quota"},
    ),
    (
        decisions.quota_deleted,
        {"cluster_queue": "cq"},
        "QuotaChanged",
        {"cluster_queue", "object", "reason", "message"},
    ),
    (
        decisions.quota_released,
        {
            "workload": "ns/a",
            "uid": "u1",
            "cluster_queue": "cq",
            "usage": {"h100": {"nvidia.com/gpu": "2"}},
            "stop_id": "d-0",
            "message": "the pods are gone",
        },
        "QuotaReleased",
        {"workload", "uid", "cluster_queue", "usage", "reason", "message", "stop_id"},
    ),
    (
        decisions.local_queue_usage,
        {
            "object": "LocalQueue team-a/lq",
            "cluster_queue": "cq",
            "consumed": {"cpu": "1500m"},
            "weighted_usage": 1.5,
        },
        "LocalQueueUsage",
        {"object", "cluster_queue", "consumed", "weighted_usage"},
    ),
]
IDS = [f"{c[0].__name__}-{sorted(c[1])}" for c in CASES]
EVENT_FIELDS = {"id": "d-1", "cause": "e-1", "cause_offset": 7, "at": 3.0}


@pytest.mark.parametrize(("builder", "kwargs", "kind", "fields"), CASES, ids=IDS)
def test_each_builder_emits_a_valid_decision_of_its_type(
    builder: Callable[..., dict[str, Any]], kwargs: dict[str, Any], kind: str, fields: set[str]
) -> None:
    data = builder(**kwargs)
    assert data["type"] == kind
    assert set(data) == fields | {"type"}
    for name, value in kwargs.items():
        assert data[name] == value
    full = {**data, **EVENT_FIELDS}
    validated = parse_decision(dict(full))  # extra="forbid": a wrong key fails here
    trusted = trusted_decision(dict(full))
    assert trusted == validated
    assert trusted.model_fields_set == validated.model_fields_set


def test_every_decision_type_has_a_builder() -> None:
    assert {c[2] for c in CASES} == set(DECISION_TYPES)


@pytest.mark.parametrize(("builder", "kwargs", "kind", "fields"), CASES, ids=IDS)
def test_a_misspelt_or_positional_argument_is_a_type_error(
    builder: Callable[..., dict[str, Any]], kwargs: dict[str, Any], kind: str, fields: set[str]
) -> None:
    name = next(iter(kwargs))
    misspelt = {**kwargs, name + "x": kwargs[name]}
    del misspelt[name]
    with pytest.raises(TypeError):
        builder(**misspelt)
    with pytest.raises(TypeError):
        builder(*kwargs.values())


def test_the_builders_take_keywords_only_in_mypy_too() -> None:
    with pytest.raises(TypeError):
        decisions.requeued(workload="a/b", uid="u", cluster_queue="cq", reson="x")  # type: ignore[call-arg]


def test_no_fold_module_writes_a_decision_dict_itself() -> None:
    fold = Path(__file__).resolve().parents[3] / "shared" / "kuota" / "core" / "fold"
    assert (fold / "decisions.py").is_file()
    for path in sorted(fold.glob("*.py")):
        if path.name == "decisions.py":
            continue
        text = path.read_text()
        assert not re.search(r"""["']type["']\s*:""", text), path.name
        assert "_out[-1]" not in text, path.name
