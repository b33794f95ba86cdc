"""Manifest builders and a driver for fold-level preemption tests.

``cq("a", gpu=8, cohort="pool", within="LowerPriority")`` is a ClusterQueue
manifest with one flavor ``h100`` covering ``nvidia.com/gpu``; quotas are
``n`` or ``(n, borrowing)``. ``job("ns", "j", gpu=4, priority="high", at=5)``
is a Job created at ``at`` with the queue label ``lq``. :class:`Driver` feeds
them to a :class:`~kuota.core.fold.fold.Fold` as journal events with increasing ids
and keeps every decision.
"""

from __future__ import annotations

import copy
from typing import Any

from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectUpserted,
    PodsReady,
    PreemptionPlan,
    Tick,
    WorkloadFinished,
)

GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"


def flavor(name: str = "h100") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cq(
    name: str,
    *,
    gpu: int | tuple[int, int],
    cohort: str | None = None,
    within: str | None = None,
    reclaim: str | None = None,
    borrow: str | None = None,
    threshold: int | None = None,
    weight: str | None = None,
) -> dict[str, Any]:
    nominal, borrowing = gpu if isinstance(gpu, tuple) else (gpu, None)
    quota: dict[str, Any] = {"name": GPU, "nominalQuota": nominal}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [quota]}]}
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    preemption: dict[str, Any] = {}
    if within:
        preemption["withinClusterQueue"] = within
    if reclaim:
        preemption["reclaimWithinCohort"] = reclaim
    if borrow:
        preemption["borrowWithinCohort"] = {"policy": borrow}
        if threshold is not None:
            preemption["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    if preemption:
        spec["preemption"] = preemption
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def lq(namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def wpc(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def config(**sections: Any) -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **sections}


def job(
    namespace: str,
    name: str,
    *,
    gpu: int,
    priority: str | None = None,
    at: float = 0.0,
    uid: str | None = None,
    active: bool = True,
) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "lq"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    annotations = {"kuota.dev/created-at": str(at)}
    if not active:
        annotations["kuota.dev/active"] = "false"
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "x", "resources": {"requests": {GPU: gpu}}}
                    ],
                }
            }
        },
    }


class Driver:
    def __init__(self, fold: Fold | None = None) -> None:
        self.fold = fold or Fold()
        self.t = 0.0
        self.n = 0
        self.events: list[JournalEvent] = []
        self.decisions: list[Decision] = []

    def _id(self, at: float | None) -> tuple[str, float]:
        self.n += 1
        if at is not None:
            self.t = at
        return f"e{self.n}", self.t

    def feed(self, event: JournalEvent) -> list[Decision]:
        self.events.append(event)
        out = self.fold.apply(event, offset=len(self.events) - 1)
        self.decisions.extend(out)
        return out

    def apply(self, *objs: dict[str, Any], at: float | None = None) -> list[Decision]:
        out: list[Decision] = []
        for o in objs:
            eid, t = self._id(at)
            out += self.feed(ObjectUpserted(id=eid, at=t, object=copy.deepcopy(o)))
        return out

    def finish(self, key: str, *, at: float | None = None) -> list[Decision]:
        eid, t = self._id(at)
        ns, _, name = key.partition("/")
        return self.feed(WorkloadFinished(id=eid, at=t, namespace=ns, name=name))

    def ready(self, key: str, *, ready: bool = True, at: float | None = None) -> list[Decision]:
        eid, t = self._id(at)
        ns, _, name = key.partition("/")
        return self.feed(PodsReady(id=eid, at=t, namespace=ns, name=name, ready=ready))

    def tick(self, at: float) -> list[Decision]:
        eid, t = self._id(at)
        return self.feed(Tick(id=eid, at=t))

    def plan(
        self, preemptor: str, victims: list[str], *, at: float | None = None
    ) -> list[Decision]:
        eid, t = self._id(at)
        return self.feed(PreemptionPlan(id=eid, at=t, preemptor=preemptor, victims=victims))


def kinds(decisions: list[Decision]) -> list[tuple[str, str | None]]:
    return [(d.type, d.workload) for d in decisions]
