"""What the dashboard shows, as JSON-ready dicts: no I/O, no clock.

Theory of operation: three inputs, each read the way a CLI command reads it.

- The actuator's Redis read model (``kuota status``'s hash, parsed by
  :func:`kuota.audit.status.parse_status`) gives each ClusterQueue's usage,
  nominal quota and borrowing limit per flavor and resource.
  :func:`queue_views` turns its rows into bars: a resource whose name says
  memory is shown in GiB, any other (devices, extended resources) as a count.
  :func:`cohort_views` sums a cohort's members (the cohort's own quota is not
  in the read model: its pool is the sum of its members' nominal quotas).
- The decision topic: :class:`Reasons` keeps the last ``Inadmissible`` reason
  of each workload still waiting (an ``Admitted``, ``Finished`` or
  ``Deactivated`` forgets it) and :func:`decision_view` is one line of the
  live stream.
- The journal, folded by the services' own fold: ``Fold.pending_workloads``
  gives the queue order, exactly as ``kuota explain`` reports positions
  (:func:`pending_views`; 1-based, like ``explain`` for people).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kuota.audit.status import QueueStatus, queue_fields
from kuota.events.schema import Decision

__all__ = [
    "GIB",
    "Reasons",
    "cohort_views",
    "decision_view",
    "display",
    "pending_views",
    "queue_views",
]

GIB = 1024**3
MILLI = 1000
_FORGET = frozenset({"Admitted", "Finished", "Deactivated"})


def display(resource: str, milli: int | None) -> float | None:
    """A quantity in milli-units as people read it: GiB for memory, else a count."""
    if milli is None:
        return None
    if "memory" in resource:
        return round(milli / MILLI / GIB, 3)
    return round(milli / MILLI, 3)


def unit(resource: str) -> str:
    return "GiB" if "memory" in resource else "count"


def _bar(flavor: str, resource: str, usage: int, nominal: int | None, borrowing: int | None) -> Any:
    limit = None
    if nominal is not None and borrowing is not None:
        limit = nominal + borrowing
    return {
        "flavor": flavor,
        "resource": resource,
        "unit": unit(resource),
        "usage": display(resource, usage),
        "nominal": display(resource, nominal),
        "borrowing_limit": display(resource, borrowing),  # None: unlimited (or unknown)
        "limit": display(resource, limit),  # nominal + borrowing limit
        "borrowed": display(resource, max(0, usage - nominal) if nominal is not None else 0),
    }


def queue_views(queues: Iterable[QueueStatus]) -> list[dict[str, Any]]:
    """Each ClusterQueue with its bars, sorted by name (as ``parse_status`` gives them)."""
    return [
        {
            **queue_fields(q),
            "bars": [
                _bar(r.flavor, r.resource, r.usage, r.nominal, r.borrowing_limit)
                for r in q.resources
            ],
        }
        for q in queues
    ]


def cohort_views(queues: Iterable[QueueStatus]) -> list[dict[str, Any]]:
    """Each cohort: its members and, per flavor and resource, their summed usage
    against their summed nominal quota."""
    members: dict[str, list[QueueStatus]] = {}
    for q in queues:
        if q.cohort is not None:
            members.setdefault(q.cohort, []).append(q)
    out = []
    for cohort, qs in sorted(members.items()):
        usage: dict[tuple[str, str], int] = {}
        nominal: dict[tuple[str, str], int | None] = {}
        for q in qs:
            for r in q.resources:
                fr = (r.flavor, r.resource)
                usage[fr] = usage.get(fr, 0) + r.usage
                have = nominal.get(fr, 0)
                nominal[fr] = None if have is None or r.nominal is None else have + r.nominal
        out.append(
            {
                "name": cohort,
                "members": [q.name for q in qs],
                "bars": [
                    _bar(f, r, usage[(f, r)], nominal.get((f, r)), None) for f, r in sorted(usage)
                ],
            }
        )
    return out


@dataclass(slots=True)
class Reasons:
    """The last ``Inadmissible`` reason of each workload not admitted since."""

    last: dict[str, Decision] = field(default_factory=dict)

    def apply(self, d: Decision) -> None:
        if d.workload is None:
            return
        if d.type == "Inadmissible":
            self.last[d.workload] = d
        elif d.type in _FORGET:
            self.last.pop(d.workload, None)


def pending_views(
    queued: Iterable[tuple[str, list[tuple[str, str]]]], reasons: Reasons
) -> list[dict[str, Any]]:
    """Rows of the pending table from (ClusterQueue, its queue in order of
    ``Fold.pending_workloads``): position 1-based in the ClusterQueue."""
    rows = []
    for cq, queue in queued:
        for index, (key, local_queue) in enumerate(queue):
            namespace, _, name = key.partition("/")
            why = reasons.last.get(key)
            rows.append(
                {
                    "workload": key,
                    "namespace": namespace,
                    "name": name,
                    "cluster_queue": cq,
                    "local_queue": local_queue,
                    "position": index + 1,
                    "queued": len(queue),
                    "reason": why.reason if why else None,
                    "message": why.message if why else None,
                    "reason_at": why.at if why else None,
                }
            )
    return rows


def decision_view(d: Decision, offset: int | None = None) -> dict[str, Any]:
    """One line of the live stream."""
    return {
        "offset": offset,
        "id": d.id,
        "at": d.at,
        "type": d.type,
        "workload": d.workload,
        "cluster_queue": d.cluster_queue,
        "reason": d.reason,
        "message": d.message,
        "preemptor": d.preemptor,
        "usage": d.usage,
        "object": d.object,
    }
