"""Proof that the stack's Redis answers, stores, expires, and is the version reported."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    c = aioredis.Redis.from_url(redis_url)
    try:
        yield c
    finally:
        await c.aclose()


async def test_value_round_trips(client: aioredis.Redis) -> None:
    key = f"kuota-test:{uuid.uuid4().hex}"
    value = "quota ✓ 8×H100".encode()
    assert await client.set(key, value)
    assert await client.get(key) == value
    await client.hset(f"{key}:h", mapping={"gpu": "8", "queue": "team-a"})
    assert await client.hgetall(f"{key}:h") == {b"gpu": b"8", b"queue": b"team-a"}
    assert await client.delete(key, f"{key}:h") == 2
    assert await client.get(key) is None


async def test_ttl_expiry(client: aioredis.Redis) -> None:
    key = f"kuota-test:ttl:{uuid.uuid4().hex}"
    await client.set(key, b"lease", px=300)
    assert 0 < await client.pttl(key) <= 300
    await asyncio.sleep(0.6)
    assert await client.get(key) is None
    assert await client.exists(key) == 0


async def test_server_version_matches_stack(client: aioredis.Redis, redis_url: str) -> None:
    info = await client.info("server")
    version = str(info["redis_version"])
    major = int(version.split(".")[0])
    assert major >= 7, f"redis {version}: the stack expects Redis 7+"
    # When this Redis is the local stack's, `scripts/stack versions` must name it.
    out = subprocess.run(
        ["bash", str(REPO / "scripts/stack"), "versions", "redis"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUOTA_COMPONENTS": "redis"},
        check=True,
    ).stdout.split()
    u = urlsplit(redis_url)
    if out[-1] == f"{u.hostname}:{u.port}":
        assert out[:2] == ["redis", version], f"stack reports {out}, server says {version}"
        assert int(info["tcp_port"]) == u.port
