"""The actuator's pure core: Job patches for decisions, and the ClusterQueue read model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from actuator_builders import (
    NS,
    converge,
    decision,
    flavor,
    job,
    order,
    tol,
)
from actuator_builders import (
    admitted as admit,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.actuation.patch import (
    ANN_DECISION_ID,
    ANN_DECISION_OFFSET,
    ANN_ORIGINAL,
    MAX_EVENT_MESSAGE,
    DecisionOrder,
    Fail,
    ResetStartTime,
    Skip,
    UpdateJob,
    Wait,
    feedback_events,
    plan,
)
from kuota.actuation.scheduling import SchedulingFields, inject, read_flavor, toleration_json
from kuota.api.parse import parse_object
from kuota.api.types import ResourceFlavor, ValidationError
from kuota.status.model import ClusterQueueReadModel, statuses

H100 = flavor("h100", {"gpu": "h100", "zone": "a"}, [tol("nvidia.com/gpu")])
SPOT = flavor("spot", {"lifecycle": "spot"}, [tol("spot"), tol("nvidia.com/gpu")])
PLAIN = flavor("plain")
FLAVORS = {f.name: f for f in (H100, SPOT, PLAIN)}


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def annotations(manifest: dict[str, Any]) -> dict[str, str]:
    ann: dict[str, str] = manifest["metadata"].get("annotations") or {}
    return ann


# --------------------------------------------------------------------------- inject


def test_admitted_injects_labels_and_tolerations_and_unsuspends() -> None:
    d = admit({"nvidia.com/gpu": "h100"})
    final, steps = converge(job().build(), d, FLAVORS)
    assert len(steps) == 1 and isinstance(steps[0], UpdateJob) and steps[0].final
    assert final["spec"]["suspend"] is False
    assert pod(final)["nodeSelector"] == {"gpu": "h100", "zone": "a"}
    assert pod(final)["tolerations"] == [tol("nvidia.com/gpu")]
    ann = annotations(final)
    assert ann[ANN_DECISION_ID] == d.id
    assert ann[ANN_DECISION_OFFSET] == str(order(d))
    assert json.loads(ann[ANN_ORIGINAL]) == {"nodeSelector": None, "tolerations": None}
    assert [e.reason for e in steps[0].events] == ["Admitted", "Started"]
    # No creationTimestamp on this Job: no wait is claimed (test_actuator_failed_start).
    assert steps[0].events[0].message == "Admitted by ClusterQueue cq"


def test_admitted_keeps_the_jobs_own_selector_and_tolerations() -> None:
    manifest = job().selector(team="ml").toleration("kwok.x-k8s.io/node").build()
    final, _ = converge(manifest, admit({"nvidia.com/gpu": "h100"}), FLAVORS)
    assert pod(final)["nodeSelector"] == {"team": "ml", "gpu": "h100", "zone": "a"}
    assert pod(final)["tolerations"] == [tol("kwok.x-k8s.io/node"), tol("nvidia.com/gpu")]
    assert json.loads(annotations(final)[ANN_ORIGINAL]) == {
        "nodeSelector": {"team": "ml"},
        "tolerations": [tol("kwok.x-k8s.io/node")],
    }


def test_tolerations_merge_without_duplicates() -> None:
    # The Job already tolerates nvidia.com/gpu; both flavors add it too.
    manifest = job().toleration("nvidia.com/gpu").build()
    d = admit({"nvidia.com/gpu": "h100", "cpu": "spot"})
    final, _ = converge(manifest, d, FLAVORS)
    assert pod(final)["tolerations"] == [tol("nvidia.com/gpu"), tol("spot")]


def test_an_omitted_field_equals_its_empty_value_when_deduplicating() -> None:
    have = SchedulingFields(None, ({"key": "a", "operator": "Exists", "value": ""},))
    got = inject(have, [flavor("f", tolerations=[{"key": "a", "operator": "Exists"}])])
    assert got.tolerations is not None and len(got.tolerations) == 1


def test_between_flavors_the_first_label_wins() -> None:
    a = flavor("a", {"zone": "a"})
    b = flavor("b", {"zone": "b", "disk": "ssd"})
    got = inject(SchedulingFields(), [a, b])
    assert dict(got.node_selector or {}) == {"zone": "a", "disk": "ssd"}


def test_a_selector_conflict_fails_like_kueue() -> None:
    manifest = job().selector(zone="b").build()
    step = plan(manifest, d := admit({"cpu": "h100"}), order=order(d), flavors=FLAVORS)
    assert isinstance(step, Fail)
    assert step.reason == "FailedToStart"
    assert "nodeSelector zone=b conflicts with the nodeLabel zone=a of ResourceFlavor h100" in (
        step.message
    )


def test_no_flavors_only_unsuspends() -> None:
    manifest = job().selector(team="ml").toleration("x").build()
    final, steps = converge(manifest, admit(None), FLAVORS)
    assert final["spec"]["suspend"] is False
    assert pod(final)["nodeSelector"] == {"team": "ml"}
    assert pod(final)["tolerations"] == [tol("x")]
    assert isinstance(steps[-1], UpdateJob) and steps[-1].what == "unsuspend with no flavor"


def test_a_flavor_without_labels_changes_nothing_in_the_template() -> None:
    final, _ = converge(job().build(), admit({"cpu": "plain"}), FLAVORS)
    assert "nodeSelector" not in pod(final) and "tolerations" not in pod(final)


def test_a_missing_flavor_fails() -> None:
    d = admit({"cpu": "gone"})
    step = plan(job().build(), d, order=order(d), flavors=FLAVORS)
    assert step == Fail("FlavorNotFound", "ResourceFlavor gone not found")


def test_an_invalid_flavor_fails_with_the_field_at_fault() -> None:
    bad = read_flavor(
        {"metadata": {"name": "bad"}, "spec": {"tolerations": [{"operator": "Sometimes"}]}}
    )
    assert isinstance(bad, ValidationError)
    d = admit({"cpu": "bad"})
    step = plan(job().build(), d, order=order(d), flavors={**FLAVORS, "bad": bad})
    assert isinstance(step, Fail) and step.reason == "InvalidFlavor"
    assert step.message.startswith("ResourceFlavor bad is not valid")
    assert "spec.tolerations[0].operator" in step.message


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "a string",
        {"metadata": {"name": "f"}, "spec": {"nodeLabels": "zone=a"}},
        {"kind": "ClusterQueue", "metadata": {"name": "f"}},
        {"spec": {}},
    ],
    ids=["none", "string", "labels-not-a-map", "another-kind", "no-name"],
)
def test_reading_a_flavor_never_raises(obj: Any) -> None:
    assert isinstance(read_flavor(obj), ValidationError)


def test_a_flavor_reads_as_the_fold_reads_it() -> None:
    manifest = {
        "metadata": {"name": "f", "resourceVersion": "7"},  # a list item: no kind, no apiVersion
        "spec": {
            "nodeLabels": {"zone": "a"},
            "tolerations": [
                {"key": "gpu", "value": "yes", "effect": "NoSchedule"},
                {
                    "key": "drain",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 30,
                },
            ],
        },
    }
    fl = read_flavor(manifest)
    assert isinstance(fl, ResourceFlavor)
    assert fl == parse_object(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", **manifest}
    )
    assert [toleration_json(t) for t in fl.tolerations] == [
        {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
        {"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ]


def test_an_omitted_operator_is_equal_when_deduplicating() -> None:
    have = SchedulingFields(None, ({"key": "gpu", "value": "yes"},))
    got = inject(have, [flavor("f", tolerations=[{"key": "gpu", "value": "yes"}])])
    assert got.tolerations == ({"key": "gpu", "value": "yes"},)


def test_admitted_resets_a_stale_start_time_before_changing_the_template() -> None:
    manifest = job().start_time().build()  # suspended by someone, startTime not yet cleared
    d = admit({"cpu": "h100"})
    step = plan(manifest, d, order=order(d), flavors=FLAVORS)
    assert isinstance(step, ResetStartTime)
    assert "startTime" not in step.job["status"]
    final, steps = converge(manifest, d, FLAVORS)
    assert [type(s).__name__ for s in steps] == ["ResetStartTime", "UpdateJob"]
    assert final["spec"]["suspend"] is False


def test_admitted_stops_a_job_running_with_another_placement_first() -> None:
    first = admit({"cpu": "h100"})
    running, _ = converge(job().build(), first, FLAVORS, record=1)
    second = admit({"cpu": "spot"})  # its Preempted was never applied
    final, steps = converge(running, second, FLAVORS, record=2)
    kinds = [(type(s).__name__, getattr(s, "final", None)) for s in steps]
    assert kinds == [("UpdateJob", False), ("Wait", None), ("UpdateJob", True)]
    assert pod(final)["nodeSelector"] == {"lifecycle": "spot"}
    assert pod(final)["tolerations"] == [tol("spot"), tol("nvidia.com/gpu")]


def test_admitted_on_a_job_already_running_as_wanted_records_only() -> None:
    d1 = admit({"cpu": "h100"})
    running, _ = converge(job().build(), d1, FLAVORS, record=1)
    d2 = admit({"cpu": "h100"})
    final, steps = converge(running, d2, FLAVORS, record=2)
    assert len(steps) == 1
    assert annotations(final)[ANN_DECISION_ID] == d2.id
    assert pod(final) == pod(running)


# --------------------------------------------------------------------------- idempotence


def test_the_same_decision_again_is_skipped() -> None:
    d = admit({"cpu": "h100"})
    final, _ = converge(job().build(), d, FLAVORS)
    step = plan(final, d, order=order(d), flavors=FLAVORS)
    assert isinstance(step, Skip) and "already applied" in step.why


def test_an_older_decision_is_skipped() -> None:
    newer = decision("Preempted", cause_offset=20)
    older = admit({"cpu": "h100"}, cause_offset=10)
    manifest = job().annotate(
        **{ANN_DECISION_ID: newer.id, ANN_DECISION_OFFSET: str(DecisionOrder(20, 5))}
    )
    step = plan(manifest.build(), older, order=order(older, 4), flavors=FLAVORS)
    assert isinstance(step, Skip) and "not after" in step.why


def test_same_cause_is_ordered_by_the_decision_record() -> None:
    # One event evicts and re-admits the same workload: the Admitted comes after.
    evicted = decision("Evicted", cause_offset=7, reason="ClusterQueueStopped")
    readmit = admit({"cpu": "h100"}, cause_offset=7)
    stopped, _ = converge(job().running().build(), evicted, FLAVORS, record=30)
    final, steps = converge(stopped, readmit, FLAVORS, record=32)
    assert final["spec"]["suspend"] is False
    assert isinstance(steps[-1], UpdateJob) and steps[-1].final
    # ... and the Evicted redelivered after the Admitted does nothing.
    again = plan(final, evicted, order=order(evicted, 30), flavors=FLAVORS)
    assert isinstance(again, Skip)


def test_decision_order_text_round_trips_and_orders() -> None:
    o = DecisionOrder(12, 3)
    assert DecisionOrder.parse(str(o)) == o
    assert DecisionOrder(12, 3) < DecisionOrder(12, 4) < DecisionOrder(13, 0)
    assert DecisionOrder.of(decision("Evicted", cause_offset=None), 9) == DecisionOrder(-1, 9)
    for bad in (None, "", "12", "a/b", 5):
        assert DecisionOrder.parse(bad) is None


def test_a_replaced_job_is_not_touched() -> None:
    d = admit({"cpu": "h100"})
    step = plan(job().uid("other").build(), d, order=order(d), flavors=FLAVORS)
    assert isinstance(step, Fail) and step.reason == "JobNotFound"


def test_a_finished_job_is_not_touched() -> None:
    d = decision("Preempted")
    assert isinstance(plan(job().finished().build(), d, order=order(d), flavors={}), Skip)


@pytest.mark.parametrize("type_", ["Finished", "Inadmissible", "Requeued", "Rejected"])
def test_decisions_that_do_not_change_jobs(type_: str) -> None:
    d = decision(type_)
    step = plan(job().build(), d, order=order(d), flavors=FLAVORS)
    assert isinstance(step, Skip)


# --------------------------------------------------------------------------- restore


def test_preempted_suspends_then_restores_the_original_template() -> None:
    original = job().selector(team="ml").toleration("kwok.x-k8s.io/node").build()
    running, _ = converge(original, admit({"gpu": "h100", "cpu": "spot"}), FLAVORS, record=1)
    assert pod(running) != pod(original)
    preempted = decision("Preempted", reason="InClusterQueue", preemptor=f"{NS}/big")
    final, steps = converge(running, preempted, FLAVORS, record=2)
    assert [(type(s).__name__, getattr(s, "final", None)) for s in steps] == [
        ("UpdateJob", False),
        ("Wait", None),
        ("UpdateJob", True),
    ]
    assert final["spec"]["suspend"] is True
    assert pod(final) == pod(original)
    ann = annotations(final)
    assert ANN_ORIGINAL not in ann
    assert ann[ANN_DECISION_ID] == preempted.id
    first, last = steps[0], steps[-1]
    assert isinstance(first, UpdateJob) and isinstance(last, UpdateJob)
    assert [e.reason for e in first.events] == ["Stopped"]
    assert [e.reason for e in last.events] == ["Preempted"]
    assert last.events[0].message == (
        f"Preempted to accommodate a workload ({NS}/big) due to prioritization in the ClusterQueue"
    )


def test_restore_removes_fields_the_job_did_not_have() -> None:
    running, _ = converge(job().build(), admit({"cpu": "h100"}), FLAVORS, record=1)
    final, _ = converge(running, decision("Evicted", reason="PodsReadyTimeout"), record=2)
    assert "nodeSelector" not in pod(final) and "tolerations" not in pod(final)


def test_restore_waits_for_the_pods_then_resets_start_time() -> None:
    # An older Job controller that leaves startTime set: Kueue's reset step.
    running, _ = converge(job().build(), admit({"cpu": "h100"}), FLAVORS, record=1)
    d = decision("Evicted", reason="PodsReadyTimeout")
    final, steps = converge(running, d, record=2, controller_clears_start_time=False)
    assert [type(s).__name__ for s in steps] == ["UpdateJob", "Wait", "ResetStartTime", "UpdateJob"]
    assert "nodeSelector" not in pod(final)


def test_a_suspended_job_with_active_pods_waits() -> None:
    manifest = job().annotate(**{ANN_ORIGINAL: '{"nodeSelector":null,"tolerations":null}'})
    manifest.selector(gpu="h100").active(2)
    d = decision("Preempted")
    step = plan(manifest.build(), d, order=order(d), flavors={})
    assert step == Wait("2 active pod(s) of the suspended Job")


@pytest.mark.parametrize(
    ("type_", "reason", "event"),
    [
        ("Evicted", "PodsReadyTimeout", "EvictedDueToPodsReadyTimeout"),
        ("Evicted", "ClusterQueueStopped", "EvictedDueToClusterQueueStopped"),
        ("Deactivated", "InactiveWorkload", "Deactivated"),
    ],
)
def test_stop_events(type_: str, reason: str, event: str) -> None:
    running, _ = converge(job().build(), admit({"cpu": "h100"}), FLAVORS, record=1)
    d = decision(type_, reason=reason, message="why")
    _, steps = converge(running, d, record=2)
    last = steps[-1]
    assert isinstance(last, UpdateJob) and last.final
    assert [(e.reason, e.message) for e in last.events] == [(event, "why")]


def test_stop_of_a_never_admitted_job_writes_nothing() -> None:
    manifest = job().selector(team="ml").build()
    final, steps = converge(manifest, decision("Deactivated"), record=3)
    assert len(steps) == 1 and isinstance(steps[0], Skip)
    assert [e.reason for e in steps[0].events] == ["Deactivated"]
    assert final == manifest


def test_stop_of_an_admission_without_flavors_records_it() -> None:
    running, _ = converge(job().build(), admit(None), record=1)
    final, steps = converge(running, decision("Preempted", reason="InClusterQueue"), record=2)
    last = steps[-1]
    assert isinstance(last, UpdateJob) and last.final and last.what == "record the stop"
    assert final["spec"]["suspend"] is True and ANN_ORIGINAL not in annotations(final)


# --------------------------------------------------------------------------- Suspended


def suspended_decision() -> Any:
    return decision(
        "Suspended", reason="StartedWithoutAdmission", message="started without admission"
    )


def test_suspended_suspends_a_job_started_without_admission_in_one_patch() -> None:
    user_started = job().selector(team="ml").running().build()
    d = suspended_decision()
    final, steps = converge(user_started, d, record=5)
    assert len(steps) == 1
    (step,) = steps
    assert isinstance(step, UpdateJob) and step.final
    assert final["spec"]["suspend"] is True
    assert pod(final) == pod(user_started), "the user's own template is left alone"
    ann = annotations(final)
    assert ann[ANN_DECISION_ID] == d.id and ann[ANN_DECISION_OFFSET] == str(order(d, 5))
    assert ANN_ORIGINAL not in ann
    assert [(e.reason, e.message, e.type) for e in step.events] == [
        ("Suspended", "started without admission", "Warning")
    ]
    again = plan(final, d, order=order(d, 5), flavors={})
    assert isinstance(again, Skip), "applied once"


def test_suspended_on_a_suspended_job_writes_nothing() -> None:
    d = suspended_decision()
    step = plan(job().build(), d, order=order(d), flavors={})
    assert isinstance(step, Skip) and step.events == ()


def test_suspended_restores_the_template_when_kuotas_flavors_are_on_it() -> None:
    """The Job was started by kuota (flavors injected), its admission ended and
    the user unsuspended it before the stop restored it: the stop's steps."""
    original = job().selector(team="ml").build()
    running, _ = converge(original, admit({"gpu": "h100"}), FLAVORS, record=1)
    d = suspended_decision()
    final, steps = converge(running, d, record=2)
    assert [(type(s).__name__, getattr(s, "final", None)) for s in steps] == [
        ("UpdateJob", False),
        ("Wait", None),
        ("UpdateJob", True),
    ]
    assert final["spec"]["suspend"] is True and pod(final) == pod(original)
    last = steps[-1]
    assert isinstance(last, UpdateJob)
    assert [(e.reason, e.message) for e in last.events] == [
        ("Suspended", "started without admission")
    ]
    assert annotations(final)[ANN_DECISION_ID] == d.id


def test_suspended_never_touches_a_finished_or_replaced_job() -> None:
    d = suspended_decision()
    assert isinstance(plan(job().running().finished().build(), d, order=order(d), flavors={}), Skip)
    other = job().running().uid("someone-else").build()
    assert isinstance(plan(other, d, order=order(d), flavors={}), Fail)


def test_the_plan_does_not_modify_its_input() -> None:
    manifest = job().build()
    before = json.dumps(manifest, sort_keys=True)
    d = admit({"cpu": "h100"})
    plan(manifest, d, order=order(d), flavors=FLAVORS)
    assert json.dumps(manifest, sort_keys=True) == before


# --------------------------------------------------------------------------- feedback


def test_feedback_events() -> None:
    (pending,) = feedback_events(decision("Inadmissible", message="insufficient quota"))
    assert (pending.reason, pending.type, pending.message) == (
        "Pending",
        "Warning",
        "insufficient quota",
    )
    (rejected,) = feedback_events(
        decision("Rejected", workload=None, object="ClusterQueue cq", reason="InvalidObject")
    )
    assert (rejected.reason, rejected.type) == ("InvalidObject", "Warning")
    (long,) = feedback_events(decision("Inadmissible", message="x" * 5000))
    assert len(long.message) == MAX_EVENT_MESSAGE
    assert feedback_events(decision("Requeued")) == ()


# --------------------------------------------------------------------------- read model


def wl(name: str, type_: str, **fields: Any) -> Any:
    return decision(type_, workload=f"{NS}/{name}", **fields)


def usage(cpu: str, gpu: str) -> dict[str, dict[str, str]]:
    return {"h100": {"cpu": cpu, "nvidia.com/gpu": gpu}}


def test_read_model_admit_release_pending() -> None:
    m = ClusterQueueReadModel()
    m.apply(wl("a", "Inadmissible", cluster_queue="cq", reason="QuotaExceeded"))
    m.apply(wl("b", "Inadmissible", cluster_queue="cq"))
    assert m.pending("cq") == {"inadmissible": 2}
    m.apply(wl("a", "Admitted", cluster_queue="cq", usage=usage("6", "2")))
    m.apply(wl("b", "Admitted", cluster_queue="cq", usage=usage("4", "1")))
    assert m.pending("cq") == {}
    assert m.admitted("cq") == 2
    assert m.usage("cq") == {("h100", "cpu"): 10_000, ("h100", "nvidia.com/gpu"): 3_000}
    stop = wl("a", "Preempted", cluster_queue="cq", reason="InClusterQueue")
    m.apply(stop)
    # its pods may still run: the usage stays until the fold's QuotaReleased
    assert m.usage("cq") == {("h100", "cpu"): 10_000, ("h100", "nvidia.com/gpu"): 3_000}
    assert m.admitted("cq") == 1 and m.pending("cq") == {"active": 1}
    assert [(k.stop_id, k.workload) for k in m.draining()] == [(stop.id, f"{NS}/a")]
    m.apply(wl("a", "QuotaReleased", cluster_queue="cq", stop_id="another"))
    assert m.usage("cq")[("h100", "cpu")] == 10_000, "another stop's release: not this one"
    m.apply(wl("a", "QuotaReleased", cluster_queue="cq", stop_id=stop.id))
    assert m.usage("cq") == {("h100", "cpu"): 4_000, ("h100", "nvidia.com/gpu"): 1_000}
    assert m.draining() == []
    m.apply(wl("b", "Finished", cluster_queue="cq", reason="Succeeded"))
    m.apply(wl("a", "Deactivated"))
    assert (m.usage("cq"), m.pending("cq"), m.admitted("cq")) == ({}, {}, 0)


def test_read_model_ignores_suspended() -> None:
    """The backstop's Suspended ends no admission and queues nothing."""
    m = ClusterQueueReadModel()
    m.apply(wl("a", "Admitted", cluster_queue="cq", usage=usage("6", "2")))
    m.apply(wl("b", "Inadmissible", cluster_queue="cq"))
    before = (m.usage("cq"), m.pending("cq"), m.admitted("cq"))
    m.apply(wl("b", "Suspended", cluster_queue="cq", reason="StartedWithoutAdmission"))
    assert (m.usage("cq"), m.pending("cq"), m.admitted("cq")) == before


def quota_changed(name: str = "cq", cpu: str = "8", gpu: str = "2", **extra: Any) -> Any:
    quota = {"h100": {"cpu": {"nominalQuota": cpu}, "nvidia.com/gpu": {"nominalQuota": gpu}}}
    fields: dict[str, Any] = {"quota": quota, **extra}
    return decision(
        "QuotaChanged",
        workload=None,
        uid=None,
        cluster_queue=name,
        object=f"ClusterQueue {name}",
        **fields,
    )


def test_read_model_status_with_and_without_quotas() -> None:
    m = ClusterQueueReadModel()
    m.apply(wl("a", "Admitted", cluster_queue="cq", usage=usage("10", "2")))
    m.apply(wl("b", "Inadmissible", cluster_queue="cq"))
    without = m.status("cq")  # no QuotaChanged yet: nominal unknown, nothing borrowed
    assert [r["borrowed"] for r in without["flavorsUsage"][0]["resources"]] == ["0", "0"]
    m.apply(quota_changed(cohort="pool"))
    with_quota = m.status("cq")
    assert with_quota["admittedWorkloads"] == with_quota["reservingWorkloads"] == 1
    assert with_quota["pendingWorkloads"] == 1
    assert with_quota["flavorsUsage"] == [
        {
            "name": "h100",
            "resources": [
                {"name": "cpu", "total": "10", "borrowed": "2"},
                {"name": "nvidia.com/gpu", "total": "2", "borrowed": "0"},
            ],
        }
    ]
    assert with_quota["flavorsReservation"] == with_quota["flavorsUsage"]
    assert m.cohort("cq") == "pool"
    assert [(r.flavor, r.resource, r.nominal) for r in m.quota("cq") or ()] == [
        ("h100", "cpu", 8000),
        ("h100", "nvidia.com/gpu", 2000),
    ]
    m.apply(quota_changed("idle"))
    idle = m.status("idle")
    assert idle["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "0", "borrowed": "0"}
    assert idle["admittedWorkloads"] == 0
    assert set(statuses(m)) == {"cq", "idle"}
    m.apply(quota_changed("idle", reason="Deleted", quota=None))
    assert set(statuses(m)) == {"cq"}, "a deleted idle ClusterQueue is forgotten"
    m.apply(quota_changed(reason="Deleted", quota=None))
    assert m.quota("cq") is None and m.admitted("cq") == 1, "its workloads still count"


def test_read_model_moves_a_workload_between_cluster_queues() -> None:
    m = ClusterQueueReadModel()
    m.apply(wl("a", "Admitted", cluster_queue="one", usage=usage("1", "0")))
    stop = wl("a", "Evicted", cluster_queue="one", reason="ClusterQueueStopped")
    m.apply(stop)
    m.apply(wl("a", "QuotaReleased", cluster_queue="one", stop_id=stop.id))
    m.apply(wl("a", "Admitted", cluster_queue="two", usage=usage("2", "0")))
    assert m.usage("one") == {} and m.pending("one") == {}
    assert m.usage("two")[("h100", "cpu")] == 2_000


Op = tuple[str, str, str]
OPS = st.tuples(
    st.sampled_from(["a", "b", "c", "d"]),
    st.sampled_from(
        ["Admitted", "Preempted", "Evicted", "Requeued", "Inadmissible", "Finished", "Deactivated"]
    ),
    st.sampled_from(["one", "two"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(OPS, max_size=40), st.integers(min_value=0, max_value=39))
def test_read_model_matches_a_recount_and_redelivery_changes_nothing(
    ops: list[Op], redeliver: int
) -> None:
    m = ClusterQueueReadModel()
    decisions = [
        wl(name, t, cluster_queue=cq, usage=usage("1", "1") if t == "Admitted" else None)
        for name, t, cq in ops
    ]
    for i, d in enumerate(decisions):
        m.apply(d)
        if i == redeliver:
            m.apply(d)  # at-least-once delivery
        if d.type in ("Preempted", "Evicted", "Deactivated"):  # its pods gone: released
            released = wl(d.workload.partition("/")[2], "QuotaReleased", stop_id=d.id)
            m.apply(released)
            if i == redeliver:
                m.apply(released)
    assert m.draining() == []
    # Recount from each workload's last decision.
    last: dict[str, Any] = {}
    for d in decisions:
        last[d.workload] = d
    for cq in ("one", "two"):
        admitted = [d for d in last.values() if d.type == "Admitted" and d.cluster_queue == cq]
        assert m.admitted(cq) == len(admitted)
        want = {
            ("h100", "cpu"): 1000 * len(admitted),
            ("h100", "nvidia.com/gpu"): 1000 * len(admitted),
        }
        assert m.usage(cq) == {k: v for k, v in want.items() if v}
        assert all(v > 0 for v in m.pending(cq).values())
