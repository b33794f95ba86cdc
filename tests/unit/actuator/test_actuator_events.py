"""Events in the background: they yield to Job writes, and a full queue drops, never blocks."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from kuota.actuation.patch import EventSpec
from kuota_actuator.events import EventSink
from kuota_actuator.kubeapi import Kube
from kuota_actuator.metrics import ActuatorMetrics

TARGET = ({"apiVersion": "batch/v1", "kind": "Job", "name": "j", "namespace": "ns"}, "ns")


class Posts(Kube):
    def __init__(self) -> None:
        self.posted: list[tuple[float, str]] = []

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        self.posted.append((asyncio.get_running_loop().time(), body["reason"]))
        return body


async def test_events_wait_while_the_actuator_is_busy_then_trickle_out() -> None:
    kube = Posts()
    busy = True
    sink = EventSink(
        kube, ActuatorMetrics(CollectorRegistry()), workers=1, busy=lambda: busy, yield_for=0.3
    )
    stop = asyncio.Event()
    task = asyncio.create_task(sink.run(stop))
    start = asyncio.get_running_loop().time()
    assert sink.emit("d1", (EventSpec("Admitted", "m"),), target=TARGET)
    await asyncio.sleep(0.15)
    assert kube.posted == [], "written while the Job writes had the slots"
    await sink.drain()
    assert [r for _, r in kube.posted] == ["Admitted"]
    assert kube.posted[0][0] - start >= 0.25, "held back for yield_for, then written anyway"
    busy = False
    sink.emit("d2", (EventSpec("Started", "m"),), target=TARGET)
    await asyncio.wait_for(sink.drain(), 0.2)  # not busy: at once
    stop.set()
    await task


async def test_a_full_queue_drops_and_counts() -> None:
    metrics = ActuatorMetrics(CollectorRegistry())
    sink = EventSink(Posts(), metrics, capacity=2)
    specs = (EventSpec("Pending", "m", "Warning"),)
    assert [sink.emit(f"d{i}", specs, target=TARGET) for i in range(3)] == [True, True, False]
    assert (
        metrics.registry.get_sample_value(
            "kuota_actuator_events_dropped_total", {"reason": "Pending"}
        )
        == 1
    )
    assert sink.pending == 2


def test_metrics_refresh_works_before_any_request_and_keeps_its_labels() -> None:
    """A misplaced attribute once made refresh() fail until the first API request
    (found by the bad-input helper in the dead-letter test's log)."""
    from actuator_builders import admitted

    from kuota.status.model import ClusterQueueReadModel

    metrics = ActuatorMetrics(CollectorRegistry())
    model = ClusterQueueReadModel()
    model.apply(admitted({"cpu": "f"}, cq="cq", usage={"f": {"cpu": "1"}}))
    metrics.refresh(model)  # before any observe_request
    metrics.observe_request("PATCH", 0.01)
    metrics.refresh(ClusterQueueReadModel())  # the ClusterQueue is gone: its gauges too
    value = metrics.registry.get_sample_value(
        "kuota_pending_workloads", {"cluster_queue": "cq", "status": "active"}
    )
    assert value is None
