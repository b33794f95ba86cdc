"""A small journal and its recorded decisions, for the audit's unit tests.

``Journal().queues().jobs(6).finish("j0").tick()`` builds journal events for
one ResourceFlavor ``gpu-a``, a ClusterQueue ``cq-gpu`` of 4 GPUs (optionally
in a cohort) and a LocalQueue ``lq`` in ``team-a``; ``.records()`` gives them
as :class:`JournalRecord` with Kafka-like offsets (gaps of 1 every 3 records,
as transaction markers leave), and :func:`recorded` folds them the way the
admission service does (``Fold(preemption="plans")``) and returns the
decisions as they would be on the decision topic. :func:`preempting_journal`
is a journal in which a high-priority Job preempts, with the preemption
service's plans written into it as the service writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from builders.journal import journaled_job, upserted
from builders.manifests import cluster_queue, flavor, local_queue, priority_class

from kuota.audit.replay import JournalRecord, RecordedDecision
from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.events.schema import (
    Decision,
    JournalEvent,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
)
from kuota.sim.planning import PreemptionService

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
NS = "team-a"


def _cluster_queue(
    name: str, gpus: int, cohort: str | None, *, within: str | None = None
) -> dict[str, Any]:
    return cluster_queue(
        name,
        gpus=gpus,
        flavor="gpu-a",
        cohort=cohort,
        cohort_field="cohortName",
        within=within,
        resource_version="1",
    )


@dataclass
class Journal:
    events: list[JournalEvent] = field(default_factory=list)
    t: float = T0
    n_jobs: int = 0

    def _at(self) -> float:
        self.t += 1.0
        return self.t

    def add(self, event: JournalEvent) -> Journal:
        self.events.append(event)
        return self

    def queues(
        self, *, gpus: int = 4, cohort: str | None = None, within: str | None = None
    ) -> Journal:
        self.add(upserted(flavor("gpu-a", spec={}, resource_version="1"), self._at()))
        self.add(upserted(_cluster_queue("cq-gpu", gpus, cohort, within=within), self._at()))
        if cohort:
            self.add(upserted(_cluster_queue("cq-other", 2, cohort), self._at()))
        lq = local_queue("lq", namespace=NS, cluster_queue="cq-gpu", resource_version="1")
        return self.add(upserted(lq, self._at()))

    def job(
        self, name: str, gpus: int = 1, *, queue: str = "lq", priority: str | None = None
    ) -> Journal:
        at = self._at()
        self.n_jobs += 1
        manifest = journaled_job(
            name, namespace=NS, gpus=gpus, created=at, queue=queue, priority=priority
        )
        return self.add(upserted(manifest, at))

    def priorities(self) -> Journal:
        self.add(upserted(priority_class("low", value=10, resource_version="1"), self._at()))
        return self.add(
            upserted(priority_class("high", value=100, resource_version="1"), self._at())
        )

    def with_plans(self) -> Journal:
        """The journal as it is once the preemption service has run: after each
        event, the plans it writes (``kuota.sim.planning``, the service's fold
        and planner), at the event's instant, and the actuator's WorkloadStopped
        for each stop (its pods gone at once)."""
        service = PreemptionService()
        admission = Fold(preemption="plans")  # its stops, which the actuator answers
        out: list[JournalEvent] = []
        pending = list(self.events)
        while pending:
            event = pending.pop(0)
            out.append(event)
            stops: list[JournalEvent] = [
                WorkloadStopped(
                    id=f"workloadstopped/{d.id}",
                    at=d.at,
                    workload=d.workload or "",
                    uid=d.uid or "",
                    decision_id=d.id,
                )
                for d in admission.apply(event, offset=len(out) - 1)
                if d.type in ("Preempted", "Evicted", "Deactivated")
            ]
            plans = service.after(event, offset=len(out) - 1)
            pending[:0] = [*plans, *stops]  # the actuator reports once the pods are gone
        self.events = out
        return self

    def jobs(self, n: int, gpus: int = 1) -> Journal:
        for _ in range(n):
            self.job(f"j{self.n_jobs}", gpus)
        return self

    def finish(self, name: str) -> Journal:
        return self.add(
            WorkloadFinished(
                id=f"finished/{NS}/{name}/uid-{name}", at=self._at(), namespace=NS, name=name
            )
        )

    def tick(self) -> Journal:
        at = self._at()
        return self.add(Tick(id=f"tick@{at}", at=at))

    def records(self) -> list[JournalRecord]:
        return records(self.events)


def records(events: list[JournalEvent]) -> list[JournalRecord]:
    """Offsets with a gap after every third record (a transaction marker)."""
    out: list[JournalRecord] = []
    offset = 0
    for i, ev in enumerate(events):
        out.append(JournalRecord(offset, ev))
        offset += 2 if i % 3 == 2 else 1
    return out


def fold_all(recs: list[JournalRecord], *, preemption: str = PLANS) -> list[Decision]:
    """The decisions the admission service writes for these records (its mode)."""
    fold = Fold(preemption=preemption)
    out: list[Decision] = []
    for r in recs:
        if r.event is not None:
            out += fold.apply(r.event, offset=r.offset)
    return out


def as_recorded(decisions: list[Decision], topic: str = "t.decisions") -> list[RecordedDecision]:
    return [RecordedDecision(f"{topic}[0]@{i}", d) for i, d in enumerate(decisions)]


def recorded(recs: list[JournalRecord]) -> list[RecordedDecision]:
    return as_recorded(fold_all(recs))


def busy_journal() -> Journal:
    """A mix of Admitted, Inadmissible and Finished, with an event that makes two
    decisions (a finish that admits a waiting job)."""
    j = Journal().queues().jobs(6, gpus=1).jobs(2, gpus=2)
    return j.tick().finish("j0").finish("j1").tick().finish("j2").jobs(2, gpus=1).tick()


def preempting_journal() -> Journal:
    """Two low Jobs fill the 4 GPUs; a high one preempts the later (a plan), the
    victim waits (an empty plan); a finish lets it back in."""
    j = Journal().priorities().queues(gpus=4, within="LowerPriority")
    j.job("low-1", 2, priority="low").job("low-2", 2, priority="low").tick()
    j.job("high-1", 2, priority="high").tick().finish("low-1").tick()
    return j.with_plans()
