"""Admissions that cannot be applied: what is reported, what is retried, and the
Evicted decision the fold answers with (a no-op on a Job that never started).
Also the Event texts of an admission (issue 14)."""

from __future__ import annotations

import asyncio
import copy

import pytest
from actuator_builders import NS, admitted, decision, flavor, job, order
from test_actuator_shell import WORKLOAD, Harness

from kuota.actuation.patch import (
    ANN_DECISION_ID,
    Fail,
    Skip,
    UpdateJob,
    plan,
)
from kuota_actuator.apply import job_path
from kuota_actuator.kubeapi import Permanent, Transient

ZONED = flavor("h100", {"zone": "a"})


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.kube.objects[job_path(WORKLOAD)] = job().build()
    return harness


# --------------------------------------------------------------------------- texts


def test_a_selector_conflict_names_what_conflicted_in_kuotas_terms() -> None:
    manifest = job().selector(zone="b").build()
    d = admitted({"cpu": "h100"})
    step = plan(manifest, d, order=order(d), flavors={"h100": ZONED})
    assert isinstance(step, Fail) and step.reason == "FailedToStart"
    assert step.message == (
        "the Job's nodeSelector zone=b conflicts with the nodeLabel zone=a of "
        "ResourceFlavor h100, which kuota adds to the pod template"
    )
    assert "admission check" not in step.message and "PodSetUpdate" not in step.message


def test_the_admitted_event_gives_the_wait_since_the_jobs_creation() -> None:
    manifest = job().build()
    manifest["metadata"]["creationTimestamp"] = "2026-12-01T15:00:00Z"
    created = 1796137200.0  # 2026-12-01T15:00:00Z
    d = admitted({"cpu": "h100"}, cq="gpus", at=created + 12.4)
    step = plan(manifest, d, order=order(d), flavors={"h100": ZONED})
    assert isinstance(step, UpdateJob) and step.final
    assert [(e.reason, e.message) for e in step.events] == [
        ("Admitted", "Admitted by ClusterQueue gpus, wait time since creation was 12s"),
        ("Started", "Admitted by clusterQueue gpus"),
    ]


@pytest.mark.parametrize(
    ("stamp", "text"),
    [
        (None, "Admitted by ClusterQueue cq"),  # no creationTimestamp: no wait claimed
        ("not a time", "Admitted by ClusterQueue cq"),
        ("2026-12-01T15:00:30Z", "Admitted by ClusterQueue cq, wait time since creation was 0s"),
        (
            "2026-12-01T14:58:00+00:00",
            "Admitted by ClusterQueue cq, wait time since creation was 120s",
        ),
    ],
)
def test_the_admitted_event_without_a_usable_creation_time(stamp: str | None, text: str) -> None:
    manifest = job().build()
    if stamp is not None:
        manifest["metadata"]["creationTimestamp"] = stamp
    d = admitted({"cpu": "h100"}, at=1796137200.0)  # before the clock skew case's creation
    step = plan(manifest, d, order=order(d), flavors={"h100": ZONED})
    assert isinstance(step, UpdateJob)
    assert step.events[0].message == text


# --------------------------------------------------------------------------- the stop that follows


def test_the_eviction_of_a_never_started_job_writes_nothing_but_its_event() -> None:
    manifest = job().selector(zone="b").build()
    d = decision(
        "Evicted",
        reason="FailedToStart",
        message="the Job could not be started with its admission: ...; its quota is released",
    )
    step = plan(manifest, d, order=order(d), flavors={})
    assert isinstance(step, Skip)
    assert [(e.reason, e.message) for e in step.events] == [
        ("EvictedDueToFailedToStart", d.message)
    ]


async def test_a_failed_start_is_reported_once_and_its_eviction_is_a_no_op(h: Harness) -> None:
    h.kube.objects[job_path(WORKLOAD)] = job().selector(zone="b").build()
    h.actuator._flavor_objects = lambda: {
        "h100": {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"zone": "a"}}}
    }
    before = copy.deepcopy(h.job)
    out = await h.actuator.apply(admitted({"cpu": "h100"}, cause_offset=1), 1)
    assert out.result == "failed"
    (report,) = h.reported
    assert (report.reason, report.decision_type) == ("FailedToStart", "Admitted")
    assert "zone=b conflicts with the nodeLabel zone=a" in report.message
    evicted = decision("Evicted", cause_offset=2, reason="FailedToStart", message="released")
    out = await h.actuator.apply(evicted, 2)
    assert out.result == "skipped"
    assert h.kube.patches == [] and h.job == before, "no write to the Job"
    assert len(h.reported) == 1, "the eviction is not a failure"
    assert [(e["reason"], e["message"]) for e in await h.events()] == [
        ("EvictedDueToFailedToStart", "released")
    ]
    await h.actuator.apply(evicted, 2)  # delivered again: the same Event name, no second one
    assert len(await h.events()) == 1 and h.kube.patches == []


async def test_the_fixed_job_is_admitted_after_its_failed_start(h: Harness) -> None:
    h.kube.objects[job_path(WORKLOAD)] = job().selector(zone="b").build()
    h.actuator._flavor_objects = lambda: {
        "h100": {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"zone": "a"}}}
    }
    await h.actuator.apply(admitted({"cpu": "h100"}, cause_offset=1), 1)
    await h.actuator.apply(decision("Evicted", cause_offset=2, reason="FailedToStart"), 2)
    fixed = h.job
    del fixed["spec"]["template"]["spec"]["nodeSelector"]  # the user removes the selector
    fixed["metadata"]["resourceVersion"] = "300"
    h.kube.objects[job_path(WORKLOAD)] = fixed
    again = admitted({"cpu": "h100"}, cause_offset=3)
    out = await h.actuator.apply(again, 3)
    assert out.result == "applied"
    assert h.job["spec"]["suspend"] is False
    assert h.job["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "a"}
    assert h.job["metadata"]["annotations"][ANN_DECISION_ID] == again.id


# --------------------------------------------------------------------------- what is reported


async def test_a_missing_flavor_is_reported_as_flavor_not_found(h: Harness) -> None:
    out = await h.actuator.apply(admitted({"cpu": "a100"}, cause_offset=1), 1)
    assert out.result == "failed"
    assert [(e.reason, e.message) for e in h.reported] == [
        ("FlavorNotFound", "ResourceFlavor a100 not found")
    ]


async def test_a_template_the_apiserver_refuses_is_reported_as_api_error(h: Harness) -> None:
    refused = 'Job.batch "train" is invalid: spec.template.spec.tolerations[0].value: Invalid'
    h.kube.failures = [Permanent(422, refused)]
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    assert out.result == "failed"
    (report,) = h.reported
    assert (report.reason, report.decision_type, report.workload) == (
        "ApiError",
        "Admitted",
        f"{NS}/train",
    )
    assert refused in report.message and report.id.startswith("actuationfailed/")


async def test_transient_errors_of_an_admission_are_never_reported(h: Harness) -> None:
    h.kube.failures = [Transient(503, "unavailable"), Transient(0, "connection refused")] * 5
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    assert out.result == "applied" and h.reported == []


async def test_an_admission_waits_for_the_pods_as_long_as_it_takes() -> None:
    """A Job that ran before (its pods still going) is not a failed start: the
    admission waits past the stop timeout instead of releasing the quota."""
    h = Harness(wait_timeout=0.01)
    h.kube.objects[job_path(WORKLOAD)] = job().active(1).build()
    task = asyncio.create_task(h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1))
    while h.kube.gets < 4 and not task.done():  # three waits, each past wait_timeout
        await asyncio.sleep(0.01)
    assert not task.done() and h.reported == []
    h.job["status"] = {}  # the Job controller took the pod down
    out = await asyncio.wait_for(task, 10)
    assert out.result == "applied" and h.reported == []
    assert h.job["spec"]["suspend"] is False
