"""The HMAC keys of what kuota keeps in Redis, read from the environment.

Redis is a cache kuota does not trust (#23 item 10): what a service reads back
from it is signed, so a writer without the key cannot make a service unpickle
data of its choosing (admission's fold snapshots, ``KUOTA_SNAPSHOT_KEY``) or
forget what it journaled (ingest's seen-memory, ``KUOTA_SEEN_KEY``). A key is
required: missing or empty, the service refuses to start (``SettingsError``,
exit 2), since an empty or public key signs nothing. Each service has its own
key, so one that holds the seen key cannot forge a snapshot. The local stack
makes both once per stack dir (``scripts/stack.d/redis.sh``, in stack.env).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from kuota.bus.settings import SettingsError

SNAPSHOT_KEY = "KUOTA_SNAPSHOT_KEY"
SEEN_KEY = "KUOTA_SEEN_KEY"
_HINT = {
    SNAPSHOT_KEY: "the HMAC key of admission's fold snapshots",
    SEEN_KEY: "the HMAC key of ingest's memory of what it journaled",
}


def signing_key(name: str, env: Mapping[str, str] | None = None) -> bytes:
    """The key in variable ``name``; ``SettingsError`` when it is missing or empty."""
    e = os.environ if env is None else env
    value = e.get(name, "").strip()
    if not value:
        what = _HINT.get(name, "an HMAC key")
        raise SettingsError(
            f"{name} is not set: {what}, which must be a secret of your own "
            "(e.g. `openssl rand -hex 32`; the local stack's is in .stack/stack.env)"
        )
    return value.encode()
