"""The actuator starts a Job only at the generation its admission was decided on
(``Decision.generation``): a Job that changed after it is refused as
``JobChanged`` without a write (docs/design/backstop.md)."""

from __future__ import annotations

import copy
from typing import Any

from actuator_builders import admitted, decision, job, order
from test_actuator_shell import FLAVOR, WORKLOAD, FakeKube, Harness

from kuota.actuation.patch import ANN_ORIGINAL, Fail, UpdateJob, plan
from kuota.actuation.scheduling import SchedulingFields, read_flavor
from kuota_actuator.apply import job_path
from kuota_actuator.kubeapi import Conflict

GPU = {"nvidia.com/gpu": "h100"}
FLAVORS = {"h100": read_flavor(FLAVOR)}


def at(generation: int, builder: Any = None) -> dict[str, Any]:
    m: dict[str, Any] = (builder or job()).build()
    m["metadata"]["generation"] = generation
    return m


class GenerationKube(FakeKube):
    """The apiserver's metadata.generation: +1 on every write that changes spec."""

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        before = copy.deepcopy(self.objects.get(path.removesuffix("/status")))
        new = await super().merge_patch(path, body)
        if new is not None and before is not None and new.get("spec") != before.get("spec"):
            new["metadata"]["generation"] = before["metadata"].get("generation", 0) + 1
            self.objects[path.removesuffix("/status")]["metadata"]["generation"] = new["metadata"][
                "generation"
            ]
        return new


def harness(stored: dict[str, Any]) -> Harness:
    h = Harness()
    h.kube = GenerationKube()
    h.actuator.kube = h.kube
    h.actuator.events.kube = h.kube
    h.kube.objects[job_path(WORKLOAD)] = stored
    return h


# ------------------------------------------------------------------------------ the plan


def test_plan_refuses_an_admission_of_a_job_at_another_generation() -> None:
    d = admitted(GPU, generation=1)
    step = plan(at(2), d, order=order(d), flavors=FLAVORS)
    assert isinstance(step, Fail) and step.reason == "JobChanged" and step.generation == 2
    assert "metadata.generation 2, admitted at 1" in step.message


def test_plan_starts_the_job_at_the_admissions_generation() -> None:
    d = admitted(GPU, generation=2)
    step = plan(at(2), d, order=order(d), flavors=FLAVORS)
    assert isinstance(step, UpdateJob) and step.final and step.job["spec"]["suspend"] is False


def test_plan_without_a_generation_does_not_check() -> None:
    d = admitted(GPU)
    assert isinstance(plan(at(7), d, order=order(d), flavors=FLAVORS), UpdateJob)


def test_plan_follows_the_shells_own_writes() -> None:
    """After the shell's own suspend (generation 2 -> 3), the admission may start at 3."""
    d = admitted(GPU, generation=2)
    step = plan(at(3), d, order=order(d), flavors=FLAVORS, generation=3)
    assert isinstance(step, UpdateJob)


# ------------------------------------------------------------------------------ the shell


async def test_a_job_grown_after_its_admission_is_not_started() -> None:
    """rogue-005: admitted at generation 1 (1 pod), grown to 4 pods while suspended
    (generation 2) before the actuator got to it: no write, JobChanged reported."""
    grown = at(2)
    grown["spec"]["parallelism"] = 4
    h = harness(grown)
    h.cache.note(copy.deepcopy(grown))
    out = await h.actuator.apply(admitted(GPU, generation=1), 5)
    assert out.result == "failed" and out.detail.startswith("JobChanged")
    assert h.kube.patches == [], "never unsuspended at the old size"
    assert h.job["spec"]["suspend"] is True
    (report,) = h.reported
    assert (report.reason, report.generation, report.decision_type) == ("JobChanged", 2, "Admitted")
    assert h.value("kuota_actuation_failures_total", reason="JobChanged") == 1


async def test_a_stale_cache_is_confirmed_before_refusing() -> None:
    """The watch cache still shows generation 1; the decision is for 2 (as is the Job)."""
    h = harness(at(2))
    h.cache.note(at(1))
    out = await h.actuator.apply(admitted(GPU, generation=2), 5)
    assert out.result == "applied" and h.reported == []
    assert h.job["spec"]["suspend"] is False


async def test_a_change_between_the_check_and_the_write_is_caught() -> None:
    """The cache matched (generation 1, resourceVersion 100) but the Job changed
    since (generation 2, 101): the PATCH's precondition fails, the fresh GET refuses."""
    changed = at(2)
    changed["metadata"]["resourceVersion"] = "101"
    h = harness(changed)
    h.cache.note(at(1))
    out = await h.actuator.apply(admitted(GPU, generation=1), 5)
    assert out.result == "failed" and [r.reason for r in h.reported] == ["JobChanged"]
    assert h.kube.patches == [], "the conditional write was refused: nothing landed"
    assert h.value("kuota_actuation_retries_total", cause="conflict") == 1
    assert h.job["spec"]["suspend"] is True


async def test_the_shells_own_suspend_before_a_start_is_not_a_change() -> None:
    """A Job still running with another placement (a stop never applied): the
    admission suspends it first (generation 1 -> 2), then starts it at 2."""
    injected = job().running().active(0).selector(gpu="a100")
    running = at(1, injected.annotate(**{ANN_ORIGINAL: SchedulingFields().to_json()}))
    del running["status"]["startTime"]
    h = harness(running)
    out = await h.actuator.apply(admitted(GPU, generation=1), 5)
    assert out.result == "applied", out
    assert h.reported == [] and len(h.kube.patches) == 2
    assert h.job["metadata"]["generation"] == 3 and h.job["spec"]["suspend"] is False
    assert h.job["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "h100"}


async def test_conflicts_then_the_change_are_one_refusal_not_a_loop() -> None:
    h = harness(at(2))
    h.kube.failures = [Conflict(409, "modified")]
    out = await h.actuator.apply(admitted(GPU, generation=1), 5)
    assert out.result == "failed" and [r.reason for r in h.reported] == ["JobChanged"]
    assert h.value("kuota_actuation_failures_total", reason="ActuationLoop") == 0


async def test_a_readmission_decided_before_kuotas_own_stop_was_seen_starts_the_job() -> None:
    """Admitted at 1 and started (1 -> 2), stopped by kuota (2 -> 3: suspend and
    restore), admitted again at 2 (the fold had not seen the stop yet): only this
    actuator's own writes moved the Job from 2 to 3, so the admission starts it."""
    h = harness(at(1))
    first = admitted(GPU, generation=1, cause_offset=5)
    assert (await h.actuator.apply(first, 5)).result == "applied"
    assert h.job["metadata"]["generation"] == 2
    stop = decision("Evicted", cluster_queue="cq", reason="Preempted", cause_offset=6)
    assert (await h.actuator.apply(stop, 6)).result == "applied"
    assert h.job["spec"]["suspend"] is True and h.job["metadata"]["generation"] == 4
    again = admitted(GPU, generation=2, cause_offset=7)
    out = await h.actuator.apply(again, 7)
    assert out.result == "applied", out
    assert h.reported == [] and h.job["spec"]["suspend"] is False


async def test_a_users_change_after_kuotas_own_writes_is_still_refused() -> None:
    """Started by kuota (1 -> 2), then a user's change (2 -> 3, not kuota's): an
    admission decided at 2 or 1 is for another Job, refused."""
    h = harness(at(1))
    assert (await h.actuator.apply(admitted(GPU, generation=1, cause_offset=5), 5)).result == (
        "applied"
    )
    stored = h.kube.objects[job_path(WORKLOAD)]
    stored["metadata"]["generation"] = 3
    stored["metadata"]["resourceVersion"] = "150"
    stored["spec"]["suspend"] = True
    stored["spec"]["parallelism"] = 4
    h.cache.note(copy.deepcopy(stored))
    out = await h.actuator.apply(admitted(GPU, generation=2, cause_offset=6), 6)
    assert out.result == "failed" and [r.reason for r in h.reported] == ["JobChanged"]
