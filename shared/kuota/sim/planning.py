"""The preemption service, in-process, for ``kuota simulate --preemption plans``.

Theory of operation: the services fold in plans mode (``Fold(preemption=
"plans")``): admission sets a head that needs preemption aside, and the
preemption service, folding the same journal in the same mode, writes a
``PreemptionPlan`` back to the journal (``kuota.core.preemption.planner``). To simulate
that, :class:`PreemptionService` keeps the preemption service's own fold; the
engine (``kuota.sim.engine``) hands it every journal event right after the
admission fold applied it (:meth:`PreemptionService.after`), and it answers
with the plans to append to the simulated journal. The engine applies them
next, at the same instant, to the admission fold and back to this object, which
folds them, tells the planner (``Planner.folded``) and asks again, until no plan
is produced: a preemption service with no lag. The decisions are the admission
fold's; this fold's are dropped, as the service drops them.

Both folds see the same events in the same order, so a plan is normally valid
when admission folds it. A plan admission rejects (*stale*) makes the planner
search again; should the same plan come back :data:`MAX_REPEATS` times in one
instant, the two sides disagree for good and the run stops with a
``SimulationError`` instead of looping (a core bug, the two halves of plans mode
not agreeing).

Pure, like the engine: no clock, no randomness.
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
