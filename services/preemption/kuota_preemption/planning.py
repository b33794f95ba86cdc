"""Journal records in, PreemptionPlan journal records out.

Theory of operation: :class:`PlanningFolder` keeps its own
``Fold(preemption="plans")`` of the journal: the same events admission folds in
the same mode, so the same state and the same heads awaiting a plan. After each
live batch that changed something (an event other than a plan, or a plan whose
head still waits: a stale one) it runs the victim search for every awaiting
head (:class:`kuota.core.preemption.planner.Planner`) and returns the results
as ``PreemptionPlan`` journal events, ``plan/<preemptor>/<based_on>``, produced
in the transaction that commits the batch's offsets; admission folds and
validates them. A record that does not decode, or whose fold raised, is
dead-lettered live (``kuota-consumer``: this service's group) and skipped in
the start-up replay. docs/design/preemption.md (*Plans mode in the services*).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Protocol

from aiokafka import ConsumerRecord

from kuota.bus.deadletter import dead_letter_record
from kuota.bus.processor import OutRecord
from kuota.bus.topics import Topics, shard_key
from kuota.core.fold.fold import Fold
from kuota.core.preemption.planner import Planner
from kuota.events.decode import DecodeError, decode_event
from kuota.events.schema import JournalEvent, PreemptionPlan

log = logging.getLogger("kuota.preemption")

TYPE_HEADER = "kuota-type"


class Observer(Protocol):
    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None: ...

    def skipped(self, reason: str) -> None: ...

    def searched(self, seconds: float, plans: int, *, failed: bool) -> None: ...


def decode(value: bytes | None) -> JournalEvent | str:
    """The event, or the reason the record is not one."""
    try:
        return decode_event(value)
    except DecodeError as err:
        return err.reason


def plan_record(topic: str, plan: PreemptionPlan) -> OutRecord:
    return OutRecord(
        topic=topic,
        key=shard_key(plan.preemptor),
        value=plan.model_dump_json().encode(),
        headers=((TYPE_HEADER, plan.type.encode()),),
    )


class PlanningFolder:
    def __init__(
        self,
        *,
        topics: Topics,
        fold: Fold | None = None,
        observer: Observer | None = None,
        consumer: str = "kuota-preemption",
    ) -> None:
        self.topics = topics
        self.consumer = consumer  # the kuota-consumer header of its dead letters
        self.fold = fold if fold is not None else Fold(preemption="plans")
        self.planner = Planner()
        self.observer = observer
        self.next_offset = 0
        self.last_event_id = ""

    def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[OutRecord]:
        dead: list[OutRecord] = []
        search = self._fold_batch(records, live=True, dead=dead)
        if not search or not self.last_event_id:
            return dead
        t0 = time.perf_counter()
        try:
            plans = self.planner.plans(self.fold, based_on=self.last_event_id, at=self.fold.now)
        except Exception as err:  # a bug in the search must not stop the service
            log.error(
                "preemption search failed after offset %d: %s: %s",
                self.next_offset - 1,
                type(err).__name__,
                err,
            )
            if self.observer is not None:
                self.observer.searched(time.perf_counter() - t0, 0, failed=True)
            return dead
        if self.observer is not None:
            self.observer.searched(time.perf_counter() - t0, len(plans), failed=False)
        for plan in plans:
            log.info("plan %s: preempt %s", plan.id, ", ".join(plan.victims) or "nothing")
        return dead + [plan_record(self.topics.journal, p) for p in plans]

    def replay(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        self._fold_batch(records, live=False)

    def _fold_batch(
        self,
        records: Sequence[ConsumerRecord[bytes, bytes]],
        *,
        live: bool,
        dead: list[OutRecord] | None = None,
    ) -> bool:
        """Fold the records; whether a search is due: an event other than a plan,
        or a plan whose head still waits (stale). Live, the dead letters of
        records that do not decode or fold go to ``dead``."""
        search = False
        for record in records:
            if record.offset < self.next_offset:
                raise RuntimeError(
                    f"journal offset {record.offset} is below the next offset to fold "
                    f"({self.next_offset}): the consumer position moved backwards"
                )
            self.next_offset = record.offset + 1
            event = decode(record.value)
            if isinstance(event, str):
                if live:
                    self._dead_letter(record, event, dead)
                continue
            t0 = time.perf_counter()
            try:
                self.fold.apply(event, offset=record.offset)
            except Exception as err:  # a bug in the fold must not stop the service
                log.error(
                    "fold failed on journal offset %d (event %s): %s: %s",
                    record.offset,
                    event.id,
                    type(err).__name__,
                    err,
                )
                if live:
                    first_line = (str(err).splitlines() or [""])[0]
                    self._dead_letter(
                        record, f"fold raised {type(err).__name__}: {first_line}", dead
                    )
                continue
            if self.observer is not None:
                self.observer.folded(event, time.perf_counter() - t0, live=live)
            self.last_event_id = event.id
            if not isinstance(event, PreemptionPlan):
                search = True
            elif self.planner.folded(event, self.fold):
                search = True  # stale: its head still waits
        return search

    def _dead_letter(
        self, record: ConsumerRecord[bytes, bytes], reason: str, dead: list[OutRecord] | None
    ) -> None:
        log.warning("dead-lettered journal offset %d: %s", record.offset, reason)
        if dead is not None:
            dead.append(
                dead_letter_record(self.topics.deadletter, record, reason, consumer=self.consumer)
            )
        if self.observer is not None:
            self.observer.skipped(reason)
