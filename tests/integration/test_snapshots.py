"""Snapshots round-trip through the real Redis, and a tampered one is refused."""

from __future__ import annotations

import os
import uuid

import pytest
import redis.asyncio as aioredis

from kuota.store.snapshots import Snapshot, SnapshotStore

pytestmark = pytest.mark.integration


@pytest.fixture
async def client():
    url = os.environ.get("KUOTA_REDIS_URL")
    assert url, "KUOTA_REDIS_URL unset: run scripts/stack up"
    c = aioredis.from_url(url)
    yield c
    await c.aclose()


async def test_round_trip_and_tamper(client: aioredis.Redis) -> None:
    store = SnapshotStore(client, name=f"t-{uuid.uuid4().hex[:8]}", key=b"k1")
    assert (await store.load())[0] is None
    state = {"usage": {"team-a": {"h100": 8000}}, "pending": ["ns/a", "ns/b"]}
    await store.save(Snapshot(offset=42, state=state))
    snap, why = await store.load()
    assert why == "ok" and snap is not None
    assert snap.offset == 42 and snap.state == state

    # A reader holding another key refuses it (and so does one after tampering).
    other = SnapshotStore(client, name=store._redis_key.rsplit(":", 1)[1], key=b"k2")
    snap2, why2 = await other.load()
    assert snap2 is None and "signature" in why2
    await client.hset(store._redis_key, "offset", "43")
    snap3, why3 = await store.load()
    assert snap3 is None and "signature" in why3
    await store.delete()
