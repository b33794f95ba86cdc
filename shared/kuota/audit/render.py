"""Text for people: decision one-liners, divergences, histories, status tables.

Theory of operation: every function returns rich renderables (``Text``,
``Table``) or plain strings and prints nothing, so the commands choose the
console (stdout for the command's answer, stderr for progress) and tests read
the text without a terminal. Scripts use ``--json`` instead; nothing here is
a stable format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kuota.audit.explain import PREEMPTOR, Explanation
from kuota.audit.replay import AuditResult, Divergence
from kuota.audit.status import QueueStatus, cohort_totals
from kuota.events.schema import Decision, JournalEvent
from kuota.quantity import format_quantity
from kuota.status.render import quota_line, quota_table

__all__ = [
    "decision_text",
    "divergence_text",
    "event_text",
    "explanation",
    "status_tables",
    "when",
]

STYLES = {
    "Admitted": "green",
    "Preempted": "red",
    "Evicted": "red",
    "Requeued": "cyan",
    "Finished": "blue",
    "Inadmissible": "yellow",
    "Deactivated": "magenta",
    "Rejected": "magenta",
    "Suspended": "red",
}


def when(at: float) -> str:
    """Event time for people: UTC for epoch times, ``t=…s`` for scenario times."""
    if at >= 1e8:
        dt = datetime.fromtimestamp(at, UTC)
        text = dt.strftime("%Y-%m-%dT%H:%M:%S")
        if dt.microsecond:
            text += f".{dt.microsecond // 1000:03d}"
        return text + "Z"
    return f"t={at:g}s"


def _usage(usage: dict[str, dict[str, str]] | None) -> str:
    return "; ".join(
        f"{flavor}: " + ", ".join(f"{r}={q}" for r, q in sorted(res.items()))
        for flavor, res in sorted((usage or {}).items())
    )


def decision_text(d: Decision, *, offset: bool = True) -> Text:
    """One line: when, type, whom, where, and what it says."""
    text = Text()
    text.append(when(d.at), style="dim")
    text.append("  ")
    text.append(f"{d.type:<12}", style=STYLES.get(d.type, ""))
    text.append(" ")
    text.append(d.workload or d.object or "-", style="bold")
    if d.cluster_queue:
        text.append(f"  cq={d.cluster_queue}")
    details: list[str] = []
    if d.type == "Admitted" and d.usage:
        details.append(_usage(d.usage))
    if d.nodes:
        placed = sorted({n for ns in d.nodes.values() for n in ns})
        details.append("on " + ", ".join(placed))
    if d.preemptor:
        by = f"by {d.preemptor}"
        if d.policy:
            by += f", policy {d.policy}"
        details.append(by)
    if d.reason:
        details.append(f"{d.reason}: {d.message}" if d.message else d.reason)
    elif d.message:
        details.append(d.message)
    if d.victims:
        details.append("victims " + ", ".join(d.victims))
    if d.requeue_at is not None:
        details.append(f"requeue at {when(d.requeue_at)}")
    if details:
        text.append("  " + " · ".join(details))
    if offset and d.cause_offset is not None:
        text.append(f"  @{d.cause_offset}", style="dim")
    return text


def event_text(event: JournalEvent | None, offset: int | None) -> str:
    where = f"journal offset {offset}" if offset is not None else "journal offset unknown"
    if event is None:
        return f"{where}: (event not kept; `kuota journal export` and look it up)"
    return f"{where}: {event.type} {event.id} (at {when(event.at)})"


def _compact(d: Decision | None) -> str:
    if d is None:
        return "-"
    return json.dumps(d.model_dump(mode="json", exclude_none=True), separators=(",", ":"))


def divergence_text(div: Divergence) -> Group:
    lines: list[RenderableType] = [
        Text(f"DIVERGENCE at decision #{div.index} ({div.kind}): {div.note}", style="bold red"),
        Text("  event:    " + event_text(div.event, div.offset)),
    ]
    exp = Text("  expected: ")
    exp.append_text(decision_text(div.expected) if div.expected else Text("(none)"))
    rec = Text("  recorded: ")
    rec.append_text(decision_text(div.recorded) if div.recorded else Text("(none)"))
    if div.where:
        rec.append(f"  [{div.where}]", style="dim")
    lines += [exp, rec]
    if div.expected is not None and div.recorded is not None:
        for name in div.fields:
            a = getattr(div.expected, name)
            b = getattr(div.recorded, name)
            lines.append(Text(f"  differs:  {name}: expected {a!r}, recorded {b!r}"))
    lines.append(Text("  expected JSON: " + _compact(div.expected)))
    lines.append(Text("  recorded JSON: " + _compact(div.recorded)))
    if div.event is not None:
        lines.append(Text("  event JSON:    " + div.event.model_dump_json()))
    return Group(*lines)


def result_text(result: AuditResult, *, source: str) -> Text:
    verdict = "identical" if result.identical else "DIVERGENT"
    style = "bold green" if result.identical else "bold red"
    text = Text()
    text.append(f"audit: {verdict}", style=style)
    span = (
        f"offsets {result.first_offset}..{result.last_offset}"
        if result.first_offset is not None
        else "no journal records"
    )
    text.append(
        f" — {source}: {result.events} journal records ({span}), "
        f"{result.matched} of {result.expected} recomputed decisions matched "
        f"{result.recorded} recorded"
    )
    extras = []
    if result.skipped:
        extras.append(f"{result.skipped} undecodable records skipped")
    if result.fold_errors:
        extras.append(f"{result.fold_errors} fold errors")
    if result.ignored:
        extras.append(f"{result.ignored} recorded decisions outside the compared range")
    if extras:
        text.append(" (" + ", ".join(extras) + ")")
    return text


# ---------------------------------------------------------------------- explain


def explanation(ex: Explanation) -> Group:
    state = ex.state or "unknown to the fold"
    head = Text()
    head.append(ex.workload, style="bold")
    head.append(f"  state: {state}")
    if ex.as_of_offset is not None:
        head.append(f"  (as of journal offset {ex.as_of_offset}", style="dim")
        head.append(f", {when(ex.as_of)})" if ex.as_of is not None else ")", style="dim")
    lines: list[RenderableType] = [head]
    if not ex.steps:
        lines.append(Text("  no decisions about this workload"))
    for step in ex.steps:
        line = Text("  ")
        if step.role == PREEMPTOR:
            line.append("(as preemptor) ", style="dim")
        line.append_text(decision_text(step.decision))
        lines.append(line)
        for i, s in enumerate(step.quota):
            label = "quota after: " if i == 0 else "  cohort:    "
            lines.append(Text(f"      {label}{quota_line(s)}", style="dim"))
    w = ex.waiting
    if w is not None:
        if w.position is not None:
            # People count from 1 (1 = the head); --json keeps Kueue's 0-based
            # positionInClusterQueue / positionInLocalQueue.
            local = (
                f"position {w.local_position + 1} in LocalQueue {w.local_queue}"
                if w.local_position is not None
                else f"LocalQueue {w.local_queue}"
            )
            text = (
                f"  waiting: position {w.position + 1} of {w.queued} in ClusterQueue "
                f"{w.cluster_queue} (1 is the next to be tried), {local}"
            )
            if w.ahead:
                text += "; just ahead: " + ", ".join(w.ahead)
        else:
            text = "  waiting: in no ClusterQueue's queue yet"
        lines.append(Text(text, style="yellow"))
        if w.fair_sharing:
            order = ", ".join(
                f"{name} {'inf' if usage == float('inf') else f'{usage:.3f}'}"
                for name, usage, _ in w.fair_sharing
            )
            lines.append(
                Text(f"  admission fair sharing (lowest usage first): {order}", style="yellow")
            )
        if w.reason:
            since = f" (since {when(w.reason_at)})" if w.reason_at is not None else ""
            lines.append(Text(f"  why{since}: {w.reason}: {w.message or ''}", style="yellow"))
    return Group(*lines)


# ---------------------------------------------------------------------- status


def status_tables(queues: Sequence[QueueStatus]) -> Group:
    """The ClusterQueues table (``kuota.status.render``), then usage per cohort."""
    parts: list[RenderableType] = [quota_table(queues)]
    cohorts = cohort_totals(list(queues))
    if cohorts:
        ct = Table(title="Cohorts", title_justify="left", box=box.SIMPLE_HEAD)
        for column in ("Cohort", "ClusterQueues", "Flavor/Resource", "Usage"):
            ct.add_column(column, no_wrap=True)
        for cohort, totals in sorted(cohorts.items()):
            members = ", ".join(q.name for q in queues if q.cohort == cohort)
            for i, ((flavor, resource), usage) in enumerate(sorted(totals.items())):
                ct.add_row(
                    cohort if i == 0 else "",
                    members if i == 0 else "",
                    f"{flavor}/{resource}",
                    format_quantity(usage),
                )
        parts.append(ct)
    fair = [q for q in queues if q.local_queues]
    if fair:
        ft = Table(
            title="Admission fair sharing (lowest usage goes first)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for column in ("ClusterQueue", "Order", "LocalQueue", "Usage", "Consumed"):
            ft.add_column(column, no_wrap=True)
        for q in fair:
            for i, (name, lq_usage, consumed) in enumerate(q.local_queues):
                ft.add_row(
                    q.name if i == 0 else "",
                    str(i + 1),
                    name,
                    "inf (weight 0)" if lq_usage is None else f"{lq_usage:.3f}",
                    ", ".join(f"{r}={v}" for r, v in consumed) or "-",
                )
        parts.append(ft)
    return Group(*parts)
