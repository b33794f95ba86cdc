"""Classical preemption (Kueue's rules), one table row per rule.

Each case builds a quota forest with admitted workloads, asks for the victims
of one preemptor, and checks the victims in order with their reason and the
policy that allowed them, and that the tree was restored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from preemption_builders import World

from kuota.core.preemption.classical import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    Preemptor,
    classical_targets,
    validate_plan,
)

Expected = list[tuple[str, str, str]]  # (victim, reason, policy)


@dataclass
class Case:
    name: str
    build: Callable[[], tuple[World, Preemptor]]
    victims: Expected
    borrowing: bool | None = None  # the attempt that succeeded, when it matters


def within(policy: str) -> World:
    return World().cq("a", within=policy, gpu=8)


CASES = [
    Case(
        "within LowerPriority: the lower-priority workload goes",
        lambda: (
            w := within("LowerPriority")
            .admitted("a", "a/low", gpu=4, priority=1)
            .admitted("a", "a/high", gpu=4, priority=5),
            w.preemptor("a", gpu=4, priority=3),
        ),
        [("a/low", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
    ),
    Case(
        "within LowerPriority: equal priority is never preempted",
        lambda: (
            w := within("LowerPriority").admitted("a", "a/same", gpu=8, priority=3),
            w.preemptor("a", gpu=4, priority=3),
        ),
        [],
    ),
    Case(
        "within Never: nothing is preempted",
        lambda: (
            w := within("Never").admitted("a", "a/low", gpu=8, priority=0),
            w.preemptor("a", gpu=4, priority=9),
        ),
        [],
    ),
    Case(
        "within LowerOrNewerEqualPriority: an equal-priority workload queued later goes",
        lambda: (
            w := within("LowerOrNewerEqualPriority")
            .admitted("a", "a/older", gpu=4, priority=3, queue_time=5)
            .admitted("a", "a/newer", gpu=4, priority=3, queue_time=50),
            w.preemptor("a", gpu=4, priority=3, queue_time=10),
        ),
        [("a/newer", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerOrNewerEqualPriority")],
    ),
    Case(
        "within LowerOrNewerEqualPriority: equal priority queued earlier stays",
        lambda: (
            w := within("LowerOrNewerEqualPriority").admitted(
                "a", "a/older", gpu=8, priority=3, queue_time=5
            ),
            w.preemptor("a", gpu=4, priority=3, queue_time=10),
        ),
        [],
    ),
    Case(
        "lower priority first, then the most recently admitted",
        lambda: (
            w := within("LowerPriority")
            .admitted("a", "a/p1-early", gpu=2, priority=1, at=1)
            .admitted("a", "a/p1-late", gpu=2, priority=1, at=2)
            .admitted("a", "a/p0", gpu=2, priority=0, at=3)
            .admitted("a", "a/p2", gpu=2, priority=2, at=4),
            w.preemptor("a", gpu=4, priority=5),
        ),
        [
            ("a/p0", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority"),
            ("a/p1-late", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority"),
        ],
    ),
    Case(
        "minimal set: a small victim taken first is given back",
        lambda: (
            w := within("LowerPriority")
            .admitted("a", "a/small", gpu=1, priority=0)
            .admitted("a", "a/big", gpu=6, priority=1)
            .admitted("a", "a/other", gpu=1, priority=9),
            w.preemptor("a", gpu=6, priority=5),
        ),
        [("a/big", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
    ),
    Case(
        "a workload already being evicted comes first",
        lambda: (
            w := within("LowerPriority")
            .admitted("a", "a/low", gpu=4, priority=0)
            .admitted("a", "a/evicting", gpu=4, priority=2, evicting=True),
            w.preemptor("a", gpu=4, priority=5),
        ),
        [("a/evicting", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
    ),
    Case(
        "only workloads using a contested flavor-resource are candidates",
        lambda: (
            w := World()
            .cq("a", within="LowerPriority", gpu=8, cpu=8)
            .admitted("a", "a/cpu-only", cpu=8, priority=0)
            .admitted("a", "a/gpu", gpu=8, cpu=0, priority=1),
            w.preemptor("a", gpu=4, priority=5),
        ),
        [("a/gpu", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
    ),
    # ------------------------------------------------------------ reclaim
    Case(
        "reclaim: a queue inside its nominal quota takes back what another borrows",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=(8, 4))
            .cq("beta", "pool", reclaim="Any", gpu=8)
            .admitted("alpha", "alpha/1", gpu=4, at=1)
            .admitted("alpha", "alpha/2", gpu=4, at=2)
            .admitted("alpha", "alpha/3", gpu=4, at=3)
            .admitted("beta", "beta/1", gpu=4, at=4),
            w.preemptor("beta", gpu=4, priority=0),
        ),
        [("alpha/3", IN_COHORT_RECLAMATION, "reclaimWithinCohort=Any")],
    ),
    Case(
        "reclaim LowerPriority: an equal-priority borrower is not reclaimed",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", reclaim="LowerPriority", gpu=8)
            .admitted("alpha", "alpha/1", gpu=12, priority=2)
            .admitted("beta", "beta/1", gpu=4),
            w.preemptor("beta", gpu=4, priority=2),
        ),
        [],
    ),
    Case(
        "reclaim never takes from a queue within its nominal quota",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("gamma", "pool", gpu=8)
            .cq("beta", "pool", reclaim="Any", gpu=8)
            .admitted("gamma", "gamma/low", gpu=8, priority=0)
            .admitted("alpha", "alpha/high", gpu=12, priority=9)
            .admitted("beta", "beta/1", gpu=4),
            w.preemptor("beta", gpu=4, priority=5),
        ),
        [("alpha/high", IN_COHORT_RECLAMATION, "reclaimWithinCohort=Any")],
    ),
    Case(
        "other queues before the preemptor's own",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", within="LowerPriority", reclaim="Any", gpu=8)
            .admitted("beta", "beta/low", gpu=4, priority=0)
            .admitted("alpha", "alpha/high", gpu=12, priority=4),
            w.preemptor("beta", gpu=4, priority=5),
        ),
        [("alpha/high", IN_COHORT_RECLAMATION, "reclaimWithinCohort=Any")],
    ),
    Case(
        "a borrowing preemptor cannot reclaim without borrowWithinCohort",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", reclaim="Any", gpu=8)
            .admitted("alpha", "alpha/1", gpu=10, priority=0)
            .admitted("beta", "beta/1", gpu=6, priority=9),
            w.preemptor("beta", gpu=4, priority=5),
        ),
        [],
    ),
    Case(
        "reclaiming stops once the queue is back at its nominal quota",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("gamma", "pool", gpu=2)
            .cq("beta", "pool", reclaim="Any", borrow="LowerPriority", gpu=8)
            .admitted("alpha", "alpha/1", gpu=2, priority=0, at=1)
            .admitted("alpha", "alpha/2", gpu=2, priority=0, at=2)
            .admitted("alpha", "alpha/3", gpu=2, priority=0, at=3)
            .admitted("alpha", "alpha/4", gpu=2, priority=0, at=4)
            .admitted("alpha", "alpha/5", gpu=2, priority=0, at=5)
            .admitted("beta", "beta/1", gpu=8, priority=9),
            w.preemptor("beta", gpu=4, priority=5),
        ),
        [],
    ),
    # ------------------------------------------------------------ borrowWithinCohort
    Case(
        "borrowWithinCohort: a borrowing preemptor reclaims lower priority",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", reclaim="Any", borrow="LowerPriority", gpu=8)
            .admitted("alpha", "alpha/1", gpu=12, priority=0)
            .admitted("beta", "beta/1", gpu=4, priority=9),
            w.preemptor("beta", gpu=6, priority=5),
        ),
        [
            (
                "alpha/1",
                IN_COHORT_RECLAIM_WHILE_BORROWING,
                "borrowWithinCohort=LowerPriority",
            )
        ],
        True,
    ),
    Case(
        "borrowWithinCohort: only at or below maxPriorityThreshold",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", reclaim="Any", borrow="LowerPriority", threshold=2, gpu=8)
            .admitted("alpha", "alpha/p3", gpu=6, priority=3, at=1)
            .admitted("alpha", "alpha/p2", gpu=6, priority=2, at=2)
            .admitted("beta", "beta/1", gpu=4, priority=9),
            w.preemptor("beta", gpu=6, priority=5),
        ),
        [
            (
                "alpha/p2",
                IN_COHORT_RECLAIM_WHILE_BORROWING,
                "borrowWithinCohort=LowerPriority,maxPriorityThreshold=2",
            )
        ],
        True,
    ),
    Case(
        "borrowWithinCohort: above the threshold nothing is reclaimed while borrowing",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", reclaim="Any", borrow="LowerPriority", threshold=2, gpu=8)
            .admitted("alpha", "alpha/p3", gpu=12, priority=3)
            .admitted("beta", "beta/1", gpu=4, priority=9),
            w.preemptor("beta", gpu=6, priority=5),
        ),
        [],
    ),
    Case(
        "no candidate elsewhere: own lower-priority workloads, borrowing allowed",
        lambda: (
            w := World()
            .cq("alpha", "pool", gpu=8)
            .cq("beta", "pool", within="LowerPriority", reclaim="Any", gpu=8)
            .admitted("alpha", "alpha/1", gpu=4, priority=0)
            .admitted("beta", "beta/low", gpu=12, priority=0),
            w.preemptor("beta", gpu=4, priority=5),
        ),
        [("beta/low", IN_CLUSTER_QUEUE, "withinClusterQueue=LowerPriority")],
        True,
    ),
    # ------------------------------------------------------------ hierarchy
    Case(
        "hierarchical advantage: reclaim from a borrowing sibling sub-cohort",
        lambda: (
            w := World()
            .cohort("root")
            .cohort("left", "root")
            .cohort("right", "root")
            .cq("a1", "left", reclaim="LowerPriority", gpu=4)
            .cq("a2", "left", gpu=4)
            .cq("b1", "right", gpu=4)
            .admitted("a2", "a2/1", gpu=4, priority=0)
            .admitted("b1", "b1/1", gpu=4, priority=0, at=1)
            .admitted("b1", "b1/2", gpu=4, priority=0, at=2),
            w.preemptor("a1", gpu=4, priority=1),
        ),
        [("b1/2", IN_COHORT_RECLAMATION, "reclaimWithinCohort=LowerPriority")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_classical(case: Case) -> None:
    world, preemptor = case.build()
    before = world.usage()
    result = classical_targets(world.view(), preemptor)
    got = [(v.key, v.reason, v.policy) for v in result.victims]
    assert got == case.victims
    assert world.usage() == before, "the search must restore the tree"
    if case.borrowing is not None and case.victims:
        assert result.borrowing is case.borrowing
    if case.victims:
        assert all(v.cluster_queue == world.workload(v.key).cluster_queue for v in result.victims)


def test_nothing_contested_means_no_search() -> None:
    world = within("LowerPriority").admitted("a", "a/low", gpu=2, priority=0)
    preemptor = world.preemptor("a", gpu=4, priority=5)
    assert not preemptor.contested
    assert classical_targets(world.view(), preemptor).victims == ()


def test_excluded_workloads_are_never_chosen() -> None:
    world = (
        within("LowerPriority")
        .admitted("a", "a/first", gpu=4, priority=0, at=2)
        .admitted("a", "a/second", gpu=4, priority=0, at=1)
    )
    preemptor = world.preemptor("a", gpu=4, priority=5)
    assert [v.key for v in classical_targets(world.view(), preemptor).victims] == ["a/first"]
    got = classical_targets(world.view(), preemptor, exclude=frozenset({"a/first"}))
    assert [v.key for v in got.victims] == ["a/second"]


@pytest.mark.parametrize(
    ("victims", "valid"),
    [
        (["a/low"], True),  # what the search itself would choose
        (["a/mid"], True),  # another sufficient, allowed, minimal set
        (["a/low", "a/mid"], False),  # one victim more than needed
        (["a/high"], False),  # not allowed: higher priority than the preemptor
        (["a/gone"], False),  # stale: no longer admitted
        (["a/low", "a/low"], False),  # malformed
        ([], False),
    ],
)
def test_validate_plan(victims: list[str], valid: bool) -> None:
    world = (
        within("LowerPriority")
        .admitted("a", "a/low", gpu=2, priority=0)
        .admitted("a", "a/mid", gpu=2, priority=1)
        .admitted("a", "a/high", gpu=4, priority=9)
    )
    preemptor = world.preemptor("a", gpu=2, priority=5)
    before = world.usage()
    result = validate_plan(world.view(), preemptor, victims)
    assert world.usage() == before
    if valid:
        assert result is not None
        assert sorted(v.key for v in result.victims) == sorted(victims)
        assert {v.reason for v in result.victims} == {IN_CLUSTER_QUEUE}
    else:
        assert result is None


def _own_queue_victims_without_borrowing() -> tuple[World, Preemptor]:
    """Kueue's baseline shape in small: ``a`` is within its nominal quota and
    asks for all of it; ``b`` borrows; the cohort has room, not enough. Without
    ``borrowWithinCohort`` the attempt without borrowing comes first
    (candidates elsewhere, none hierarchical): ``a``'s own two go, ``b``'s is
    taken and given back."""
    w = (
        World()
        .cq("a", "pool", within="LowerPriority", reclaim="Any", gpu=(4, 10))
        .cq("b", "pool", within="LowerPriority", reclaim="Any", gpu=(4, 10))
        .cq("c", "pool", gpu=(3, 10))
        .admitted("a", "a/low-1", gpu=1, priority=0)
        .admitted("a", "a/low-2", gpu=1, priority=0)
        .admitted("b", "b/x", gpu=3, priority=0)
        .admitted("b", "b/y", gpu=3, priority=0)
    )
    return w, w.preemptor("a", gpu=4, priority=5)


def test_a_plan_the_search_made_without_borrowing_is_valid() -> None:
    """The plan's check must walk the attempts the search walked. It used to
    choose them from the plan's victims alone: all in the preemptor's queue, so
    "no candidate elsewhere" meant one attempt, with borrowing, which needs only
    ``a/low-2`` — and every plan of the preemption service was refused, rewritten
    and refused again (the baseline shape's high-priority class waited)."""
    world, preemptor = _own_queue_victims_without_borrowing()
    result = classical_targets(world.view(), preemptor)
    assert [(v.key, v.reason) for v in result.victims] == [
        ("a/low-2", IN_CLUSTER_QUEUE),
        ("a/low-1", IN_CLUSTER_QUEUE),
    ]
    assert result.borrowing is False
    before = world.usage()
    checked = validate_plan(world.view(), preemptor, [v.key for v in result.victims])
    assert world.usage() == before
    assert checked is not None
    assert checked.victims == result.victims
    assert checked.borrowing is False
