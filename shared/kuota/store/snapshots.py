"""Fold snapshots in Redis.

Theory of operation: a processor periodically stores its fold state with the
journal position it reflects (the offset of the NEXT record to fold); on
restart it loads it and replays only the tail. A snapshot is an optimisation,
never the source of truth: missing, unreadable, badly signed or of another
build, it is refused and the whole journal is folded instead. The state is
pickled and signed with HMAC-SHA256 under ``KUOTA_SNAPSHOT_KEY`` (required:
``kuota.store.keys``), so a process that can write to Redis but lacks the key
cannot make a service unpickle data of its choosing; one ``HSET`` stores
offset, version, signature and payload, so no reader sees half a snapshot. A
store may be given a ``build`` (:func:`code_build`, a digest of the source
files of ``kuota.core`` and ``kuota.api``), stored signed with each snapshot:
a fold pickled by other code unpickles without complaint, then fails on the
first event.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import redis.asyncio as aioredis

from kuota.store.keys import SNAPSHOT_KEY, signing_key

FORMAT = b"kuota-snapshot-v1"


def code_build(*packages: ModuleType) -> str:
    """A digest of the packages' ``.py`` sources (names and contents), e.g. of
    ``kuota.core`` and ``kuota.api``, whose classes a pickled fold holds, and of
    which of their loaded modules are compiled (``scripts/native.py``): a
    compiled class and its pure-Python source do not share a pickle format."""
    digest = hashlib.sha256()
    for package in packages:
        root = Path(package.__file__ or "").parent
        digest.update(package.__name__.encode() + b"\x00")
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\x00")
            digest.update(path.read_bytes() + b"\x00")
        prefix = package.__name__ + "."
        for name in sorted(n for n in list(sys.modules) if n.startswith(prefix)):
            if not (getattr(sys.modules[name], "__file__", None) or ".py").endswith(".py"):
                digest.update(b"compiled:" + name.encode() + b"\x00")
    return digest.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Snapshot:
    offset: int  # journal offset of the next record to fold
    state: Any


class SnapshotStore:
    def __init__(
        self,
        client: aioredis.Redis,
        *,
        name: str,
        key: bytes | None = None,
        build: str | None = None,
    ) -> None:
        self._r = client
        self._build = (build or "").encode()
        self._redis_key = f"kuota:snapshot:{name}"
        # No default key: an empty or public one would sign anybody's pickle.
        self._secret = signing_key(SNAPSHOT_KEY) if key is None else key
        if not self._secret:
            raise ValueError("SnapshotStore: an empty HMAC key")

    def _sign(self, offset: int, payload: bytes, build: bytes = b"") -> bytes:
        head = FORMAT + str(offset).encode() + b"\x00"
        if build:  # snapshots without a build keep their original signature
            head += b"build=" + build + b"\x00"
        mac = hmac.new(self._secret, head + payload, hashlib.sha256)
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
                "build": self._build,
                "sig": self._sign(snapshot.offset, payload, self._build),
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
            build = raw.get(b"build", b"")
            if not hmac.compare_digest(raw[b"sig"], self._sign(offset, payload, build)):
                return None, "snapshot signature does not verify"
            if build != self._build:
                return None, (
                    f"snapshot of another build ({build.decode(errors='replace') or 'unknown'}, "
                    f"this is {self._build.decode() or 'unknown'})"
                )
            return Snapshot(offset=offset, state=pickle.loads(payload)), "ok"
        except (KeyError, ValueError, pickle.UnpicklingError, EOFError, AttributeError) as err:
            return None, f"snapshot unreadable: {err}"

    async def delete(self) -> None:
        await self._r.delete(self._redis_key)
