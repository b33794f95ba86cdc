"""Quota arithmetic on the cohort forest (Kueue's resource_node.go semantics)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.api.types import FlavorQuotas, ResourceGroup, ResourceQuota
from kuota.core.quota import tree as Q

FR = ("f", "gpu")


def groups(
    nominal: int, borrowing: int | None = None, lending: int | None = None
) -> tuple[ResourceGroup, ...]:
    quota = ResourceQuota("gpu", nominal, borrowing, lending)
    return (ResourceGroup(("gpu",), (FlavorQuotas("f", (quota,)),)),)


@dataclass
class Case:
    name: str
    cohorts: list[tuple[str, str | None, tuple[int, int | None, int | None] | None]]
    queues: list[tuple[str, str | None, tuple[int, int | None, int | None]]]
    usage: dict[str, int]
    available: dict[str, int]
    potential: dict[str, int]


CASES = [
    Case(
        "alone: nominal minus usage",
        [],
        [("a", None, (8, None, None))],
        {"a": 3},
        {"a": 5},
        {"a": 8},
    ),
    Case(
        "two queues share a cohort",
        [],
        [("a", "pool", (8, None, None)), ("b", "pool", (4, None, None))],
        {"a": 10},
        {"a": 2, "b": 2},
        {"a": 12, "b": 12},
    ),
    Case(
        "borrowing limit caps what a queue draws from its cohort",
        [],
        [("a", "pool", (8, 2, None)), ("b", "pool", (8, None, None))],
        {"a": 9},
        {"a": 1, "b": 7},
        {"a": 10, "b": 16},
    ),
    Case(
        "lending limit keeps part of a queue's quota local",
        [],
        [("a", "pool", (8, None, 2)), ("b", "pool", (4, None, None))],
        {"b": 5},
        {"a": 7, "b": 1},
        {"a": 12, "b": 6},
    ),
    Case(
        "a queue's local part is used first, then the cohort",
        [],
        [("a", "pool", (8, None, 2)), ("b", "pool", (4, None, None))],
        {"a": 7},
        {"a": 5, "b": 5},
        {"a": 12, "b": 6},
    ),
    Case(
        "a cohort's own quota and borrowing limit",
        [("root", None, (4, None, None)), ("mid", "root", (0, 1, None))],
        [("a", "mid", (2, None, None))],
        {"a": 2},
        {"a": 1},
        {"a": 3},
    ),
    Case(
        "a cohort's lending limit",
        [
            ("root", None, None),
            ("left", "root", (0, None, None)),
            ("right", "root", (0, None, None)),
        ],
        [("a", "left", (2, None, None)), ("b", "right", (4, None, 1))],
        {},
        {"a": 3, "b": 6},
        {"a": 3, "b": 6},
    ),
    Case(
        "overadmission shows as negative availability",
        [],
        [("a", None, (2, None, None))],
        {"a": 3},
        {"a": -1},
        {"a": 2},
    ),
]


def build(case: Case) -> Q.QuotaTree:
    tree = Q.QuotaTree()
    for name, parent, quota in case.cohorts:
        assert tree.set_cohort(name, parent=parent, groups=groups(*quota) if quota else ())
    for name, cohort, quota in case.queues:
        tree.set_queue(name, cohort=cohort, groups=groups(*quota))
    for name, used in case.usage.items():
        Q.add_usage(tree.queues[name], FR, used)
    return tree


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_available_and_potential(case: Case) -> None:
    tree = build(case)
    assert {q: Q.available(tree.queues[q], FR) for q in case.available} == case.available
    assert {q: Q.potential_available(tree.queues[q], FR) for q in case.potential} == case.potential


def test_borrowing_height() -> None:
    tree = Q.QuotaTree()
    tree.set_cohort("root", parent=None, groups=groups(4))
    tree.set_cohort("mid", parent="root", groups=())
    tree.set_queue("a", cohort="mid", groups=groups(2))
    tree.set_queue("b", cohort="mid", groups=groups(2))
    a = tree.queues["a"]
    assert Q.borrowing_height(a, FR, 2) == (0, True)  # within its own quota
    assert Q.borrowing_height(a, FR, 4) == (1, True)  # mid holds it
    assert Q.borrowing_height(a, FR, 6) == (2, False)  # needs root
    assert (tree.cohorts["mid"].height, tree.cohorts["root"].height) == (1, 2)


def test_limiting_factor() -> None:
    tree = Q.QuotaTree()
    tree.set_queue("solo", cohort=None, groups=groups(1))
    tree.set_queue("a", cohort="pool", groups=groups(2, 1))
    tree.set_queue("b", cohort="pool", groups=groups(4))
    assert Q.limiting_factor(tree.queues["solo"], FR) == "nominal quota reached"
    assert Q.limiting_factor(tree.queues["a"], FR) == "borrowing limit reached"
    assert Q.limiting_factor(tree.queues["b"], FR) == "no unused quota left in cohort pool"


def test_a_cycle_is_refused_and_nothing_changes() -> None:
    tree = Q.QuotaTree()
    assert tree.set_cohort("a", parent="b", groups=())
    assert tree.set_cohort("b", parent="c", groups=())
    assert not tree.set_cohort("c", parent="a", groups=groups(5))
    assert tree.cohort_parent("c") is None
    assert tree.cohorts["c"].parent is None  # implicit, as the parent of b
    assert not tree.set_cohort("a", parent="a", groups=())
    assert tree.cohort_parent("a") == "b"


def test_roots_and_trees() -> None:
    tree = Q.QuotaTree()
    tree.set_cohort("mid", parent="root", groups=())
    tree.set_queue("a", cohort="mid", groups=groups(1))
    tree.set_queue("b", cohort="root", groups=groups(1))
    tree.set_queue("c", cohort=None, groups=groups(1))
    assert [tree.root_name(q) for q in "abc"] == ["cohort:root", "cohort:root", "cq:c"]
    assert tree.queues_in_tree("cohort:root") == ["a", "b"]
    assert tree.all_roots() == ["cohort:root", "cq:c"]


def reference_available(node: Q.QuotaNode, fr: Q.FlavorResource) -> int:
    """Kueue's recursion, transcribed directly (the implementation is iterative)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    above = reference_available(node.parent, fr)
    lim = node.limits.get(fr, Q.Limits())
    if lim.borrowing_limit is not None:
        stored = node.subtree.get(fr, 0) - node.local_quota(fr)
        used = max(0, node.usage.get(fr, 0) - node.local_quota(fr))
        above = min(stored - used + lim.borrowing_limit, above)
    return node.local_available(fr) + above


Limit = tuple[int, int | None, int | None]
limits = st.tuples(st.integers(0, 8), st.none() | st.integers(0, 4), st.none() | st.integers(0, 8))


@settings(max_examples=80, deadline=None)
@given(
    root=limits,
    mid=limits,
    queues=st.lists(
        st.tuples(st.sampled_from(["root", "mid", None]), limits), min_size=1, max_size=4
    ),
    moves=st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 4)), max_size=25),
)
def test_incremental_usage_matches_kueue_and_a_rebuild(
    root: Limit, mid: Limit, queues: list[tuple[str | None, Limit]], moves: list[tuple[int, int]]
) -> None:
    tree = Q.QuotaTree()
    tree.set_cohort("root", parent=None, groups=groups(*root))
    tree.set_cohort("mid", parent="root", groups=groups(*mid))
    for i, (cohort, quota) in enumerate(queues):
        nominal, borrowing, lending = quota
        tree.set_queue(
            f"q{i}",
            cohort=cohort,
            groups=groups(
                nominal, borrowing, min(lending or 0, nominal) if lending is not None else None
            ),
        )
    for which, delta in moves:
        node = tree.queues[f"q{which % len(queues)}"]
        if delta >= 0:
            Q.add_usage(node, FR, delta)
        elif node.usage.get(FR, 0) >= -delta:
            Q.remove_usage(node, FR, -delta)
        for n in [*tree.queues.values(), *tree.cohorts.values()]:
            assert Q.available(n, FR) == reference_available(n, FR)
        before = {name: c.usage.get(FR, 0) for name, c in tree.cohorts.items()}
        tree._rebuild()
        assert {name: c.usage.get(FR, 0) for name, c in tree.cohorts.items()} == before
