"""End to end, queueing: borrowing, reclaim, priority preemption, finished Jobs.

Same harness and common checks as ``test_e2e_dra.py`` (see
``e2e_harness.assert_pipeline``: for preemptions also the same victims as
``kuota.sim``, and each preemptor's Job unsuspended only after its victims'
Jobs were suspended), with a pipeline of its own.
"""

from __future__ import annotations

import itertools

import pytest
from e2e_harness import Run, assert_pipeline, run_fixture, run_scenario

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()


async def test_cohort_borrowing(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "cohort-borrowing")
    assert_pipeline(o)
    a, b = f"{e2e_run.id}-team-a", f"{e2e_run.id}-team-b"
    # team-a borrowed one GPU beyond its nominal 2, never more (borrowingLimit 1).
    assert o.peak[(a, "whole-gpus")] == 3000, o.peak
    assert o.admitted_order() == [f"{a}/a-1", f"{a}/a-2", f"{b}/b-1", f"{b}/b-2", f"{a}/a-3"]
    # a-3 waited at the borrowing limit, b-2 for a free GPU in the cohort.
    assert o.of_type("Inadmissible", f"{a}/a-3"), "a-3 must have waited"
    assert o.of_type("Inadmissible", f"{b}/b-2"), "b-2 must have waited"
    # Neither ClusterQueue has a preemption policy: nothing is reclaimed.
    assert not [d for d in o.decisions if d.type in ("Preempted", "Evicted")], o.decisions


async def test_cohort_reclaim_preempts_the_borrower(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "cohort-reclaim")
    assert_pipeline(o)
    a, b = f"{e2e_run.id}-lender-a", f"{e2e_run.id}-owner-b"
    assert o.preemptions() == [(f"{a}/a-2", f"{b}/b-1", "InCohortReclamation")]
    assert o.admissions() == [
        (f"{a}/a-1", []),
        (f"{a}/a-2", []),
        (f"{b}/b-1", [f"{a}/a-2"]),
        (f"{a}/a-2", []),
    ]
    # a-2 was stopped (suspended, its pods taken down) and later ran again to completion.
    assert len(o.stopped_at.get(f"{a}/a-2", [])) == 1, o.stopped_at
    assert f"{a}/a-1" not in o.stopped_at, "a-1, within its nominal quota, is never a victim"
    assert o.peak[(a, "whole-gpus")] == 4000, o.peak


async def test_priority_preemption(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "priority-preemption")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-prio"
    assert o.preemptions() == [(f"{ns}/low-2", f"{ns}/high-1", "InClusterQueue")]
    assert o.admitted_order() == [f"{ns}/low-1", f"{ns}/low-2", f"{ns}/high-1", f"{ns}/low-2"]
    (preempted,) = o.of_type("Preempted", f"{ns}/low-2")
    assert preempted.policy == "withinClusterQueue=LowerPriority", preempted
    events = {e.get("reason") for e in o.events[f"{ns}/low-2"]}
    assert {"Stopped", "Preempted"} <= events, f"low-2's Events: {events}"
    assert f"{ns}/low-1" not in o.stopped_at, "low-1 was admitted first: not the victim"
    assert o.peak[(ns, "whole-gpus")] == 2000, o.peak


async def test_finished_jobs_free_quota(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "finished-frees-quota")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-fin"
    order = [f"{ns}/f-1", f"{ns}/f-2", f"{ns}/f-3"]
    assert o.admitted_order() == order
    # Each next Job started only after the one before had finished (its Job Complete).
    for before, after in itertools.pairwise(order):
        assert o.unsuspended_at[after] >= o.finished_at[before], (
            f"{after} unsuspended at {o.unsuspended_at[after]:.3f}, "
            f"before {before} finished at {o.finished_at[before]:.3f}"
        )
        (admitted,) = o.of_type("Admitted", after)
        (finished,) = o.of_type("Finished", before)
        assert admitted.cause == finished.cause, "admitted by the very event that freed the quota"
    assert o.peak[(ns, "whole-gpus")] == 1000, o.peak


async def test_cohort_priority_tiers(e2e_run: Run) -> None:
    """Kueue's baseline shape in small: a plan made without borrowing is acted on,
    and a preemptor's victims stay preempted until it runs (their quota is held
    for it)."""
    o = await run_scenario(e2e_run, "cohort-priority-tiers")
    assert_pipeline(o)
    a, b, c = (f"{e2e_run.id}-tier-{q}" for q in "abc")
    assert sorted(o.preemptions()) == sorted(
        [
            (f"{a}/small-2", f"{a}/large-1", "InClusterQueue"),
            (f"{a}/small-1", f"{a}/large-1", "InClusterQueue"),
            (f"{a}/small-2", f"{c}/large-2", "InCohortReclamation"),
            (f"{a}/small-1", f"{c}/large-2", "InCohortReclamation"),
            (f"{b}/medium-3", f"{c}/large-2", "InCohortReclamation"),
        ]
    )
    order = o.admitted_order()
    # large-2 ran before any of its victims ran again; b/small-4 (b at its limit) last.
    after = order[order.index(f"{c}/large-2") :]
    assert after[:4] == [f"{c}/large-2", f"{b}/medium-3", f"{a}/small-1", f"{a}/small-2"], order
    assert order[-1] == f"{b}/small-4", order
    assert o.peak[(b, "cpu")] == 6000, o.peak  # nominal 4 + borrowingLimit 2, never more


async def test_parked_head_reclaims(e2e_run: Run) -> None:
    """A Job parked without a victim (its ClusterQueue borrowing) reclaims from a
    borrower once a preemption brings its queue back within its nominal quota
    (issue #16: Kueue requeues it on the eviction; kuota used to leave it parked)."""
    o = await run_scenario(e2e_run, "parked-head-reclaims")
    assert_pipeline(o)
    a, b, c = (f"{e2e_run.id}-parked-{q}" for q in "abc")
    assert o.preemptions() == [
        (f"{a}/big", f"{c}/large", "InCohortReclamation"),
        (f"{b}/two", f"{a}/x", "InCohortReclamation"),
    ]
    order = o.admitted_order()
    after = order[order.index(f"{c}/large") :]
    assert after == [f"{c}/large", f"{a}/x", f"{b}/two", f"{a}/big"], order
    assert o.peak[(a, "cpu")] <= 8000 and o.peak[(b, "cpu")] <= 8000, o.peak
