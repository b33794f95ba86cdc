"""A driver that feeds manifests and journal events to a Fold.

Each call wraps its input in a journal event with the next id (``e1``,
``e2``, ...) at time ``at`` (or ``step`` seconds after the event before, 0
unless told), applies it at the next offset, and keeps the event and its
decisions (``events``, ``decisions``). Manifests are copied before they go in, so a test may change
and apply the same dict again; a fluent builder (anything with a manifest in
``.m``) is taken as its manifest.

The actuator is modelled as pods that go at once: after every stop decision
(Preempted, Evicted, Deactivated, Finished with reason Deleted) the driver feeds
its ``WorkloadStopped`` at the same time, as ``kuota simulate`` does, unless
``auto_stop=False`` (then a test calls :meth:`Driver.stopped` itself).
"""

from __future__ import annotations

import copy
from typing import Any

from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    PreemptionPlan,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
)
from kuota.kinds import workload_ref

STOPS = frozenset({"Preempted", "Evicted", "Deactivated"})


def is_stop(d: Decision) -> bool:
    """A decision the actuator answers with WorkloadStopped once the pods are gone."""
    return d.type in STOPS or (d.type == "Finished" and d.reason == "Deleted")


def manifest(x: Any) -> dict[str, Any]:
    """A copy of a manifest, or of a fluent builder's (``.m``)."""
    m: dict[str, Any] = x if isinstance(x, dict) else x.m
    return copy.deepcopy(m)


class Driver:
    """Feeds a Fold with events carrying increasing ids; keeps every decision."""

    def __init__(
        self, fold: Fold | None = None, *, step: float = 0.0, auto_stop: bool = True
    ) -> None:
        self.fold = fold or Fold()
        self.step = step
        self.auto_stop = auto_stop
        self.t = 0.0
        self.n = 0
        self.events: list[JournalEvent] = []
        self.decisions: list[Decision] = []

    def _next(self, at: float | None) -> tuple[str, float]:
        self.n += 1
        self.t = at if at is not None else self.t + self.step
        return f"e{self.n}", self.t

    def feed(self, event: JournalEvent) -> list[Decision]:
        self.events.append(event)
        out = self.fold.apply(event, offset=len(self.events) - 1)
        self.decisions.extend(out)
        if self.auto_stop:
            for d in [d for d in out if is_stop(d)]:
                out += self.stopped(d, at=event.at)
        return out

    def stopped(self, stop: Decision, *, at: float | None = None) -> list[Decision]:
        """The actuator's report that the pods of ``stop``'s Job are gone."""
        assert stop.workload is not None
        self.n += 1
        self.t = at if at is not None else self.t + self.step
        return self.feed(
            WorkloadStopped(
                id=f"e{self.n}",
                at=self.t,
                workload=stop.workload,
                uid=stop.uid or "",
                decision_id=stop.id,
            )
        )

    def apply(self, *objs: Any, at: float | None = None) -> list[Decision]:
        out: list[Decision] = []
        for o in objs:
            eid, t = self._next(at)
            out += self.feed(ObjectUpserted(id=eid, at=t, object=manifest(o)))
        return out

    def delete(
        self, kind: str, name: str, namespace: str = "", *, at: float | None = None
    ) -> list[Decision]:
        eid, t = self._next(at)
        return self.feed(ObjectDeleted(id=eid, at=t, kind=kind, name=name, namespace=namespace))

    def finish(
        self, key: str, *, succeeded: bool = True, at: float | None = None
    ) -> list[Decision]:
        ns, name, workload = _names(key)
        eid, t = self._next(at)
        return self.feed(
            WorkloadFinished(
                id=eid, at=t, namespace=ns, name=name, succeeded=succeeded, workload=workload
            )
        )

    def ready(self, key: str, *, ready: bool = True, at: float | None = None) -> list[Decision]:
        ns, name, workload = _names(key)
        eid, t = self._next(at)
        return self.feed(
            PodsReady(id=eid, at=t, namespace=ns, name=name, ready=ready, workload=workload)
        )

    def tick(self, at: float | None = None) -> list[Decision]:
        eid, t = self._next(at)
        return self.feed(Tick(id=eid, at=t))

    def plan(
        self, preemptor: str, victims: list[str], *, at: float | None = None
    ) -> list[Decision]:
        eid, t = self._next(at)
        return self.feed(PreemptionPlan(id=eid, at=t, preemptor=preemptor, victims=victims))

    def state(self, key: str) -> str | None:
        return self.fold.workload_state(key)

    def usage(self, cluster_queue: str) -> dict[tuple[str, str], int]:
        for s in self.fold.summary():
            if s.name == cluster_queue:
                return {(r.flavor, r.resource): r.usage for r in s.resources if r.usage}
        raise KeyError(cluster_queue)


def _names(key: str) -> tuple[str, str, str | None]:
    """Namespace, name and (for a kind other than a Job) the key of a workload key."""
    ref = workload_ref(key)
    if ref is None or (ref.kind == "Job" and not ref.pod_group):
        ns, _, name = key.partition("/")
        return ns, name, None
    return ref.namespace, ref.name, ref.key


def kinds(decisions: list[Decision]) -> list[tuple[str, str | None]]:
    """Each decision's type and what it is about (its workload, else its object)."""
    return [(d.type, d.workload or d.object) for d in decisions]
