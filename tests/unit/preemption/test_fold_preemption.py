"""Preemption, plans, WaitForPodsReady and blockAdmission inside the fold."""

from __future__ import annotations

import copy
import pickle

import pytest
from builders.driver import Driver, kinds
from builders.manifests import (
    cluster_queue,
    configuration,
    flavor,
    job,
    local_queue,
    priority_class,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preemption_builders import plans_setup, within_setup

from kuota.core.fold.fold import Fold
from kuota.core.quota.tree import available
from kuota.events.schema import ActuationFailed, Decision, JournalEvent


def test_inline_preemption_admits_once_the_victims_pods_are_gone() -> None:
    d = Driver(auto_stop=False)
    within_setup(d)
    out = d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    assert kinds(out) == [
        ("Preempted", "ns/low-2"),
        ("Requeued", "ns/low-2"),
        ("Inadmissible", "ns/high"),
    ]
    preempted, _, waiting = out
    assert preempted.preemptor == "ns/high" and preempted.reason == "InClusterQueue"
    assert preempted.policy == "withinClusterQueue=LowerPriority"
    assert preempted.message and "ns/high" in preempted.message
    assert waiting.reason == "WaitingForStoppedWorkloads"
    assert "waiting for 1 stopped workload(s) to stop (ns/low-2)" in (waiting.message or "")
    (summary,) = d.fold.summary()
    assert summary.admitted == 1 and summary.resources[0].usage == 8000, "low-2 still charged"
    assert d.tick(50) == [], "no pods-gone report: the preemptor waits, no more victims"
    out = d.stopped(preempted, at=60)
    assert kinds(out) == [
        ("QuotaReleased", "ns/low-2"),
        ("Admitted", "ns/high"),
        ("Inadmissible", "ns/low-2"),
    ]
    released, admitted, _ = out
    assert released.stop_id == preempted.id and released.usage == {"h100": {"nvidia.com/gpu": "4"}}
    assert admitted.victims == ["ns/low-2"]
    (summary,) = d.fold.summary()
    assert summary.admitted == 2 and summary.resources[0].usage == 8000
    assert d.fold.workload_state("ns/low-2") == "Inadmissible"


def test_a_victim_is_admitted_again_when_quota_frees() -> None:
    d = Driver()
    within_setup(d)
    d.apply(job("high", namespace="ns", gpus=4, priority="high"))
    out = d.finish("ns/high", at=50)
    assert ("Admitted", "ns/low-2") in kinds(out)


def test_nothing_to_preempt_leaves_the_preemptor_waiting() -> None:
    d = Driver()
    within_setup(d)
    out = d.apply(job("same", namespace="ns", gpus=4, priority="low", created=5), at=5)
    assert kinds(out) == [("Inadmissible", "ns/same")]
    assert "preemption possible" in (out[0].message or "")


# --------------------------------------------------------------------------- plans


def test_plans_mode_waits_for_a_plan_and_validates_it() -> None:
    d = plans_setup()
    out = d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    assert kinds(out) == [("Inadmissible", "ns/high")]
    assert out[0].reason == "WaitingForPreemptionPlan"
    assert (out[0].message or "").startswith("waiting for a preemption plan")
    assert d.fold.awaits_plan("ns/high")
    (plan,) = d.fold.preemption_plans()
    assert plan.preemptor == "ns/high" and plan.victims == ("ns/low-2",)
    assert dict(plan.reasons) == {"ns/low-2": "InClusterQueue"}
    out = d.plan("ns/high", ["ns/low-2"], at=6)
    assert kinds(out)[:5] == [
        ("Preempted", "ns/low-2"),
        ("Requeued", "ns/low-2"),
        ("Inadmissible", "ns/high"),  # waiting for low-2's pods to be gone
        ("QuotaReleased", "ns/low-2"),  # the driver reports them gone at once
        ("Admitted", "ns/high"),
    ]
    assert out[2].reason == "WaitingForStoppedWorkloads"
    assert out[4].victims == ["ns/low-2"]
    assert not d.fold.awaits_plan("ns/high")
    # The requeued victim now waits too, and nothing is below it: an empty plan.
    assert [(p.preemptor, p.victims) for p in d.fold.preemption_plans()] == [("ns/low-2", ())]


@pytest.mark.parametrize(
    "victims",
    [
        ["ns/low-1", "ns/low-2"],  # one more than needed
        ["ns/missing"],  # unknown
    ],
)
def test_invalid_plans_are_ignored(victims: list[str]) -> None:
    d = plans_setup()
    d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    assert d.plan("ns/high", victims, at=6) == []
    assert d.fold.workload_state("ns/high") == "Inadmissible"
    assert d.fold.awaits_plan("ns/high")  # a stale or invalid plan: the wait goes on


def test_an_empty_plan_ends_the_wait_with_the_quota_reason() -> None:
    d = plans_setup()
    out = d.apply(job("same", namespace="ns", gpus=4, priority="low", created=5), at=5)
    assert [o.reason for o in out] == ["WaitingForPreemptionPlan"]
    (plan,) = d.fold.preemption_plans()
    assert plan.victims == ()  # nothing of lower priority to preempt
    out = d.plan("ns/same", [], at=6)
    assert kinds(out) == [("Inadmissible", "ns/same")]
    assert "preemption possible" in (out[0].message or "")  # what inline mode says
    assert not d.fold.awaits_plan("ns/same")
    assert d.fold.preemption_plans() == []


def test_a_head_waiting_for_a_plan_is_announced_again_with_the_lag() -> None:
    d = plans_setup()
    d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    assert d.fold.next_wakeup() == 10
    assert d.tick(9) == []
    out = d.tick(10)
    assert kinds(out) == [("Inadmissible", "ns/high")]
    assert "(preemption service lag 5 s)" in (out[0].message or "")
    assert d.tick(20) == []
    (out,) = d.tick(40)  # 35 s after it was set aside
    assert "(preemption service lag 30 s)" in (out.message or "")
    d.plan("ns/high", ["ns/low-2"], at=41)
    assert d.fold.workload_state("ns/high") == "Admitted"
    assert d.fold.next_wakeup() == 46  # the requeued victim waits for its (empty) plan
    d.plan("ns/low-2", [], at=42)
    assert d.fold.next_wakeup() is None  # the later notices died with the waits


def test_a_head_whose_queue_stops_preempting_no_longer_waits_for_a_plan() -> None:
    d = plans_setup()
    d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    assert d.fold.awaits_plan("ns/high")
    out = d.apply(cluster_queue("a", gpus=8), at=6)  # the same quota, no preemption policy
    waits = [o for o in out if o.workload == "ns/high"]
    assert [o.reason for o in waits] == ["InsufficientQuota"], waits
    assert not d.fold.awaits_plan("ns/high") and d.fold.preemption_plans() == []


def test_a_failed_start_releases_the_quota_and_holds_until_the_job_changes() -> None:
    d = plans_setup()
    d.apply(
        job("big", namespace="ns", gpus=8, created=10), at=10
    )  # waits: low-1 and low-2 hold the 8
    admitted = next(x for x in d.decisions if x.type == "Admitted" and x.workload == "ns/low-1")
    failed = ActuationFailed(
        id=f"actuationfailed/{admitted.id}",
        at=admitted.at,  # the failed decision's
        decision_id=admitted.id,
        workload="ns/low-1",
        reason="FailedToStart",
        message="nodeSelector gpu=a conflicts with the Job's gpu=b",
        decision_type="Admitted",
    )
    out = d.feed(failed)
    assert kinds(out)[0] == ("Evicted", "ns/low-1")
    assert out[0].reason == "FailedToStart" and "conflicts" in (out[0].message or "")
    assert out[0].at == d.fold.now == 10, "decided at the latest event time, not back-dated"
    assert ("Inadmissible", "ns/low-1") in kinds(out)
    assert d.fold.workload_state("ns/low-1") == "Inadmissible"
    (summary,) = d.fold.summary()
    assert summary.resources[0].usage == 4000  # low-2 only
    assert d.feed(failed) == []  # the same report again changes nothing
    d.finish("ns/low-2", at=20)
    assert d.fold.workload_state("ns/big") == "Admitted"  # low-1 does not come back
    assert d.fold.workload_state("ns/low-1") == "Inadmissible"
    d.finish("ns/big", at=30)
    d.apply(job("low-1", namespace="ns", gpus=2, priority="low"), at=31)  # the user fixes the Job
    assert d.fold.workload_state("ns/low-1") == "Admitted"


@pytest.mark.parametrize("reason", ["Conflict", "ActuationLoop"])
def test_an_admission_lost_to_contention_is_queued_again(reason: str) -> None:
    d = plans_setup()
    d.apply(job("big", namespace="ns", gpus=8, created=10), at=10)  # waits for low-1 and low-2
    admitted = next(x for x in d.decisions if x.type == "Admitted" and x.workload == "ns/low-1")
    out = d.feed(
        ActuationFailed(
            id=f"actuationfailed/{admitted.id}",
            at=admitted.at,
            decision_id=admitted.id,
            workload="ns/low-1",
            reason=reason,
            message="8 conflicts in a row",
            decision_type="Admitted",
        )
    )
    assert kinds(out)[:3] == [
        ("Evicted", "ns/low-1"),
        ("QuotaReleased", "ns/low-1"),  # never started: nothing to wait for
        ("Requeued", "ns/low-1"),
    ]
    assert (out[0].message or "").endswith("; it is queued again")
    # queued again by its creation time (before big): it takes back what it had
    assert ("Admitted", "ns/low-1") in kinds(out)
    assert d.fold.workload_state("ns/big") == "Inadmissible"


def test_a_failed_stop_or_a_missing_job_keeps_the_quota() -> None:
    d = plans_setup()
    admitted = next(x for x in d.decisions if x.type == "Admitted" and x.workload == "ns/low-1")
    for reason, kind in (("JobNotFound", "Admitted"), ("FailedToStart", "Preempted")):
        event = ActuationFailed(
            id=f"actuationfailed/{admitted.id}/{reason}",
            at=admitted.at,
            decision_id=admitted.id,
            workload="ns/low-1",
            reason=reason,
            decision_type=kind,
        )
        assert d.feed(event) == []
    assert d.fold.workload_state("ns/low-1") == "Admitted"


def test_a_stale_plan_is_ignored() -> None:
    d = plans_setup()
    d.apply(job("high", namespace="ns", gpus=4, priority="high", created=5), at=5)
    out = d.finish("ns/low-1", at=6)  # room appears: high is admitted without preemption
    assert ("Admitted", "ns/high") in kinds(out)
    assert d.plan("ns/high", ["ns/low-2"], at=7) == []
    assert d.fold.workload_state("ns/low-2") == "Admitted"


def test_a_plan_in_inline_mode_is_validated_too() -> None:
    d = Driver()
    within_setup(d)
    d.apply(
        job("high", namespace="ns", gpus=4, priority="high", created=5), at=5
    )  # already preempted inline
    assert d.plan("ns/high", ["ns/low-1"], at=6) == []


# --------------------------------------------------------------------------- WaitForPodsReady


def wfpr(**kw: object) -> dict[str, object]:
    section: dict[str, object] = {"timeout": "5m"}
    strategy = {k: v for k, v in kw.items() if k != "blockAdmission"}
    if "blockAdmission" in kw:
        section["blockAdmission"] = kw["blockAdmission"]
    if strategy:
        section["requeuingStrategy"] = strategy
    return configuration(waitForPodsReady=section)


def test_timer_fires_and_backoff_requeues() -> None:
    d = Driver()
    d.apply(
        wfpr(backoffBaseSeconds=10),
        flavor("h100"),
        cluster_queue("a", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="a"),
    )
    d.apply(job("w", namespace="ns", gpus=4), at=0)
    assert d.fold.next_wakeup() == 300
    assert d.tick(299.5) == []
    out = d.tick(300)
    assert kinds(out) == [("Evicted", "ns/w"), ("QuotaReleased", "ns/w")]
    assert out[0].reason == "PodsReadyTimeout"
    requeue_at = out[0].requeue_at
    assert requeue_at is not None and 310 <= requeue_at < 310.01
    assert d.fold.next_wakeup() == requeue_at
    out = d.tick(requeue_at)
    assert kinds(out) == [("Requeued", "ns/w"), ("Admitted", "ns/w")]


def test_ready_pods_stop_the_timer() -> None:
    d = Driver()
    d.apply(
        wfpr(),
        flavor("h100"),
        cluster_queue("a", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="a"),
    )
    d.apply(job("w", namespace="ns", gpus=4), at=0)
    d.ready("ns/w", at=100)
    assert d.fold.next_wakeup() is None
    assert d.tick(1000) == []


def test_a_pods_ready_event_at_the_deadline_is_in_time() -> None:
    d = Driver()
    d.apply(
        wfpr(),
        flavor("h100"),
        cluster_queue("a", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="a"),
    )
    d.apply(job("w", namespace="ns", gpus=4), at=0)
    assert d.ready("ns/w", at=300) == []
    assert d.fold.workload_state("ns/w") == "Admitted"


def test_a_late_event_fires_the_overdue_timer_first() -> None:
    d = Driver()
    d.apply(
        wfpr(),
        flavor("h100"),
        cluster_queue("a", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="a"),
    )
    d.apply(job("w", namespace="ns", gpus=4), at=0)
    out = d.ready("ns/w", at=301)
    assert kinds(out) == [("Evicted", "ns/w"), ("QuotaReleased", "ns/w")]


@pytest.mark.parametrize(("timestamp", "first"), [("Eviction", "ns/c"), ("Creation", "ns/a")])
def test_requeuing_timestamp_decides_the_place_in_the_queue(timestamp: str, first: str) -> None:
    d = Driver()
    d.apply(
        wfpr(timestamp=timestamp, backoffBaseSeconds=10),
        flavor("h100"),
        cluster_queue("q", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="q"),
    )
    d.apply(job("a", namespace="ns", gpus=4, created=0), at=0)
    d.apply(
        job("b", namespace="ns", gpus=4, created=10),
        job("c", namespace="ns", gpus=4, created=20),
        at=20,
    )
    out = d.tick(300)  # a times out; b is admitted once a's pods are gone
    assert kinds(out) == [("Evicted", "ns/a"), ("QuotaReleased", "ns/a"), ("Admitted", "ns/b")]
    d.ready("ns/b", at=301)
    d.tick(320)  # a's backoff is over: it queues again
    out = d.finish("ns/b", at=400)
    assert ("Admitted", first) in kinds(out)


def test_the_requeue_limit_deactivates_until_the_job_changes() -> None:
    d = Driver()
    d.apply(
        wfpr(backoffLimitCount=0),
        flavor("h100"),
        cluster_queue("q", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="q"),
    )
    d.apply(job("w", namespace="ns", gpus=2, uid="u1"), at=0)
    out = d.tick(300)
    assert kinds(out) == [("Deactivated", "ns/w"), ("QuotaReleased", "ns/w")]
    assert out[0].reason == "RequeuingLimitExceeded"
    assert d.fold.workload_state("ns/w") == "Deactivated"
    assert d.fold.next_wakeup() is None
    d.apply(
        job("w", namespace="ns", gpus=2, uid="u1"), at=301
    )  # the same Job again: nothing changes
    assert d.fold.workload_state("ns/w") == "Deactivated"
    out = d.apply(job("w", namespace="ns", gpus=3, uid="u1"), at=302)  # the Job changed
    assert ("Admitted", "ns/w") in kinds(out)


def test_a_job_change_during_backoff_keeps_the_backoff() -> None:
    d = Driver()
    d.apply(
        wfpr(backoffBaseSeconds=100),
        flavor("h100"),
        cluster_queue("q", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="q"),
    )
    d.apply(job("w", namespace="ns", gpus=2, uid="u1"), at=0)
    d.tick(300)
    assert d.apply(job("w", namespace="ns", gpus=3, uid="u1"), at=310) == []
    out = d.tick(400.02)
    assert kinds(out) == [("Requeued", "ns/w"), ("Admitted", "ns/w")]
    assert out[1].usage == {"h100": {"nvidia.com/gpu": "3"}}


def test_block_admission_admits_one_at_a_time() -> None:
    d = Driver()
    d.apply(
        wfpr(blockAdmission=True),
        flavor("h100"),
        cluster_queue("q", gpus=8),
        local_queue("lq", namespace="ns", cluster_queue="q"),
    )
    out = d.apply(
        job("a", namespace="ns", gpus=2, created=0),
        job("b", namespace="ns", gpus=2, created=1),
        at=1,
    )
    assert kinds(out) == [("Admitted", "ns/a")]
    out = d.ready("ns/a", at=2)
    assert kinds(out) == [("Admitted", "ns/b")]
    assert d.ready("ns/b", at=3) == []


# --------------------------------------------------------------------------- properties

Step = tuple[str, int, int, int]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("job"), st.integers(0, 2), st.integers(1, 4), st.integers(0, 2)),
        st.tuples(st.just("finish"), st.integers(0, 30), st.just(0), st.just(0)),
        st.tuples(st.just("ready"), st.integers(0, 30), st.just(0), st.just(0)),
        st.tuples(st.just("tick"), st.integers(1, 400), st.just(0), st.just(0)),
    ),
    max_size=40,
)


def events_of(script: list[Step], *, fair: bool) -> list[JournalEvent]:
    """The setup (a cohort of three queues with different policies, the
    WaitForPodsReady configuration) and the script, as journal events."""
    d = Driver()
    sections: dict[str, object] = {
        "waitForPodsReady": {
            "timeout": "2m",
            "requeuingStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 30},
        }
    }
    if fair:
        sections["fairSharing"] = {}
    d.fold = _Recorder()  # type: ignore[assignment]
    d.apply(
        configuration(**sections),
        flavor("h100"),
        priority_class("p0", value=0),
        priority_class("p1", value=10),
        priority_class("p2", value=20),
    )
    d.apply(
        cluster_queue("q0", gpus=(4, 4), cohort="pool", within="LowerPriority", reclaim="Any"),
        cluster_queue("q1", gpus=4, cohort="pool", reclaim="LowerPriority", borrow="LowerPriority"),
        cluster_queue(
            "q2", gpus=2, cohort="pool", within="LowerOrNewerEqualPriority", reclaim="Any"
        ),
    )
    for i in range(3):
        d.apply(local_queue("lq", namespace=f"ns{i}", cluster_queue=f"q{i}"))
    made: list[str] = []
    for kind, a, b, c in script:
        t = d.t + 7
        if kind == "job":
            name = f"j{len(made)}"
            made.append(f"ns{a}/{name}")
            d.apply(job(name, namespace=f"ns{a}", gpus=b, priority=f"p{c}", created=t), at=t)
        elif kind == "finish" and made:
            d.finish(made[a % len(made)], at=t)
        elif kind == "ready" and made:
            d.ready(made[a % len(made)], at=t)
        elif kind == "tick":
            d.tick(d.t + a)
    return d.events


class _Recorder:
    """Stands in for a fold while events are only being written down."""

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]:
        return []


def within_limits(fold: Fold) -> None:
    for name, node in fold._tree.queues.items():
        for fr in node.limits:
            assert available(node, fr) >= 0, f"{name} over its limits"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=steps, fair=st.booleans(), cut=st.integers(0, 60))
def test_replay_is_identical_and_limits_hold(script: list[Step], fair: bool, cut: int) -> None:
    events = events_of(script, fair=fair)
    fold = Fold()
    expected: list[Decision] = []
    for i, e in enumerate(events):
        expected += fold.apply(e, offset=i)
        within_limits(fold)
    cut = min(cut, len(events))
    head = Fold()
    got: list[Decision] = []
    for i, e in enumerate(events[:cut]):
        got += head.apply(e, offset=i)
    for resumed in (pickle.loads(pickle.dumps(head)), copy.deepcopy(head)):
        tail = [d for i, e in enumerate(events[cut:], cut) for d in resumed.apply(e, offset=i)]
        assert [d.model_dump() for d in got + tail] == [d.model_dump() for d in expected]
