"""The auditor: identical records pass; every kind of tampering is the first divergence."""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import pytest
from audit_builders import as_recorded, busy_journal, fold_all, records
from fold_doubles import RaisingFold

from kuota.audit.replay import (
    Auditor,
    JournalRecord,
    RecordedDecision,
    decode_event,
    run,
)
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, Tick


def audit(recs: list[JournalRecord], recorded: list[RecordedDecision], **kw: object) -> Auditor:
    auditor = Auditor(**kw)  # type: ignore[arg-type]
    run(auditor, recs, recorded)
    return auditor


def tampered(d: Decision, **fields: object) -> Decision:
    return d.model_copy(update=fields)


@pytest.fixture
def recs() -> list[JournalRecord]:
    return busy_journal().records()


@pytest.fixture
def decisions(recs: list[JournalRecord]) -> list[Decision]:
    ds = fold_all(recs)
    assert {d.type for d in ds} >= {"Admitted", "Inadmissible", "Finished"}, "a varied journal"
    return ds


def test_identical_record_replays_identically(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    result = audit(recs, as_recorded(decisions)).finish()
    assert result.identical, result.divergence
    assert result.events == len(recs)
    assert result.matched == result.expected == result.recorded == len(decisions)
    assert (result.first_offset, result.last_offset) == (recs[0].offset, recs[-1].offset)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reason", "Forged"),
        ("cluster_queue", "cq-elsewhere"),
        ("usage", {"gpu-a": {"nvidia.com/gpu": "3"}}),
        ("at", 1.0),
        ("cause_offset", 999),
    ],
)
def test_a_tampered_field_is_a_changed_divergence_naming_the_field(
    recs: list[JournalRecord], decisions: list[Decision], field: str, value: object
) -> None:
    k = 3
    forged = list(decisions)
    forged[k] = tampered(decisions[k], **{field: value})
    div = audit(recs, as_recorded(forged)).finish().divergence
    assert div is not None, "a tampered decision must not pass"
    assert (div.kind, div.index, div.fields) == ("changed", k, (field,))
    assert div.expected == decisions[k] and div.recorded == forged[k]
    assert div.where == f"t.decisions[0]@{k}"
    # The journal event that caused it, with its offset.
    assert div.offset == decisions[k].cause_offset
    assert div.event is not None and div.event.id == decisions[k].cause


def test_a_missing_decision_is_reported_where_it_should_be(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    k = 5
    div = audit(recs, as_recorded(decisions[:k] + decisions[k + 1 :])).finish().divergence
    assert div is not None and div.kind == "missing"
    assert div.index == k and div.expected == decisions[k] and div.recorded == decisions[k + 1]


def test_a_missing_first_decision_of_an_event_with_two() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    # A finish that admits a waiting job: two decisions with the same cause.
    k = next(i for i in range(len(ds) - 1) if ds[i].cause_offset == ds[i + 1].cause_offset)
    div = audit(recs, as_recorded(ds[:k] + ds[k + 1 :])).finish().divergence
    assert div is not None and (div.kind, div.index) == ("missing", k)
    assert div.note == "the record goes on with a later decision of this event"


def test_an_extra_decision_is_reported_where_it_was_inserted(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    k = 4
    forged = tampered(decisions[k], id="f" * 24, reason="Forged")
    div = audit(recs, as_recorded([*decisions[: k + 1], forged, *decisions[k + 1 :]])).finish()
    d = div.divergence
    assert d is not None and (d.kind, d.index) == ("extra", k + 1)
    assert d.recorded == forged and d.expected == decisions[k + 1]
    assert d.event is not None and d.event.id == decisions[k].cause, "the forged record's cause"


def test_a_duplicate_appended_at_the_end_is_extra(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    forged = tampered(decisions[0], reason="Forged")
    result = audit(recs, as_recorded([*decisions, forged])).finish()
    d = result.divergence
    assert d is not None and (d.kind, d.index) == ("extra", len(decisions))
    assert result.matched == len(decisions)


def test_a_record_that_ends_early_misses_the_rest(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    d = audit(recs, as_recorded(decisions[:-2])).finish().divergence
    assert d is not None and (d.kind, d.index) == ("missing", len(decisions) - 2)
    assert d.recorded is None and d.note == "the decision topic ends before this decision"


def test_an_unreadable_record_is_a_divergence(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    recorded = as_recorded(decisions)
    recorded[2] = RecordedDecision("t.decisions[0]@2", None, "not a decision (1 error(s))")
    d = audit(recs, recorded).finish().divergence
    assert d is not None and (d.kind, d.index, d.where) == ("unreadable", 2, "t.decisions[0]@2")


def test_only_the_first_divergence_is_reported(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    forged = list(decisions)
    forged[2] = tampered(decisions[2], reason="First")
    forged[6] = tampered(decisions[6], reason="Second")
    auditor = audit(recs, as_recorded(forged))
    d = auditor.finish().divergence
    assert d is not None and d.index == 2 and d.recorded is not None
    assert d.recorded.reason == "First"
    assert auditor.done


def test_compare_from_ignores_earlier_decisions_but_folds_every_event(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    cut = decisions[6].cause_offset
    assert cut is not None
    forged = list(decisions)
    forged[1] = tampered(decisions[1], reason="BeforeTheCut")  # not compared
    result = audit(recs, as_recorded(forged), compare_from=cut).finish()
    assert result.identical, result.divergence
    assert result.matched == len(decisions) - 6 and result.ignored == 6
    forged[8] = tampered(decisions[8], reason="AfterTheCut")
    d = audit(recs, as_recorded(forged), compare_from=cut).finish().divergence
    assert d is not None and d.kind == "changed" and d.index == 2


def test_compare_to_leaves_out_decisions_of_events_not_yet_folded(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    end = decisions[-3].cause_offset
    assert end is not None
    folded = [r for r in recs if r.offset < end]
    result = audit(folded, as_recorded(decisions), compare_to=end).finish()
    assert result.identical, result.divergence
    assert result.ignored == sum(1 for d in decisions if (d.cause_offset or 0) >= end)


def test_resuming_from_a_snapshot_compares_the_tail(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    """A pickled Fold at offset S, then the records from S (as ``--snapshot``)."""
    split = len(recs) // 2
    fold = Fold()
    for r in recs[:split]:
        assert r.event is not None
        fold.apply(r.event, offset=r.offset)
    start = recs[split].offset
    snapshot = pickle.loads(pickle.dumps(fold))
    auditor = audit(recs[split:], as_recorded(decisions), fold=snapshot, compare_from=start)
    result = auditor.finish()
    assert result.identical, result.divergence
    assert result.matched == sum(1 for d in decisions if (d.cause_offset or 0) >= start) > 0


def test_undecodable_records_are_skipped_like_admission_skips_them(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    last = recs[-1].offset
    v2 = Tick(id="tick@v2", at=1.0, schema_version=2).model_dump_json().encode()
    junk = [decode_event(last + 1, b"\x00garbage"), decode_event(last + 2, v2)]
    assert [j.event for j in junk] == [None, None]
    assert junk[0].problem is not None and "not a journal event" in junk[0].problem
    assert junk[1].problem is not None and "schema_version 2" in junk[1].problem
    result = audit([*recs, *junk], as_recorded(decisions)).finish()
    assert result.identical and result.skipped == 2 and result.events == len(recs) + 2


def test_a_fold_that_raises_is_counted_and_the_stream_goes_on(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    boom = JournalRecord(recs[-1].offset + 1, Tick(id="boom", at=recs[-1].event.at))  # type: ignore[union-attr]
    result = audit([*recs, boom], as_recorded(decisions), fold=RaisingFold("boom")).finish()
    assert result.identical and result.fold_errors == 1


def test_recorded_decisions_may_arrive_before_their_events() -> None:
    """The Kafka reader pulls decisions in batches ahead of the journal."""
    recs = busy_journal().records()
    ds = fold_all(recs)
    auditor = Auditor()
    for r in as_recorded(ds):
        assert auditor.recorded(r) is None
    for rec in recs:
        assert auditor.event(rec) is None
    assert auditor.finish().identical


def test_feeding_in_batches_with_decisions_not_yet_available() -> None:
    """The Kafka driver's pattern: batches of records; ``pull`` may have nothing
    yet (None) and more arrives before the next batch."""
    recs = busy_journal().records()
    ds = as_recorded(fold_all(recs))
    auditor = Auditor()
    available: list[RecordedDecision] = []

    def pull() -> RecordedDecision | None:
        return available.pop(0) if available else None

    for i in range(0, len(recs), 4):
        assert auditor.feed(recs[i : i + 4], pull) is None
        if i % 8 == 0:  # decisions show up every other batch, two at a time
            available += ds[:2]
            del ds[:2]
    for r in available + ds:
        assert auditor.recorded(r) is None
    result = auditor.finish()
    assert result.identical, result.divergence
    assert result.events == len(recs) and result.matched == result.expected


def test_divergence_serialises_for_json(
    recs: list[JournalRecord], decisions: list[Decision]
) -> None:
    forged = list(decisions)
    forged[0] = tampered(decisions[0], reason="Forged")
    result = audit(recs, as_recorded(forged)).finish()
    doc = result.to_dict()
    assert doc["identical"] is False
    div = doc["divergence"]
    assert div["kind"] == "changed" and div["fields"] == ["reason"]
    assert div["recorded"]["reason"] == "Forged" and div["expected"]["reason"] is None
    assert div["event"]["id"] == decisions[0].cause


def test_recent_events_window_bounds_what_a_divergence_can_show() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    forged = list(ds)
    forged[0] = tampered(ds[0], reason="Forged")
    # Even a window of one event suffices for matching in step: the comparison
    # happens right after the cause is folded.
    auditor = Auditor(keep_events=1)
    for r in as_recorded(forged):
        auditor.recorded(r)
    for rec in recs:
        auditor.event(rec)
    d = auditor.finish().divergence
    assert d is not None and d.event is not None and d.event.id == ds[0].cause
    # An extra record whose cause fell out of the window names only its offset.
    auditor = Auditor(keep_events=1)
    late = [*as_recorded(ds), RecordedDecision("x", replace_id(ds[0]))]
    run(auditor, recs, late)
    d = auditor.finish().divergence
    assert d is not None and d.kind == "extra" and d.event is None
    assert d.offset == ds[0].cause_offset


def replace_id(d: Decision) -> Decision:
    return d.model_copy(update={"id": "0" * 24})


def test_journal_records_are_plain_values() -> None:
    rec = JournalRecord(3, Tick(id="t", at=1.0))
    assert replace(rec, offset=4).offset == 4
    assert copy.copy(rec) == rec
    assert records([Tick(id="a", at=1.0)] * 4)[3].offset == 4, "a gap after every third"
