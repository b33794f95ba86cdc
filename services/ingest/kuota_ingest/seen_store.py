"""Ingest's memory in Redis, signed: what was journaled, per object (#23 item 10).

Theory of operation: every entry of the seen hash (``kuota:ingest:seen``) is
``s1.<hmac>.<Seen JSON>``, the HMAC-SHA256 under ``KUOTA_SEEN_KEY`` of the
hash's name, the object key and the JSON, so an entry cannot be forged, nor
moved to another object or instance. At start-up an entry that does not
verify (unsigned, another key, forged) is never trusted: its object is kept by
name only, with no resourceVersion, digest, uid or status (``UNTRUSTED``), so
the first LIST journals it again from scratch, and if it is gone the relist
reports its delete. Nothing a Redis writer puts there can then hide a change,
a finish or a delete: at worst ingest journals again what it had journaled
(which the fold ignores), as after Redis lagged the journal. What a signature
cannot stop is a deleted entry (docs/security.md, "#23 item 10").
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping

from redis.asyncio import Redis

from kuota.kube.translate import Seen
from kuota.store.keys import SEEN_KEY, signing_key

log = logging.getLogger("kuota_ingest.seen_store")

FORMAT = "s1"
#: What an entry that fails verification is remembered as: its name only.
UNTRUSTED = Seen(rv="", digest="", uid="")


def _mac(secret: bytes, hash_key: str, field: str, body: str) -> str:
    msg = b"\x00".join((b"kuota-seen-v1", hash_key.encode(), field.encode(), body.encode()))
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def dumps(hash_key: str, field: str, seen: Seen, secret: bytes | None = None) -> str:
    """The signed entry for ``field`` (an object key) of the hash ``hash_key``."""
    key = signing_key(SEEN_KEY) if secret is None else secret
    body = seen.dumps()
    return f"{FORMAT}.{_mac(key, hash_key, field, body)}.{body}"


def loads(hash_key: str, field: str, raw: str | bytes, secret: bytes | None = None) -> Seen | None:
    """The entry's ``Seen`` if it verifies, else ``None``."""
    key = signing_key(SEEN_KEY) if secret is None else secret
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    fmt, _, rest = text.partition(".")
    mac, _, body = rest.partition(".")
    if fmt != FORMAT or not hmac.compare_digest(mac, _mac(key, hash_key, field, body)):
        return None
    return Seen.loads(body)


def verified(
    hash_key: str, raw: Mapping[bytes, bytes], secret: bytes | None = None
) -> tuple[dict[str, Seen], int]:
    """The memory from the hash's entries, and how many did not verify."""
    key = signing_key(SEEN_KEY) if secret is None else secret
    memory: dict[str, Seen] = {}
    refused = 0
    for k, v in raw.items():
        field = k.decode(errors="replace")
        seen = loads(hash_key, field, v, key)
        if seen is None:
            refused += 1
            if field.count("/") < 2:  # not <Kind>/<namespace>/<name>: nothing to keep
                continue
            seen = UNTRUSTED
        memory[field] = seen
    return memory, refused


async def load(redis: Redis, hash_key: str) -> dict[str, Seen]:
    """Ingest's memory as it starts (see the module docstring)."""
    raw: dict[bytes, bytes] = await redis.hgetall(hash_key)  # type: ignore[misc]
    memory, refused = verified(hash_key, raw)
    if refused:
        log.warning(
            "%d of %d entries of %s do not verify (unsigned, another KUOTA_SEEN_KEY, or "
            "written by someone else): their objects are journaled again from the first LIST",
            refused,
            len(raw),
            hash_key,
        )
    return memory
