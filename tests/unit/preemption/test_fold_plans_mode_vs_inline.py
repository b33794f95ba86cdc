"""Plans mode against inline mode, at the fold (docs/design/plans-mode.md).

- An empty plan sets its head aside as a failed inline search does. Found by
  running the reference scenarios in both modes (``kuota simulate --preemption
  plans``, tests/unit/sim/test_sim_planning.py): after an empty plan the
  head's *group* kept the ``WaitingForPreemptionPlan`` verdict, so a victim
  requeued into that parked group later was told it waited for a plan that no
  one would write (it awaited none), where inline mode gives the quota reason.
- The inherent difference: a cycle with a Preempt head and another head that
  fits. Inline mode preempts and admits the preemptor first; plans mode sets
  the preemptor aside, admits the other head, and the plan (searched on the
  state after that admission) preempts next. Same outcome, another order.
"""

from __future__ import annotations

from builders.driver import Driver, kinds
from builders.manifests import (
    cluster_queue,
    flavor,
    job,
    local_queue,
    priority_class,
)

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision

WAITING = "WaitingForPreemptionPlan"


def setup(mode: str, *, strategy: str | None = None) -> Driver:
    d = Driver(Fold(preemption=mode))
    queue = cluster_queue("a", gpus=8, within="LowerPriority")
    if strategy is not None:
        queue["spec"]["queueingStrategy"] = strategy
    d.apply(
        flavor("h100"),
        priority_class("low", value=10),
        priority_class("high", value=100),
        queue,
        local_queue("lq", namespace="ns", cluster_queue="a"),
    )
    d.apply(
        job("low-1", namespace="ns", gpus=4, priority="low"),
        job("low-2", namespace="ns", gpus=4, priority="low"),
    )
    return d


def plan_now(d: Driver, *, at: float) -> list[Decision]:
    """What the preemption service writes for the fold's state, folded back."""
    out: list[Decision] = []
    while plans := d.fold.preemption_plans():
        for plan in plans:
            out += d.plan(plan.preemptor, list(plan.victims), at=at)
    return out


def reasons(decisions: list[Decision], key: str) -> list[str | None]:
    return [x.reason for x in decisions if x.workload == key and x.type == "Inadmissible"]


def test_a_victim_requeued_into_a_group_whose_plan_was_empty_gets_the_quota_reason() -> None:
    d = setup("plans")
    d.apply(job("high-1", namespace="ns", gpus=4, priority="high", created=5), at=5)
    out = plan_now(d, at=5)  # high-1 preempts low-2; low-2 waits, then its plan is empty
    assert ("Admitted", "ns/high-1") in kinds(out)
    assert reasons(out, "ns/low-2") == [WAITING, "InsufficientQuota"]
    d.apply(job("high-2", namespace="ns", gpus=4, priority="high", created=10), at=10)
    out = plan_now(d, at=10)  # high-2 preempts low-1, requeued into low-2's parked group
    assert kinds(out)[:5] == [
        ("Preempted", "ns/low-1"),
        ("Requeued", "ns/low-1"),
        ("Inadmissible", "ns/high-2"),  # WaitingForStoppedWorkloads
        ("QuotaReleased", "ns/low-1"),  # its pods gone (the driver: at once)
        ("Admitted", "ns/high-2"),
    ]
    # low-1's quota going back sends the parked group to search again (Kueue
    # requeues on an eviction): low-1, its head now, really awaits a plan, and
    # the empty plan gives it the quota reason. It is not left "waiting for a
    # preemption plan" that nobody will write.
    *_, verdict = [x for x in out if x.type == "Inadmissible" and x.workload == "ns/low-1"]
    assert reasons(out, "ns/low-1") == [WAITING, "InsufficientQuota"]
    assert not d.fold.awaits_plan("ns/low-1")
    assert verdict.reason == "InsufficientQuota", verdict.message
    assert "preemption possible" in (verdict.message or "")


def test_after_the_fix_plans_mode_says_what_inline_mode_says() -> None:
    inline, plans = setup("inline"), setup("plans")
    for at, name in ((5, "high-1"), (10, "high-2"), (15, "high-3")):
        inline.apply(job(name, namespace="ns", gpus=4, priority="high", created=at), at=at)
        plans.apply(job(name, namespace="ns", gpus=4, priority="high", created=at), at=at)
        plan_now(plans, at=at)
    for key in ("ns/high-1", "ns/high-2"):
        inline.finish(key, at=20)
        plans.finish(key, at=20)
        plan_now(plans, at=20)

    def outcome(ds: list[Decision]) -> list[tuple[float, str, str | None, str | None]]:
        return [(x.at, x.type, x.workload, x.reason) for x in ds if x.reason != WAITING]

    assert outcome(plans.decisions) == outcome(inline.decisions)
    assert any(x.reason == WAITING for x in plans.decisions)  # plans mode did wait


def test_strict_fifo_an_empty_plan_reblocks_the_queue_with_the_quota_reason() -> None:
    d = setup("plans", strategy="StrictFIFO")
    out = d.apply(job("same", namespace="ns", gpus=4, priority="low", created=5), at=5)
    assert reasons(out, "ns/same") == [WAITING]
    out = plan_now(d, at=5)
    assert reasons(out, "ns/same") == ["InsufficientQuota"]
    assert not d.fold.awaits_plan("ns/same")
    # The queue stays blocked at its head: a later, smaller job of the same
    # priority does not pass it (StrictFIFO), and is not told to wait for a plan.
    out = d.apply(job("later", namespace="ns", gpus=1, priority="low", created=6), at=6)
    assert ("Admitted", "ns/later") not in kinds(out)
    assert WAITING not in reasons(out, "ns/later")
    d.finish("ns/low-1", at=7)
    assert d.fold.workload_state("ns/same") == "Admitted"


def cohort_setup(mode: str) -> Driver:
    """b-1 borrows 2 of a's 4; a-2 (needs a's 4: reclaim) and b-2 (fits, borrowing)
    wait for their priority class, which arrives in one event: two heads, one cycle."""
    d = Driver(Fold(preemption=mode))
    d.apply(
        flavor("h100"),
        priority_class("low", value=10),
        cluster_queue("a", gpus=4, cohort="pool", reclaim="Any"),
        cluster_queue("b", gpus=4, cohort="pool"),
        local_queue("lq", namespace="na", cluster_queue="a"),
        local_queue("lq", namespace="nb", cluster_queue="b"),
    )
    d.apply(job("b-1", namespace="nb", gpus=6, priority="low"))
    d.apply(
        job("a-2", namespace="na", gpus=4, priority="high", created=1),
        job("b-2", namespace="nb", gpus=1, priority="high", created=2),
        at=2,
    )
    return d


def test_a_cycle_with_a_preemptor_and_a_fitting_head_decides_alike_once_it_waits() -> None:
    """Inline, the preemptor now waits for its victim's pods too, so the fitting
    head of the same cycle is admitted first in both modes (before quota was kept
    until the pods were gone, inline admitted the preemptor first)."""
    inline = cohort_setup("inline").apply(priority_class("high", value=100), at=10)
    d = cohort_setup("plans")
    plans = d.apply(priority_class("high", value=100), at=10)
    plans += plan_now(d, at=10)
    assert kinds(inline) == [
        ("Preempted", "nb/b-1"),
        ("Requeued", "nb/b-1"),
        ("Inadmissible", "na/a-2"),  # WaitingForStoppedWorkloads
        ("Admitted", "nb/b-2"),
        ("QuotaReleased", "nb/b-1"),
        ("Admitted", "na/a-2"),
        ("Inadmissible", "nb/b-1"),
    ]
    assert kinds(plans) == [
        ("Inadmissible", "na/a-2"),  # WaitingForPreemptionPlan
        ("Admitted", "nb/b-2"),  # the other head goes first
        ("Preempted", "nb/b-1"),  # the plan, searched after b-2's admission
        ("Requeued", "nb/b-1"),
        ("Inadmissible", "na/a-2"),  # WaitingForStoppedWorkloads
        ("QuotaReleased", "nb/b-1"),
        ("Admitted", "na/a-2"),
        ("Inadmissible", "nb/b-1"),
    ]
    assert plans[0].reason == WAITING
    assert inline[2].reason == plans[4].reason == "WaitingForStoppedWorkloads"

    def admitted(ds: list[Decision]) -> dict[str | None, list[str] | None]:
        return {x.workload: x.victims for x in ds if x.type == "Admitted"}

    assert admitted(plans) == admitted(inline) == {"na/a-2": ["nb/b-1"], "nb/b-2": None}
    assert sorted(kinds(plans[1:])) == sorted(kinds(inline))
