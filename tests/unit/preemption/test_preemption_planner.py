"""kuota.core.preemption.planner: the preemption service's planner over a fold in
plans mode (one plan per waiting head, again after a stale one)."""

from __future__ import annotations

from builders.driver import kinds
from builders.manifests import job
from preemption_builders import plans_setup

from kuota.core.preemption.planner import Planner


def test_the_planner_writes_a_plan_once_and_again_after_a_stale_one() -> None:
    d = plans_setup()
    planner = Planner()
    d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    (event,) = planner.plans(d.fold, based_on="e1", at=5)
    assert event.id == "plan/ns/high/e1" and event.victims == ["ns/low-2"]
    assert planner.plans(d.fold, based_on="e2", at=5) == []  # in flight: not repeated
    # Before it is folded, low-2 finishes and low-1 changes nothing: the plan is stale.
    d.finish("ns/low-2", at=6)  # room: high is admitted without preemption
    out = d.feed(event)
    assert out == []
    assert planner.folded(event, d.fold) is False  # its head no longer waits
    assert planner.in_flight() == 0


def test_a_stale_plan_leaves_the_head_waiting_and_the_planner_searches_again() -> None:
    d = plans_setup()
    planner = Planner()
    d.apply(job("high", namespace="ns", gpus=8, priority="high", created=5), at=5)
    (stale,) = planner.plans(d.fold, based_on="e1", at=5)
    assert sorted(stale.victims) == ["ns/low-1", "ns/low-2"]
    d.finish("ns/low-2", at=6)  # before the plan is folded: one victim is gone
    assert d.feed(stale) == []
    assert d.fold.awaits_plan("ns/high")
    assert planner.folded(stale, d.fold) is True  # search again
    (fresh,) = planner.plans(d.fold, based_on="e3", at=7)
    assert fresh.victims == ["ns/low-1"]
    out = d.feed(fresh)
    assert kinds(out)[0] == ("Preempted", "ns/low-1")
    assert ("Admitted", "ns/high") in kinds(out)
    # The requeued victim may preempt in its turn: search again for it at once.
    assert d.fold.plans_awaited() == ("ns/low-1",)
    assert planner.folded(fresh, d.fold) is True
    (empty,) = planner.plans(d.fold, based_on="e4", at=7)
    assert empty.preemptor == "ns/low-1" and empty.victims == []
    d.feed(empty)
    assert planner.folded(empty, d.fold) is False, "nobody waits any more"
