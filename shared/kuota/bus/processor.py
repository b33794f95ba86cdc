"""Exactly-once consume-transform-produce with aiokafka transactions.

Theory of operation: a processor reads a batch from its input topic with a
``read_committed`` consumer (auto-commit off), hands the batch to a pure-ish
``handle`` callback that returns the records to produce, and then, inside ONE
Kafka transaction, produces those records and commits the consumer offsets
that caused them (``send_offsets_to_transaction``). Either both become visible
or neither does, so a decision and the journal offset that caused it commit
together.

A fixed ``transactional_id`` per (service, partition) fences zombies: a
restarted processor's ``init_transactions`` aborts whatever its predecessor
left open, so ``read_committed`` readers are not blocked for the transaction
timeout.

If producing or committing fails, the in-memory state that ``handle`` already
advanced no longer matches the committed offsets. The processor does not try to
undo it: it raises, the service exits, and on restart the state is rebuilt
from the snapshot plus the journal tail. This is the same "re-initialise the
task" recovery Kafka Streams uses. Why not faust: see
docs/design/exactly-once.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from kuota.bus.settings import KafkaSettings


@dataclass(frozen=True, slots=True)
class OutRecord:
    topic: str
    value: bytes
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = field(default=())


Handler = Callable[[Sequence[ConsumerRecord[bytes, bytes]]], Sequence[OutRecord]]


class TransactionalProcessor:
    def __init__(
        self,
        settings: KafkaSettings,
        *,
        group_id: str,
        transactional_id: str,
        input_topic: str,
        handle: Handler,
        max_batch: int = 500,
        transaction_timeout_ms: int = 15000,
    ) -> None:
        self._settings = settings
        self._group_id = group_id
        self._input_topic = input_topic
        self._handle = handle
        self._max_batch = max_batch
        kw = settings.client_kwargs()
        self.consumer: AIOKafkaConsumer = AIOKafkaConsumer(
            input_topic,
            group_id=group_id,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            **kw,
        )
        self.producer: AIOKafkaProducer = AIOKafkaProducer(
            transactional_id=transactional_id,
            enable_idempotence=True,
            transaction_timeout_ms=transaction_timeout_ms,
            **kw,
        )
        self.batches = 0
        self.records_in = 0
        self.records_out = 0

    async def start(self) -> None:
        await self.producer.start()
        await self.consumer.start()

    async def stop(self) -> None:
        await self.consumer.stop()
        await self.producer.stop()

    async def committed(self) -> dict[TopicPartition, int | None]:
        """The group's committed offsets for the input topic's partitions."""
        parts = self.consumer.partitions_for_topic(self._input_topic) or set()
        out: dict[TopicPartition, int | None] = {}
        for p in sorted(parts):
            tp = TopicPartition(self._input_topic, p)
            out[tp] = await self.consumer.committed(tp)
        return out

    async def run_once(self, timeout_ms: int = 500) -> int:
        """Process one batch; returns how many input records it consumed."""
        fetched = await self.consumer.getmany(timeout_ms=timeout_ms, max_records=self._max_batch)
        records = [r for tp in sorted(fetched) for r in fetched[tp]]
        if not records:
            return 0
        outputs = self._handle(records)
        offsets = {}
        for tp, recs in fetched.items():
            if recs:
                offsets[tp] = recs[-1].offset + 1
        async with self.producer.transaction():
            for out in outputs:
                await self.producer.send(
                    out.topic, value=out.value, key=out.key, headers=list(out.headers)
                )
            await self.producer.send_offsets_to_transaction(offsets, self._group_id)
        self.batches += 1
        self.records_in += len(records)
        self.records_out += len(outputs)
        return len(records)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.run_once()
