"""The export format: the journal and the decision topic as JSON lines.

Theory of operation: ``kuota journal export FILE`` writes ``FILE`` (the
journal: a header line, then ``{"offset":N,"event":{...}}`` per record) and
``FILE.decisions`` (a header, then ``{"offset":N,"partition":0,"decision":{...}}``),
so that ``kuota audit replay --file`` and ``kuota explain --file`` need no
Kafka. A value that is one line of JSON is kept as it is in Kafka (an event
this build does not read stays, and is skipped on replay as admission skips
it); any other value is kept byte for byte as ``raw_b64``. Offsets are Kafka's,
gaps included. The header's ``end`` is the first journal offset not covered,
the admission group's committed offset, so every decision caused before it is
in the decisions file. Readers skip blank lines; a line that is not JSON is an
:class:`ExportError` with its line number. Examples: docs/design/audit.md
("The export format").

``kuota simulate --export FILE`` writes the same pair from the events the
simulator applied and the decisions the fold made (:class:`ExportWriter`), so
that the offline commands can be tried without Kafka. Its header adds
``preemption``, the mode the simulator folded in, which ``audit replay`` and
``explain`` take as their default.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from kuota.audit.replay import (
    JournalRecord,
    RecordedDecision,
    checked,
    decode_decision,
    decode_event,
)
from kuota.events.schema import SCHEMA_VERSION, Decision, JournalEvent

__all__ = [
    "ExportError",
    "ExportHeader",
    "ExportWriter",
    "decision_line",
    "decisions_path",
    "header_line",
    "journal_line",
    "read_decisions",
    "read_header",
    "read_journal",
]

FORMAT_VERSION = 1
JOURNAL_KIND = "journal-export"
DECISIONS_KIND = "decisions-export"


class ExportError(ValueError):
    """An export file that cannot be read (not ours, or a line is not JSON)."""


@dataclass(frozen=True, slots=True)
class ExportHeader:
    kind: str
    topic: str
    partition: int = 0
    start: int = 0
    end: int | None = None  # first journal offset not covered
    end_reason: str = ""
    preemption: str | None = None  # the mode the decisions were folded in, when known

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kuota": self.kind,
            "version": FORMAT_VERSION,
            "topic": self.topic,
            "partition": self.partition,
            "start": self.start,
            "end": self.end,
            "end_reason": self.end_reason,
        }
        if self.preemption is not None:
            data["preemption"] = self.preemption
        return data


def decisions_path(path: Path) -> Path:
    return path.with_name(path.name + ".decisions")


def header_line(header: ExportHeader) -> bytes:
    return json.dumps(header.to_dict(), separators=(",", ":")).encode() + b"\n"


def _embeddable(value: bytes | None) -> bool:
    """One line of JSON holding an object: embedded as is."""
    if not value or b"\n" in value or b"\r" in value:
        return False
    try:
        return isinstance(json.loads(value), dict)
    except (ValueError, UnicodeDecodeError):
        return False


def journal_line(offset: int, value: bytes | None) -> bytes:
    if _embeddable(value):
        assert value is not None
        return b'{"offset":%d,"event":%s}\n' % (offset, value)
    raw = base64.b64encode(value or b"")
    return b'{"offset":%d,"raw_b64":"%s"}\n' % (offset, raw)


def decision_line(offset: int, partition: int, value: bytes | None) -> bytes:
    if _embeddable(value):
        assert value is not None
        return b'{"offset":%d,"partition":%d,"decision":%s}\n' % (offset, partition, value)
    raw = base64.b64encode(value or b"")
    return b'{"offset":%d,"partition":%d,"raw_b64":"%s"}\n' % (offset, partition, raw)


class ExportWriter:
    """An export pair written from events and decisions in hand (``kuota simulate
    --export``): journal offsets are the order of :meth:`event` calls, the
    decisions' offsets the order of :meth:`decision` calls. The header's ``end``
    is known only at :meth:`close`, so the lines go to ``FILE.tmp`` first; the
    pair appears under its names, headers first, once closed (never half-written
    under the real names)."""

    def __init__(self, path: Path, *, topic: str, preemption: str) -> None:
        self.path = path
        self._dpath = decisions_path(path)
        self._topic = topic
        self._preemption = preemption
        self._body = path.with_name(path.name + ".tmp")
        self._dbody = self._dpath.with_name(self._dpath.name + ".tmp")
        self._journal: IO[bytes] = self._body.open("wb")
        self._decisions: IO[bytes] = self._dbody.open("wb")
        self.events = 0
        self.decisions = 0

    def event(self, event: JournalEvent, *, offset: int) -> None:
        self._journal.write(journal_line(offset, event.model_dump_json().encode()))
        self.events += 1

    def decision(self, decision: Decision) -> None:
        line = decision_line(self.decisions, 0, decision.model_dump_json().encode())
        self._decisions.write(line)
        self.decisions += 1

    def close(self, *, end: int, end_reason: str) -> None:
        """Write both files under their names: the header, then the lines."""
        self._journal.close()
        self._decisions.close()
        headers = (
            ExportHeader(
                JOURNAL_KIND, self._topic, 0, 0, end, end_reason, preemption=self._preemption
            ),
            ExportHeader(DECISIONS_KIND, self._topic, 0, 0, None, "", preemption=self._preemption),
        )
        for header, body, path in zip(
            headers, (self._body, self._dbody), (self.path, self._dpath), strict=True
        ):
            final = path.with_name(path.name + ".part")
            with final.open("wb") as out, body.open("rb") as lines:
                out.write(header_line(header))
                shutil.copyfileobj(lines, out)
            final.replace(path)
            body.unlink()

    def discard(self) -> None:
        """Remove what was written (the run failed before anything was worth keeping)."""
        self._journal.close()
        self._decisions.close()
        self._body.unlink(missing_ok=True)
        self._dbody.unlink(missing_ok=True)


# ---------------------------------------------------------------------- reading


# TypedDicts, not models: one object fewer per line (a fifth of a Tick's decode).
class _JournalLine(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    offset: int
    event: JournalEvent


class _DecisionLine(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    offset: int
    partition: NotRequired[int]
    decision: Decision


_journal_line: TypeAdapter[_JournalLine] = TypeAdapter(_JournalLine)
_decision_line: TypeAdapter[_DecisionLine] = TypeAdapter(_DecisionLine)


def _parse_header(line: bytes, path: Path, kind: str) -> ExportHeader | None:
    if not line.startswith(b'{"kuota"'):
        return None
    try:
        data = json.loads(line)
    except ValueError as err:
        raise ExportError(f"{path}:1: not JSON: {err}") from None
    if data.get("kuota") != kind:
        raise ExportError(f"{path}: a {data.get('kuota')!r} file, not a {kind!r} file")
    if data.get("version") != FORMAT_VERSION:
        raise ExportError(f"{path}: format version {data.get('version')} is not supported")
    end = data.get("end")
    preemption = data.get("preemption")
    return ExportHeader(
        kind=kind,
        topic=str(data.get("topic", "")),
        partition=int(data.get("partition") or 0),
        start=int(data.get("start") or 0),
        end=int(end) if end is not None else None,
        end_reason=str(data.get("end_reason", "")),
        preemption=str(preemption) if preemption is not None else None,
    )


def read_header(path: Path, kind: str = JOURNAL_KIND) -> ExportHeader | None:
    """The header of an export file (None: a file of bare lines without one)."""
    with path.open("rb") as f:
        return _parse_header(f.readline(), path, kind)


def _first(f: IO[bytes], path: Path, kind: str) -> tuple[int, bytes | None]:
    """Skip the header: (the line number of the first data line, that line if
    the file has no header)."""
    first = f.readline()
    if not first or _parse_header(first, path, kind) is not None:
        return 2, None
    return 1, first


def _loads(line: bytes, path: Path, lineno: int) -> dict[str, Any] | None:
    """A line off the fast path: None for a blank line, else its JSON object."""
    if not line.strip():
        return None
    try:
        data = json.loads(line)
    except ValueError as err:
        raise ExportError(f"{path}:{lineno}: not JSON: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("offset"), int):
        raise ExportError(f"{path}:{lineno}: not an export line (no offset)")
    return data


def _slow_journal(line: bytes, path: Path, lineno: int) -> JournalRecord | None:
    data = _loads(line, path, lineno)
    if data is None:
        return None
    offset = data["offset"]
    if "raw_b64" in data:
        return decode_event(offset, base64.b64decode(data["raw_b64"]))
    if "event" in data:
        return decode_event(offset, json.dumps(data["event"]).encode())
    raise ExportError(f"{path}:{lineno}: neither 'event' nor 'raw_b64'")


def read_journal(path: Path) -> Iterator[JournalRecord]:
    """The journal records of an export file, in file order."""
    validate = _journal_line.validate_json
    with path.open("rb") as f:
        lineno, first = _first(f, path, JOURNAL_KIND)
        lines = f if first is None else itertools.chain((first,), f)
        for lineno, line in enumerate(lines, lineno):  # noqa: B020 (numbering goes on)
            try:
                parsed = validate(line)
            except ValidationError:
                record = _slow_journal(line, path, lineno)
                if record is not None:
                    yield record
                continue
            event = parsed["event"]
            if event.schema_version == SCHEMA_VERSION and math.isfinite(event.at):
                yield JournalRecord(parsed["offset"], event)
            else:
                yield checked(parsed["offset"], event)


def read_decisions(path: Path) -> Iterator[RecordedDecision]:
    """The recorded decisions of an export file, in file order."""
    validate = _decision_line.validate_json
    name = path.name
    with path.open("rb") as f:
        lineno, first = _first(f, path, DECISIONS_KIND)
        lines = f if first is None else itertools.chain((first,), f)
        for lineno, line in enumerate(lines, lineno):  # noqa: B020 (numbering goes on)
            try:
                parsed = validate(line)
            except ValidationError:
                pass
            else:
                yield RecordedDecision(f"{name}:{lineno}", parsed["decision"])
                continue
            data = _loads(line, path, lineno)
            if data is None:
                continue
            where = f"{name}:{lineno}"
            if "raw_b64" in data:
                yield decode_decision(where, base64.b64decode(data["raw_b64"]))
            elif "decision" in data:
                yield decode_decision(where, json.dumps(data["decision"]).encode())
            else:
                raise ExportError(f"{path}:{lineno}: neither 'decision' nor 'raw_b64'")
