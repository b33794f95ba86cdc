"""The one writer of the journal: events in order, then what was journaled to Redis.

Every source (watches, the configuration file, the clock) hands its events to
``JournalWriter.put`` in the order it produced them; one task sends them with
an idempotent producer (``acks=all``), so the journal partition holds them in
that order with no duplicates from producer retries. Only after Kafka has
acknowledged a batch is ``Seen`` state written to the Redis hash: Redis may lag
the journal (a restart then re-emits an upsert, which the fold ignores) but
never leads it (that would lose an event). While Redis is unreachable (it
restarts), the unsaved keys are kept and written with a later batch. A send
that fails for good is fatal: the in-memory state has moved past what the
journal holds, so the service exits and a restart relists. So no send may be
refused for its size: an upsert over ``MAX_EVENT_BYTES`` is replaced by a stand-in
the fold rejects with the reason (``record_value``), never sent as it is.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer
from redis.asyncio import Redis
from redis.exceptions import RedisError

from kuota.bus.topics import JOURNAL_MAX_MESSAGE_BYTES, shard_key
from kuota.events.schema import JournalEvent, ObjectUpserted, Tick
from kuota.kube.translate import Seen, stand_in
from kuota_ingest import metrics, seen_store

log = logging.getLogger("kuota_ingest.journal")


# A journal record is one Kafka record: the producer refuses one over
# MAX_REQUEST_BYTES, the broker one over the topic's max.message.bytes
# (kuota.bus.topics.JOURNAL_MAX_MESSAGE_BYTES). An event's JSON is kept under
# MAX_EVENT_BYTES, leaving room for the key, the header and the batch's framing.
MAX_REQUEST_BYTES = 1_048_576
MAX_EVENT_BYTES = 1_000_000
assert MAX_EVENT_BYTES + 4096 < MAX_REQUEST_BYTES <= JOURNAL_MAX_MESSAGE_BYTES


def record_value(event: JournalEvent, limit: int = MAX_EVENT_BYTES) -> bytes | None:
    """The record to send for ``event``: its JSON, or for an upsert over ``limit`` the
    stand-in the fold rejects with the reason (``kuota.kube.translate.stand_in``);
    None (logged, counted) for anything else over it, which ingest never makes."""
    value = event.model_dump_json().encode()
    if len(value) <= limit:
        return value
    kind = event.object.get("kind") if isinstance(event, ObjectUpserted) else None
    metrics.OVERSIZED.labels(str(kind or event.type)).inc()
    if isinstance(event, ObjectUpserted):
        replaced = stand_in(event, len(value), limit).model_dump_json().encode()
        if len(replaced) <= limit:
            log.warning(
                "%s: %d bytes, over the journal's %d: journaled as a stand-in the fold rejects",
                event.id,
                len(value),
                limit,
            )
            return replaced
    log.error(
        "%s (%s): %d bytes, over the journal's %d: not journaled",
        event.id,
        event.type,
        len(value),
        limit,
    )
    return None


@dataclass(frozen=True, slots=True)
class Item:
    events: tuple[JournalEvent, ...]
    key: str | None = None  # object key whose Seen state to persist after the events
    seen: Seen | None = None  # None with a key: forget the key


class JournalWriter:
    def __init__(
        self,
        producer: AIOKafkaProducer,
        *,
        topic: str,
        redis: Redis,
        seen_key: str,
        max_batch: int = 1000,
        queue_size: int = 10000,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._redis = redis
        self._seen_key = seen_key
        self._max_batch = max_batch
        self._queue: asyncio.Queue[Item] = asyncio.Queue(queue_size)
        self.produced = 0
        self._unsaved_upserts: dict[str, str] = {}
        self._unsaved_deletes: set[str] = set()

    async def put(self, item: Item) -> None:
        await self._queue.put(item)

    def pending(self) -> int:
        return self._queue.qsize()

    async def run(self) -> None:
        while True:
            items = [await self._queue.get()]
            while len(items) < self._max_batch and not self._queue.empty():
                items.append(self._queue.get_nowait())
            await self._write(items)
            for _ in items:
                self._queue.task_done()

    async def idle(self) -> None:
        """Wait until everything queued so far is journaled (used at shutdown)."""
        await self._queue.join()

    async def _write(self, items: list[Item]) -> None:
        futures = []
        for item in items:
            key = shard_key(item.key or "")
            for event in item.events:
                value = record_value(event)
                if value is None:
                    continue
                futures.append(
                    await self._producer.send(
                        self._topic,
                        value=value,
                        key=key,
                        headers=[("kuota-type", event.type.encode())],
                    )
                )
        if futures:
            await asyncio.gather(*futures)
        last_tick: float | None = None
        for item in items:
            for event in item.events:
                metrics.EVENTS.labels(event.type).inc()
                if isinstance(event, Tick):
                    last_tick = event.at
                else:
                    log.info("journaled %s %s", event.type, event.id)
        self.produced += len(futures)
        if last_tick is not None:
            metrics.LAST_TICK.set(last_tick)
        # What a failed Redis write left unsaved is saved with this batch's.
        upserts, deletes = self._unsaved_upserts, self._unsaved_deletes
        for item in items:
            if item.key is None:
                continue
            if item.seen is None:
                upserts.pop(item.key, None)
                deletes.add(item.key)
            else:
                deletes.discard(item.key)
                upserts[item.key] = seen_store.dumps(self._seen_key, item.key, item.seen)
        if upserts or deletes:
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    if deletes:
                        pipe.hdel(self._seen_key, *sorted(deletes))
                    if upserts:
                        pipe.hset(self._seen_key, mapping=upserts)
                    await pipe.execute()
            except (RedisError, OSError) as err:
                # Redis may lag the journal (see above): keep the keys for the
                # next batch (ticks bring one soon) rather than stop ingesting.
                log.warning(
                    "Redis unavailable (%s); %d journaled keys are saved with the next batch",
                    err,
                    len(upserts) + len(deletes),
                )
                return
            upserts.clear()
            deletes.clear()
