"""The auditor: re-fold the journal, recompute every decision, diff with the record.

Theory of operation: an :class:`Auditor` is fed journal records in offset
order (:meth:`Auditor.feed`, :meth:`Auditor.event`) and folds each with
``Fold.apply(event, offset=offset)`` as admission does, by default in its mode
(:func:`service_fold`, ``preemption="plans"``); an undecodable record is
skipped and an exception in the fold counted, where admission dead-letters
both. It is fed the recorded decisions too (:meth:`Auditor.recorded`), in
topic order. Admission writes a batch's decisions in fold order to one
partition, so the two sequences must be equal element by element: the auditor
matches heads as they come and stops at the first difference, classified
``changed``, ``missing``, ``extra`` or ``unreadable``. Only decisions caused at
offsets in ``[compare_from, compare_to)`` are compared. Pure: sources, timing
and progress are the caller's. Kinds and ranges: docs/design/audit.md.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.events.decode import DecodeError
from kuota.events.decode import decode_event as _decode_event
from kuota.events.schema import (
    SCHEMA_VERSION,
    Decision,
    JournalEvent,
    parse_decision,
)

__all__ = [
    "AuditResult",
    "Auditor",
    "Divergence",
    "JournalRecord",
    "RecordedDecision",
    "decode_decision",
    "decode_event",
    "run",
    "service_fold",
]

CHANGED = "changed"
MISSING = "missing"
EXTRA = "extra"
UNREADABLE = "unreadable"


# Records are plain (not frozen) slotted dataclasses: one is made per journal
# record and a frozen one costs twice as much to build. Treat them as values.
@dataclass(slots=True)
class JournalRecord:
    """One journal record: its offset and the event, or why it cannot be folded."""

    offset: int
    event: JournalEvent | None
    problem: str | None = None


@dataclass(slots=True)
class RecordedDecision:
    """One record of the decision topic (or export file), and where it was read."""

    where: str  # e.g. "kuota.decisions[0]@17" or "journal.jsonl.decisions:18"
    decision: Decision | None
    problem: str | None = None


def decode_event(offset: int, value: bytes | None) -> JournalRecord:
    """Decode a journal record value the way the admission service does
    (``kuota.events.decode``: same events folded, same records refused)."""
    try:
        return JournalRecord(offset, _decode_event(value))
    except DecodeError as err:
        return JournalRecord(offset, None, err.reason)


def checked(offset: int, event: JournalEvent) -> JournalRecord:
    """A decoded event, refused when its schema version is not this build's or
    its event time is not finite (as ``kuota.events.decode`` refuses it)."""
    if event.schema_version != SCHEMA_VERSION:
        return JournalRecord(
            offset,
            None,
            f"schema_version {event.schema_version} is not supported "
            f"(this build reads {SCHEMA_VERSION})",
        )
    if not math.isfinite(event.at):
        return JournalRecord(
            offset, None, f"not a journal event: at: {event.at!r} is not a finite event time"
        )
    return JournalRecord(offset, event)


def decode_decision(where: str, value: bytes | None) -> RecordedDecision:
    if not value:
        return RecordedDecision(where, None, "empty record value")
    try:
        return RecordedDecision(where, parse_decision(value))
    except ValidationError as err:
        return RecordedDecision(where, None, f"not a decision ({err.error_count()} error(s))")


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first place where the recomputed and the recorded decisions differ."""

    kind: str  # changed | missing | extra | unreadable
    index: int  # position among the compared decisions (0-based)
    offset: int | None  # journal offset of the cause
    event: JournalEvent | None  # that journal event, if still known
    expected: Decision | None  # what the fold decides there
    recorded: Decision | None  # what the decision topic says there
    where: str | None  # where the recorded record was read
    fields: tuple[str, ...] = ()  # for ``changed``: the fields that differ
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "journal_offset": self.offset,
            "event": self.event.model_dump(mode="json") if self.event is not None else None,
            "expected": self.expected.model_dump(mode="json") if self.expected else None,
            "recorded": self.recorded.model_dump(mode="json") if self.recorded else None,
            "recorded_at": self.where,
            "fields": list(self.fields),
            "note": self.note,
        }


@dataclass(slots=True)
class AuditResult:
    events: int = 0  # journal records fed
    skipped: int = 0  # records that do not decode (admission dead-letters them)
    fold_errors: int = 0  # events whose fold raised (likewise dead-lettered)
    expected: int = 0  # recomputed decisions in the compared range
    recorded: int = 0  # recorded decisions in the compared range
    matched: int = 0
    ignored: int = 0  # recorded decisions outside the compared range
    first_offset: int | None = None
    last_offset: int | None = None
    divergence: Divergence | None = None

    @property
    def identical(self) -> bool:
        return self.divergence is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "events": self.events,
            "skipped": self.skipped,
            "fold_errors": self.fold_errors,
            "expected": self.expected,
            "recorded": self.recorded,
            "matched": self.matched,
            "ignored": self.ignored,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "divergence": self.divergence.to_dict() if self.divergence else None,
        }


def differing_fields(a: Decision, b: Decision) -> tuple[str, ...]:
    return tuple(name for name in Decision.model_fields if getattr(a, name) != getattr(b, name))


def service_fold(preemption: str = PLANS) -> Fold:
    """A new fold in the admission service's mode (``"plans"``), or in ``"inline"``
    mode for a journal written before the services folded in plans mode."""
    return Fold(preemption=preemption)


@dataclass(slots=True)
class Auditor:
    """Fold journal records and compare decisions (see the module docstring)."""

    fold: Fold = field(default_factory=service_fold)
    compare_from: int = 0
    compare_to: int | None = None
    keep_events: int = 4096
    result: AuditResult = field(default_factory=AuditResult)
    _expected: deque[Decision] = field(default_factory=deque)
    _recorded: deque[RecordedDecision] = field(default_factory=deque)
    _recent: deque[JournalRecord] = field(init=False)

    def __post_init__(self) -> None:
        self._recent = deque(maxlen=max(1, self.keep_events))

    @property
    def done(self) -> bool:
        """A divergence was found: feeding more changes nothing."""
        return self.result.divergence is not None

    @property
    def waiting(self) -> int:
        """Recomputed decisions waiting for their recorded counterpart."""
        return len(self._expected)

    # ------------------------------------------------------------------ input

    def event(self, record: JournalRecord) -> Divergence | None:
        """Fold one journal record (offsets must grow)."""
        return self.feed((record,))

    def feed(
        self,
        records: Iterable[JournalRecord],
        pull: Callable[[], RecordedDecision | None] | None = None,
        *,
        progress: Progress | None = None,
        every: int = 20_000,
    ) -> Divergence | None:
        """Fold records in order; after each one whose decisions wait for their
        recorded counterparts, take recorded decisions from ``pull`` (None: none
        available now) until they are matched. The hot loop of an audit: a
        million Ticks cost little more than the fold's own time for them."""
        res = self.result
        if res.divergence is not None:
            return res.divergence
        apply = self.fold.apply
        remember = self._recent.append
        waiting = self._expected
        lo, hi = self.compare_from, self.compare_to
        n = 0
        offset = -1
        try:
            for record in records:
                n += 1
                offset = record.offset
                if res.first_offset is None:
                    res.first_offset = offset
                event = record.event
                if event is None:
                    res.skipped += 1
                    continue
                remember(record)
                try:
                    decisions = apply(event, offset=offset)
                except Exception:  # admission dead-letters the event and goes on; so do we
                    res.fold_errors += 1
                    continue
                if decisions and offset >= lo and (hi is None or offset < hi):
                    res.expected += len(decisions)
                    waiting.extend(decisions)
                    if self._recorded and self._match() is not None:
                        break
                    while waiting and pull is not None:
                        r = pull()
                        if r is None:
                            break
                        if self.recorded(r) is not None:
                            break
                    if res.divergence is not None:
                        break
                if progress is not None and n % every == 0:
                    progress(n, offset)
        finally:
            res.events += n
            if n:
                res.last_offset = offset
        return res.divergence

    def recorded(self, record: RecordedDecision) -> Divergence | None:
        """Take one recorded decision, in topic order."""
        res = self.result
        if res.divergence is not None:
            return res.divergence
        d = record.decision
        if d is not None and d.cause_offset is not None and not self._in_range(d.cause_offset):
            res.ignored += 1
            return None
        res.recorded += 1
        self._recorded.append(record)
        if self._expected or d is None:
            return self._match()
        return None

    def finish(self) -> AuditResult:
        """The journal range and the record are both read: what is left over diverges."""
        res = self.result
        if res.divergence is None:
            self._match()
        if res.divergence is None:
            if self._expected:
                e = self._expected[0]
                self._diverge(
                    MISSING,
                    e,
                    None,
                    None,
                    note="the decision topic ends before this decision",
                )
            elif self._recorded:
                r = self._recorded[0]
                if r.decision is None:
                    self._diverge(UNREADABLE, None, None, r, note=r.problem or "")
                else:
                    self._diverge(
                        EXTRA,
                        None,
                        r.decision,
                        r,
                        note="recorded after the fold's last decision for the journal range",
                    )
        return res

    # ------------------------------------------------------------------ matching

    def _in_range(self, offset: int) -> bool:
        return offset >= self.compare_from and (self.compare_to is None or offset < self.compare_to)

    def _match(self) -> Divergence | None:
        exp, rec, res = self._expected, self._recorded, self.result
        while rec:
            r = rec[0]
            d = r.decision
            if d is None:
                return self._diverge(
                    UNREADABLE, exp[0] if exp else None, None, r, note=r.problem or ""
                )
            if not exp:
                return None
            e = exp[0]
            if d.id == e.id:
                if d == e:
                    exp.popleft()
                    rec.popleft()
                    res.matched += 1
                    continue
                return self._diverge(
                    CHANGED,
                    e,
                    d,
                    r,
                    fields=differing_fields(e, d),
                    note="same decision id, different content",
                )
            eo, ro = e.cause_offset, d.cause_offset
            if eo is not None and ro is not None and ro > eo:
                return self._diverge(
                    MISSING,
                    e,
                    d,
                    r,
                    note=f"the record goes on with a decision caused at offset {ro}",
                )
            if eo is not None and ro == eo and any(x.id == d.id for x in exp):
                return self._diverge(
                    MISSING, e, d, r, note="the record goes on with a later decision of this event"
                )
            return self._diverge(
                EXTRA,
                e,
                d,
                r,
                note="the fold makes no such decision here"
                if ro is not None
                else "the fold makes no such decision here (it has no cause_offset)",
            )
        return None

    def _diverge(
        self,
        kind: str,
        expected: Decision | None,
        recorded: Decision | None,
        where: RecordedDecision | None,
        *,
        fields: tuple[str, ...] = (),
        note: str = "",
    ) -> Divergence:
        if kind == EXTRA or expected is None:
            offset = recorded.cause_offset if recorded is not None else None
        else:
            offset = expected.cause_offset
        div = Divergence(
            kind=kind,
            index=self.result.matched,
            offset=offset,
            event=self._event_at(offset),
            expected=expected,
            recorded=recorded,
            where=where.where if where is not None else None,
            fields=fields,
            note=note,
        )
        self.result.divergence = div
        return div

    def _event_at(self, offset: int | None) -> JournalEvent | None:
        if offset is None:
            return None
        for record in reversed(self._recent):
            if record.offset == offset:
                return record.event
            if record.offset < offset:
                break
        return None


Progress = Callable[[int, int], None]  # (records folded, last journal offset)


def run(
    auditor: Auditor,
    journal: Iterable[JournalRecord],
    recorded: Iterable[RecordedDecision],
    *,
    progress: Progress | None = None,
    every: int = 20_000,
) -> AuditResult:
    """Drive an auditor over two in-order sources (files, lists): recorded
    decisions are pulled only while recomputed ones wait for them, so neither
    side is held in memory; stops at the first divergence."""
    pending = iter(recorded)

    def pull() -> RecordedDecision | None:
        return next(pending, None)

    if auditor.feed(journal, pull, progress=progress, every=every) is None:
        for r in pending:
            if auditor.recorded(r) is not None:
                break
    return auditor.finish()
