"""The ingest shell's loops with fakes for the apiserver, Kafka and Redis:
a missing CRD is retried (not fatal), a restart seeded from remembered state
journals only what changed plus the deletes it missed, and Redis is written
only after Kafka acknowledged."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from builders.kafka import FakeProducer
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.events.schema import ObjectDeleted, ObjectUpserted, parse_event
from kuota.kube.translate import Seen, tick
from kuota.kube.watch import Resource
from kuota_ingest import seen_store
from kuota_ingest.journal import Item, JournalWriter
from kuota_ingest.sources import Clock, Sources, Watched


class FakeResponse:
    def __init__(self, body: dict[str, Any] | None = None, lines: list[bytes] | None = None):
        self._body = body
        self._lines = lines or []
        self.content = self._iter()

    async def _iter(self) -> Any:
        for line in self._lines:
            yield line
        await asyncio.sleep(3600)  # a watch that stays open

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()

    def release(self) -> None:
        pass


class FakeApi:
    """LIST answers from ``items`` (or 404 while ``missing``); WATCH stays quiet."""

    def __init__(self, items: list[dict[str, Any]], *, missing: bool = False) -> None:
        self.items = items
        self.missing = missing
        self.lists = 0

    async def call_api(self, path: str, method: str, **kw: Any) -> FakeResponse:
        query = dict(kw.get("query_params") or [])
        if self.missing:
            raise ApiException(status=404, reason="Not Found")
        if query.get("watch") == "true":
            return FakeResponse(lines=[])
        self.lists += 1
        return FakeResponse({"items": self.items, "metadata": {"resourceVersion": "1000"}})


class FakePipeline:
    def __init__(self, redis: FakeRedis) -> None:
        self._redis = redis
        self._ops: list[Any] = []

    async def __aenter__(self) -> FakePipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def hset(self, key: str, mapping: dict[str, str]) -> None:
        self._ops.append(("hset", key, mapping))

    def hdel(self, key: str, *fields: str) -> None:
        self._ops.append(("hdel", key, fields))

    async def execute(self) -> None:
        for op, key, arg in self._ops:
            h = self._redis.hashes.setdefault(key, {})
            if op == "hset":
                h.update(arg)
                self._redis.log.append(f"hset {sorted(arg)}")
            else:
                for f in arg:
                    h.pop(f, None)
                self._redis.log.append(f"hdel {sorted(arg)}")


class FakeRedis:
    def __init__(self, log: list[str]) -> None:
        self.hashes: dict[str, dict[str, str]] = {}
        self.log = log

    def pipeline(self, transaction: bool = False) -> FakePipeline:
        return FakePipeline(self)


def _ns(name: str, rv: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv, "labels": labels}
    }


async def _run_until(cond: Any, what: str, timeout: float = 5) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


def _setup(
    api: FakeApi, memory: dict[str, Seen]
) -> tuple[Sources, JournalWriter, FakeProducer, FakeRedis]:
    producer = FakeProducer()
    redis = FakeRedis(producer.log)
    writer = JournalWriter(producer, topic="j", redis=redis, seen_key="seen")  # type: ignore[arg-type]
    sources = Sources(api, writer, memory=memory, clock=Clock(), crd_retry_seconds=0.05)  # type: ignore[arg-type]
    return sources, writer, producer, redis


async def test_restart_journals_only_changes_and_missed_deletes() -> None:
    # Before the restart: a, b, c, gone. While down: b relabelled, c's status
    # changed (new rv, same digest), gone deleted, new created.
    first_api = FakeApi([_ns("a", "5"), _ns("b", "6"), _ns("c", "8"), _ns("gone", "7")])
    c_status = {**_ns("c", "11"), "status": {"phase": "Terminating"}}
    api = FakeApi([_ns("a", "5"), _ns("b", "9", team="x"), c_status, _ns("new", "10")])
    sources, writer, producer, redis = _setup(first_api, {})
    tasks = [asyncio.create_task(writer.run())]
    tasks.append(asyncio.create_task(sources.watch(Watched(Resource("Namespace", "/ns")))))
    await _run_until(lambda: len(producer.sent) == 4, "first run journaled 4")
    await _run_until(lambda: len(redis.hashes.get("seen", {})) == 4, "memory persisted")
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    raw = redis.hashes["seen"]
    memory = {k: s for k, v in raw.items() if (s := seen_store.loads("seen", k, v))}
    sources2, writer2, producer2, redis2 = _setup(api, memory)
    tasks = [asyncio.create_task(writer2.run())]
    tasks.append(asyncio.create_task(sources2.watch(Watched(Resource("Namespace", "/ns")))))
    await _run_until(lambda: len(producer2.sent) == 3, "second run journaled 3")
    await asyncio.sleep(0.05)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    events = sorted((parse_event(v) for v in producer2.sent), key=lambda e: e.id)
    assert [e.id for e in events] == [
        "Namespace//b@9",
        "Namespace//gone@7/deleted",
        "Namespace//new@10",
    ], "a is unchanged: not journaled again"
    assert isinstance(events[1], ObjectDeleted) and isinstance(events[0], ObjectUpserted)
    assert set(redis2.hashes["seen"]) == {"Namespace//b", "Namespace//c", "Namespace//new"}, (
        "the delete was forgotten, the new object remembered; a (unchanged) was not rewritten"
    )
    c = seen_store.loads("seen", "Namespace//c", redis2.hashes["seen"]["Namespace//c"])
    assert c is not None and c.rv == "11", "a skipped change still advances the remembered rv"


async def test_missing_crd_is_retried_then_watched(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi([{"metadata": {"name": "cq", "resourceVersion": "3"}, "spec": {}}], missing=True)
    sources, writer, producer, _ = _setup(api, {})
    watched = Watched(Resource("ClusterQueue", "/cq"), crd="clusterqueues.kueue.x-k8s.io")
    with caplog.at_level(logging.INFO, logger="kuota_ingest.sources"):
        tasks = [
            asyncio.create_task(writer.run()),
            asyncio.create_task(sources.watch(watched)),
            asyncio.create_task(sources.monitor(["ClusterQueue"], period=0.01)),
        ]
        await _run_until(lambda: "ClusterQueue" in sources.missing, "missing noticed")
        await asyncio.sleep(0.2)  # several retries, one warning
        assert not sources.listed("ClusterQueue")
        api.missing = False  # the CRD gets installed
        await _run_until(lambda: len(producer.sent) == 1, "the ClusterQueue journaled")
        await _run_until(lambda: "ClusterQueue" not in sources.missing, "no longer missing")
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    warnings = [r for r in caplog.records if "is not installed" in r.getMessage()]
    assert len(warnings) == 1, "the missing CRD is logged once, clearly"
    assert "clusterqueues.kueue.x-k8s.io" in warnings[0].getMessage()
    assert any("CRD is installed now" in r.getMessage() for r in caplog.records)
    assert parse_event(producer.sent[0]).id == "ClusterQueue//cq@3"


async def test_redis_is_written_only_after_kafka_acknowledged() -> None:
    _, writer, producer, _ = _setup(FakeApi([]), {})
    task = asyncio.create_task(writer.run())
    seen = Seen(rv="1", digest="d", uid="u")
    await writer.put(Item((tick(1.0),)))
    await writer.put(Item((tick(2.0),), key="Namespace//x", seen=seen))
    await asyncio.wait_for(writer.idle(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    log = producer.log
    assert log.index("hset ['Namespace//x']") > max(
        i for i, e in enumerate(log) if e.startswith("ack")
    )
    assert [e for e in log if e.startswith("send")] == ["send tick@1.0", "send tick@2.0"]


class FlakyRedis(FakeRedis):
    """Refuses connections while ``down`` (a Redis restart)."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(log)
        self.down = True

    def pipeline(self, transaction: bool = False) -> FakePipeline:
        pipe = super().pipeline(transaction)
        if self.down:

            async def refuse() -> None:
                from redis.exceptions import ConnectionError as RedisConnectionError

                raise RedisConnectionError("Error 111 connecting to 127.0.0.1:26379.")

            pipe.execute = refuse  # type: ignore[method-assign]
        return pipe


async def test_redis_down_keeps_ingesting_and_saves_the_keys_later() -> None:
    # Found by the fault runs (docs/design/chaos.md): a Redis restart stopped ingest.
    producer = FakeProducer()
    redis = FlakyRedis(producer.log)
    writer = JournalWriter(producer, topic="j", redis=redis, seen_key="seen")  # type: ignore[arg-type]
    task = asyncio.create_task(writer.run())
    await writer.put(Item((tick(1.0),), key="Namespace//x", seen=Seen(rv="1", digest="d", uid="u")))
    await writer.put(Item((tick(2.0),), key="Namespace//gone", seen=None))
    await asyncio.wait_for(writer.idle(), 5)
    assert not task.done(), "the writer must survive a Redis outage"
    assert writer.produced == 2 and "seen" not in redis.hashes
    redis.down = False
    redis.hashes["seen"] = {"Namespace//gone": "stale"}
    await writer.put(Item((tick(3.0),), key="Namespace//y", seen=Seen(rv="2", digest="e", uid="v")))
    await asyncio.wait_for(writer.idle(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert set(redis.hashes["seen"]) == {"Namespace//x", "Namespace//y"}
    assert [e for e in producer.log if e.startswith("send")] == [
        "send tick@1.0",
        "send tick@2.0",
        "send tick@3.0",
    ]
