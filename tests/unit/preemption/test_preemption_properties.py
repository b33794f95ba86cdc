"""Hypothesis properties of the classical victim search and multi-preemptor plans.

Random cohort trees (flat or with two sub-cohorts; nominal, borrowing and
lending limits), random preemption policies, workloads admitted while they
fit, and a preemptor that does not fit. For every search:

- the tree is restored;
- within a ClusterQueue, a victim always has a lower priority than the
  preemptor, or equal priority and queued after it when the policy is
  LowerOrNewerEqualPriority (never otherwise);
- a victim in another ClusterQueue comes from a queue that, at that point in
  the victim order, is above its nominal quota in a contested flavor-resource
  (a queue within its nominal quota is never reclaimed from), allowed by
  reclaimWithinCohort; while borrowing, only below the priority threshold;
- the set is minimal: without all victims the preemptor fits, and giving
  back any single victim makes it not fit;
- admission's check of the plan (``validate_plan``) accepts the victims the
  search chose, as they are;
- after the victims are gone and the preemptor is charged, every queue is
  within its limits (available >= 0 everywhere) and the incremental usage
  equals a rebuild from the queues' usage.

Plans for several preemptors never share a victim and leave the tree as it
was.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preemption_builders import MILLI, World

from kuota.core.preemption.classical import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    PreemptionResult,
    Preemptor,
    add_workload,
    allows,
    classical_targets,
    fits,
    plan_victims,
    remove_workload,
    validate_plan,
)
from kuota.core.preemption.fair import fair_targets
from kuota.core.quota.fairshare import Weights
from kuota.core.quota.tree import QuotaTree, add_usage, available, potential_available

WITHIN = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
RECLAIM = ["Never", "LowerPriority", "Any"]
BORROW = ["Never", "LowerPriority"]


@dataclass(frozen=True)
class QueueSpec:
    nominal: int
    borrowing: int | None
    lending: int | None
    within: str
    reclaim: str
    borrow: str
    threshold: int | None


queue_specs = st.builds(
    QueueSpec,
    nominal=st.integers(0, 6),
    borrowing=st.none() | st.integers(0, 6),
    lending=st.none() | st.integers(0, 3),
    within=st.sampled_from(WITHIN),
    reclaim=st.sampled_from(RECLAIM),
    borrow=st.sampled_from(BORROW),
    threshold=st.none() | st.integers(0, 3),
)

workloads = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(0, 3), st.integers(0, 9)),
    max_size=20,
)
# (queue, how much more than available it asks, priority, queue time)
preemptor_specs = st.tuples(
    st.integers(0, 3), st.integers(1, 6), st.integers(0, 3), st.integers(0, 9)
)


def build(specs: list[QueueSpec], nested: bool, loads: list[tuple[int, int, int, int]]) -> World:
    world = World().cohort("root")
    if nested:
        world.cohort("left", "root").cohort("right", "root")
    for i, s in enumerate(specs):
        parent = ("left" if i % 2 == 0 else "right") if nested else "root"
        lending = None if s.lending is None else min(s.lending, s.nominal)
        world.cq(
            f"q{i}",
            parent,
            within=s.within,
            reclaim=s.reclaim,
            borrow=s.borrow,
            threshold=s.threshold,
            gpu=(s.nominal, s.borrowing, lending),
        )
    for n, (qi, gpu, prio, qt) in enumerate(loads):
        name = f"q{qi % len(specs)}"
        node = world.tree.queues[name]
        if gpu * MILLI <= available(node, ("f", "gpu")):
            world.admitted(name, f"{name}/w{n}", gpu=gpu, priority=prio, queue_time=qt)
    return world


def preemptor_of(world: World, name: str, spec: tuple[int, ...]) -> Preemptor | None:
    """A preemptor asking ``extra`` more than its queue has available now (so it
    does not fit), but no more than the queue could ever get."""
    _, extra, prio, qt = spec
    node = world.tree.queues[name]
    free = max(0, available(node, ("f", "gpu"))) // MILLI
    most = potential_available(node, ("f", "gpu")) // MILLI
    gpu = min(free + extra, most)
    if gpu <= free:
        return None
    p = world.preemptor(name, "new/p", gpu=gpu, priority=prio, queue_time=qt)
    assert p.contested
    return p


def invariant(tree: QuotaTree) -> None:
    for name, node in tree.queues.items():
        for fr in node.limits:
            assert available(node, fr) >= 0, f"{name} over its limits in {fr}"
    rebuilt = copy.deepcopy(tree)
    rebuilt._rebuild()
    for name, node in tree.cohorts.items():
        assert {k: v for k, v in node.usage.items() if v} == {
            k: v for k, v in rebuilt.cohorts[name].usage.items() if v
        }


def check(world: World, p: Preemptor, result: PreemptionResult) -> None:
    tree = world.tree
    node = tree.queues[p.cluster_queue]
    policy = world.policies[p.cluster_queue]
    victims = [world.workload(v.key) for v in result.victims]
    # --- who may be a victim
    taken: dict[str, int] = {}
    for v, w in zip(result.victims, victims, strict=True):
        assert any(fr in p.contested for fr, _ in w.usage)
        if v.reason == IN_CLUSTER_QUEUE:
            assert w.cluster_queue == p.cluster_queue
            assert allows(policy.within_cluster_queue, p, w)
            assert policy.within_cluster_queue != "Never"
            if policy.within_cluster_queue == "LowerPriority":
                assert w.priority < p.priority
            else:
                assert w.priority < p.priority or (
                    w.priority == p.priority and p.queue_time < w.queue_time
                )
            continue
        assert w.cluster_queue != p.cluster_queue
        assert allows(policy.reclaim_within_cohort, p, w)
        other = tree.queues[w.cluster_queue]
        gone = taken.get(w.cluster_queue, 0)
        assert any(
            other.usage.get(fr, 0) - gone > other.subtree.get(fr, 0) for fr in p.contested
        ), f"{w.key}: its queue was within its nominal quota"
        taken[w.cluster_queue] = gone + sum(q for _, q in w.usage)
        if v.reason == IN_COHORT_RECLAIM_WHILE_BORROWING:
            bwc = policy.borrow_within_cohort
            assert bwc.policy != "Never" and w.priority < p.priority
            assert bwc.max_priority_threshold is None or w.priority <= bwc.max_priority_threshold
    # --- minimal, and fits without borrowing when the attempt did not borrow
    for w in victims:
        remove_workload(tree, w)
    assert fits(node, p.usage, borrowing=result.borrowing)
    for w in victims:
        add_workload(tree, w)
        assert not fits(node, p.usage, borrowing=result.borrowing), f"{w.key} is not needed"
        remove_workload(tree, w)
    # --- the state after the preemption keeps every limit
    for fr, qty in p.usage:
        add_usage(node, fr, qty)
    invariant(tree)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    specs=st.lists(queue_specs, min_size=2, max_size=4),
    nested=st.booleans(),
    loads=workloads,
    spec=preemptor_specs,
)
def test_classical_search_properties(
    specs: list[QueueSpec],
    nested: bool,
    loads: list[tuple[int, int, int, int]],
    spec: tuple[int, ...],
) -> None:
    world = build(specs, nested, loads)
    p = preemptor_of(world, f"q{spec[0] % len(specs)}", spec)
    if p is None:
        return
    before = world.usage()
    result = classical_targets(world.view(), p)
    assert world.usage() == before
    if result:
        # Admission's check of the plan the preemption service would write
        # accepts it as it is (a refused plan is written again and again).
        # The search restricted to its own choice chooses it again: the check
        # walks the attempts the search walked.
        keys = [v.key for v in result.victims]
        assert classical_targets(world.view(), p, only=frozenset(keys)) == result
        assert validate_plan(world.view(), p, keys) == result
        assert world.usage() == before
        check(world, p, result)


@settings(max_examples=200, deadline=None)
@given(
    specs=st.lists(queue_specs, min_size=2, max_size=4),
    nested=st.booleans(),
    loads=workloads,
    preemptors=st.lists(preemptor_specs, min_size=2, max_size=4),
)
def test_plans_never_share_victims(
    specs: list[QueueSpec],
    nested: bool,
    loads: list[tuple[int, int, int, int]],
    preemptors: list[tuple[int, ...]],
) -> None:
    world = build(specs, nested, loads)
    ps = []
    for i, spec in enumerate(preemptors):
        p = preemptor_of(world, f"q{spec[0] % len(specs)}", spec)
        if p is not None:
            ps.append(replace(p, key=f"new/p{i}"))
    before = world.usage()
    results = plan_victims(world.view(), ps)
    assert world.usage() == before
    seen: set[str] = set()
    for r in results:
        keys = {v.key for v in r.victims}
        assert not keys & seen, "two preemptors claimed the same victim"
        seen |= keys
    # Applying the plans in order keeps every limit.
    tree = world.tree
    for p, r in zip(ps, results, strict=True):
        if not r:
            continue
        for v in r.victims:
            remove_workload(tree, world.workload(v.key))
        node = tree.queues[p.cluster_queue]
        assert fits(node, p.usage, borrowing=True)
        for fr, qty in p.usage:
            add_usage(node, fr, qty)
        invariant(tree)


@settings(max_examples=300, deadline=None)
@given(
    lender=st.integers(2, 8),
    borrower=st.integers(0, 4),
    borrow=st.sampled_from(BORROW),
    threshold=st.none() | st.integers(0, 3),
    loads=st.lists(st.tuples(st.booleans(), st.integers(1, 2), st.integers(0, 3)), max_size=16),
    extra=st.integers(1, 6),
    priority=st.integers(0, 4),
)
def test_borrowers_are_reclaimed_only_down_to_their_nominal_quota(
    lender: int,
    borrower: int,
    borrow: str,
    threshold: int | None,
    loads: list[tuple[bool, int, int]],
    extra: int,
    priority: int,
) -> None:
    """A focused tree: one queue borrows with many small workloads, the other
    reclaims (Any) and may borrow while preempting."""
    world = (
        World()
        .cohort("root")
        .cq("lend", "root", reclaim="Any", borrow=borrow, threshold=threshold, gpu=lender)
        .cq("borrow", "root", gpu=borrower)
    )
    for n, (to_lender, gpu, prio) in enumerate(loads):
        name = "lend" if to_lender else "borrow"
        if gpu * MILLI <= available(world.tree.queues[name], ("f", "gpu")):
            world.admitted(name, f"{name}/w{n}", gpu=gpu, priority=prio)
    p = preemptor_of(world, "lend", (0, extra, priority, 0))
    if p is None:
        return
    result = classical_targets(world.view(), p)
    if result:
        check(world, p, result)


@settings(max_examples=200, deadline=None)
@given(
    specs=st.lists(queue_specs, min_size=2, max_size=4),
    nested=st.booleans(),
    loads=workloads,
    spec=preemptor_specs,
    weights=st.lists(st.sampled_from([0, 500, 1000, 2000]), min_size=4, max_size=4),
)
def test_fair_search_properties(
    specs: list[QueueSpec],
    nested: bool,
    loads: list[tuple[int, int, int, int]],
    spec: tuple[int, ...],
    weights: list[int],
) -> None:
    """Fair-sharing victims: the tree is restored, own-queue victims follow
    withinClusterQueue, others come from borrowing queues allowed by
    reclaimWithinCohort, the set is minimal and the result keeps every limit."""
    world = build(specs, nested, loads)
    p = preemptor_of(world, f"q{spec[0] % len(specs)}", spec)
    if p is None:
        return
    w = Weights({f"q{i}": weights[i] for i in range(len(specs))})
    before = world.usage()
    result = fair_targets(world.view(), p, weights=w)
    assert world.usage() == before
    if not result:
        return
    search = partial(fair_targets, weights=w)
    keys = [v.key for v in result.victims]
    reasons = {v.key: v.reason for v in result.victims}
    checked = validate_plan(world.view(), p, keys, search=search, reasons=reasons)
    assert checked is not None
    assert {v.key: v.reason for v in checked.victims} == reasons
    assert world.usage() == before
    tree, policy = world.tree, world.policies[p.cluster_queue]
    victims = [world.workload(v.key) for v in result.victims]
    for v, wl in zip(result.victims, victims, strict=True):
        if v.reason == IN_CLUSTER_QUEUE:
            assert wl.cluster_queue == p.cluster_queue
            assert allows(policy.within_cluster_queue, p, wl)
        else:
            assert v.reason == IN_COHORT_FAIR_SHARING and wl.cluster_queue != p.cluster_queue
            assert allows(policy.reclaim_within_cohort, p, wl)
            other = tree.queues[wl.cluster_queue]
            assert any(other.usage.get(fr, 0) > other.subtree.get(fr, 0) for fr in p.contested)
    node = tree.queues[p.cluster_queue]
    for wl in victims:
        remove_workload(tree, wl)
    assert fits(node, p.usage, borrowing=True)
    for wl in victims:
        add_workload(tree, wl)
        assert not fits(node, p.usage, borrowing=True), f"{wl.key} is not needed"
        remove_workload(tree, wl)
    for fr, qty in p.usage:
        add_usage(node, fr, qty)
    invariant(tree)
