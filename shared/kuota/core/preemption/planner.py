"""The preemption service's side of plans mode: which plans to write, and when.

Theory of operation: the preemption service folds the same journal as
admission, in ``preemption="plans"`` mode, so its fold knows the same heads
awaiting a plan. After a batch :meth:`Planner.plans` gives one plan per
awaiting head (an empty one when no victims would make room), skipping a head
whose identical plan is *in flight* (written, not yet folded back), so a burst
of ticks does not repeat it. :meth:`Planner.folded` forgets a plan that came
back and says whether to search again: its head still waits (a stale plan), or
the plan made another head wait (a requeued victim) with no plan in flight.
Plan ids are ``plan/<preemptor>/<based_on>``, ``based_on`` being the last
event the search had folded. The in-flight memory is not fold state: after a
restart a plan may be written twice, and the second is stale when folded.
"""

from __future__ import annotations

from typing import Protocol

from kuota.core.preemption.classical import Plan
from kuota.events.schema import PreemptionPlan


class PlanningFold(Protocol):
    def preemption_plans(self) -> list[Plan]: ...

    def awaits_plan(self, key: str) -> bool: ...

    def plans_awaited(self) -> tuple[str, ...]: ...


class Planner:
    __slots__ = ("_in_flight",)

    def __init__(self) -> None:
        self._in_flight: dict[str, tuple[str, ...]] = {}  # preemptor -> victims written

    def plans(self, fold: PlanningFold, *, based_on: str, at: float) -> list[PreemptionPlan]:
        """The plans to write now, as journal events."""
        out: list[PreemptionPlan] = []
        for plan in fold.preemption_plans():
            if self._in_flight.get(plan.preemptor) == plan.victims:
                continue
            self._in_flight[plan.preemptor] = plan.victims
            out.append(
                PreemptionPlan(
                    id=f"plan/{plan.preemptor}/{based_on}",
                    at=at,
                    preemptor=plan.preemptor,
                    victims=list(plan.victims),
                    reasons=dict(plan.reasons),
                    based_on=based_on,
                )
            )
        return out

    def folded(self, event: PreemptionPlan, fold: PlanningFold) -> bool:
        """A plan came back through the journal (and was folded): True if the
        search must run again — its head still awaits a plan (it was stale), or
        the plan made another head wait (a requeued victim that may preempt in
        its turn) for which no plan is in flight."""
        if self._in_flight.get(event.preemptor) == tuple(event.victims):
            del self._in_flight[event.preemptor]
        if fold.awaits_plan(event.preemptor):
            return True
        return any(key not in self._in_flight for key in fold.plans_awaited())

    def in_flight(self) -> int:
        return len(self._in_flight)
