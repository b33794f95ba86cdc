"""Dominant Resource Share, the fair-sharing strategies, and the admission order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import pytest
from preemption_builders import MILLI, World, usage_of

from kuota.api.types import FlavorQuotas, ResourceGroup, ResourceQuota
from kuota.core.quota.fairshare import (
    MAX_INT64,
    FairEntry,
    Share,
    Weights,
    dominant_resource_share,
    fair_order,
    less_than_initial_share,
    less_than_or_equal_to_final_share,
    tournament_winner,
)
from kuota.core.quota.tree import QuotaNode, add_usage


@dataclass
class DrsCase:
    name: str
    build: Callable[[], tuple[World, QuotaNode]]
    share: Share
    rounded: int


def pool(**weights: float) -> World:
    """Two queues of 10 CPU and 20 memory each in cohort ``pool``."""
    w = World()
    for name in ("a", "b"):
        w.cq(name, "pool", weight=weights.get(name), cpu=10, memory=20)
    return w


def two_flavor_world() -> tuple[World, QuotaNode]:
    w = World()
    group = ResourceGroup(
        ("cpu",),
        (
            FlavorQuotas("f", (ResourceQuota("cpu", 10 * MILLI),)),
            FlavorQuotas("g", (ResourceQuota("cpu", 10 * MILLI),)),
        ),
    )
    w.tree.set_queue("a", cohort="pool", groups=(group,))
    w.tree.set_queue("b", cohort="pool", groups=(group,))
    node = w.tree.queues["a"]
    add_usage(node, ("f", "cpu"), 12 * MILLI)
    add_usage(node, ("g", "cpu"), 13 * MILLI)
    return w, node


def share(value: Fraction | int, resource: str, infinite: bool = False) -> Share:
    return Share(infinite, Fraction(value), resource)


DRS_CASES = [
    DrsCase(
        "a queue without a cohort has share 0",
        lambda: ((w := World().cq("a", cpu=10).admitted("a", "a/1", cpu=10)), w.tree.queues["a"]),
        Share(),
        0,
    ),
    DrsCase(
        "within its nominal quota: 0",
        lambda: ((w := pool().admitted("a", "a/1", cpu=10)), w.tree.queues["a"]),
        Share(),
        0,
    ),
    DrsCase(
        "borrowing 5 of the 20 CPU the cohort could lend: 250",
        lambda: ((w := pool().admitted("a", "a/1", cpu=15)), w.tree.queues["a"]),
        share(250, "cpu"),
        250,
    ),
    DrsCase(
        "weight 2 halves the share",
        lambda: ((w := pool(a=2).admitted("a", "a/1", cpu=15)), w.tree.queues["a"]),
        share(125, "cpu"),
        125,
    ),
    DrsCase(
        "weight 0.5 doubles it",
        lambda: ((w := pool(a=0.5).admitted("a", "a/1", cpu=15)), w.tree.queues["a"]),
        share(500, "cpu"),
        500,
    ),
    DrsCase(
        "weight 0 while borrowing: infinite",
        lambda: ((w := pool(a=0).admitted("a", "a/1", cpu=15)), w.tree.queues["a"]),
        share(250, "cpu", infinite=True),
        MAX_INT64,
    ),
    DrsCase(
        "weight 0 within nominal: 0",
        lambda: ((w := pool(a=0).admitted("a", "a/1", cpu=5)), w.tree.queues["a"]),
        Share(),
        0,
    ),
    DrsCase(
        "the dominant resource is the largest ratio",
        lambda: ((w := pool().admitted("a", "a/1", cpu=15, memory=30)), w.tree.queues["a"]),
        share(250, "cpu"),
        250,
    ),
    DrsCase(
        "memory dominates when its ratio is larger",
        lambda: ((w := pool().admitted("a", "a/1", cpu=12, memory=36)), w.tree.queues["a"]),
        share(400, "memory"),
        400,
    ),
    DrsCase(
        "a tie goes to the alphabetically first resource",
        lambda: ((w := pool().admitted("a", "a/1", cpu=15, memory=30)), w.tree.queues["a"]),
        share(250, "cpu"),
        250,
    ),
    DrsCase(
        "borrowing is summed over flavors of one resource",
        two_flavor_world,
        share(125, "cpu"),  # (2 + 3) of 40
        125,
    ),
    DrsCase(
        "Kueue's integer share rounds up",
        lambda: (
            (
                w := World()
                .cq("a", "pool", cpu=1)
                .cq("b", "pool", cpu=2)
                .admitted("a", "a/1", cpu=2)
            ),
            w.tree.queues["a"],
        ),
        share(Fraction(1000, 3), "cpu"),
        334,
    ),
    DrsCase(
        "a cohort's share: what its subtree borrows from the root",
        lambda: (
            (
                w := World()
                .cohort("root")
                .cohort("left", "root")
                .cohort("right", "root")
                .cq("a", "left", cpu=10)
                .cq("b", "right", cpu=10)
                .admitted("a", "a/1", cpu=15)
            ),
            w.tree.cohorts["left"],
        ),
        share(250, "cpu"),
        250,
    ),
]


@pytest.mark.parametrize("case", DRS_CASES, ids=[c.name for c in DRS_CASES])
def test_dominant_resource_share(case: DrsCase) -> None:
    world, node = case.build()
    got = dominant_resource_share(node, world.weights())
    assert got == case.share
    assert got.resource == case.share.resource
    assert got.rounded() == case.rounded


def test_share_order_is_kueues_compare_drs() -> None:
    zero, low, high = Share(), share(100, "cpu"), share(200, "cpu")
    inf_low, inf_high = share(1, "cpu", True), share(5, "cpu", True)
    assert sorted([inf_high, high, zero, inf_low, low]) == [zero, low, high, inf_low, inf_high]
    assert zero.is_zero and not low.is_zero and not inf_low.is_zero


@pytest.mark.parametrize(
    ("preemptor_new", "target_old", "target_new", "s2a", "s2b"),
    [
        (100, 300, 100, True, True),  # equal to the target's final share
        (150, 300, 100, False, True),  # above the final share, below the initial one
        (300, 300, 100, False, False),  # not below the initial share
        (0, 0, 0, True, False),
        (50, 100, 200, True, True),
    ],
)
def test_strategies(
    preemptor_new: int, target_old: int, target_new: int, s2a: bool, s2b: bool
) -> None:
    p, old, new = share(preemptor_new, "cpu"), share(target_old, "cpu"), share(target_new, "cpu")
    assert less_than_or_equal_to_final_share(p, old, new) is s2a
    assert less_than_initial_share(p, old, new) is s2b


def test_an_infinite_preemptor_share_passes_no_strategy() -> None:
    p = share(1, "cpu", True)
    big = share(10**9, "cpu")
    assert not less_than_or_equal_to_final_share(p, big, big)
    assert not less_than_initial_share(p, big, big)


# --------------------------------------------------------------------------- admission order


def entry(cq: str, key: str, cpu: int, priority: int = 0, t: float = 0.0) -> FairEntry:
    return FairEntry(key, cq, priority, t, usage_of({"cpu": cpu}))


def keys(entries: list[FairEntry]) -> list[str]:
    return [e.key for e in entries]


def test_the_lower_share_after_admission_goes_first() -> None:
    world = pool().admitted("a", "a/old", cpu=12)
    heads = [entry("a", "a/head", 1, priority=9), entry("b", "b/head", 1, priority=0)]
    assert keys(fair_order(world.tree, world.weights(), heads)) == ["b/head", "a/head"]


def test_equal_shares_go_by_priority_then_time_then_key() -> None:
    world = pool()
    heads = [
        entry("a", "a/x", 1, priority=1, t=5),
        entry("b", "b/y", 1, priority=1, t=3),
        entry("b", "b/z", 1, priority=2, t=9),
        entry("a", "a/w", 1, priority=1, t=3),
    ]
    assert keys(fair_order(world.tree, world.weights(), heads)) == ["b/z", "a/w", "b/y", "a/x"]


def test_admitting_the_winner_changes_the_next_tournament() -> None:
    world = World().cq("a", "pool", cpu=5).cq("b", "pool", cpu=5)
    heads = [entry("a", "a/1", 5, priority=0), entry("b", "b/1", 5, 1), entry("b", "b/2", 5, 1, 1)]
    assert keys(fair_order(world.tree, world.weights(), heads)) == ["b/1", "b/2", "a/1"]

    def admit(e: FairEntry) -> None:
        node = world.tree.queues[e.cluster_queue]
        for fr, qty in e.usage:
            add_usage(node, fr, qty)

    assert keys(fair_order(world.tree, world.weights(), heads, admit=admit)) == [
        "b/1",
        "a/1",
        "b/2",
    ]


def test_a_heavier_weight_wins_the_tournament() -> None:
    world = pool(b=4).admitted("a", "a/old", cpu=12).admitted("b", "b/old", cpu=14)
    heads = [entry("a", "a/head", 1), entry("b", "b/head", 1)]
    # a: 3 of 20 borrowed -> 150; b: 5 of 20 at weight 4 -> 62.5
    assert tournament_winner(world.tree, world.weights(), heads) == heads[1]


def test_nested_cohorts_compare_the_subtrees_at_each_level() -> None:
    world = (
        World()
        .cohort("root")
        .cohort("left", "root")
        .cohort("right", "root")
        .cq("l1", "left", cpu=5)
        .cq("l2", "left", cpu=5)
        .cq("r1", "right", cpu=10)
        .admitted("l1", "l1/old", cpu=12)
    )
    # left would borrow 2+1 of the root's 20 with l2's head (150); right none (0).
    heads = [entry("l2", "l2/head", 1, priority=5), entry("r1", "r1/head", 1)]
    assert keys(fair_order(world.tree, world.weights(), heads)) == ["r1/head", "l2/head"]


def test_queues_without_cohort_go_by_priority() -> None:
    world = World().cq("a", cpu=5).cq("b", cpu=5)
    heads = [entry("a", "a/1", 1, priority=1), entry("b", "b/1", 1, priority=3)]
    assert keys(fair_order(world.tree, world.weights(), heads)) == ["b/1", "a/1"]


def test_order_computations_leave_the_tree_as_it_was() -> None:
    world = pool().admitted("a", "a/old", cpu=12)
    before = world.usage()
    fair_order(world.tree, Weights(), [entry("a", "a/h", 3), entry("b", "b/h", 30)])
    assert world.usage() == before
