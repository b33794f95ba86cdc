"""``kuota status``: ClusterQueues and cohorts from the actuator's Redis read model.

Theory of operation: the actuator writes, when a ClusterQueue's figures
change, one JSON document per ClusterQueue to the hash
``<instance>:status:clusterqueues`` (:func:`redis_key`): Kueue's status fields
(``flavorsUsage`` ...), ``pendingByStatus``, ``updated_at`` and, Redis only,
``cohort`` and ``quota``. :func:`parse_status` reads each into a
:class:`QueueStatus` whose rows are :class:`~kuota.core.quota.rows.QuotaRow`
(nominal ``None``, shown ``?``, when the document has no quota; ``borrowed``
derived as the actuator derives it); an unreadable document is a row with a
``problem``, never an error. :func:`cohort_totals` sums usage per cohort and
:func:`status_dict` is ``--json``. Nothing here does I/O. Staleness
(``updated_at`` is the last *change*; the actuator's lag bounds the rest) and
the document: docs/design/audit.md ("Status"), docs/design/quota-rows.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kuota.core.quota.rows import QuotaRow, read_quantity, row_json
from kuota.quantity import format_quantity

__all__ = [
    "QueueStatus",
    "cohort_totals",
    "parse_status",
    "queue_fields",
    "redis_key",
    "status_dict",
]


def redis_key(instance: str) -> str:
    """The hash the actuator writes (``kuota_actuator.settings.Config.redis_key``)."""
    return f"{instance}:status:clusterqueues"


@dataclass(frozen=True, slots=True)
class QueueStatus:
    name: str
    cohort: str | None
    admitted: int
    pending: int
    pending_by_status: tuple[tuple[str, int], ...]
    resources: tuple[QuotaRow, ...]  # nominal None: the document does not carry it
    updated_at: float | None
    problem: str | None = None  # a document that could not be read
    # admission fair sharing: (LocalQueue, weighted usage or None for weight 0,
    # consumed resources), in the order their workloads go
    local_queues: tuple[tuple[str, float | None, tuple[tuple[str, str], ...]], ...] = ()


def _queue(name: str, doc: Mapping[str, Any]) -> QueueStatus:
    cq = str(doc.get("name") or name)
    quota: dict[tuple[str, str], Mapping[str, Any]] = {
        (str(q.get("flavor", "")), str(q.get("resource", ""))): q
        for q in doc.get("quota") or []
        if isinstance(q, dict)
    }
    rows: list[QuotaRow] = []
    for flavor in doc.get("flavorsUsage") or []:
        for r in flavor.get("resources") or []:
            fr = (str(flavor.get("name", "")), str(r.get("name", "")))
            q = quota.get(fr, {})
            rows.append(
                QuotaRow(
                    cluster_queue=cq,
                    flavor=fr[0],
                    resource=fr[1],
                    nominal=read_quantity(q.get("nominalQuota")),
                    borrowing_limit=read_quantity(q.get("borrowingLimit")),
                    lending_limit=read_quantity(q.get("lendingLimit")),
                    usage=read_quantity(r.get("total")) or 0,
                )
            )
    by_status = doc.get("pendingByStatus") or {}
    fair: list[tuple[str, float | None, tuple[tuple[str, str], ...]]] = []
    for entry in doc.get("admissionFairSharing") or []:
        if not isinstance(entry, dict):
            continue
        usage = entry.get("weightedUsage")
        consumed = entry.get("consumedResources") or {}
        fair.append(
            (
                str(entry.get("localQueue", "")),
                float(usage) if isinstance(usage, int | float) else None,
                tuple(sorted((str(k), str(v)) for k, v in consumed.items())),
            )
        )
    updated = doc.get("updated_at")
    cohort = doc.get("cohort")
    return QueueStatus(
        name=cq,
        cohort=str(cohort) if cohort else None,
        admitted=int(doc.get("admittedWorkloads") or 0),
        pending=int(doc.get("pendingWorkloads") or 0),
        pending_by_status=tuple(sorted((str(k), int(v)) for k, v in by_status.items())),
        resources=tuple(rows),
        updated_at=float(updated) if isinstance(updated, int | float) else None,
        local_queues=tuple(fair),
    )


def parse_status(raw: Mapping[bytes | str, bytes | str]) -> list[QueueStatus]:
    """The hash's documents as rows, sorted by ClusterQueue name."""
    out: list[QueueStatus] = []
    for field_name, value in raw.items():
        name = field_name.decode() if isinstance(field_name, bytes) else field_name
        try:
            doc = json.loads(value)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            out.append(_queue(name, doc))
        except (ValueError, TypeError, AttributeError) as err:
            out.append(QueueStatus(name, None, 0, 0, (), (), None, problem=str(err)))
    return sorted(out, key=lambda q: q.name)


def cohort_totals(queues: list[QueueStatus]) -> dict[str, dict[tuple[str, str], int]]:
    """Usage per cohort, flavor and resource (ClusterQueues whose cohort is known)."""
    out: dict[str, dict[tuple[str, str], int]] = {}
    for q in queues:
        if q.cohort is None:
            continue
        totals = out.setdefault(q.cohort, {})
        for r in q.resources:
            fr = (r.flavor, r.resource)
            totals[fr] = totals.get(fr, 0) + r.usage
    return out


def queue_fields(q: QueueStatus) -> dict[str, Any]:
    """A ClusterQueue's figures as JSON, without its rows (``--json``, the dashboard)."""
    return {
        "name": q.name,
        "cohort": q.cohort,
        "admitted": q.admitted,
        "pending": q.pending,
        "pending_by_status": dict(q.pending_by_status),
        "updated_at": q.updated_at,
        "problem": q.problem,
        "admission_fair_sharing": [
            {"local_queue": name, "weighted_usage": usage, "consumed": dict(consumed)}
            for name, usage, consumed in q.local_queues
        ],
    }


def status_dict(
    queues: list[QueueStatus], *, key: str, now: float, actuator_lag: int | None
) -> dict[str, Any]:
    changes = [q.updated_at for q in queues if q.updated_at is not None]
    return {
        "key": key,
        "read_at": now,
        "last_change_age_s": round(now - max(changes), 3) if changes else None,
        "actuator_lag": actuator_lag,
        "cluster_queues": [
            {**queue_fields(q), "resources": [row_json(r) for r in q.resources]} for q in queues
        ],
        "cohorts": {
            cohort: [
                {"flavor": f, "resource": r, "usage": format_quantity(v)}
                for (f, r), v in sorted(totals.items())
            ]
            for cohort, totals in sorted(cohort_totals(queues).items())
        },
    }
