"""Journal records in, decision and dead-letter records out.

Theory of operation: :class:`JournalFolder` owns the admission :class:`Fold`
and the journal offset of the next record to fold. The transactional processor
hands it batches in two modes: ``handle`` (live) decodes and folds each record
with ``offset=record.offset`` and returns a decision record per decision and a
dead-letter record (the original bytes, a ``kuota-reason``) per record that
does not decode or whose fold raised, produced with the offsets in one
transaction; ``replay`` (silent recovery, from the snapshot offset up to the
committed offset) folds the same way and drops the outputs, committed already.
No clock is read for a decision (time is the events' ``at``); the clocks here
are for metrics: ``perf_counter`` for the fold latency and, for the plan
latency, ``clock`` (monotonic) in :class:`PlanWaits`. docs/design/admission.md;
the plan latency: docs/design/preemption.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from aiokafka import ConsumerRecord

from kuota.bus.deadletter import REASON_HEADER, SOURCE_HEADER, dead_letter_record
from kuota.bus.processor import OutRecord
from kuota.bus.topics import Topics
from kuota.core.fold.fold import Fold
from kuota.events.decode import DecodeError, decode_event
from kuota.events.schema import Decision, JournalEvent

log = logging.getLogger("kuota.admission")

TYPE_HEADER = "kuota-type"
__all__ = [
    "REASON_HEADER",
    "SOURCE_HEADER",
    "JournalFolder",
    "PlanWaits",
    "UndecodableRecord",
    "decode",
]


# A journal record that is not a journal event this build can fold (the one
# decode error type of kuota.events.decode; the old name is kept).
UndecodableRecord = DecodeError


class Observer(Protocol):
    """What the folder reports (the metrics); ``live`` is False during replay."""

    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None: ...

    def decided(self, decision: Decision, *, live: bool) -> None: ...

    def dead_lettered(self, reason: str) -> None: ...

    def plan_waited(self, seconds: float) -> None: ...


def decode(value: bytes | None) -> JournalEvent:
    """The journal event in a record's value, or :class:`UndecodableRecord`."""
    return decode_event(value)


def decision_record(topic: str, decision: Decision) -> OutRecord:
    key = decision.workload or decision.object or decision.cause
    return OutRecord(
        topic=topic,
        key=key.encode(),
        value=decision.model_dump_json().encode(),
        headers=((TYPE_HEADER, decision.type.encode()),),
    )


class PlanWaits:
    """Live: since when (``clock``) each head has awaited a preemption plan."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since: dict[str, float] = {}

    def after_apply(self, fold: Fold, decisions: Sequence[Decision], now: float) -> list[float]:
        """Note the heads this apply made wait; the waits its decisions ended
        with a preemption (seconds), one per preemptor (its first victim's
        ``Preempted``; its ``Admitted`` follows once the victims' pods are gone)."""
        ended: list[float] = []
        since = self._since
        for d in decisions:
            key = d.workload
            if key is None:
                continue
            if d.type == "Preempted" and d.preemptor:
                start = since.pop(d.preemptor, None)
                if start is not None:
                    ended.append(max(0.0, now - start))
            elif key not in since and fold.awaits_plan(key):
                since[key] = now
        return ended

    def prune(self, fold: Fold) -> None:
        """Forget the heads that no longer await a plan (after a batch)."""
        if self._since:
            for key in [k for k in self._since if not fold.awaits_plan(k)]:
                del self._since[key]

    def __len__(self) -> int:
        return len(self._since)


class JournalFolder:
    def __init__(
        self,
        *,
        topics: Topics,
        fold: Fold | None = None,
        next_offset: int = 0,
        observer: Observer | None = None,
        consumer: str = "kuota-admission",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self.consumer = consumer  # the kuota-consumer header of its dead letters
        self.fold = fold if fold is not None else Fold(preemption="plans")
        self.next_offset = next_offset  # journal offset of the next record to fold
        self.observer = observer
        self.since_snapshot = 0  # records folded live since the last snapshot
        self.fold_errors = 0
        self.clock = clock  # for the plan-latency metric only
        self.plan_waits = PlanWaits()

    # ------------------------------------------------------------------ modes

    def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[OutRecord]:
        """Live: fold the batch; the decision and dead-letter records to produce."""
        out: list[OutRecord] = []
        for record in records:
            self._check_order(record)
            try:
                event = decode(record.value)
            except UndecodableRecord as err:
                why = err.reason
                log.warning("dead-lettered journal offset %d: %s", record.offset, why)
                out.append(self._dead_letter(record, why))
                self._dead_lettered(why)
            else:
                decisions, reason = self._fold(event, record.offset, live=True)
                if reason is not None:
                    out.append(self._dead_letter(record, reason))
                    self._dead_lettered(reason)
                out.extend(decision_record(self.topics.decisions, d) for d in decisions)
                if decisions:
                    self._plan_waits(decisions)
            self.next_offset = record.offset + 1
            self.since_snapshot += 1
        self.plan_waits.prune(self.fold)
        return out

    def replay(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        """Silent: fold the batch, produce nothing (its outputs were committed)."""
        for record in records:
            self._check_order(record)
            try:
                event = decode(record.value)
            except UndecodableRecord:
                pass  # dead-lettered by the incarnation that committed it
            else:
                self._fold(event, record.offset, live=False)
            self.next_offset = record.offset + 1

    # ------------------------------------------------------------------ helpers

    def _check_order(self, record: ConsumerRecord[bytes, bytes]) -> None:
        # Offsets only grow (gaps are transaction markers and aborted records);
        # a record below next_offset would be folded twice.
        if record.offset < self.next_offset:
            raise RuntimeError(
                f"journal offset {record.offset} is below the next offset to fold "
                f"({self.next_offset}): the consumer position moved backwards"
            )

    def _fold(
        self, event: JournalEvent, offset: int, *, live: bool
    ) -> tuple[list[Decision], str | None]:
        t0 = time.perf_counter()
        try:
            decisions = self.fold.apply(event, offset=offset)
        except Exception as err:  # a bug in the fold must not stop admission
            self.fold_errors += 1
            first_line = (str(err).splitlines() or [""])[0]
            reason = f"fold raised {type(err).__name__}: {first_line}"
            log.error(
                "fold failed on journal offset %d (event %s)%s: %s",
                offset,
                event.id,
                "" if live else " during replay",
                reason,
            )
            return [], reason
        if self.observer is not None:
            self.observer.folded(event, time.perf_counter() - t0, live=live)
            for d in decisions:
                self.observer.decided(d, live=live)
        return decisions, None

    def _plan_waits(self, decisions: list[Decision]) -> None:
        for seconds in self.plan_waits.after_apply(self.fold, decisions, self.clock()):
            if self.observer is not None:
                self.observer.plan_waited(seconds)

    def _dead_letter(self, record: ConsumerRecord[bytes, bytes], reason: str) -> OutRecord:
        return dead_letter_record(self.topics.deadletter, record, reason, consumer=self.consumer)

    def _dead_lettered(self, reason: str) -> None:
        if self.observer is not None:
            self.observer.dead_lettered(reason)
