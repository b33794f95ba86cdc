"""The actuator's start-up replay on the real broker: the read model is rebuilt
from the decisions up to the group's committed offset, so a stop whose pods a
killed incarnation was still waiting for is watched again.

The chaos run found the bug this pins: the replay asked a consumer that
subscribes to nothing for the topic's partitions, which it never loads, so
every restart rebuilt the model from 0 decisions and forgot the stops in
flight (a preempted Job then waited forever for a release nobody reported)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.core.fold.decisions import admitted, preempted
from kuota.events.schema import Decision
from kuota_actuator.loop import Service
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.settings import Config

pytestmark = pytest.mark.integration


def _config() -> Config:
    assert os.environ.get("KUOTA_KAFKA_BOOTSTRAP"), "KUOTA_KAFKA_BOOTSTRAP unset: scripts/stack up"
    kafka = dataclasses.replace(
        KafkaSettings.from_env(), topic_prefix=f"replay{uuid.uuid4().hex[:8]}."
    )
    return Config(
        kafka=kafka,
        redis_url="redis://127.0.0.1:1/0",  # not used by the replay
        kubeconfig=None,
        metrics_port=0,
        log_level="INFO",
        status_interval=1.0,
        max_attempts=1,
        max_batch=10,
    )


def _decision(n: int, body: dict[str, object]) -> bytes:
    return (
        Decision.model_validate({"id": f"d{n}", "cause": f"c{n}", "at": float(n), **body})
        .model_dump_json()
        .encode()
    )


async def test_a_restart_rebuilds_the_read_model_up_to_the_committed_offset() -> None:
    cfg = _config()
    topics = await ensure_topics(cfg.kafka)
    kw = cfg.kafka.client_kwargs()
    usage = {"f": {"gpu": "1"}}
    records = [
        admitted(
            workload="ns/a",
            uid="ua",
            cluster_queue="cq",
            flavors={"main": {"gpu": "f"}},
            usage=usage,
        ),
        admitted(
            workload="ns/b",
            uid="ub",
            cluster_queue="cq",
            flavors={"main": {"gpu": "f"}},
            usage=usage,
        ),
        preempted(
            workload="ns/a",
            uid="ua",
            cluster_queue="cq",
            reason="InClusterQueue",
            message="m",
            preemptor="ns/c",
            policy="withinClusterQueue=LowerPriority",
        ),
        # past the committed offset: the previous incarnation had not applied it
        admitted(
            workload="ns/c",
            uid="uc",
            cluster_queue="cq",
            flavors={"main": {"gpu": "f"}},
            usage=usage,
        ),
    ]
    producer = AIOKafkaProducer(**kw)
    await producer.start()
    try:
        for n, body in enumerate(records):
            await producer.send_and_wait(topics.decisions, _decision(n, body))
    finally:
        await producer.stop()
    # the previous incarnation applied and committed the first three
    group = AIOKafkaConsumer(
        topics.decisions,
        group_id=cfg.group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **kw,
    )
    await group.start()
    try:
        for _ in range(100):  # joined once it fetches
            if await group.getmany(timeout_ms=200):
                break
        await group.commit({TopicPartition(topics.decisions, 0): 3})
    finally:
        await group.stop()

    svc = Service(cfg, ActuatorMetrics())
    folded = await asyncio.wait_for(svc._replay(topics, asyncio.Event()), 30)

    assert folded == 3
    stops = svc.model.draining()
    assert [(d.stop_id, d.workload, d.uid) for d in stops] == [("d2", "ns/a", "ua")]
    place = svc.model.workload("ns/b")
    assert place is not None and place.cluster_queue == "cq"
    assert svc.model.workload("ns/c") is None  # after the committed offset: not folded


async def test_a_group_that_never_committed_replays_nothing() -> None:
    cfg = _config()
    topics = await ensure_topics(cfg.kafka)
    svc = Service(cfg, ActuatorMetrics())
    assert await asyncio.wait_for(svc._replay(topics, asyncio.Event()), 30) == 0
    assert svc.model.draining() == []
