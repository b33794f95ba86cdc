"""The recovery steps admission uses (``TransactionalProcessor.committed_offsets``
and ``replay``) on the real broker: a journal with committed and aborted
transactions (control records and aborted records occupy offsets), the
group's committed offset read without joining, and a truncated log."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.records_to_delete import RecordsToDelete

from kuota.bus.processor import OutRecord, ReplayError, TransactionalProcessor
from kuota.bus.settings import KafkaSettings

pytestmark = pytest.mark.integration


def _settings() -> KafkaSettings:
    assert os.environ.get("KUOTA_KAFKA_BOOTSTRAP"), "KUOTA_KAFKA_BOOTSTRAP unset: scripts/stack up"
    return KafkaSettings.from_env()


async def test_replay_reads_exactly_the_committed_range_across_transaction_markers() -> None:
    settings = _settings()
    run = uuid.uuid4().hex[:8]
    topic = f"t-replay-{run}"
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    writer = AIOKafkaProducer(transactional_id=f"w-{run}", **settings.client_kwargs())
    await writer.start()
    try:
        # 0..2 committed, 3..4 aborted, 5..6 committed, with markers in between.
        for values, commit in (
            ([b"0", b"1", b"2"], True),
            ([b"x", b"y"], False),
            ([b"5", b"6"], True),
        ):
            await writer.begin_transaction()
            for v in values:
                await writer.send_and_wait(topic, v)
            if commit:
                await writer.commit_transaction()
            else:
                await writer.abort_transaction()
    finally:
        await writer.stop()

    seen: list[bytes] = []

    def handle(records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[OutRecord]:
        seen.extend(r.value or b"" for r in records)
        return []

    group = f"g-replay-{run}"
    live = TransactionalProcessor(
        settings,
        group_id=group,
        transactional_id=f"tx-{run}",
        input_topic=topic,
        handle=handle,
        max_batch=2,
    )
    await live.start()
    try:
        assert await live.committed_offsets() == {0: None}
        while len(seen) < 3:
            await live.run_once(timeout_ms=300)
        committed = (await live.committed_offsets())[0]
        assert committed is not None and committed >= 3
    finally:
        await live.stop()

    replayed: list[tuple[int, bytes]] = []

    def apply(records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        replayed.extend((r.offset, r.value or b"") for r in records)

    fresh = TransactionalProcessor(
        settings,
        group_id=group,
        transactional_id=f"tx-{run}",
        input_topic=topic,
        handle=handle,
        max_batch=2,
    )
    try:
        n = await fresh.replay(partition=0, start=0, end=committed, apply=apply)
        assert [v for _, v in replayed] == seen and n == len(seen), "what live consumed"
        assert all(off < committed for off, _ in replayed)
        everything: list[tuple[int, bytes]] = []
        probe = AIOKafkaConsumer(**settings.client_kwargs())
        await probe.start()
        tp = TopicPartition(topic, 0)
        end = (await probe.end_offsets([tp]))[tp]  # past the last marker
        await probe.stop()
        await fresh.replay(
            partition=0,
            start=0,
            end=end,
            apply=lambda rs: everything.extend((r.offset, r.value or b"") for r in rs),
        )
        assert [v for _, v in everything] == [b"0", b"1", b"2", b"5", b"6"], (
            "aborted records skipped"
        )
        tail: list[bytes] = []
        await fresh.replay(
            partition=0,
            start=3,
            end=end,
            apply=lambda rs: tail.extend(r.value or b"" for r in rs),
        )
        assert tail == [b"5", b"6"], "a range that starts on aborted records and markers"
        assert await fresh.replay(partition=0, start=4, end=4, apply=apply) == 0

        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(2)})
        with pytest.raises(ReplayError, match="no longer in the log"):
            await fresh.replay(partition=0, start=0, end=end, apply=apply)
    finally:
        await fresh.consumer.stop()
        await fresh.producer.stop()
        await admin.delete_topics([topic])
        await admin.close()
