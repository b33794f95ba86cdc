"""The preemption scenarios (``examples/scenarios``) through the simulator and
the real fold: who is preempted, by whom, why, in which order, and when the
workloads run, as each file's header describes."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision
from kuota.sim.engine import Simulator
from kuota.sim.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
PREEMPTED = ("Preempted",)


@cache
def run(name: str) -> tuple[Decision, ...]:
    text = (SCENARIOS / name).read_text(encoding="utf-8")
    simulator = Simulator(load_scenario(text, source=name), fold=Fold())
    decisions = simulator.run(max_steps=10_000)
    assert simulator.settled
    return tuple(decisions)


def preemptions(name: str) -> list[tuple[float, str, str, str, str]]:
    """(at, victim, preemptor, reason, policy) in order."""
    return [
        (d.at, d.workload or "", d.preemptor or "", d.reason or "", d.policy or "")
        for d in run(name)
        if d.type == "Preempted"
    ]


def admissions(name: str, workload: str) -> list[float]:
    return [d.at for d in run(name) if d.type == "Admitted" and d.workload == workload]


def of_type(name: str, kind: str, workload: str) -> list[Decision]:
    return [d for d in run(name) if d.type == kind and d.workload == workload]


def test_priority_preemption() -> None:
    name = "priority-preemption.yaml"
    policy = "withinClusterQueue=LowerPriority"
    assert preemptions(name) == [
        (60.0, "research/low-2", "research/high-1", "InClusterQueue", policy),
        (120.0, "research/low-1", "research/high-2", "InClusterQueue", policy),
    ]
    assert admissions(name, "research/high-1") == [60.0]
    assert admissions(name, "research/high-2") == [120.0]
    assert admissions(name, "research/high-3") == [360.0]  # equal priority: waited
    assert admissions(name, "research/low-1") == [0.0, 420.0]
    assert admissions(name, "research/low-2") == [10.0, 420.0]
    victims = {d.workload: d for d in run(name) if d.type == "Admitted" and d.victims}
    assert victims["research/high-1"].victims == ["research/low-2"]


def test_cohort_reclaim_from_the_article() -> None:
    name = "cohort-reclaim.yaml"
    assert preemptions(name) == [
        (
            180.0,
            "team-alpha/alpha-3",
            "team-beta/beta-3",
            "InCohortReclamation",
            "reclaimWithinCohort=Any",
        )
    ]
    assert admissions(name, "team-beta/beta-3") == [180.0]
    assert admissions(name, "team-alpha/alpha-3") == [60.0, 480.0]
    assert admissions(name, "team-alpha/alpha-1") == [0.0]  # never a candidate


def test_borrow_within_cohort_with_a_threshold() -> None:
    name = "borrow-within-cohort.yaml"
    assert preemptions(name) == [
        (
            60.0,
            "batch/batch-low-2",
            "research/research-1",
            "InCohortReclamation",
            "reclaimWithinCohort=Any",
        ),
        (
            120.0,
            "batch/batch-low-1",
            "research/research-2",
            "InCohortReclaimWhileBorrowing",
            "borrowWithinCohort=LowerPriority,maxPriorityThreshold=100",
        ),
    ]
    assert admissions(name, "research/research-3") == [660.0]  # after research-1 finishes
    waiting = of_type(name, "Inadmissible", "research/research-3")
    assert waiting and waiting[0].at == 180.0


def test_fair_sharing() -> None:
    name = "fair-sharing.yaml"
    s2a = "fairSharing=LessThanOrEqualToFinalShare"
    got = [(at, victim, by, reason, policy) for at, victim, by, reason, policy in preemptions(name)]
    assert got == [
        (60.0, "team-a/a-6", "team-b/b-1", "InCohortFairSharing", s2a),
        (60.0, "team-a/a-5", "team-b/b-2", "InCohortFairSharing", s2a),
        (60.0, "team-a/a-4", "team-b/b-3", "InCohortFairSharing", s2a),
        (120.0, "team-b/b-3", "team-c/c-1", "InCohortFairSharing", s2a),
        (120.0, "team-a/a-3", "team-c/c-2", "InCohortFairSharing", s2a),
    ]
    # Each team ends with its nominal 4 GPUs.
    running: dict[str, bool] = {}
    for d in run(name):
        if d.type == "Admitted":
            running[d.workload or ""] = True
        elif d.type in PREEMPTED:
            running[d.workload or ""] = False
    final = sorted(k for k, on in running.items() if on)
    assert final == [
        "team-a/a-1",
        "team-a/a-2",
        "team-b/b-1",
        "team-b/b-2",
        "team-c/c-1",
        "team-c/c-2",
    ]


def test_pods_ready_timeout_backoff_and_deactivation() -> None:
    name = "pods-ready-timeout.yaml"
    stuck = "research/stuck"
    evicted = of_type(name, "Evicted", stuck)
    assert [(d.at, d.reason) for d in evicted] == [
        (300.0, "PodsReadyTimeout"),
        (720.0, "PodsReadyTimeout"),
    ]
    first, second = (d.requeue_at or 0.0 for d in evicted)
    assert 360.0 <= first < 360.01  # 60s x 2^0, plus at most 0.01% jitter
    assert 840.0 <= second < 840.02  # 60s x 2^1
    requeued = [d.at for d in of_type(name, "Requeued", stuck)]
    assert requeued == [pytest.approx(first), pytest.approx(second)]
    assert admissions(name, stuck) == [0.0, 420.0, pytest.approx(second)]
    assert admissions(name, "research/helper") == [300.0]
    deactivated = of_type(name, "Deactivated", stuck)
    assert len(deactivated) == 1
    assert deactivated[0].reason == "RequeuingLimitExceeded"
    assert deactivated[0].at == pytest.approx(second + 300)
    assert not of_type(name, "Finished", stuck)
