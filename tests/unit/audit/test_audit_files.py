"""The export format round-trips records byte for byte, and the offline audit reads it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from audit_builders import busy_journal, fold_all

from kuota.audit.files import (
    DECISIONS_KIND,
    JOURNAL_KIND,
    ExportError,
    ExportHeader,
    decision_line,
    decisions_path,
    header_line,
    journal_line,
    read_decisions,
    read_header,
    read_journal,
)
from kuota.audit.replay import Auditor, run
from kuota.events.schema import Tick


def write_export(path: Path, *, end: int | None = None, tamper: int | None = None) -> int:
    """An export as ``kuota journal export`` writes it; returns the decision count."""
    recs = busy_journal().records()
    decisions = fold_all(recs)
    with path.open("wb") as f:
        f.write(header_line(ExportHeader(JOURNAL_KIND, "t.journal", 0, 0, end, "test")))
        for r in recs:
            assert r.event is not None
            f.write(journal_line(r.offset, r.event.model_dump_json().encode()))
    with decisions_path(path).open("wb") as f:
        f.write(header_line(ExportHeader(DECISIONS_KIND, "t.decisions")))
        for i, d in enumerate(decisions):
            if i == tamper:
                d = d.model_copy(update={"message": "forged"})
            f.write(decision_line(i, 0, d.model_dump_json().encode()))
    return len(decisions)


def test_event_values_are_embedded_as_they_are() -> None:
    value = Tick(id="tick@1.0", at=1.0).model_dump_json().encode()
    line = journal_line(7, value)
    assert line == b'{"offset":7,"event":' + value + b"}\n"
    assert json.loads(line)["event"] == json.loads(value)


@pytest.mark.parametrize(
    "value", [b"\x00not json {", b"", b'"a string"', b'{"type":\n"Tick"}', None]
)
def test_other_values_are_kept_byte_for_byte(value: bytes | None, tmp_path: Path) -> None:
    line = journal_line(3, value)
    assert base64.b64decode(json.loads(line)["raw_b64"]) == (value or b"")
    path = tmp_path / "j.jsonl"
    path.write_bytes(line)
    (rec,) = read_journal(path)
    assert rec.offset == 3 and rec.event is None and rec.problem


def test_an_unknown_event_type_is_embedded_and_skipped_on_replay(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(journal_line(0, b'{"type":"Mystery","id":"x","at":1.0}'))
    (rec,) = read_journal(path)
    assert rec.event is None and rec.problem is not None and "not a journal event" in rec.problem


def test_records_and_decisions_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    n = write_export(path, end=99)
    recs = busy_journal().records()
    assert [(r.offset, r.event) for r in read_journal(path)] == [(r.offset, r.event) for r in recs]
    got = list(read_decisions(decisions_path(path)))
    assert [r.decision for r in got] == fold_all(recs) and len(got) == n
    assert got[0].where == "journal.jsonl.decisions:2", "file and line (after the header)"
    header = read_header(path)
    assert header is not None and (header.end, header.end_reason, header.topic) == (
        99,
        "test",
        "t.journal",
    )


def test_offline_audit_of_an_export(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    n = write_export(path)
    result = run(Auditor(), read_journal(path), read_decisions(decisions_path(path)))
    assert result.identical and result.matched == n
    write_export(path, tamper=4)
    div = run(Auditor(), read_journal(path), read_decisions(decisions_path(path)))
    assert div.divergence is not None
    assert (div.divergence.kind, div.divergence.index, div.divergence.fields) == (
        "changed",
        4,
        ("message",),
    )
    assert div.divergence.where == "journal.jsonl.decisions:6"


def test_bad_files_are_errors_with_a_line_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(journal_line(0, b'{"type":"Tick","id":"t","at":1.0}') + b"not json\n")
    with pytest.raises(ExportError, match=r"bad.jsonl:2: not JSON"):
        list(read_journal(path))
    path.write_bytes(header_line(ExportHeader(DECISIONS_KIND, "t")))
    with pytest.raises(ExportError, match="not a 'journal-export' file"):
        read_header(path)
    path.write_bytes(b'{"offset":1,"other":2}\n')
    with pytest.raises(ExportError, match="neither 'event' nor 'raw_b64'"):
        list(read_journal(path))


def test_a_file_without_header_and_with_blank_lines_reads(tmp_path: Path) -> None:
    path = tmp_path / "bare.jsonl"
    tick = Tick(id="t", at=1.0).model_dump_json().encode()
    path.write_bytes(journal_line(0, tick) + b"\n" + journal_line(5, tick))
    assert read_header(path) is None
    assert [r.offset for r in read_journal(path)] == [0, 5]
