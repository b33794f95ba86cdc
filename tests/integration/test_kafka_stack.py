"""Proof that the stack's Kafka is a real Apache Kafka 4.x with working transactions."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.conn import create_conn
from aiokafka.protocol.admin import ApiVersionRequest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 3
REPO = Path(__file__).resolve().parents[2]


async def _fresh_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    topic = f"kuota-test-txn-{uuid.uuid4().hex[:12]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    return topic


async def _drain(bootstrap: str, topic: str, isolation: str) -> list[str]:
    """Read every partition of `topic` from the start up to its end offset."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        # for read_committed this is the last stable offset
        end = await consumer.end_offsets(tps)
        seen: list[str] = []
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                seen.extend(r.value.decode() for r in records)
        return seen
    finally:
        await consumer.stop()


async def test_read_committed_sees_committed_and_no_aborted(kafka_bootstrap: str) -> None:
    topic = await _fresh_topic(kafka_bootstrap)
    run = uuid.uuid4().hex[:8]
    producers = [
        AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap, transactional_id=f"kuota-test-{run}-{i}"
        )
        for i in range(2)
    ]
    for p in producers:
        await p.start()
    committed: set[str] = set()
    aborted: set[str] = set()
    try:
        # Two producers with overlapping open transactions, so that committed
        # and aborted records interleave within each partition's log.
        for rnd in range(4):
            for p in producers:
                await p.begin_transaction()
            for j in range(6):
                for i, p in enumerate(producers):
                    value = f"r{rnd}-p{i}-{j}"
                    await p.send_and_wait(topic, value.encode(), key=str(j).encode())
                    (committed if (rnd + i) % 2 == 0 else aborted).add(value)
            for i, p in enumerate(producers):
                if (rnd + i) % 2 == 0:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
    finally:
        for p in producers:
            await p.stop()

    seen = await _drain(kafka_bootstrap, topic, "read_committed")
    assert len(seen) == len(set(seen)), "duplicate records under read_committed"
    assert set(seen) == committed
    assert not set(seen) & aborted

    # the aborted records really are in the log: read_uncommitted returns them
    everything = await _drain(kafka_bootstrap, topic, "read_uncommitted")
    assert set(everything) == committed | aborted


async def test_broker_is_apache_kafka_4(kafka_bootstrap: str) -> None:
    host, _, port = kafka_bootstrap.split(",")[0].rpartition(":")
    conn = await create_conn(host, int(port))
    try:
        resp = await conn.send(ApiVersionRequest())
    finally:
        conn.close()
    versions = {key: (lo, hi) for key, lo, hi in resp.api_versions}
    # Kafka 4.0 removed Fetch v0-v3 and OffsetCommit v0-v1 (KIP-896); 3.x and
    # most look-alikes still accept v0. ConsumerGroupHeartbeat (68) is KIP-848.
    assert versions[1][0] >= 4, f"Fetch versions {versions[1]}: not a Kafka 4.x broker"
    assert versions[8][0] >= 2, f"OffsetCommit versions {versions[8]}: not a Kafka 4.x broker"
    assert 68 in versions, "no ConsumerGroupHeartbeat API: not a Kafka 4.x broker"

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    assert len(cluster["brokers"]) == 1

    # When the broker is the local stack's, it must be the one the stack
    # formatted (same cluster id) and report the version the stack resolved.
    out = subprocess.run(
        ["bash", str(REPO / "scripts/stack"), "versions", "kafka"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUOTA_COMPONENTS": "kafka"},
        check=True,
    ).stdout.split()
    if out[-1] == kafka_bootstrap:
        assert out[0] == "kafka" and out[1].startswith("4."), f"stack runs {out}"
        stack_dir = Path(os.environ.get("KUOTA_STACK_DIR") or REPO / ".stack")
        cluster_id = (stack_dir / "kafka" / "cluster-id").read_text().strip()
        assert cluster["cluster_id"] == cluster_id


async def test_consumer_group_commits(kafka_bootstrap: str) -> None:
    """Group coordination on the single node (offsets topic with one replica)."""
    topic = await _fresh_topic(kafka_bootstrap, 1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, str(i).encode())
    finally:
        await producer.stop()
    group = f"kuota-test-{uuid.uuid4().hex[:8]}"
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        got: list[bytes] = []
        async with asyncio.timeout(60):
            while len(got) < 5:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    got.extend(r.value for r in records)
        await consumer.commit()
        assert await consumer.committed(TopicPartition(topic, 0)) == 5
    finally:
        await consumer.stop()
    assert got == [str(i).encode() for i in range(5)]
