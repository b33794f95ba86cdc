"""Exactly-once consume-transform-produce with aiokafka transactions.

Theory of operation: a processor reads a batch with a ``read_committed``
consumer (auto-commit off), hands it to a ``handle`` callback that returns the
records to produce, then produces them and commits the offsets that caused
them in ONE Kafka transaction (``send_offsets_to_transaction``): a decision and
its cause commit together or not at all. A fixed ``transactional_id`` per
(service, partition) fences zombies. If producing or committing fails, the
state ``handle`` advanced no longer matches the offsets: the processor raises,
the service exits, and a restart rebuilds the state from the snapshot and the
journal tail, as Kafka Streams re-initialises a task. A stateful service
starts in steps instead of ``start()``: ``start_producer()`` (fences),
``committed_offsets()``, ``replay()`` up to them (producing nothing), then
``start_consumer()``. Why not faust: docs/design/exactly-once.md; the
start-up in full: docs/design/admission.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import OffsetOutOfRangeError

from kuota.bus.offsets import group_offsets
from kuota.bus.settings import KafkaSettings


@dataclass(frozen=True, slots=True)
class OutRecord:
    topic: str
    value: bytes
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = field(default=())


Handler = Callable[[Sequence[ConsumerRecord[bytes, bytes]]], Sequence[OutRecord]]
Replayer = Callable[[Sequence[ConsumerRecord[bytes, bytes]]], None]


async def journal_lag(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int | None:
    """Records of ``tp`` not consumed yet, as of the last fetch: its end offset
    minus the consumer's position. The position steps over transaction markers;
    the offset after the last record consumed does not, so a trailing commit
    marker would count as a record forever. None before the first fetch."""
    try:
        high = consumer.highwater(tp)
        if high is None:
            return None
        position: int = await consumer.position(tp)
        return max(0, int(high) - position)
    except (AssertionError, KeyError, TypeError):  # not assigned (yet)
        return None


class ReplayError(RuntimeError):
    """The journal range to replay cannot be read (truncated, or no progress)."""


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
        group_instance_id: str | None = None,
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
            # Static membership (KIP-345): a restarted member with the same
            # instance id takes its predecessor's partitions at once instead of
            # waiting a session timeout for the dead member to be dropped.
            group_instance_id=group_instance_id,
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
        await self.start_producer()
        await self.start_consumer()

    async def start_producer(self) -> None:
        """Start the transactional producer. Its ``init_transactions`` fences a
        predecessor with the same transactional id and aborts the transaction it
        left open, so after this the group's committed offsets are final."""
        await self.producer.start()

    async def start_consumer(self) -> None:
        """Join the group; consumption resumes at the committed offsets."""
        await self.consumer.start()

    async def committed_offsets(self) -> dict[int, int | None]:
        """The group's committed offset per partition of the input topic (None:
        nothing committed yet), read without joining the group, so usable
        before ``start_consumer``."""
        return await group_offsets(self._settings, self._input_topic, self._group_id)

    async def replay(
        self,
        *,
        partition: int,
        start: int,
        end: int,
        apply: Replayer,
        max_batch: int | None = None,
        stall_timeout_s: float = 60.0,
    ) -> int:
        """Feed the input records at offsets ``[start, end)`` of ``partition`` to
        ``apply``, in batches, producing and committing nothing. Reads like the
        live consumer (``read_committed``), so it sees the same records. Returns
        how many records it fed. Raises :class:`ReplayError` if ``start`` is no
        longer in the log or the position stops advancing for ``stall_timeout_s``."""
        if end <= start:
            return 0
        tp = TopicPartition(self._input_topic, partition)
        reader = AIOKafkaConsumer(
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="none",
            **self._settings.client_kwargs(),
        )
        await reader.start()
        fed = 0
        try:
            reader.assign([tp])
            reader.seek(tp, start)
            loop = asyncio.get_running_loop()
            last_progress = loop.time()
            position = start
            while position < end:
                try:
                    fetched = await reader.getmany(
                        tp, timeout_ms=500, max_records=max_batch or self._max_batch
                    )
                except OffsetOutOfRangeError as err:
                    raise ReplayError(
                        f"offset {start} of {self._input_topic}[{partition}] is no longer "
                        f"in the log: {err}"
                    ) from err
                records = [r for r in fetched.get(tp, []) if r.offset < end]
                if records:
                    apply(records)
                    fed += len(records)
                new_position = await reader.position(tp)
                if new_position > position:
                    position = new_position
                    last_progress = loop.time()
                elif loop.time() - last_progress > stall_timeout_s:
                    raise ReplayError(
                        f"replay of {self._input_topic}[{partition}] stalled at offset "
                        f"{position} (target {end})"
                    )
        finally:
            await reader.stop()
        return fed

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
