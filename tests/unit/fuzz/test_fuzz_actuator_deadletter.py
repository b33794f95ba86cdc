"""The actuator's consume loop dead-letters decision records it cannot decode.

A unit test of the shell with stand-ins for the Kafka clients and the
actuator (the shell's wiring is what is under test; the integration suites run
it on the real stack): a batch of decision records with poison mixed in is
consumed; each poison record is sent to the dead-letter topic with its original
bytes, reason, source and consumer BEFORE any offset past it is committed, the
good decisions are applied in order, and the loop ends cleanly.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition
from builders.kafka import FakeProducer, consumer_record
from fuzz_support import golden_records
from prometheus_client import CollectorRegistry

from kuota.bus.deadletter import CONSUMER_HEADER, REASON_HEADER, SOURCE_HEADER
from kuota.bus.settings import KafkaSettings
from kuota.events.schema import Decision, parse_decision
from kuota_actuator.loop import Service
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.settings import Config

TOPIC = "u.decisions"
TP = TopicPartition(TOPIC, 0)
GOOD = golden_records("decision")[:3]
POISON = [b"\x00\xff", b'{"type": "Admitted", "id": "x"', b'{"kind": "Job"}']


def _rec(offset: int, value: bytes) -> ConsumerRecord[bytes, bytes]:
    return consumer_record(TOPIC, offset, value, key=b"k")


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []


class FakeConsumer:
    def __init__(self, log: Log, records: list[ConsumerRecord[bytes, bytes]], stop: asyncio.Event):
        self.log, self.batches, self.stop = log, [records], stop

    async def getmany(self, **_: Any) -> dict[TopicPartition, list[Any]]:
        if self.batches:
            return {TP: self.batches.pop()}
        await asyncio.sleep(0.01)
        self.stop.set()
        return {}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.log.events.append(("commit", offsets[TP]))

    def highwater(self, tp: TopicPartition) -> int:
        return 0

    async def position(self, tp: TopicPartition) -> int:
        return 0


class FakeActuator:
    def __init__(self, log: Log) -> None:
        self.log = log

    async def apply(self, decision: Decision, offset: int) -> None:
        self.log.events.append(("applied", decision.id))


async def test_poison_decisions_are_dead_lettered_before_their_offsets_commit() -> None:
    values = [GOOD[0], POISON[0], GOOD[1], POISON[1], POISON[2], GOOD[2]]
    records = [_rec(i, v) for i, v in enumerate(values)]
    log, stop = Log(), asyncio.Event()
    cfg = Config(
        kafka=KafkaSettings(bootstrap="127.0.0.1:1", topic_prefix="u."),
        redis_url="redis://x",
        kubeconfig=None,
        metrics_port=0,
        log_level="INFO",
        status_interval=1.0,
        max_attempts=1,
        max_batch=10,
    )
    service = Service(cfg, ActuatorMetrics(CollectorRegistry()))
    await service._consume(
        FakeConsumer(log, records, stop),  # type: ignore[arg-type]
        FakeActuator(log),  # type: ignore[arg-type]
        stop,
        producer=FakeProducer(lambda topic, kw: log.events.append(("dead", (topic, kw)))),  # type: ignore[arg-type]
        deadletter="u.deadletter",
    )
    dead = [kw for kind, (topic, kw) in ((k, v) for k, v in log.events if k == "dead")]
    assert [d["value"] for d in dead] == POISON, "the original bytes, in order"
    for offset, d in zip((1, 3, 4), dead, strict=True):
        headers = dict(d["headers"])
        assert headers[REASON_HEADER] and d["key"] == b"k"
        assert headers[SOURCE_HEADER] == f"{TOPIC}/0/{offset}".encode()
        assert headers[CONSUMER_HEADER] == b"u-actuator"
    applied = [v for k, v in log.events if k == "applied"]
    # Different workloads are applied concurrently (lanes): every good one, once.
    assert sorted(applied) == sorted(parse_decision(g).id for g in GOOD)
    commits = [(i, v) for i, (k, v) in enumerate(log.events) if k == "commit"]
    assert commits and commits[-1][1] == len(values), "everything committed in the end"
    last_dead = max(i for i, (k, _) in enumerate(log.events) if k == "dead")
    assert all(i > last_dead for i, _ in commits), "no offset committed before its dead letter"
