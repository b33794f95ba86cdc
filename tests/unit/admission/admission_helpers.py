"""Small builders for the admission unit tests: a journal of manifests as
events, Kafka records of it, and the in-process oracle (the Fold)."""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord

from kuota.bus.topics import Topics
from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectUpserted,
    Tick,
    WorkloadFinished,
)

TOPICS = Topics(journal="t.journal", decisions="t.decisions", deadletter="t.deadletter")
GPU = "nvidia.com/gpu"


def _obj(kind: str, name: str, ns: str = "", **rest: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if ns:
        meta["namespace"] = ns
    api = "batch/v1" if kind == "Job" else "kueue.x-k8s.io/v1beta2"
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def job(name: str, gpus: int) -> dict[str, Any]:
    o = _obj(
        "Job",
        name,
        "ns",
        spec={
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {GPU: str(gpus)}}}
                    ]
                }
            }
        },
    )
    o["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    o["metadata"]["uid"] = f"uid-{name}"
    return o


def journal() -> list[JournalEvent]:
    cq = _obj(
        "ClusterQueue",
        "cq",
        spec={
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "f", "resources": [{"name": GPU, "nominalQuota": 2}]}],
                }
            ],
        },
    )
    objs = [
        _obj("ResourceFlavor", "f", spec={}),
        cq,
        _obj("LocalQueue", "lq", "ns", spec={"clusterQueue": "cq"}),
        job("a", 1),
        job("b", 1),
        job("c", 2),
    ]
    evs: list[JournalEvent] = [
        ObjectUpserted(id=f"{o['kind']}/{o['metadata']['name']}@1", at=10.0 + i, object=o)
        for i, o in enumerate(objs)
    ]
    evs.append(WorkloadFinished(id="finished/ns/a/uid-a", at=20.0, namespace="ns", name="a"))
    evs.append(WorkloadFinished(id="finished/ns/b/uid-b", at=21.0, namespace="ns", name="b"))
    evs.append(Tick(id="tick@22", at=22.0))
    return evs


def rec(
    offset: int, value: bytes | None, key: bytes | None = b"kuota"
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=TOPICS.journal,
        partition=0,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value or b""),
        headers=[],
    )


def records(events: list[JournalEvent], first: int = 0) -> list[ConsumerRecord[bytes, bytes]]:
    return [rec(first + i, e.model_dump_json().encode()) for i, e in enumerate(events)]


def oracle(events: list[tuple[int, JournalEvent]]) -> list[Decision]:
    fold = Fold()
    return [d for off, e in events for d in fold.apply(e, offset=off)]
