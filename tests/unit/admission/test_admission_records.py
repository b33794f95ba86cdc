"""The admission service's record handling, without Kafka: decode, fold,
decision records with cause_offset, dead letters, silent replay."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from admission_helpers import TOPICS, journal, oracle, rec, records
from fold_doubles import RaisingFold

from kuota.events.schema import (
    parse_decision,
)
from kuota_admission.records import JournalFolder, UndecodableRecord, decode

# ---------------------------------------------------------------------- decode


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty record value"),
        (b"", "empty record value"),
        (b"\x00garbage", "not a journal event"),
        (b'{"type": "Mystery", "id": "x", "at": 1}', "not a journal event"),
        (b'{"type": "Tick", "at": 1}', "id: Field required"),
        (b'{"type": "Tick", "id": "t", "at": 1, "schema_version": 2}', "schema_version 2"),
    ],
)
def test_undecodable_records_say_why(value: bytes | None, reason: str) -> None:
    with pytest.raises(UndecodableRecord, match=reason):
        decode(value)


def test_decode_round_trips_a_journal_event() -> None:
    ev = journal()[3]
    assert decode(ev.model_dump_json().encode()) == ev


# ---------------------------------------------------------------------- live handling


def test_decisions_equal_the_fold_with_cause_offset_keys_and_type_header() -> None:
    evs = journal()
    folder = JournalFolder(topics=TOPICS, next_offset=100)
    out = folder.handle(records(evs, first=100))
    want = oracle([(100 + i, e) for i, e in enumerate(evs)])
    assert {d.type for d in want} >= {"Admitted", "Inadmissible", "Finished"}
    assert all(o.topic == TOPICS.decisions for o in out)
    got = [parse_decision(o.value) for o in out]
    assert got == want
    assert [d.cause_offset for d in got] == [d.cause_offset for d in want]
    assert all(d.cause_offset is not None and d.cause_offset >= 100 for d in got)
    for o, d in zip(out, got, strict=True):
        assert o.key == (d.workload or d.object or d.cause).encode()
        assert dict(o.headers) == {"kuota-type": d.type.encode()}
    assert folder.next_offset == 100 + len(evs)
    assert folder.since_snapshot == len(evs)


def test_garbage_is_dead_lettered_with_reason_and_later_events_are_decided() -> None:
    evs = journal()
    batch = records(evs[:3])
    batch.append(rec(3, b"{not json", key=b"k"))
    batch += records(evs[3:], first=4)
    folder = JournalFolder(topics=TOPICS)
    out = folder.handle(batch)

    dead = [o for o in out if o.topic == TOPICS.deadletter]
    assert len(dead) == 1
    assert dead[0].value == b"{not json" and dead[0].key == b"k"
    headers = dict(dead[0].headers)
    assert headers["kuota-reason"].startswith(b"not a journal event")
    assert headers["kuota-source"] == b"t.journal/0/3"
    decided = [parse_decision(o.value) for o in out if o.topic == TOPICS.decisions]
    want = oracle(
        [(i, e) for i, e in enumerate(evs[:3])] + [(4 + i, e) for i, e in enumerate(evs[3:])]
    )
    assert decided == want
    assert any(d.type == "Admitted" for d in decided), "events after the poison are decided"


def test_a_fold_exception_is_dead_lettered_logged_once_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    evs = journal()
    bad = evs[4]  # job b
    folder = JournalFolder(topics=TOPICS, fold=RaisingFold(bad.id))
    with caplog.at_level(logging.ERROR, logger="kuota.admission"):
        out = folder.handle(records(evs))
    dead = [o for o in out if o.topic == TOPICS.deadletter]
    assert len(dead) == 1
    assert dead[0].value == bad.model_dump_json().encode()
    reason = dict(dead[0].headers)["kuota-reason"].decode()
    assert reason == "fold raised KeyError: 'boom\\nsecond line'", "one line"
    assert folder.fold_errors == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "offset 4" in errors[0].getMessage()
    assert "\n" not in errors[0].getMessage()
    decided = [parse_decision(o.value) for o in out if o.topic == TOPICS.decisions]
    assert any(d.workload == "ns/c" for d in decided), "later events still decided"


def test_offsets_must_not_go_backwards() -> None:
    folder = JournalFolder(topics=TOPICS, next_offset=10)
    with pytest.raises(RuntimeError, match="moved backwards"):
        folder.handle(records(journal()[:1], first=9))


# ---------------------------------------------------------------------- silent replay


@pytest.mark.parametrize("cut", [0, 3, 5, 8])
def test_replay_then_live_equals_one_uninterrupted_live_run(cut: int) -> None:
    recs = records(journal())
    recs.insert(2, rec(2, b"garbage"))
    recs = [rec(i, r.value) for i, r in enumerate(recs)]  # renumber after the insert

    uninterrupted = JournalFolder(topics=TOPICS).handle(recs)

    recovered = JournalFolder(topics=TOPICS)
    assert recovered.replay(recs[:cut]) is None, "replay returns no records to produce"
    assert recovered.next_offset == cut
    assert recovered.since_snapshot == 0
    tail = recovered.handle(recs[cut:])

    # The live tail is exactly the uninterrupted run's outputs caused at offsets >= cut.
    def caused_from(out: list[Any]) -> list[tuple[str, bytes]]:
        keep = []
        for o in out:
            if o.topic == TOPICS.decisions:
                if parse_decision(o.value).cause_offset >= cut:
                    keep.append((o.topic, o.value))
            elif int(dict(o.headers)["kuota-source"].rsplit(b"/", 1)[1]) >= cut:
                keep.append((o.topic, o.value))
        return keep

    assert caused_from(tail) == caused_from(uninterrupted)
    assert [(o.topic, o.value) for o in tail] == caused_from(uninterrupted)
