"""The plan-latency metric of the admission shell (``kuota_preemption_plan_latency_seconds``).

The folder (a real ``Fold(preemption="plans")``) is fed journal records live
with a hand-driven clock; the plans come from a second real fold and the
core's :class:`~kuota.core.preemption.planner.Planner`, as the preemption service writes
them. The observer is the real :class:`AdmissionMetrics`; the only stand-in is
the clock.
"""

from __future__ import annotations

from admission_helpers import TOPICS, rec, records
from preemption_journal import WAITING, Journal, within_cluster_queue

from kuota.core.fold.fold import Fold
from kuota.core.preemption.planner import Planner
from kuota.events.schema import (
    JournalEvent,
    ObjectDeleted,
    PreemptionPlan,
    WorkloadStopped,
    parse_decision,
)
from kuota_admission.metrics import AdmissionMetrics
from kuota_admission.records import JournalFolder

METRIC = "kuota_preemption_plan_latency_seconds"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rig:
    """Admission's folder and the preemption side's fold, fed the same journal."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.metrics = AdmissionMetrics()
        self.folder = JournalFolder(topics=TOPICS, observer=self.metrics, clock=self.clock)
        self.planning = Fold(preemption="plans")
        self.planner = Planner()
        self.offset = 0
        self.decisions: list[tuple[str, str | None, str | None]] = []

    def live(self, events: list[JournalEvent], *, at: float | None = None) -> None:
        if at is not None:
            self.clock.now = at
        out = self.folder.handle(records(events, first=self.offset))
        for i, e in enumerate(events):
            self.planning.apply(e, offset=self.offset + i)
            if isinstance(e, PreemptionPlan):
                self.planner.folded(e, self.planning)
        self.offset += len(events)
        stopped: list[JournalEvent] = []
        for r in out:
            d = parse_decision(r.value)
            self.decisions.append((d.type, d.workload, d.reason))
            if d.type in ("Preempted", "Evicted", "Deactivated") and d.workload:
                # the actuator: the stopped Job's pods are gone at once
                stopped.append(
                    WorkloadStopped(
                        id=f"workloadstopped/{d.id}",
                        at=d.at,
                        workload=d.workload,
                        uid=d.uid or "",
                        decision_id=d.id,
                    )
                )
        if stopped:
            self.live(stopped)

    def replay(self, events: list[JournalEvent]) -> None:
        self.folder.replay(records(events, first=self.offset))
        for i, e in enumerate(events):
            self.planning.apply(e, offset=self.offset + i)
        self.offset += len(events)

    def plans(self) -> list[PreemptionPlan]:
        last = f"e{self.offset}"
        return self.planner.plans(self.planning, based_on=last, at=self.planning.now)

    def count(self) -> float:
        return self.metrics.registry.get_sample_value(f"{METRIC}_count") or 0.0

    def total(self) -> float:
        return self.metrics.registry.get_sample_value(f"{METRIC}_sum") or 0.0

    def bucket(self, le: str) -> float:
        return self.metrics.registry.get_sample_value(f"{METRIC}_bucket", {"le": le}) or 0.0


def _waiting_head() -> tuple[Journal, list[JournalEvent]]:
    j = Journal()
    setup = within_cluster_queue(j)
    return j, setup


def test_latency_runs_from_the_first_wait_to_the_preemption() -> None:
    rig = Rig()
    j, setup = _waiting_head()
    rig.live(setup, at=1000.0)
    rig.live(j.job("high", namespace="team-a", gpus=2, priority="high"), at=1010.0)
    assert ("Inadmissible", "team-a/high", WAITING) in rig.decisions
    assert rig.folder.fold.awaits_plan("team-a/high")
    # Re-announced after 5 s of event time: the wait still counts from 1010.
    rig.live(j.tick(6.0), at=1012.0)
    assert rig.decisions[-1][:2] == ("Inadmissible", "team-a/high")
    assert rig.count() == 0.0
    (plan,) = rig.plans()
    assert plan.preemptor == "team-a/high" and plan.victims == ["team-a/low"]
    rig.live([plan], at=1012.25)
    assert ("Preempted", "team-a/low", "InClusterQueue") in rig.decisions
    assert ("Admitted", "team-a/high", None) in rig.decisions
    assert rig.count() == 1.0
    assert rig.total() == 2.25
    assert rig.bucket("2.5") == 1.0 and rig.bucket("1.0") == 0.0


def test_the_victims_wait_ending_in_an_empty_plan_is_not_counted() -> None:
    rig = Rig()
    j, setup = _waiting_head()
    rig.live(setup + j.job("high", namespace="team-a", gpus=2, priority="high"), at=1000.0)
    (plan,) = rig.plans()
    rig.live([plan], at=1003.0)
    assert rig.count() == 1.0 and rig.total() == 3.0
    # The requeued victim is a Preempt head in turn; its plan is empty.
    assert rig.folder.fold.awaits_plan("team-a/low")
    assert len(rig.folder.plan_waits) == 1
    (empty,) = rig.plans()
    assert empty.preemptor == "team-a/low" and empty.victims == []
    rig.live([empty], at=1100.0)
    assert rig.decisions[-1] == ("Inadmissible", "team-a/low", "InsufficientQuota")
    assert len(rig.folder.plan_waits) == 0, "the ended wait is forgotten"
    assert rig.count() == 1.0


def test_a_wait_begun_before_a_restart_is_not_counted() -> None:
    rig = Rig()
    j, setup = _waiting_head()
    rig.replay(setup + j.job("high", namespace="team-a", gpus=2, priority="high"))  # silent
    assert rig.folder.fold.awaits_plan("team-a/high")
    (plan,) = rig.plans()
    rig.live([plan], at=2000.0)
    assert ("Admitted", "team-a/high", None) in rig.decisions, "the plan is acted on"
    assert rig.count() == 0.0, "no wall time is known for a wait begun in the replay"


def test_a_head_that_stops_waiting_starts_a_new_wait_later() -> None:
    rig = Rig()
    j, setup = _waiting_head()
    rig.live(setup + j.job("high", namespace="team-a", gpus=2, priority="high"), at=1000.0)
    # The Job is deleted and created again: the first wait ends unreported.
    gone = rig.folder.fold.awaits_plan("team-a/high")
    j.t += 1
    rig.live(
        [ObjectDeleted(id="del/high", at=j.t, kind="Job", name="high", namespace="team-a")],
        at=1001.0,
    )
    assert gone and not rig.folder.fold.awaits_plan("team-a/high")
    assert len(rig.folder.plan_waits) == 0
    rig.live(j.job("high", namespace="team-a", gpus=2, priority="high"), at=1050.0)
    (plan,) = rig.plans()
    rig.live([plan], at=1050.5)
    assert rig.count() == 1.0 and rig.total() == 0.5, "timed from the new wait"


def test_a_stale_plan_keeps_the_clock_running() -> None:
    rig = Rig()
    j, setup = _waiting_head()
    rig.live(setup + j.job("high", namespace="team-a", gpus=2, priority="high"), at=1000.0)
    # A plan naming a victim that is not running: admission's validation
    # rejects it and the head keeps waiting.
    j.t += 1
    stale = PreemptionPlan(
        id="plan/team-a/high/x",
        at=j.t,
        preemptor="team-a/high",
        victims=["team-a/gone"],
        based_on="x",
    )
    rig.live([stale], at=1001.0)
    assert rig.folder.fold.awaits_plan("team-a/high")
    assert not any(d[0] == "Preempted" for d in rig.decisions)
    (plan,) = rig.plans()
    assert plan.victims == ["team-a/low"]
    rig.live([plan], at=1002.0)
    assert rig.count() == 1.0 and rig.total() == 2.0


def test_metric_is_exposed_with_its_name() -> None:
    from prometheus_client import generate_latest

    rig = Rig()
    rig.folder.handle([rec(0, b"not json")])
    text = generate_latest(rig.metrics.registry).decode()
    assert f"# TYPE {METRIC} histogram" in text
    assert f'{METRIC}_bucket{{le="0.5"}} 0.0' in text
