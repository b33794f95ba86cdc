"""ClusterQueue status from the decision stream: a small pure read model.

Theory of operation
-------------------
The actuator folds every decision into :class:`ClusterQueueReadModel` and, from
it, writes what ``kubectl get clusterqueues`` shows (Kueue's
``status.pendingWorkloads``, ``reservingWorkloads``, ``admittedWorkloads``,
``flavorsReservation`` and ``flavorsUsage``) and the ``kuota status`` hash in
Redis. It remembers, per workload, only where it is:

- ``Admitted`` charges the decision's ``usage`` to its ClusterQueue and takes
  the workload out of pending;
- ``Preempted`` / ``Evicted`` give the usage back and count the workload as
  pending again in that ClusterQueue (Kueue requeues evicted workloads);
  ``Requeued`` and ``Inadmissible`` count it as pending (``active`` /
  ``inadmissible``, Kueue's metric statuses);
- ``Finished`` and ``Deactivated`` forget it (after giving back its usage).

It sees only what decisions say: a workload that is queued and admitted in the
same fold step is never pending here, and a workload waiting at the head of
its queue without an ``Inadmissible`` decision is not counted. The fold's own
``summary()`` is exact; this model is what an outside reader of the decision
topic can know.

Borrowing needs the ClusterQueue's nominal quotas, which decisions do not
carry: :meth:`ClusterQueueReadModel.status` takes the parsed ClusterQueue (the
actuator watches them) and reports ``borrowed = max(0, usage - nominal)`` per
flavor and resource; without it, ``borrowed`` is 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kuota.api.types import ClusterQueue
from kuota.core.quantity import QuantityError, format_quantity, parse_quantity
from kuota.events.schema import Decision

__all__ = ["ClusterQueueReadModel", "WorkloadPlace", "statuses"]

FlavorResource = tuple[str, str]

PENDING_ACTIVE = "active"
PENDING_INADMISSIBLE = "inadmissible"


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


class ClusterQueueReadModel:
    """Per-ClusterQueue usage and workload counts, folded from decisions."""

    def __init__(self) -> None:
        self._workloads: dict[str, WorkloadPlace] = {}
        self._queues: dict[str, _Queue] = {}
        self.decisions = 0

    # ------------------------------------------------------------------ fold

    def apply(self, decision: Decision) -> None:
        self.decisions += 1
        key = decision.workload
        if key is None:
            return  # Rejected objects are not workloads
        t = decision.type
        if t == "Admitted":
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
        """Every ClusterQueue a decision has named, sorted."""
        return sorted(self._queues)

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

    def status(self, cq: str, *, spec: ClusterQueue | None = None) -> dict[str, Any]:
        """Kueue's ClusterQueue status fields for ``cq``.

        ``flavorsUsage`` lists the flavors and resources of ``spec``'s resource
        groups in their order (zero when unused), then any flavor/resource the
        model charged that the spec does not list.
        """
        usage = self.usage(cq)
        nominal: dict[FlavorResource, int] = {}
        order: list[FlavorResource] = []
        if spec is not None:
            for group in spec.resource_groups:
                for fq in group.flavors:
                    for rq in fq.resources:
                        fr = (fq.name, rq.name)
                        nominal[fr] = rq.nominal_quota
                        order.append(fr)
        order.extend(sorted(fr for fr in usage if fr not in nominal))
        flavors: dict[str, list[dict[str, str]]] = {}  # flavor -> its resources, in order
        for fr in order:
            total = usage.get(fr, 0)
            borrowed = max(0, total - nominal[fr]) if fr in nominal else 0
            flavors.setdefault(fr[0], []).append(
                {
                    "name": fr[1],
                    "total": format_quantity(total),
                    "borrowed": format_quantity(borrowed),
                }
            )

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


def _usage(decision: Decision) -> tuple[tuple[FlavorResource, int], ...]:
    out: list[tuple[FlavorResource, int]] = []
    for flavor, resources in sorted((decision.usage or {}).items()):
        for resource, qty in sorted(resources.items()):
            try:
                out.append(((flavor, resource), parse_quantity(qty)))
            except QuantityError:
                continue  # a decision we cannot read charges nothing here
    return tuple(out)


def statuses(
    model: ClusterQueueReadModel, specs: Iterable[ClusterQueue]
) -> dict[str, dict[str, Any]]:
    """``status`` for every ClusterQueue in ``specs`` and every one the model knows."""
    by_name = {s.name: s for s in specs}
    names = sorted(set(by_name) | set(model.cluster_queues()))
    return {n: model.status(n, spec=by_name.get(n)) for n in names}
