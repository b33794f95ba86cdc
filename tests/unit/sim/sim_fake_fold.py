"""A tiny stand-in fold for the engine's own timeline tests.

It is *not* the core: one pool of ``capacity`` slots, FIFO admission, each Job
takes ``spec.parallelism`` slots (default 1). With ``ready_timeout`` set it
evicts a workload whose pods are not ready in time and requeues it after
``backoff`` seconds (a timer reported through ``next_wakeup``), enough to
exercise ticks and cancelled runs. Unknown kinds are Rejected; a ``FakeEvict``
object evicts the workload named in its ``spec.workload`` and requeues it at
once. It records every event it applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
    decision_id,
)

KNOWN = {"Job", "ClusterQueue", "LocalQueue", "ResourceFlavor", "Namespace", "FakeEvict"}


@dataclass
class _Workload:
    key: str
    slots: int
    state: str = "Pending"  # Pending | Admitted | Backoff | Finished
    admitted_at: float = 0.0
    ready: bool = False
    requeue_at: float = 0.0
    created_at: str = ""


@dataclass
class FakeFold:
    capacity: int = 1
    ready_timeout: float | None = None
    backoff: float = 10.0
    stuck_wakeup: float | None = None  # a broken fold: always wants this wakeup
    events: list[JournalEvent] = field(default_factory=list)
    offsets: list[int | None] = field(default_factory=list)
    workloads: dict[str, _Workload] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    now: float = 0.0

    def used(self) -> int:
        return sum(w.slots for w in self.workloads.values() if w.state == "Admitted")

    def next_wakeup(self) -> float | None:
        if self.stuck_wakeup is not None:
            return self.stuck_wakeup
        times = [w.requeue_at for w in self.workloads.values() if w.state == "Backoff"]
        if self.ready_timeout is not None:
            times += [
                w.admitted_at + self.ready_timeout
                for w in self.workloads.values()
                if w.state == "Admitted" and not w.ready
            ]
        return min(times) if times else None

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]:
        assert event.at >= self.now, "events must arrive in time order"
        self.events.append(event)
        self.offsets.append(offset)
        self.now = event.at
        out: list[dict[str, Any]] = []
        if isinstance(event, ObjectUpserted):
            self._upsert(event.object, out)
        elif isinstance(event, ObjectDeleted):
            key = f"{event.namespace or 'default'}/{event.name}"
            w = self.workloads.get(key)
            if event.kind == "Job" and w is not None and w.state != "Finished":
                w.state = "Finished"
                out.append({"type": "Finished", "workload": key, "reason": "Deleted"})
        elif isinstance(event, WorkloadFinished):
            key = f"{event.namespace}/{event.name}"
            w = self.workloads[key]
            assert w.state == "Admitted", f"{key} finished while {w.state}"
            w.state = "Finished"
            out.append({"type": "Finished", "workload": key, "reason": "Succeeded"})
        elif isinstance(event, PodsReady):
            w = self.workloads[f"{event.namespace}/{event.name}"]
            assert w.state == "Admitted"
            w.ready = True
        elif not isinstance(event, WorkloadStopped):  # pods gone: time only here
            assert isinstance(event, Tick)
        self._timers(out)
        self._admit(out)
        return [
            Decision(id=decision_id(event.id, i), cause=event.id, at=event.at, **d)
            for i, d in enumerate(out)
        ]

    def _upsert(self, obj: dict[str, Any], out: list[dict[str, Any]]) -> None:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind not in KNOWN:
            out.append(
                {"type": "Rejected", "object": f"{kind} {meta.get('name')}", "reason": "Unknown"}
            )
            return
        if kind == "FakeEvict":  # test hook: evict spec.workload and requeue it at once
            w = self.workloads[obj["spec"]["workload"]]
            if w.state == "Admitted":
                w.state = "Pending"
                out.append({"type": "Evicted", "workload": w.key, "reason": "Test"})
                out.append({"type": "Requeued", "workload": w.key, "reason": "Test"})
            return
        if kind != "Job":
            return
        key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
        if key in self.workloads:
            return
        slots = int((obj.get("spec") or {}).get("parallelism", 1))
        created = (meta.get("annotations") or {}).get("kuota.dev/created-at", "")
        self.workloads[key] = _Workload(key=key, slots=slots, created_at=created)
        self.order.append(key)

    def _timers(self, out: list[dict[str, Any]]) -> None:
        for key in self.order:
            w = self.workloads[key]
            if w.state == "Backoff" and w.requeue_at <= self.now:
                w.state = "Pending"
                out.append({"type": "Requeued", "workload": key, "reason": "BackoffFinished"})
            if (
                self.ready_timeout is not None
                and w.state == "Admitted"
                and not w.ready
                and w.admitted_at + self.ready_timeout <= self.now
            ):
                w.state = "Backoff"
                w.requeue_at = self.now + self.backoff
                out.append(
                    {
                        "type": "Evicted",
                        "workload": key,
                        "reason": "PodsReadyTimeout",
                        "requeue_at": w.requeue_at,
                    }
                )

    def _admit(self, out: list[dict[str, Any]]) -> None:
        for key in self.order:
            w = self.workloads[key]
            if w.state != "Pending":
                continue
            if self.used() + w.slots > self.capacity:
                break  # strict FIFO
            w.state, w.admitted_at, w.ready = "Admitted", self.now, False
            out.append(
                {
                    "type": "Admitted",
                    "workload": key,
                    "cluster_queue": "cq",
                    "usage": {"pool": {"slots": str(w.slots)}},
                }
            )
