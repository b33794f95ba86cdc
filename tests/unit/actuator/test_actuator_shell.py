"""The actuator shell's retry and reporting logic, against an in-memory apiserver."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from actuator_builders import NAME, NS, admitted, decision, job, tol
from prometheus_client import CollectorRegistry

from kuota.core.actuation import ANN_DECISION_ID
from kuota.events.schema import ActuationFailed
from kuota_actuator.apply import Actuator, job_path
from kuota_actuator.kubeapi import Conflict, Kube, Permanent, Transient
from kuota_actuator.metrics import ActuatorMetrics

FLAVOR = {
    "metadata": {"name": "h100"},
    "spec": {"nodeLabels": {"gpu": "h100"}, "tolerations": [tol("nvidia.com/gpu")]},
}


class FakeKube(Kube):
    """Objects by path; PUT enforces the resourceVersion precondition."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.failures: list[Exception] = []  # raised by the next calls, in order
        self.puts = 0
        self.events: list[dict[str, Any]] = []

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    async def get(self, path: str) -> dict[str, Any] | None:
        self._maybe_fail()
        obj = self.objects.get(path)
        return copy.deepcopy(obj) if obj is not None else None

    async def put(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        self._maybe_fail()
        key = path.removesuffix("/status")
        stored = self.objects.get(key)
        if stored is None:
            return None
        if body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise Conflict(409, "the object has been modified")
        new = copy.deepcopy(body)
        if path.endswith("/status"):
            new = {**copy.deepcopy(stored), "status": new.get("status", {})}
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = new
        self.puts += 1
        return copy.deepcopy(new)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if any(e["metadata"]["name"] == body["metadata"]["name"] for e in self.events):
            raise Conflict(409, "already exists")
        self.events.append(body)
        return body

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        raise AssertionError("not used")


class Harness:
    def __init__(self, **kw: Any) -> None:
        self.kube = FakeKube()
        self.reported: list[ActuationFailed] = []
        self.metrics = ActuatorMetrics(CollectorRegistry())

        async def report(event: ActuationFailed) -> None:
            self.reported.append(event)

        async def no_sleep(_: float) -> None:
            return None

        self.actuator = Actuator(
            self.kube,
            flavors=lambda: {"h100": FLAVOR},
            report=report,
            metrics=self.metrics,
            sleep=no_sleep,
            clock=lambda: 1000.5,
            **kw,
        )

    def value(self, name: str, **labels: str) -> float:
        v = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if v is None else v

    @property
    def job(self) -> dict[str, Any]:
        return self.kube.objects[job_path(f"{NS}/{NAME}")]


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.kube.objects[job_path(f"{NS}/{NAME}")] = job().build()
    return harness


async def test_admitted_is_applied_once_with_events(h: Harness) -> None:
    d = admitted({"nvidia.com/gpu": "h100"})
    out = await h.actuator.apply(d, 3)
    assert out.result == "applied" and out.latency == pytest.approx(0.5)
    assert h.job["spec"]["suspend"] is False
    assert h.job["metadata"]["annotations"][ANN_DECISION_ID] == d.id
    assert [e["reason"] for e in h.kube.events] == ["Admitted", "Started"]
    assert h.kube.events[0]["involvedObject"]["uid"] == "uid-1"
    rv = h.job["metadata"]["resourceVersion"]
    again = await h.actuator.apply(d, 3)
    assert again.result == "skipped"
    assert h.job["metadata"]["resourceVersion"] == rv and len(h.kube.events) == 2
    assert h.value("kuota_admitted_workloads_total", cluster_queue="cq") == 1


async def test_a_conflict_is_retried_with_a_fresh_get(h: Harness) -> None:
    h.kube.failures = [Conflict(409, "modified")]
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "applied"
    assert h.value("kuota_actuation_retries_total", cause="conflict") == 1


async def test_transient_errors_give_up_after_the_bound_and_report() -> None:
    h = Harness(max_attempts=3)
    h.kube.objects[job_path(f"{NS}/{NAME}")] = job().build()
    h.kube.failures = [Transient(503, "unavailable")] * 3
    d = admitted({"nvidia.com/gpu": "h100"})
    out = await h.actuator.apply(d, 1)
    assert out.result == "failed"
    assert [(e.reason, e.decision_id, e.workload) for e in h.reported] == [
        ("ApiUnavailable", d.id, f"{NS}/{NAME}")
    ]
    assert h.reported[0].id == f"actuationfailed/{d.id}" and h.reported[0].at == d.at
    assert h.value("kuota_actuation_retries_total", cause="transient") == 3
    assert h.job["spec"]["suspend"] is True


async def test_a_permanent_error_is_reported_at_once(h: Harness) -> None:
    h.kube.failures = [Permanent(403, "forbidden")]
    out = await h.actuator.apply(decision("Preempted"), 1)
    assert out.result == "failed"
    assert [e.reason for e in h.reported] == ["ApiError"]


async def test_a_missing_job_is_reported() -> None:
    h = Harness()
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "failed"
    assert [e.reason for e in h.reported] == ["JobNotFound"]
    assert h.value("kuota_actuation_failures_total", reason="JobNotFound") == 1


async def test_preempted_takes_three_writes_and_restores(h: Harness) -> None:
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"]["startTime"] = "2026-01-01T00:00:00Z"  # the Job controller started it
    puts = h.kube.puts
    out = await h.actuator.apply(decision("Preempted", cause_offset=2, reason="InClusterQueue"), 2)
    assert out.result == "applied"
    assert h.kube.puts - puts == 3  # suspend, reset startTime, restore
    assert h.job["spec"]["suspend"] is True
    assert "nodeSelector" not in h.job["spec"]["template"]["spec"]
    assert [e["reason"] for e in h.kube.events][-2:] == ["Stopped", "Preempted"]


async def test_inadmissible_writes_one_pending_event(h: Harness) -> None:
    d = decision("Inadmissible", message="insufficient quota")
    await h.actuator.apply(d, 1)
    await h.actuator.apply(d, 1)  # redelivered: same event name, not written twice
    assert [(e["reason"], e["type"]) for e in h.kube.events] == [("Pending", "Warning")]
    assert h.value("kuota_actuator_kube_events_total", reason="Pending", result="duplicate") == 1


async def test_a_stop_waits_for_the_job_controller(h: Harness) -> None:
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"].update(startTime="2026-01-01T00:00:00Z", active=1)
    gets = 0
    real_get = h.kube.get

    async def get(path: str) -> dict[str, Any] | None:
        nonlocal gets
        gets += 1
        stored = h.kube.objects.get(path)
        if stored is not None and stored["spec"].get("suspend") and gets > 4:
            stored["status"] = {}  # the Job controller took the pod down
        return await real_get(path)

    h.kube.get = get  # type: ignore[method-assign]
    out = await h.actuator.apply(decision("Evicted", cause_offset=2, reason="PodsReadyTimeout"), 2)
    assert out.result == "applied"
    assert "nodeSelector" not in h.job["spec"]["template"]["spec"]
    assert gets >= 5


async def test_a_stop_that_never_sees_the_pods_go_is_reported() -> None:
    h = Harness(wait_timeout=0.3)
    h.kube.objects[job_path(f"{NS}/{NAME}")] = job().build()
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"].update(active=1)
    out = await h.actuator.apply(decision("Preempted", cause_offset=2), 2)
    assert out.result == "failed"
    assert [e.reason for e in h.reported] == ["StopTimeout"]
    assert h.job["spec"]["suspend"] is True  # suspended, template not yet restored
