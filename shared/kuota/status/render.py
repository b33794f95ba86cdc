"""ClusterQueue quota for people: the one table and the one line.

Theory of operation: ``kuota status`` (rows from the actuator's Redis
documents) and ``kuota simulate`` (rows from ``Fold.summary``) show the same
:class:`~kuota.core.quota.rows.QuotaRow` the same way: :func:`quota_table`, one
line per (ClusterQueue, flavor, resource) with usage, nominal quota (``?``
when the reader does not know it, ``(+N)`` for a borrowing limit) and what is
borrowed; the simulator adds its peak usage. ``kuota explain`` prints a
ClusterQueue on one line (:func:`quota_line`). Everything returns renderables
or strings and prints nothing; the cell texts come from ``kuota.core.quota.rows``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from rich import box
from rich.table import Table

from kuota.core.quota.rows import QuotaRow, nominal_text, row_line
from kuota.quantity import format_quantity

__all__ = ["QuotaQueue", "UsageKey", "pending_text", "quota_line", "quota_table"]

#: (ClusterQueue, flavor, resource)
UsageKey = tuple[str, str, str]


class QuotaQueue(Protocol):
    """A ClusterQueue with its rows: ``Fold.summary``'s or ``kuota status``'s."""

    @property
    def name(self) -> str: ...
    @property
    def cohort(self) -> str | None: ...
    @property
    def resources(self) -> tuple[QuotaRow, ...]: ...
    @property
    def pending(self) -> int: ...
    @property
    def admitted(self) -> int: ...
    @property
    def pending_by_status(self) -> tuple[tuple[str, int], ...]: ...
    @property
    def problem(self) -> str | None: ...


def pending_text(q: QuotaQueue) -> str:
    """``3``, or ``3 (inadmissible 3)`` when the reader knows why they wait."""
    text = str(q.pending)
    if q.pending_by_status:
        text += " (" + ", ".join(f"{k} {v}" for k, v in q.pending_by_status) + ")"
    return text


def quota_table(
    queues: Sequence[QuotaQueue], *, peaks: Mapping[UsageKey, int] | None = None
) -> Table:
    """ClusterQueue, Cohort, Flavor/Resource, Usage, Nominal, Borrowed, [Peak],
    Admitted, Pending; the ClusterQueue's columns on its first row only."""
    table = Table(title="ClusterQueues", title_justify="left", box=box.SIMPLE_HEAD)
    middle = ["Flavor/Resource", "Usage", "Nominal", "Borrowed"]
    for column in ("ClusterQueue", "Cohort", *middle):
        table.add_column(column, no_wrap=True)
    if peaks is not None:
        table.add_column("Peak", justify="right", no_wrap=True)
        middle.append("Peak")
    table.add_column("Admitted", justify="right")
    table.add_column("Pending", justify="right")
    for q in queues:
        if q.problem is not None:
            cells = [f"unreadable: {q.problem}"] + [""] * (len(middle) - 1)
            table.add_row(q.name, "-", *cells, "", "")
            continue
        pending = pending_text(q)
        rows = q.resources
        if not rows:
            table.add_row(q.name, q.cohort or "-", *["-"] * len(middle), str(q.admitted), pending)
        for i, r in enumerate(rows):
            first = i == 0
            cells = [
                f"{r.flavor}/{r.resource}",
                format_quantity(r.usage),
                nominal_text(r),
                format_quantity(r.borrowed),
            ]
            if peaks is not None:
                cells.append(format_quantity(peaks.get((q.name, r.flavor, r.resource), 0)))
            table.add_row(
                q.name if first else "",
                (q.cohort or "-") if first else "",
                *cells,
                str(q.admitted) if first else "",
                pending if first else "",
                end_section=i == len(rows) - 1,
            )
    return table


def quota_line(q: QuotaQueue) -> str:
    """``cq (cohort pool): h100/nvidia.com/gpu 12/8 (borrowing 4) · admitted 3 · pending 1``."""
    cohort = f" (cohort {q.cohort})" if q.cohort else ""
    body = ", ".join(row_line(r) for r in q.resources) or "no quota"
    return f"{q.name}{cohort}: {body} · admitted {q.admitted} · pending {q.pending}"
