"""Fold snapshots in Redis.

Theory of operation: a processor periodically stores its fold state together
with the journal position it reflects (the offset of the NEXT record to fold).
On restart it loads the snapshot and replays only the tail. A snapshot is an
optimisation, never the source of truth: if it is missing, unreadable, or its
signature does not verify, the processor folds the whole journal instead.

The state is pickled (the fold's state is plain Python data) and signed with
HMAC-SHA256 under ``KUOTA_SNAPSHOT_KEY``, so a process that can write to Redis
but does not hold the key cannot make a service unpickle data of its choosing.
One key holds the whole snapshot (``HSET`` of offset, version, signature and
payload in one command), so readers never see a half-written snapshot.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

FORMAT = b"kuota-snapshot-v1"


@dataclass(frozen=True, slots=True)
class Snapshot:
    offset: int  # journal offset of the next record to fold
    state: Any


class SnapshotStore:
    def __init__(self, client: aioredis.Redis, *, name: str, key: bytes | None = None) -> None:
        self._r = client
        self._redis_key = f"kuota:snapshot:{name}"
        secret = key if key is not None else os.environ.get("KUOTA_SNAPSHOT_KEY", "").encode()
        # An empty secret still detects corruption; deployments set a real one.
        self._secret = secret or b"kuota-dev-snapshot-key"

    def _sign(self, offset: int, payload: bytes) -> bytes:
        mac = hmac.new(
            self._secret, FORMAT + str(offset).encode() + b"\x00" + payload, hashlib.sha256
        )
        return mac.hexdigest().encode()

    async def save(self, snapshot: Snapshot) -> int:
        """Store a snapshot; returns its size in bytes."""
        payload = pickle.dumps(snapshot.state, protocol=pickle.HIGHEST_PROTOCOL)
        # redis-py's asyncio client shares the sync client's stubs (Awaitable | value).
        await self._r.hset(  # type: ignore[misc]
            self._redis_key,
            mapping={
                "format": FORMAT,
                "offset": str(snapshot.offset),
                "sig": self._sign(snapshot.offset, payload),
                "payload": payload,
            },
        )
        return len(payload)

    async def load(self) -> tuple[Snapshot | None, str]:
        """The stored snapshot, or None and the reason it could not be used."""
        raw = await self._r.hgetall(self._redis_key)  # type: ignore[misc]
        if not raw:
            return None, "no snapshot"
        try:
            if raw.get(b"format") != FORMAT:
                return None, f"unknown snapshot format {raw.get(b'format')!r}"
            offset = int(raw[b"offset"])
            payload = raw[b"payload"]
            if not hmac.compare_digest(raw[b"sig"], self._sign(offset, payload)):
                return None, "snapshot signature does not verify"
            return Snapshot(offset=offset, state=pickle.loads(payload)), "ok"
        except (KeyError, ValueError, pickle.UnpicklingError, EOFError, AttributeError) as err:
            return None, f"snapshot unreadable: {err}"

    async def delete(self) -> None:
        await self._r.delete(self._redis_key)
