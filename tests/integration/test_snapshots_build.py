"""A snapshot pickled by another build of the fold's code is refused (found by `make demo`:
a fold pickled before a change of ``kuota.core`` unpickled fine, then failed on every event)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

import kuota.api
import kuota.core
from kuota.store.snapshots import Snapshot, SnapshotStore, code_build

pytestmark = pytest.mark.integration


@pytest.fixture
async def client() -> AsyncIterator[aioredis.Redis]:
    url = os.environ.get("KUOTA_REDIS_URL")
    assert url, "KUOTA_REDIS_URL unset: run scripts/stack up"
    c = aioredis.from_url(url)
    yield c
    await c.aclose()


async def test_a_snapshot_of_another_build_is_refused(client: aioredis.Redis) -> None:
    name = f"t-build-{uuid.uuid4().hex[:8]}"
    old = SnapshotStore(client, name=name, key=b"k", build="aaaa")
    await old.save(Snapshot(offset=7, state={"x": 1}))
    try:
        snap, why = await SnapshotStore(client, name=name, key=b"k", build="aaaa").load()
        assert snap is not None and snap.offset == 7 and why == "ok"
        snap, why = await SnapshotStore(client, name=name, key=b"k", build="bbbb").load()
        assert snap is None and "another build" in why and "aaaa" in why, why
        # The build is signed: rewriting it does not smuggle the snapshot in.
        await client.hset(f"kuota:snapshot:{name}", "build", "bbbb")
        snap, why = await SnapshotStore(client, name=name, key=b"k", build="bbbb").load()
        assert snap is None and "signature" in why, why
        # A snapshot written without a build (before builds existed) is refused too.
        await SnapshotStore(client, name=name, key=b"k").save(Snapshot(offset=1, state=None))
        snap, why = await SnapshotStore(client, name=name, key=b"k", build="bbbb").load()
        assert snap is None and "unknown" in why, why
    finally:
        await old.delete()


def test_the_build_follows_the_sources() -> None:
    build = code_build(kuota.core, kuota.api)
    assert build == code_build(kuota.core, kuota.api), "deterministic"
    assert build != code_build(kuota.core), "every package counts"
    assert len(build) == 16 and int(build, 16) >= 0
