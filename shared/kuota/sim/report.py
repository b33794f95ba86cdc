"""The human summary of a simulation run (``kuota simulate`` stderr).

Theory of operation: after the run, the ClusterQueues table of ``kuota
status`` (``kuota.status.render.quota_table``) over ``Fold.summary()``: a row
per (ClusterQueue, flavor, resource) with usage, nominal quota and borrowing
limit, what is borrowed, admitted and pending workloads on the ClusterQueue's
first row; then the decision totals by type and how the run ended. A run
that settles ends with every job finished and every usage at 0, so the table
also shows the *peak* usage, tracked from the decisions (``PeakUsage``: an
admission adds its usage, its end takes it away). With ``--preemption plans``
a last line counts the plans the simulated preemption service wrote and the
preemptions they decided (``plans_line``). It is for people only: the
machine-readable output is stdout's JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table

from kuota.core.fold.fold import ClusterQueueSummary
from kuota.events.schema import DECISION_TYPES, Decision
from kuota.quantity import QuantityError, parse_quantity
from kuota.sim.duration import format_seconds
from kuota.sim.planning import PlanCounts
from kuota.status.render import UsageKey, quota_table

_RELEASES = frozenset({"Finished", "Preempted", "Evicted", "Deactivated"})


class PeakUsage:
    """Concurrent usage per (ClusterQueue, flavor, resource), from decisions."""

    def __init__(self) -> None:
        self._held: dict[str, dict[UsageKey, int]] = {}
        self._current: dict[UsageKey, int] = {}
        self.peak: dict[UsageKey, int] = {}

    def observe(self, decision: Decision) -> None:
        key = decision.workload
        if key is None:
            return
        if decision.type in _RELEASES or decision.type == "Admitted":
            for usage_key, amount in self._held.pop(key, {}).items():
                self._current[usage_key] -= amount
        if decision.type != "Admitted" or decision.cluster_queue is None:
            return
        held: dict[UsageKey, int] = {}
        for flavor, resources in sorted((decision.usage or {}).items()):
            for resource, quantity in sorted(resources.items()):
                try:
                    amount = parse_quantity(quantity)
                except QuantityError:
                    continue
                usage_key = (decision.cluster_queue, flavor, resource)
                held[usage_key] = held.get(usage_key, 0) + amount
        self._held[key] = held
        for usage_key, amount in held.items():
            now = self._current.get(usage_key, 0) + amount
            self._current[usage_key] = now
            if now > self.peak.get(usage_key, 0):
                self.peak[usage_key] = now


def summary_table(
    summaries: Sequence[ClusterQueueSummary], *, peaks: Mapping[UsageKey, int] | None = None
) -> Table:
    """The ClusterQueues table, with the peak usage of the run."""
    return quota_table(summaries, peaks=peaks or {})


def render_summary(
    summaries: Sequence[ClusterQueueSummary],
    *,
    counts: Mapping[str, int],
    end: float,
    events: int,
    settled: bool,
    peaks: Mapping[UsageKey, int] | None = None,
    notes: Sequence[str] = (),
    console: Console | None = None,
) -> None:
    """Print the table and totals (to stderr unless a console is given)."""
    if console is None:
        # Not a terminal (a pipe, a CI log): wide enough not to truncate names.
        console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    if summaries:
        console.print(summary_table(summaries, peaks=peaks))
    else:
        console.print("no ClusterQueues")
    known = [t for t in DECISION_TYPES if counts.get(t)]
    others = sorted(t for t in counts if t not in DECISION_TYPES)
    totals = ", ".join(f"{t} {counts[t]}" for t in [*known, *others]) or "none"
    console.print(f"decisions: {totals}")
    ending = "settled" if settled else "stopped"
    console.print(f"{ending} at {format_seconds(end)}s after {events} events")
    for note in notes:
        console.print(note)


def plans_line(counts: PlanCounts, *, preempted: int) -> str:
    """``preemption plans: 3 written (1 empty, 0 stale); 2 preemptions planned by the
    preemption service``."""
    return (
        f"preemption plans: {counts.written} written ({counts.empty} empty, "
        f"{counts.stale} stale); {preempted} preemption{'' if preempted == 1 else 's'} "
        f"planned by the preemption service"
    )
