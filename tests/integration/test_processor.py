"""The transactional processor against the real broker: outputs and offsets
commit together, so a crash between batches neither loses nor duplicates."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Sequence

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord

from kuota.bus.processor import OutRecord, TransactionalProcessor
from kuota.bus.settings import KafkaSettings

pytestmark = pytest.mark.integration


def _settings() -> KafkaSettings:
    assert os.environ.get("KUOTA_KAFKA_BOOTSTRAP"), (
        "KUOTA_KAFKA_BOOTSTRAP unset: run scripts/stack up"
    )
    return KafkaSettings.from_env()


async def _read_all(settings: KafkaSettings, topic: str, expect: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        topic,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **settings.client_kwargs(),
    )
    await consumer.start()
    out: list[bytes] = []
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while len(out) < expect and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=300)
            for recs in batch.values():
                out.extend(r.value for r in recs if r.value is not None)
        # one more poll to catch any extra (duplicate) record
        batch = await consumer.getmany(timeout_ms=1000)
        for recs in batch.values():
            out.extend(r.value for r in recs if r.value is not None)
    finally:
        await consumer.stop()
    return out


class Boom(RuntimeError):
    pass


async def test_crash_mid_stream_neither_loses_nor_duplicates() -> None:
    settings = _settings()
    run = uuid.uuid4().hex[:8]
    src, dst, group, txid = f"t-in-{run}", f"t-out-{run}", f"g-{run}", f"tx-{run}"

    producer = AIOKafkaProducer(**settings.client_kwargs())
    await producer.start()
    for i in range(50):
        await producer.send_and_wait(src, str(i).encode())
    await producer.stop()

    seen: list[int] = []

    def make_handler(crash_after: int | None):
        def handle(records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[OutRecord]:
            outs = []
            for r in records:
                n = int(r.value or b"0")
                if crash_after is not None and len(seen) >= crash_after:
                    raise Boom("injected crash")
                seen.append(n)
                outs.append(OutRecord(topic=dst, value=str(n * 10).encode()))
            return outs

        return handle

    # First incarnation processes batches of 7 and crashes on the 23rd record:
    # the batch holding it is never committed.
    first = TransactionalProcessor(
        settings,
        group_id=group,
        transactional_id=txid,
        input_topic=src,
        handle=make_handler(crash_after=23),
        max_batch=7,
    )
    await first.start()
    with pytest.raises(Boom):
        for _ in range(40):
            await first.run_once()
    await first.stop()
    committed_before = 21  # three full batches of 7 committed before the crash
    seen.clear()

    second = TransactionalProcessor(
        settings,
        group_id=group,
        transactional_id=txid,
        input_topic=src,
        handle=make_handler(crash_after=None),
        max_batch=7,
    )
    await second.start()
    for _ in range(40):
        if await second.run_once(timeout_ms=300) == 0 and len(seen) >= 50 - committed_before:
            break
    await second.stop()
    assert seen[0] == committed_before, "restart must resume at the first uncommitted record"

    values = sorted(int(v) for v in await _read_all(settings, dst, expect=50))
    assert values == [i * 10 for i in range(50)], "every input produced exactly one output"
