"""ClusterQueue status from the decision stream: a small pure read model.

Theory of operation: the actuator folds every decision into
:class:`ClusterQueueReadModel` and, from it, writes what ``kubectl get
clusterqueues`` shows (Kueue's ``pendingWorkloads``, ``reservingWorkloads``,
``admittedWorkloads``, ``flavorsReservation``, ``flavorsUsage``) and the
``kuota status`` hash. Per workload it remembers only where it is: ``Admitted``
charges its ``usage``; ``Preempted`` / ``Evicted`` give it back and count the
workload pending again (``Requeued`` / ``Inadmissible`` too: ``active`` /
``inadmissible``); ``Finished`` / ``Deactivated`` forget it. A stop of an
admitted workload (Preempted, Evicted, Deactivated, Finished Deleted) keeps its
usage as a *drain* until the fold's ``QuotaReleased`` for that stop (its pods
are gone; :meth:`~ClusterQueueReadModel.draining` lists those still kept, which
a restarted actuator watches again). Quota is the
fold's own ``QuotaChanged`` (the version the fold charged admissions against,
never a reading of the live object), kept as
:class:`~kuota.core.quota.rows.QuotaRow` rows (:meth:`~ClusterQueueReadModel.rows`).
It knows only what decisions say; ``Fold.summary`` is exact
(docs/design/quota-view.md: why, and what an outside reader cannot know).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from kuota.core.quota.rows import QuotaRow, rows_from_quota, usage_fields
from kuota.events.schema import Decision
from kuota.quantity import QuantityError, parse_quantity

__all__ = ["ClusterQueueReadModel", "Drain", "QuotaRow", "WorkloadPlace", "statuses"]

FlavorResource = tuple[str, str]

PENDING_ACTIVE = "active"
PENDING_INADMISSIBLE = "inadmissible"
_STOPS = frozenset({"Preempted", "Evicted", "Deactivated"})


@dataclass(frozen=True, slots=True)
class Drain:
    """A stop whose quota is kept until the pods of its Job are gone."""

    stop_id: str
    workload: str
    uid: str
    cluster_queue: str
    usage: tuple[tuple[FlavorResource, int], ...]
    at: float


@dataclass(slots=True)
class WorkloadPlace:
    cluster_queue: str | None
    admitted: bool
    pending_status: str | None = None  # active | inadmissible while pending
    usage: tuple[tuple[FlavorResource, int], ...] = ()


@dataclass(slots=True)
class _Queue:
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    admitted: int = 0
    pending: dict[str, int] = field(default_factory=dict)  # status -> count
    quota: tuple[QuotaRow, ...] | None = None  # from QuotaChanged (usage 0); None: none seen
    cohort: str | None = None
    # admission fair sharing, from LocalQueueUsage: LocalQueue -> (consumed,
    # weighted usage, the decision's time)
    local_queues: dict[str, tuple[dict[str, str], float | None, float]] = field(
        default_factory=dict
    )


class ClusterQueueReadModel:
    """Per-ClusterQueue usage and workload counts, folded from decisions."""

    def __init__(self) -> None:
        self._workloads: dict[str, WorkloadPlace] = {}
        self._queues: dict[str, _Queue] = {}
        self._drains: dict[str, Drain] = {}  # stop decision id -> the usage it keeps
        self.decisions = 0

    # ------------------------------------------------------------------ fold

    def apply(self, decision: Decision) -> None:
        self.decisions += 1
        t = decision.type
        if t == "QuotaChanged":
            self._set_quota(decision)
            return
        if t == "LocalQueueUsage":
            self._local_queue_usage(decision)
            return
        key = decision.workload
        if key is None:
            return  # Rejected objects are not workloads
        if t in _STOPS or (t == "Finished" and decision.reason == "Deleted"):
            self._drain(key, decision)
        if t == "QuotaReleased":
            self._released(decision)
        elif t == "Admitted":
            self._leave(key)
            cq = decision.cluster_queue
            usage = _usage(decision)
            self._workloads[key] = WorkloadPlace(cq, True, None, usage)
            if cq is not None:
                q = self._queue(cq)
                q.admitted += 1
                for fr, qty in usage:
                    q.usage[fr] = q.usage.get(fr, 0) + qty
        elif t in ("Preempted", "Evicted", "Requeued"):
            place = self._workloads.get(key)
            cq = decision.cluster_queue or (place.cluster_queue if place else None)
            self._leave(key)
            self._pend(key, cq, PENDING_ACTIVE)
        elif t == "Inadmissible":
            self._leave(key)
            self._pend(key, decision.cluster_queue, PENDING_INADMISSIBLE)
        elif t in ("Finished", "Deactivated"):
            self._leave(key)
            self._workloads.pop(key, None)

    def _local_queue_usage(self, decision: Decision) -> None:
        name = (decision.object or "").removeprefix("LocalQueue ")
        cq = decision.cluster_queue
        if not name or cq is None:
            return
        for other, q in self._queues.items():  # it moved to another ClusterQueue
            if other != cq:
                q.local_queues.pop(name, None)
        self._queue(cq).local_queues[name] = (
            dict(decision.consumed or {}),
            decision.weighted_usage,
            decision.at,
        )

    def _drain(self, key: str, decision: Decision) -> None:
        """A stop of an admitted workload: its usage stays charged as a drain."""
        place = self._workloads.get(key)
        if place is None or not place.admitted or place.cluster_queue is None:
            return
        cq = place.cluster_queue
        self._drains[decision.id] = Drain(
            decision.id, key, decision.uid or "", cq, place.usage, decision.at
        )
        q = self._queue(cq)
        for fr, qty in place.usage:
            q.usage[fr] = q.usage.get(fr, 0) + qty  # _leave takes the admission's off

    def _released(self, decision: Decision) -> None:
        drain = self._drains.pop(decision.stop_id or "", None)
        if drain is None:
            return
        q = self._queue(drain.cluster_queue)
        for fr, qty in drain.usage:
            left = q.usage.get(fr, 0) - qty
            if left:
                q.usage[fr] = left
            else:
                q.usage.pop(fr, None)

    def draining(self) -> list[Drain]:
        """The stops whose quota is still kept (no QuotaReleased yet), oldest first."""
        return list(self._drains.values())

    def _set_quota(self, decision: Decision) -> None:
        name = decision.cluster_queue
        if name is None:
            return
        if decision.reason == "Deleted" or decision.quota is None:
            q = self._queues.get(name)
            if q is None:
                return
            q.quota, q.cohort = None, None
            if not (q.usage or q.admitted or q.pending):
                del self._queues[name]
            return
        q = self._queue(name)
        q.quota = rows_from_quota(name, decision.quota)
        q.cohort = decision.cohort

    def _queue(self, name: str) -> _Queue:
        q = self._queues.get(name)
        if q is None:
            q = self._queues[name] = _Queue()
        return q

    def _leave(self, key: str) -> None:
        """Take a workload's contribution out of its ClusterQueue."""
        place = self._workloads.get(key)
        if place is None or place.cluster_queue is None:
            return
        q = self._queue(place.cluster_queue)
        if place.admitted:
            q.admitted -= 1
            for fr, qty in place.usage:
                left = q.usage.get(fr, 0) - qty
                if left:
                    q.usage[fr] = left
                else:
                    q.usage.pop(fr, None)
        elif place.pending_status is not None:
            n = q.pending.get(place.pending_status, 0) - 1
            if n > 0:
                q.pending[place.pending_status] = n
            else:
                q.pending.pop(place.pending_status, None)
        place.admitted = False
        place.pending_status = None
        place.usage = ()

    def _pend(self, key: str, cq: str | None, status: str) -> None:
        self._workloads[key] = WorkloadPlace(cq, False, status)
        if cq is not None:
            q = self._queue(cq)
            q.pending[status] = q.pending.get(status, 0) + 1

    # ------------------------------------------------------------------ reads

    def cluster_queues(self) -> list[str]:
        """Every ClusterQueue a decision has named (and not deleted while idle), sorted."""
        return sorted(self._queues)

    def quota(self, cq: str) -> tuple[QuotaRow, ...] | None:
        """The quota the fold decides against (None: no QuotaChanged for ``cq``)."""
        q = self._queues.get(cq)
        return q.quota if q else None

    def cohort(self, cq: str) -> str | None:
        q = self._queues.get(cq)
        return q.cohort if q else None

    def local_queues(self, cq: str) -> list[tuple[str, float | None, dict[str, str]]]:
        """Admission fair sharing: the ClusterQueue's LocalQueues as (name, weighted
        usage or None for weight 0, consumed resources), in the order their
        workloads go (lowest usage first, weight 0 last, then by name)."""
        q = self._queues.get(cq)
        if q is None:
            return []
        rows = [(name, usage, consumed) for name, (consumed, usage, _) in q.local_queues.items()]
        return sorted(rows, key=lambda r: (r[1] is None, r[1] or 0.0, r[0]))

    def local_queue_statuses(self) -> dict[str, dict[str, Any]]:
        """``namespace/name`` -> Kueue's LocalQueue ``status.fairSharing`` for every
        LocalQueue admission fair sharing sampled: ``weightedShare`` (0: kuota
        has no fair sharing between LocalQueues) and ``admissionFairSharingStatus``
        (``consumedResources``, ``lastUpdate`` the sample's event time)."""
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(self._queues):
            for lq, (consumed, _, at) in sorted(self._queues[name].local_queues.items()):
                out[lq] = {
                    "weightedShare": 0,
                    "admissionFairSharingStatus": {
                        "consumedResources": dict(consumed),
                        "lastUpdate": rfc3339(at),
                    },
                }
        return out

    def workload(self, key: str) -> WorkloadPlace | None:
        return self._workloads.get(key)

    def usage(self, cq: str) -> dict[FlavorResource, int]:
        q = self._queues.get(cq)
        return dict(q.usage) if q else {}

    def admitted(self, cq: str) -> int:
        q = self._queues.get(cq)
        return q.admitted if q else 0

    def pending(self, cq: str) -> dict[str, int]:
        q = self._queues.get(cq)
        return dict(q.pending) if q else {}

    def rows(self, cq: str) -> tuple[QuotaRow, ...]:
        """The quota in force (the last ``QuotaChanged``) in its order, with usage
        (zero when unused), then any flavor/resource the model charged that the
        quota does not list (nominal unknown: nothing counts as borrowed)."""
        usage = self.usage(cq)
        rows = [
            replace(r, usage=usage.pop((r.flavor, r.resource), 0)) for r in self.quota(cq) or ()
        ]
        rows += [QuotaRow(cq, f, r, None, usage=used) for (f, r), used in sorted(usage.items())]
        return tuple(rows)

    def status(self, cq: str) -> dict[str, Any]:
        """Kueue's ClusterQueue status fields for ``cq``: ``flavorsUsage`` (and
        ``flavorsReservation``) list :meth:`rows` by flavor."""
        flavors: dict[str, list[dict[str, str]]] = {}  # flavor -> its resources, in order
        for row in self.rows(cq):
            flavors.setdefault(row.flavor, []).append(usage_fields(row))

        def listing() -> list[dict[str, Any]]:
            return [
                {"name": name, "resources": [dict(r) for r in res]} for name, res in flavors.items()
            ]

        admitted = self.admitted(cq)
        return {
            "pendingWorkloads": sum(self.pending(cq).values()),
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
            "flavorsReservation": listing(),
            "flavorsUsage": listing(),
        }


def rfc3339(at: float) -> str:
    """Event time as Kubernetes writes a ``metav1.Time`` (seconds, UTC)."""
    return datetime.fromtimestamp(int(at), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage(decision: Decision) -> tuple[tuple[FlavorResource, int], ...]:
    out: list[tuple[FlavorResource, int]] = []
    for flavor, resources in sorted((decision.usage or {}).items()):
        for resource, qty in sorted(resources.items()):
            try:
                out.append(((flavor, resource), parse_quantity(qty)))
            except QuantityError:
                continue  # a decision we cannot read charges nothing here
    return tuple(out)


def statuses(model: ClusterQueueReadModel) -> dict[str, dict[str, Any]]:
    """``status`` for every ClusterQueue the model knows."""
    return {n: model.status(n) for n in model.cluster_queues()}
