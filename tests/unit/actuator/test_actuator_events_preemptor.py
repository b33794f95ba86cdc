"""A victim's Events name its preemptor by uid, not namespace/name (#23 item 11),
unless ``KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR`` says a single tenant owns them all."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kuota.actuation.patch import EventSpec
from kuota.bus.settings import SettingsError
from kuota.events.schema import Decision
from kuota_actuator.events import EventSink, hide_preemptor
from kuota_actuator.kubeapi import Kube
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.settings import load_config

VICTIM = ({"apiVersion": "batch/v1", "kind": "Job", "name": "small", "namespace": "a"}, "a")
PREEMPTOR = "tenant-b/big"
MESSAGE = (
    f"Preempted to accommodate a workload ({PREEMPTOR}) due to prioritization in the ClusterQueue"
)


class Api(Kube):
    """POSTs recorded; GETs answered from ``jobs`` (path -> object), else 404 (None)."""

    def __init__(self, jobs: dict[str, dict[str, Any]] | None = None) -> None:
        self.jobs = jobs or {}
        self.gets: list[str] = []
        self.messages: dict[str, str] = {}

    async def get(self, path: str) -> dict[str, Any] | None:
        self.gets.append(path)
        return self.jobs.get(path)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        self.messages[body["reason"]] = body["message"]
        return body


def preempted(preemptor: str | None = PREEMPTOR) -> Decision:
    return Decision(
        id="d" * 24,
        cause="c",
        at=time.time(),
        type="Preempted",
        workload="a/small",
        uid="victim-uid",
        reason="InClusterQueue",
        preemptor=preemptor,
        message=MESSAGE,
    )


SPECS = (EventSpec("Stopped", MESSAGE), EventSpec("Preempted", MESSAGE))


async def emit(sink: EventSink, decision: Decision, specs: tuple[EventSpec, ...] = SPECS) -> None:
    assert sink.emit(decision.id, specs, target=VICTIM, decision=decision)
    await sink._write(sink._queue.get_nowait())  # one item, in this task


async def test_the_victims_events_name_the_preemptor_by_its_cached_uid() -> None:
    api = Api()
    sink = EventSink(api, ActuatorMetrics(CollectorRegistry()), uid_of={PREEMPTOR: "u-1"}.get)
    await emit(sink, preempted())
    want = (
        "Preempted to accommodate a workload (UID: u-1, JobUID: u-1) "
        "due to prioritization in the ClusterQueue"
    )
    assert api.messages == {"Stopped": want, "Preempted": want}
    assert api.gets == [], "the cache knew the uid: no GET"


async def test_a_preemptor_not_cached_is_read_and_one_not_found_is_unknown() -> None:
    path = "/apis/batch/v1/namespaces/tenant-b/jobs/big"
    api = Api({path: {"metadata": {"name": "big", "uid": "u-2"}}})
    sink = EventSink(api, ActuatorMetrics(CollectorRegistry()))
    await emit(sink, preempted())
    assert api.gets == [path]
    assert all("(UID: u-2, JobUID: u-2)" in m for m in api.messages.values()), api.messages
    gone = Api()
    sink = EventSink(gone, ActuatorMetrics(CollectorRegistry()))
    await emit(sink, preempted())
    for message in gone.messages.values():
        assert "(UID: UNKNOWN, JobUID: UNKNOWN)" in message
        assert "tenant-b" not in message and "big" not in message


async def test_the_setting_keeps_the_name_and_other_decisions_are_untouched() -> None:
    api = Api()
    sink = EventSink(api, ActuatorMetrics(CollectorRegistry()), name_preemptor=True)
    await emit(sink, preempted())
    assert api.messages == {"Stopped": MESSAGE, "Preempted": MESSAGE}
    other = Api()
    sink = EventSink(other, ActuatorMetrics(CollectorRegistry()))
    evicted = preempted().model_copy(update={"type": "Evicted", "preemptor": None})
    await emit(sink, evicted, (EventSpec("EvictedDueToX", f"about {PREEMPTOR}"),))
    assert other.messages == {"EvictedDueToX": f"about {PREEMPTOR}"} and other.gets == []


def test_only_the_whole_key_is_replaced() -> None:
    specs = (EventSpec("Preempted", f"({PREEMPTOR}) beside {PREEMPTOR}2 and x{PREEMPTOR}"),)
    (spec,) = hide_preemptor(specs, PREEMPTOR, "u")
    assert spec.message == f"(UID: u, JobUID: u) beside {PREEMPTOR}2 and x{PREEMPTOR}"
    long = (EventSpec("Preempted", f"({PREEMPTOR})" + "x" * 1020),)
    assert len(hide_preemptor(long, PREEMPTOR, "u" * 36)[0].message) == 1024


def test_the_setting_is_read_once_and_a_bad_value_refused(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    env = {
        "KUOTA_KAFKA_BOOTSTRAP": "localhost:9092",
        "KUOTA_REDIS_URL": "redis://localhost:6379/0",
        "KUBECONFIG": str(kubeconfig),
    }
    assert load_config(env).events_name_preemptor is False
    on = {**env, "KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR": "true"}
    assert load_config(on).events_name_preemptor is True
    with pytest.raises(SettingsError, match="KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR"):
        load_config({**env, "KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR": "names"})
