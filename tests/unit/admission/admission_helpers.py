"""What the admission unit tests share: a small journal (built with
tests/builders), Kafka records of it, and the in-process oracle (the Fold)."""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord
from builders import manifests
from builders.journal import upserted
from builders.kafka import consumer_record
from builders.manifests import cluster_queue, flavor, local_queue

from kuota.bus.topics import Topics
from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    Decision,
    JournalEvent,
    Tick,
    WorkloadFinished,
)

TOPICS = Topics(journal="t.journal", decisions="t.decisions", deadletter="t.deadletter")


def job(name: str, gpus: int) -> dict[str, Any]:
    """A Job of ``gpus`` GPUs in namespace ``ns``, queued in ``lq``."""
    return manifests.job(
        name,
        namespace="ns",
        gpus=str(gpus),
        created=None,
        uid=f"uid-{name}",
        resource_version="1",
        image="x",
    )


def journal() -> list[JournalEvent]:
    """ClusterQueue ``cq`` of 2 GPUs in flavor ``f``; Jobs a, b (1 GPU) and c (2);
    a and b finish; a Tick."""
    objs = [
        flavor("f", spec={}, resource_version="1"),
        cluster_queue("cq", gpus=2, flavor="f", resource_version="1"),
        local_queue("lq", namespace="ns", cluster_queue="cq", resource_version="1"),
        job("a", 1),
        job("b", 1),
        job("c", 2),
    ]
    evs: list[JournalEvent] = [upserted(o, 10.0 + i) for i, o in enumerate(objs)]
    evs.append(WorkloadFinished(id="finished/ns/a/uid-a", at=20.0, namespace="ns", name="a"))
    evs.append(WorkloadFinished(id="finished/ns/b/uid-b", at=21.0, namespace="ns", name="b"))
    evs.append(Tick(id="tick@22", at=22.0))
    return evs


def rec(
    offset: int, value: bytes | None, key: bytes | None = b"kuota"
) -> ConsumerRecord[bytes, bytes]:
    return consumer_record(TOPICS.journal, offset, value, key=key)


def records(events: list[JournalEvent], first: int = 0) -> list[ConsumerRecord[bytes, bytes]]:
    return [rec(first + i, e.model_dump_json().encode()) for i, e in enumerate(events)]


def oracle(events: list[tuple[int, JournalEvent]]) -> list[Decision]:
    fold = Fold()
    return [d for off, e in events for d in fold.apply(e, offset=off)]
