"""Fuzz: any bytes on a kuota topic decode to an event/decision or one ``DecodeError``.

``kuota.events.decode`` is the one door every consumer reads records through.
Whatever comes in — random bytes, a golden record with bytes flipped or cut,
any JSON value, an object shaped like an event with wrong field types — the
result is a frozen event of schema v1 with a finite event time, or a
``DecodeError`` with a one-line reason; never another exception. What decodes
round-trips, and folds without raising.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fuzz_support import FUZZ, NASTY, golden_records, json_like, json_scalars, mutated_bytes
from hypothesis import given
from hypothesis import strategies as st

from kuota.audit.replay import decode_event as audit_decode
from kuota.core.fold.fold import Fold
from kuota.events.decode import MAX_REASON, DecodeError, decode_decision, decode_event
from kuota.events.schema import SCHEMA_VERSION, Decision

JOURNAL = golden_records("journal")
DECISIONS = golden_records("decision")
EVENT_TYPES = [
    "ObjectUpserted",
    "ObjectDeleted",
    "Tick",
    "WorkloadFinished",
    "PodsReady",
    "PreemptionPlan",
    "ActuationFailed",
]


def _check(value: bytes | str | None, *, decision: bool = False) -> Any:
    """Decode; assert the outcome is one of the two allowed. Returns the object or None."""
    try:
        obj = decode_decision(value) if decision else decode_event(value)
    except DecodeError as err:
        assert err.reason, "a reason"
        assert "\n" not in err.reason.strip() or err.reason.count("\n") < 3
        assert len(err.reason) <= MAX_REASON
        assert str(err) == err.reason
        return None
    assert obj.schema_version == SCHEMA_VERSION
    assert math.isfinite(obj.at)
    again = (decode_decision if decision else decode_event)(obj.model_dump_json().encode())
    assert again == obj, "what decodes round-trips"
    return obj


def test_the_seeds_decode() -> None:
    assert len(JOURNAL) >= 7 and len(DECISIONS) >= 6
    assert all(_check(r) is not None for r in JOURNAL)
    assert all(_check(r, decision=True) is not None for r in DECISIONS)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty record value"),
        (b"", "empty record value"),
        (b"\x00\xff garbage", "not a journal event: not JSON"),
        (b'{"type": "Tick", "id": "t", "at": 1', "not JSON"),
        (b'{"type": "Tick", "id": "t"}', "at: Field required"),
        (b'{"type": "Mystery", "id": "t", "at": 1}', "does not match any of the expected tags"),
        (b'{"type": "Tick", "id": "t", "at": 1, "schema_version": 7}', "schema_version 7"),
        (b'{"type": "Tick", "id": "t", "at": 1e999}', "inf is not a finite event time"),
        (b'{"type": "Tick", "id": "t", "at": NaN}', "nan is not a finite event time"),
        (b"[" * 100_000, "recursion limit"),
        (b'{"type": "Tick", "id": "\xed\xa0\x80", "at": 1}', "not JSON"),
        (b"42", "Input should be an object"),
    ],
)
def test_decode_errors_say_why(value: bytes | None, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason.replace("(", r"\(")):
        decode_event(value)


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes(value: bytes) -> None:
    _check(value)
    _check(value, decision=True)


@FUZZ
@given(mutated_bytes(JOURNAL))
def test_mutated_journal_records(value: bytes) -> None:
    _check(value)


@FUZZ
@given(mutated_bytes(DECISIONS))
def test_mutated_decision_records(value: bytes) -> None:
    _check(value, decision=True)


@FUZZ
@given(json_like)
def test_any_json_value(value: Any) -> None:
    text = json.dumps(value, allow_nan=True)
    _check(text.encode("utf-8", "surrogatepass"))
    _check(text.encode("utf-8", "surrogatepass"), decision=True)


@st.composite
def event_shaped(draw: st.DrawFn) -> dict[str, Any]:
    """A dict with an event's type and some of its fields, values of any type."""
    base = json.loads(draw(st.sampled_from(JOURNAL)))
    base["type"] = draw(st.sampled_from([*EVENT_TYPES, base["type"]]))
    for key in draw(st.lists(st.sampled_from(sorted(base)), max_size=3, unique=True)):
        choice = draw(st.sampled_from(("drop", "scalar", "nasty", "json")))
        if choice == "drop":
            base.pop(key)
        elif choice == "scalar":
            base[key] = draw(json_scalars)
        elif choice == "nasty":
            base[key] = draw(st.sampled_from(NASTY))
        else:
            base[key] = draw(json_like)
    return base


@FUZZ
@given(event_shaped())
def test_event_shaped_json_decodes_or_says_why_and_folds(value: dict[str, Any]) -> None:
    event = _check(json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass"))
    if event is not None:
        decisions = Fold().apply(event, offset=0)  # must not raise
        assert all(isinstance(d, Decision) for d in decisions)


@FUZZ
@given(st.one_of(st.binary(max_size=200), mutated_bytes(JOURNAL)))
def test_the_audit_refuses_exactly_what_admission_dead_letters(value: bytes) -> None:
    """``kuota audit replay`` must fold the same events admission folds, or the
    replay would diverge on a poison record (e.g. one with ``at: 1e999``)."""
    record = audit_decode(7, value)
    try:
        event = decode_event(value)
    except DecodeError as err:
        assert record.event is None and record.problem == err.reason
    else:
        assert record.event == event and record.problem is None


def test_the_audit_refuses_a_non_finite_event_time() -> None:
    record = audit_decode(3, b'{"type": "Tick", "id": "t", "at": 1e999}')
    assert record.event is None and "not a finite event time" in (record.problem or "")
