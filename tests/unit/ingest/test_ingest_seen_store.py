"""kuota_ingest.seen_store: signed entries verify only under their key, hash
and object; anything else is kept by name only (the real-stack test of a
forged finish: tests/integration/test_security_seen.py)."""

from __future__ import annotations

import pytest

from kuota.bus.settings import SettingsError
from kuota.kube.translate import Seen
from kuota_ingest import seen_store

KEY = b"k" * 32
HASH = "kuota:ingest:seen"
JOB = Seen(rv="12", digest="abc", uid="u-1", finished=False, ready=True)


def test_an_entry_verifies_under_its_key_hash_and_object_only() -> None:
    raw = seen_store.dumps(HASH, "Job/ns/a", JOB, KEY)
    assert raw.startswith("s1.") and raw.endswith(JOB.dumps())
    assert seen_store.loads(HASH, "Job/ns/a", raw, KEY) == JOB
    assert seen_store.loads(HASH, "Job/ns/a", raw.encode(), KEY) == JOB
    assert seen_store.loads(HASH, "Job/ns/b", raw, KEY) is None  # moved to another Job
    assert seen_store.loads(f"{HASH}:other.journal", "Job/ns/a", raw, KEY) is None
    assert seen_store.loads(HASH, "Job/ns/a", raw, b"another key") is None
    finished = raw.replace(",0,1]", ",1,1]")  # finished=1, the signature unchanged
    assert finished != raw and seen_store.loads(HASH, "Job/ns/a", finished, KEY) is None
    assert seen_store.loads(HASH, "Job/ns/a", JOB.dumps(), KEY) is None  # unsigned (old)


def test_what_does_not_verify_is_kept_by_name_only() -> None:
    good = seen_store.dumps(HASH, "Job/ns/a", JOB, KEY)
    raw = {
        b"Job/ns/a": good.encode(),
        b"Job/ns/b": JOB.dumps().encode(),
        b"garbage": b"s1.00.[]",
        b"Namespace//x": b"\xff\xfe",
    }
    memory, refused = seen_store.verified(HASH, raw, KEY)
    assert refused == 3
    assert memory == {
        "Job/ns/a": JOB,
        "Job/ns/b": seen_store.UNTRUSTED,
        "Namespace//x": seen_store.UNTRUSTED,
    }
    assert Seen(rv="", digest="", uid="") == seen_store.UNTRUSTED  # no finish, no digest


def test_the_key_comes_from_the_environment_and_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUOTA_SEEN_KEY", "from-env")
    raw = seen_store.dumps(HASH, "Job/ns/a", JOB)
    assert seen_store.loads(HASH, "Job/ns/a", raw, b"from-env") == JOB
    monkeypatch.setenv("KUOTA_SEEN_KEY", " ")
    with pytest.raises(SettingsError, match="KUOTA_SEEN_KEY is not set"):
        seen_store.dumps(HASH, "Job/ns/a", JOB)
