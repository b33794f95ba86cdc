"""The actuator shell's retry and reporting logic, against an in-memory apiserver."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from actuator_builders import NAME, NS, admitted, decision, job, tol
from prometheus_client import CollectorRegistry

from kuota.actuation.patch import ANN_DECISION_ID
from kuota.events.schema import ActuationFailed
from kuota_actuator.apply import Actuator, job_path, merge_patch
from kuota_actuator.events import EventSink
from kuota_actuator.jobcache import JobCache
from kuota_actuator.kubeapi import Conflict, Kube, Permanent, Transient
from kuota_actuator.metrics import ActuatorMetrics

FLAVOR = {
    "metadata": {"name": "h100"},
    "spec": {"nodeLabels": {"gpu": "h100"}, "tolerations": [tol("nvidia.com/gpu")]},
}
WORKLOAD = f"{NS}/{NAME}"


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the apiserver applies ``application/merge-patch+json``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out


class FakeKube(Kube):
    """Objects by path; PATCH enforces the resourceVersion precondition."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.failures: list[Exception] = []  # raised by the next calls, in order
        self.patch_failures: list[Exception] = []  # raised by the next PATCHes only
        self.gets = 0
        self.patches: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    async def get(self, path: str) -> dict[str, Any] | None:
        self._maybe_fail()
        self.gets += 1
        obj = self.objects.get(path)
        return copy.deepcopy(obj) if obj is not None else None

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        self._maybe_fail()
        if self.patch_failures:
            raise self.patch_failures.pop(0)
        key = path.removesuffix("/status")
        stored = self.objects.get(key)
        if stored is None:
            return None
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want is not None and want != stored["metadata"]["resourceVersion"]:
            raise Conflict(409, "the object has been modified")
        if path.endswith("/status"):
            new = {
                **copy.deepcopy(stored),
                "status": apply_merge_patch(stored.get("status"), body["status"]),
            }
        else:
            new = apply_merge_patch(stored, {k: v for k, v in body.items() if k != "status"})
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = new
        self.patches.append(body)
        return copy.deepcopy(new)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if any(e["metadata"]["name"] == body["metadata"]["name"] for e in self.events):
            raise Conflict(409, "already exists")
        self.events.append(body)
        return body


class Harness:
    def __init__(self, event_queue: int = 100, **kw: Any) -> None:
        self.kube = FakeKube()
        self.reported: list[ActuationFailed] = []
        self.metrics = ActuatorMetrics(CollectorRegistry())
        self.cache = JobCache(None)
        self.sink = EventSink(self.kube, self.metrics, capacity=event_queue, workers=1)
        self.sleeps: list[float] = []

        async def report(event: ActuationFailed) -> None:
            self.reported.append(event)

        async def no_sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            await asyncio.sleep(0)

        self.actuator = Actuator(
            self.kube,
            flavors=lambda: {"h100": FLAVOR},
            report=report,
            metrics=self.metrics,
            jobs=self.cache,
            events=self.sink,
            sleep=no_sleep,
            clock=lambda: 1000.5,
            **kw,
        )

    def value(self, name: str, **labels: str) -> float:
        v = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if v is None else v

    @property
    def job(self) -> dict[str, Any]:
        return self.kube.objects[job_path(WORKLOAD)]

    async def events(self) -> list[dict[str, Any]]:
        stop = asyncio.Event()
        task = asyncio.create_task(self.sink.run(stop))
        await self.sink.drain()
        stop.set()
        await task
        return self.kube.events


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.kube.objects[job_path(WORKLOAD)] = job().build()
    return harness


def test_merge_patch_sets_changes_and_nulls_removals() -> None:
    old = {"a": 1, "m": {"x": 1, "y": 2}, "l": [1, 2], "same": {"k": 1}}
    new = {"a": 2, "m": {"x": 1}, "l": [1], "same": {"k": 1}, "b": {"c": 3}}
    assert merge_patch(old, new) == {"a": 2, "m": {"y": None}, "l": [1], "b": {"c": 3}}
    assert apply_merge_patch(old, merge_patch(old, new)) == new


async def test_admitted_is_one_patch_from_the_cache_then_events(h: Harness) -> None:
    h.cache.note(job().build())  # as the watch would have it
    d = admitted({"nvidia.com/gpu": "h100"})
    out = await h.actuator.apply(d, 3)
    assert out.result == "applied" and out.latency == pytest.approx(0.5)
    assert (h.kube.gets, len(h.kube.patches)) == (0, 1), "one write, no read"
    (body,) = h.kube.patches
    assert body["metadata"]["resourceVersion"] == "100"  # the precondition
    assert body["spec"] == {
        "suspend": False,
        "template": {
            "spec": {"nodeSelector": {"gpu": "h100"}, "tolerations": [tol("nvidia.com/gpu")]}
        },
    }
    assert h.job["spec"]["suspend"] is False
    assert h.job["metadata"]["annotations"][ANN_DECISION_ID] == d.id
    events = await h.events()
    assert [e["reason"] for e in events] == ["Admitted", "Started"]
    assert events[0]["involvedObject"]["uid"] == "uid-1"
    rv = h.job["metadata"]["resourceVersion"]
    again = await h.actuator.apply(d, 3)  # redelivered: the cache holds our own write
    assert again.result == "skipped" and h.kube.gets == 0
    assert h.job["metadata"]["resourceVersion"] == rv and len(await h.events()) == 2
    assert h.value("kuota_admitted_workloads_total", cluster_queue="cq") == 1


async def test_a_stale_cache_never_unsuspends_twice(h: Harness) -> None:
    """The cache still shows the Job as it was before our write (e.g. a restart)."""
    d = admitted({"nvidia.com/gpu": "h100"})
    assert (await h.actuator.apply(d, 3)).result == "applied"
    fresh = JobCache(None)
    fresh.note(job().build())  # resourceVersion 100, no annotation: stale
    h.actuator.jobs = fresh
    again = await h.actuator.apply(d, 3)
    assert again.result == "skipped"
    assert len(h.kube.patches) == 1, "the stale write was refused by the precondition"
    assert h.value("kuota_actuation_retries_total", cause="conflict") == 1


async def test_a_conflict_is_retried_with_a_fresh_get(h: Harness) -> None:
    h.kube.failures = [Conflict(409, "modified")]
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "applied"
    assert h.value("kuota_actuation_retries_total", cause="conflict") == 1


async def test_conflicts_in_a_row_are_bounded_and_reported() -> None:
    h = Harness(max_conflicts=3)
    h.kube.objects[job_path(WORKLOAD)] = job().build()
    h.kube.failures = [Conflict(409, "modified")] * 3
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "failed" and [e.reason for e in h.reported] == ["Conflict"]


async def test_writes_that_fail_and_are_retried_are_no_actuation_loop() -> None:
    # The webhook down (ingest restarting): every PATCH of a queued Job is refused
    # with a 500 for a while. Ten failed attempts of one write are not ten writes.
    h = Harness()
    h.kube.objects[job_path(WORKLOAD)] = job().build()
    h.kube.patch_failures = [
        Transient(500, 'failed calling webhook "mutate-batch-v1-job.kuota.dev"')
    ] * 10 + [Conflict(409, "modified")] * 3
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "applied", out
    assert h.reported == []


async def test_an_unreachable_apiserver_is_retried_forever_with_a_capped_backoff() -> None:
    h = Harness(max_backoff=2.0)
    h.kube.objects[job_path(WORKLOAD)] = job().build()
    h.kube.failures = [Transient(0, "ClientConnectorError: connection refused")] * 40
    d = admitted({"nvidia.com/gpu": "h100"})
    out = await h.actuator.apply(d, 1)
    assert out.result == "applied" and h.reported == []
    assert h.job["spec"]["suspend"] is False
    assert h.value("kuota_actuation_retries_total", cause="transient") == 40
    assert max(h.sleeps) <= 2.0 and sum(h.sleeps) > 30, h.sleeps
    assert h.value("kuota_actuator_apiserver_unreachable") == 0  # back once it answered


async def test_a_permanent_error_is_reported_at_once(h: Harness) -> None:
    h.kube.failures = [Permanent(403, "forbidden")]
    out = await h.actuator.apply(decision("Preempted"), 1)
    assert out.result == "failed"
    assert [e.reason for e in h.reported] == ["ApiError"]


async def test_a_missing_job_is_reported() -> None:
    h = Harness()
    d = admitted({"nvidia.com/gpu": "h100"})
    out = await h.actuator.apply(d, 1)
    assert out.result == "failed"
    assert [(e.reason, e.decision_id, e.workload) for e in h.reported] == [
        ("JobNotFound", d.id, WORKLOAD)
    ]
    assert h.reported[0].id == f"actuationfailed/{d.id}" and h.reported[0].at == d.at
    assert h.value("kuota_actuation_failures_total", reason="JobNotFound") == 1


async def test_a_failure_seen_in_the_cache_is_confirmed_with_a_get(h: Harness) -> None:
    h.cache.note(job().uid("an-older-job").build())  # the cache has the replaced Job
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "applied" and h.reported == []
    assert h.value("kuota_actuation_retries_total", cause="stale") == 1


async def test_preempted_takes_three_writes_and_restores(h: Harness) -> None:
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"]["startTime"] = "2026-01-01T00:00:00Z"  # the Job controller started it
    h.job["metadata"]["resourceVersion"] = "200"
    patches = len(h.kube.patches)
    out = await h.actuator.apply(decision("Preempted", cause_offset=2, reason="InClusterQueue"), 2)
    assert out.result == "applied"
    assert len(h.kube.patches) - patches == 3  # suspend, reset startTime, restore
    assert h.job["spec"]["suspend"] is True
    assert "startTime" not in h.job["status"]
    assert "nodeSelector" not in h.job["spec"]["template"]["spec"]
    assert [e["reason"] for e in await h.events()][-2:] == ["Stopped", "Preempted"]


async def test_suspended_is_one_patch_and_a_warning_event(h: Harness) -> None:
    h.kube.objects[job_path(WORKLOAD)] = job().running().build()  # the user unsuspended it
    d = decision("Suspended", reason="StartedWithoutAdmission", message="started without admission")
    out = await h.actuator.apply(d, 4)
    assert out.result == "applied" and len(h.kube.patches) == 1
    (body,) = h.kube.patches
    assert body["spec"] == {"suspend": True}
    assert body["metadata"]["annotations"][ANN_DECISION_ID] == d.id
    assert h.job["spec"]["suspend"] is True
    events = await h.events()
    assert [(e["reason"], e["message"], e["type"]) for e in events] == [
        ("Suspended", "started without admission", "Warning")
    ]
    assert h.value("kuota_actuator_decisions_total", type="Suspended", outcome="applied") == 1


async def test_inadmissible_writes_one_pending_event(h: Harness) -> None:
    d = decision("Inadmissible", message="insufficient quota")
    await h.actuator.apply(d, 1)
    await h.actuator.apply(d, 1)  # redelivered: same event name, not written twice
    events = await h.events()
    assert [(e["reason"], e["type"]) for e in events] == [("Pending", "Warning")]
    assert h.value("kuota_actuator_kube_events_total", reason="Pending", result="duplicate") == 1


async def test_a_full_event_queue_drops_events_and_never_blocks_actuation() -> None:
    h = Harness(event_queue=1)
    h.kube.objects[job_path(WORKLOAD)] = job().build()
    out = await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}), 1)
    assert out.result == "applied"
    await h.actuator.apply(decision("Inadmissible", message="full"), 2)
    assert h.value("kuota_actuator_events_dropped_total", reason="Pending") == 1
    assert [e["reason"] for e in await h.events()] == ["Admitted", "Started"]


async def test_a_stop_waits_for_the_job_controller(h: Harness) -> None:
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"].update(startTime="2026-01-01T00:00:00Z", active=1)
    h.job["metadata"]["resourceVersion"] = "200"
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


async def test_a_stop_wakes_on_the_watch_instead_of_polling(h: Harness) -> None:
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"].update(startTime="2026-01-01T00:00:00Z", active=1)
    h.job["metadata"]["resourceVersion"] = "200"
    h.cache.note(copy.deepcopy(h.job))
    stop = asyncio.create_task(
        h.actuator.apply(decision("Preempted", cause_offset=2, reason="InClusterQueue"), 2)
    )
    for _ in range(50):
        await asyncio.sleep(0.01)
        if h.job["spec"].get("suspend"):
            break
    gets = h.kube.gets
    quiet = copy.deepcopy(h.job)  # the Job controller took the pod down; the watch shows it
    quiet["status"] = {}
    quiet["metadata"]["resourceVersion"] = str(int(quiet["metadata"]["resourceVersion"]) + 1)
    h.kube.objects[job_path(WORKLOAD)] = copy.deepcopy(quiet)
    h.cache.note(quiet)
    out = await asyncio.wait_for(stop, 5)
    assert out.result == "applied" and h.kube.gets == gets, "no GET: the cache told"
    assert "nodeSelector" not in h.job["spec"]["template"]["spec"]


async def test_a_stop_that_never_sees_the_pods_go_is_reported() -> None:
    h = Harness(wait_timeout=0.3)
    h.kube.objects[job_path(WORKLOAD)] = job().build()
    await h.actuator.apply(admitted({"nvidia.com/gpu": "h100"}, cause_offset=1), 1)
    h.job["status"].update(active=1)
    h.job["metadata"]["resourceVersion"] = "200"
    out = await h.actuator.apply(decision("Preempted", cause_offset=2), 2)
    assert out.result == "failed"
    assert [e.reason for e in h.reported] == ["StopTimeout"]
    assert h.job["spec"]["suspend"] is True  # suspended, template not yet restored
