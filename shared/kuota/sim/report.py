"""The human summary of a simulation run (``kuota simulate`` stderr).

Theory of operation: after the run, one rich table with a row per
(ClusterQueue, flavor, resource) from ``Fold.summary()`` (usage against
nominal quota and borrowing limit, admitted and pending workloads on the
ClusterQueue's first row), then the decision totals by type and how the run
ended. A run that settles ends with every job finished and every usage at 0,
so the table also shows the *peak* usage, tracked from the decisions
(``PeakUsage``: an admission adds its usage, its end takes it away). With
``--preemption plans`` a last line counts the plans the simulated preemption
service wrote and the preemptions they decided (``plans_line``). It is for
people only: the machine-readable output is stdout's JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from kuota.core.fold.fold import ClusterQueueSummary
from kuota.events.schema import DECISION_TYPES, Decision
from kuota.quantity import QuantityError, format_quantity, parse_quantity
from kuota.sim.duration import format_seconds
from kuota.sim.planning import PlanCounts

#: (ClusterQueue, flavor, resource)
UsageKey = tuple[str, str, str]
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


def quota_text(*, usage: int, nominal: int, borrowing_limit: int | None) -> str:
    """``usage/nominal``, with ``(+limit)`` when borrowing is capped."""
    text = f"{format_quantity(usage)}/{format_quantity(nominal)}"
    if borrowing_limit is not None:
        text += f" (+{format_quantity(borrowing_limit)})"
    return text


def summary_table(
    summaries: Sequence[ClusterQueueSummary], *, peaks: Mapping[UsageKey, int] | None = None
) -> Table:
    peaks = peaks or {}
    table = Table(title="ClusterQueues", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("ClusterQueue", "Cohort", "Flavor/Resource", "Usage/Nominal (+borrow)"):
        table.add_column(column, no_wrap=True)
    table.add_column("Peak", justify="right", no_wrap=True)
    table.add_column("Admitted", justify="right")
    table.add_column("Pending", justify="right")
    for cq in summaries:
        rows = cq.resources or ()
        if not rows:
            table.add_row(
                cq.name, cq.cohort or "-", "-", "-", "-", str(cq.admitted), str(cq.pending)
            )
        for i, r in enumerate(rows):
            first = i == 0
            table.add_row(
                cq.name if first else "",
                (cq.cohort or "-") if first else "",
                f"{r.flavor}/{r.resource}",
                quota_text(usage=r.usage, nominal=r.nominal, borrowing_limit=r.borrowing_limit),
                format_quantity(peaks.get((cq.name, r.flavor, r.resource), 0)),
                str(cq.admitted) if first else "",
                str(cq.pending) if first else "",
                end_section=i == len(rows) - 1,
            )
    return table


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
