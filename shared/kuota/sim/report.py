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
preemptions they decided (``plans_line``). Objects rejected at the end
(``Fold.rejections``: invalid ClusterQueues, LocalQueues, flavors, Jobs, ...)
follow in a table of their own with the reason, since nothing else in the
table would show them. It is for people only: the machine-readable output is
stdout's JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from rich import box
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


#: Under the ClusterQueues table: what its columns count (Usage, Admitted and
#: Pending are the end state, as in Kueue's ClusterQueue status, not run totals).
TABLE_CAPTION = (
    "Usage, Borrowed, Admitted and Pending: at the end of the run (Admitted: workloads "
    "still holding quota then, Kueue's status.admittedWorkloads); Peak: the most in use "
    "at once. Run totals: the decisions line."
)


def summary_table(
    summaries: Sequence[ClusterQueueSummary], *, peaks: Mapping[UsageKey, int] | None = None
) -> Table:
    """The ClusterQueues table, with the peak usage of the run."""
    table = quota_table(summaries, peaks=peaks or {})
    table.caption = TABLE_CAPTION
    table.caption_justify = "left"
    return table


def rejections_table(rejections: Sequence[tuple[str, str, str]]) -> Table:
    """Objects rejected at the end of the run: object, reason, message."""
    table = Table(title="Rejected", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("Object", no_wrap=True)
    table.add_column("Reason", no_wrap=True)
    table.add_column("Message")
    for obj, reason, message in rejections:
        table.add_row(obj, reason, message)
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
    until: float | None = None,
    rejections: Sequence[tuple[str, str, str]] = (),
) -> None:
    """Print the table and totals (to stderr unless a console is given). ``until``:
    the cut-off of a run stopped by ``--until``; ``rejections``: ``Fold.rejections()``."""
    if console is None:
        # Not a terminal (a pipe, a CI log): wide enough not to truncate names.
        console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    if summaries:
        console.print(summary_table(summaries, peaks=peaks))
    else:
        console.print("no ClusterQueues")
    if rejections:
        console.print(rejections_table(rejections))
    known = [t for t in DECISION_TYPES if counts.get(t)]
    others = sorted(t for t in counts if t not in DECISION_TYPES)
    totals = ", ".join(f"{t} {counts[t]}" for t in [*known, *others]) or "none"
    console.print(f"decisions: {totals}")
    if settled:
        console.print(f"settled at {format_seconds(end)}s after {events} events")
    elif until is not None:
        console.print(
            f"stopped at --until {format_seconds(until)}s after {events} events "
            f"(the last at {format_seconds(end)}s)"
        )
    else:
        console.print(f"stopped at {format_seconds(end)}s after {events} events")
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
