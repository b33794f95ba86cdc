"""Fair-sharing preemption: targets by Dominant Resource Share, rules S2-a/S2-b."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from preemption_builders import World

from kuota.core.preemption.classical import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    ClusterView,
    PreemptionResult,
    Preemptor,
    plan_victims,
)
from kuota.core.preemption.fair import fair_targets
from kuota.core.quota.fairshare import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE

S2A = f"fairSharing={LESS_THAN_OR_EQUAL_TO_FINAL_SHARE}"
S2B = f"fairSharing={LESS_THAN_INITIAL_SHARE}"


@dataclass
class Case:
    name: str
    build: Callable[[], tuple[World, Preemptor]]
    victims: list[tuple[str, str, str]]
    strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


def three(nominal: int, **weights: float) -> World:
    w = World()
    for name in ("a", "b", "c"):
        w.cq(name, "pool", reclaim="Any", weight=weights.get(name), cpu=nominal)
    return w


def loaded(world: World, cq: str, n: int, cpu: int, priority: int = 0) -> World:
    for i in range(n):
        world.admitted(cq, f"{cq}/{i}", cpu=cpu, priority=priority)
    return world


CASES = [
    Case(
        "S2-a: a queue within its quota takes back from the borrower",
        lambda: (w := loaded(loaded(three(3), "a", 6, 1), "b", 3, 1), w.preemptor("c", cpu=3)),
        [(f"a/{i}", IN_COHORT_FAIR_SHARING, S2A) for i in (5, 4, 3)],
    ),
    Case(
        "no preemption when the preemptor would end with the larger share",
        lambda: (w := loaded(loaded(three(3), "a", 6, 1), "c", 3, 1), w.preemptor("c", cpu=3)),
        [],
    ),
    Case(
        "S2-b when S2-a fails: below the target's initial share",
        lambda: (w := loaded(loaded(three(4), "a", 2, 4), "c", 4, 1), w.preemptor("c", cpu=2)),
        [("a/1", IN_COHORT_FAIR_SHARING, S2B)],
    ),
    Case(
        "S2-b is not tried when only S2-a is configured",
        lambda: (w := loaded(loaded(three(4), "a", 2, 4), "c", 4, 1), w.preemptor("c", cpu=2)),
        [],
        (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    ),
    Case(
        "the queue with the highest share is targeted first",
        lambda: (
            w := loaded(loaded(three(4, b=2), "a", 3, 2), "b", 3, 2),
            w.preemptor("c", cpu=4),
        ),
        [("a/2", IN_COHORT_FAIR_SHARING, S2A), ("b/2", IN_COHORT_FAIR_SHARING, S2A)],
    ),
    Case(
        "the preemptor's own queue: lower priority by withinClusterQueue",
        lambda: (
            w := World()
            .cq("a", "pool", within="LowerPriority", cpu=4)
            .cq("b", "pool", cpu=4)
            .admitted("a", "a/low", cpu=4, priority=0)
            .admitted("b", "b/1", cpu=4, priority=0),
            w.preemptor("a", cpu=4, priority=5),
        ),
        [("a/low", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
    ),
    Case(
        "a queue without a cohort only preempts within itself",
        lambda: (
            w := World()
            .cq("a", within="LowerPriority", cpu=4)
            .admitted("a", "a/low", cpu=2, priority=0)
            .admitted("a", "a/high", cpu=2, priority=9),
            w.preemptor("a", cpu=2, priority=5),
        ),
        [("a/low", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
    ),
    Case(
        "reclaimWithinCohort Never: nothing from other queues",
        lambda: (
            w := World().cq("a", "pool", cpu=3).cq("c", "pool", cpu=3).admitted("a", "a/1", cpu=6),
            w.preemptor("c", cpu=3),
        ),
        [],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fair_preemption(case: Case) -> None:
    world, preemptor = case.build()
    before = world.usage()
    result = fair_targets(
        world.view(), preemptor, weights=world.weights(), strategies=case.strategies
    )
    assert [(v.key, v.reason, v.policy) for v in result.victims] == case.victims
    assert world.usage() == before
    assert result.borrowing or not result.victims


def test_fair_plans_never_share_victims() -> None:
    world = loaded(three(3), "a", 9, 1)
    first = world.preemptor("b", "b/p", cpu=3)
    second = world.preemptor("c", "c/p", cpu=3)

    def search(view: ClusterView, p: Preemptor, *, exclude: frozenset[str]) -> PreemptionResult:
        return fair_targets(view, p, weights=world.weights(), exclude=exclude)

    results = plan_victims(world.view(), [first, second], search=search)
    victims = [{v.key for v in r.victims} for r in results]
    assert victims == [{"a/8", "a/7", "a/6"}, {"a/5", "a/4", "a/3"}]
