"""Poison records in the journal consumers (admission and preemption), no Kafka.

Property: a batch of good journal events with arbitrary bytes mixed in gives,
from ``JournalFolder.handle`` (admission) and ``PlanningFolder.handle``
(preemption), exactly the decisions the fold gives for the good events alone
(same ids, same order, same content), plus one dead letter per bad record that
carries the ORIGINAL key and value bytes, the reason, the source
topic/partition/offset and the consumer; ``handle`` never raises.
"""

from __future__ import annotations

import json
from typing import Any

from aiokafka import ConsumerRecord
from builders import manifests
from builders.kafka import consumer_record
from builders.manifests import cluster_queue, flavor, local_queue
from fuzz_support import FUZZ, golden_records, mutated_bytes
from hypothesis import given
from hypothesis import strategies as st

from kuota.bus.deadletter import (
    CONSUMER_HEADER,
    MAX_VALUE,
    REASON_HEADER,
    SOURCE_HEADER,
    TRUNCATED_HEADER,
)
from kuota.bus.topics import Topics
from kuota.core.fold.fold import Fold
from kuota.events.decode import DecodeError, decode_event
from kuota.events.schema import Decision, JournalEvent, ObjectUpserted, Tick
from kuota_admission.records import JournalFolder
from kuota_preemption.planning import PlanningFolder

TOPICS = Topics(journal="f.journal", decisions="f.decisions", deadletter="f.deadletter")


def _good_events() -> list[JournalEvent]:
    def job(name: str) -> dict[str, Any]:
        return manifests.job(
            name, namespace="ns", gpus="1", created=None, uid=f"uid-{name}", image="x"
        )

    objs = [
        flavor("f", spec={}),
        cluster_queue("cq", gpus=2, flavor="f"),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
        *(job(f"j{i}") for i in range(4)),
    ]
    evs: list[JournalEvent] = [
        ObjectUpserted(id=f"o{i}", at=10.0 + i, object=o) for i, o in enumerate(objs)
    ]
    evs.append(Tick(id="tick", at=30.0))
    return evs


GOOD = _good_events()
BAD_SEEDS = [
    b"\x00garbage",
    b'{"type": "Tick", "id": "t"',  # truncated JSON
    b'{"kind": "ClusterQueue", "metadata": {"name": "x"}}',  # valid JSON, wrong schema
    b'{"type": "Tick", "id": "t", "at": 1e999}',
    *golden_records("decision"),  # a decision on the journal is not a journal event
]


def _rec(offset: int, value: bytes | None, key: bytes | None) -> ConsumerRecord[bytes, bytes]:
    return consumer_record(TOPICS.journal, offset, value, key=key)


def _undecodable(value: bytes | None) -> bool:
    try:
        decode_event(value)
    except DecodeError:
        return True
    return False


bad_values = st.one_of(
    st.none(),
    st.binary(max_size=60),
    st.sampled_from(BAD_SEEDS),
    mutated_bytes([e.model_dump_json().encode() for e in GOOD]),
).filter(_undecodable)


@st.composite
def poisoned(draw: st.DrawFn) -> list[tuple[bytes | None, bytes | None, bool]]:
    """(key, value, good) in journal order: every good event, bad ones between."""
    out: list[tuple[bytes | None, bytes | None, bool]] = []
    for ev in GOOD:
        for _ in range(draw(st.integers(min_value=0, max_value=2))):
            out.append((draw(st.sampled_from([b"kuota", None, b"\xff"])), draw(bad_values), False))
        out.append((b"kuota", ev.model_dump_json().encode(), True))
    return out


def _expected() -> list[Decision]:
    fold = Fold()
    return [d for e in GOOD for d in fold.apply(e, offset=None)]


EXPECTED = _expected()


def _strip(d: Decision) -> Decision:
    return d.model_copy(update={"cause_offset": None})


@FUZZ
@given(poisoned(), st.integers(min_value=1, max_value=5))
def test_admission_dead_letters_each_bad_record_and_decides_the_rest(
    journal: list[tuple[bytes | None, bytes | None, bool]], batch: int
) -> None:
    folder = JournalFolder(topics=TOPICS, consumer="t-admission")
    recs = [_rec(i, value, key) for i, (key, value, _) in enumerate(journal)]
    out = [o for i in range(0, len(recs), batch) for o in folder.handle(recs[i : i + batch])]
    decisions = [json.loads(o.value) for o in out if o.topic == TOPICS.decisions]
    assert [_strip(Decision(**d)) for d in decisions] == [_strip(d) for d in EXPECTED]
    _assert_dead_letters(journal, [o for o in out if o.topic == TOPICS.deadletter], "t-admission")
    assert folder.next_offset == len(journal)


@FUZZ
@given(poisoned())
def test_preemption_dead_letters_each_bad_record_and_keeps_folding(
    journal: list[tuple[bytes | None, bytes | None, bool]],
) -> None:
    folder = PlanningFolder(topics=TOPICS, consumer="t-preemption")
    recs = [_rec(i, value, key) for i, (key, value, _) in enumerate(journal)]
    out = folder.handle(recs)
    assert all(o.topic == TOPICS.deadletter for o in out)
    _assert_dead_letters(journal, list(out), "t-preemption")
    # Its fold saw exactly the good events: same state as the oracle's.
    oracle = Fold()
    for e in GOOD:
        oracle.apply(e)
    assert folder.fold.summary() == oracle.summary()
    assert folder.last_event_id == GOOD[-1].id


def test_preemption_replay_skips_bad_records_silently() -> None:
    folder = PlanningFolder(topics=TOPICS)
    folder.replay([_rec(0, b"\x00", b"k"), _rec(1, GOOD[0].model_dump_json().encode(), b"k")])
    assert folder.next_offset == 2 and folder.last_event_id == GOOD[0].id


def _assert_dead_letters(
    journal: list[tuple[bytes | None, bytes | None, bool]], dead: list[Any], consumer: str
) -> None:
    bad = [(i, key, value) for i, (key, value, good) in enumerate(journal) if not good]
    assert len(dead) == len(bad)
    for (offset, key, value), letter in zip(bad, dead, strict=True):
        assert letter.value == (value or b""), "the original bytes"
        assert letter.key == key
        headers = dict(letter.headers)
        assert headers[REASON_HEADER], "a reason"
        assert headers[SOURCE_HEADER] == f"{TOPICS.journal}/0/{offset}".encode()
        assert headers[CONSUMER_HEADER] == consumer.encode()


def test_a_dead_letter_of_a_record_near_the_size_limit_is_cut_and_says_so() -> None:
    big = b"\x00" * (MAX_VALUE + 40_000)
    folder = JournalFolder(topics=TOPICS, consumer="t-admission")
    (letter,) = folder.handle([_rec(0, big, b"kuota")])
    headers = dict(letter.headers)
    assert letter.value == big[:MAX_VALUE]
    assert headers[TRUNCATED_HEADER] == str(len(big)).encode()
    assert headers[SOURCE_HEADER] == f"{TOPICS.journal}/0/0".encode()
    small = folder.handle([_rec(1, b"\x00" * 10, b"kuota")])
    assert TRUNCATED_HEADER not in dict(small[0].headers), "only when cut"
