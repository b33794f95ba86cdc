"""The preemption service, in-process, for ``kuota simulate --preemption plans``.

Theory of operation: :class:`PreemptionService` keeps the preemption
service's own ``Fold(preemption="plans")``. The engine (``kuota.sim.engine``)
hands it every journal event right after the admission fold applied it
(:meth:`PreemptionService.after`) and appends the plans it answers
(``kuota.core.preemption.planner``) to the simulated journal, applied next, at
the same instant, to both folds, until no plan comes: a preemption service
with no lag. The decisions are the admission fold's; this fold's are dropped,
as the service drops them. A stale plan makes the planner search again; the
same plan :data:`MAX_REPEATS` times in one instant means the two halves of
plans mode disagree for good (a core bug), and the run stops with a
``SimulationError`` instead of looping. Pure, like the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.core.preemption.planner import Planner
from kuota.events.schema import JournalEvent, PreemptionPlan
from kuota.sim.duration import format_seconds
from kuota.sim.scenario import SimulationError

#: The same plan (preemptor and victims) written this often at one instant: a runaway.
MAX_REPEATS = 16


@dataclass(slots=True)
class PlanCounts:
    """What the simulated preemption service wrote (for the run's summary)."""

    written: int = 0  # plans written to the journal
    empty: int = 0  # of which "nothing to preempt"
    stale: int = 0  # plans folded back whose head still waited (searched again)


class PreemptionService:
    """The preemption service's fold and planner (module docstring)."""

    def __init__(self, fold: Fold | None = None, planner: Planner | None = None) -> None:
        self.fold = fold if fold is not None else Fold(preemption=PLANS)
        if self.fold.preemption_mode != PLANS:
            raise ValueError("the preemption service folds in plans mode")
        self.planner = planner if planner is not None else Planner()
        self.counts = PlanCounts()
        self._instant: float | None = None
        self._repeats: dict[tuple[str, tuple[str, ...]], int] = {}

    def after(self, event: JournalEvent, *, offset: int) -> list[JournalEvent]:
        """Fold a journal event the admission fold just applied; the plans to write next."""
        fold = self.fold
        fold.apply(event, offset=offset)
        if isinstance(event, PreemptionPlan):
            self.planner.folded(event, fold)  # the search below runs after every event
            if fold.awaits_plan(event.preemptor):
                self.counts.stale += 1  # rejected: its head still waits
        plans = self.planner.plans(fold, based_on=event.id, at=fold.now)
        if not plans:
            return []
        if fold.now != self._instant:
            self._instant = fold.now
            self._repeats.clear()
        for plan in plans:
            key = (plan.preemptor, tuple(plan.victims))
            seen = self._repeats.get(key, 0) + 1
            self._repeats[key] = seen
            if seen > MAX_REPEATS:
                victims = ", ".join(plan.victims) or "nothing"
                raise SimulationError(
                    f"the preemption service wrote the plan for {plan.preemptor} "
                    f"(preempt {victims}) {seen} times at {format_seconds(fold.now)}s and "
                    f"admission rejected it each time: the two folds disagree"
                )
            self.counts.written += 1
            if not plan.victims:
                self.counts.empty += 1
        out: list[JournalEvent] = list(plans)
        return out


__all__ = ["MAX_REPEATS", "PlanCounts", "PreemptionService"]
