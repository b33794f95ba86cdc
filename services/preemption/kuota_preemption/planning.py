"""Journal records in, PreemptionPlan journal records out.

Theory of operation: :class:`PlanningFolder` keeps its own :class:`Fold` of
the journal (the same events admission folds, so the same state). After each
live batch it asks the core for preemption plans —
``kuota.core.preemption.plan_preemptions(fold)``, when the core has it — and
turns each into a ``PreemptionPlan`` journal event with the deterministic id
``plan/<preemptor>/<based_on>``, ``based_on`` being the id of the last event
folded. The processor produces them to the journal in the transaction that
commits the batch's offsets. Admission, the single writer of decisions,
folds the plans and validates them against its own state.

The victim search is the core's; this module only calls it and encodes what
it returns. A record that does not decode (``kuota.events.decode``), or whose
fold raised, is dead-lettered live with its original bytes and the reason
(``kuota.bus.deadletter``, header ``kuota-consumer`` = this service's group,
so it is told apart from admission's dead letter of the same record) and the
stream goes on; during the start-up replay it is skipped (dead-lettered by
the incarnation that committed it). A batch made only of plans (this service's own output
coming back) does not trigger a search: nothing about the cluster changed.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiokafka import ConsumerRecord

from kuota.bus.deadletter import dead_letter_record
from kuota.bus.processor import OutRecord
from kuota.bus.topics import Topics, shard_key
from kuota.core.fold import Fold
from kuota.events.decode import DecodeError, decode_event
from kuota.events.schema import JournalEvent, PreemptionPlan

log = logging.getLogger("kuota.preemption")

TYPE_HEADER = "kuota-type"
NOT_AVAILABLE = "preemption search not available in core yet"

Planner = Callable[[Fold], Sequence[Any]]


class Observer(Protocol):
    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None: ...

    def skipped(self, reason: str) -> None: ...

    def searched(self, seconds: float, plans: int, *, failed: bool) -> None: ...


def find_planner() -> tuple[Planner | None, str]:
    """``kuota.core.preemption.plan_preemptions`` if the core has it, else why not."""
    try:
        module = importlib.import_module("kuota.core.preemption")
    except ModuleNotFoundError as err:
        if err.name not in ("kuota.core.preemption", "kuota.core"):
            raise  # the module exists but one of its imports is missing: a bug
        return None, f"{NOT_AVAILABLE} (no module kuota.core.preemption)"
    planner = getattr(module, "plan_preemptions", None)
    if not callable(planner):
        return None, f"{NOT_AVAILABLE} (kuota.core.preemption has no plan_preemptions)"
    return planner, "kuota.core.preemption.plan_preemptions"


def decode(value: bytes | None) -> JournalEvent | str:
    """The event, or the reason the record is not one."""
    try:
        return decode_event(value)
    except DecodeError as err:
        return err.reason


def _field(item: Any, name: str, default: Any) -> Any:
    if isinstance(item, Mapping):
        return item.get(name, default)
    return getattr(item, name, default)


def to_plan_event(item: Any, *, based_on: str, at: float) -> PreemptionPlan:
    """A core plan (a PreemptionPlan, a mapping or an object with ``preemptor``,
    ``victims``, ``reasons``) as the journal event this service writes."""
    preemptor = str(_field(item, "preemptor", ""))
    if not preemptor:
        raise ValueError(f"plan without a preemptor: {item!r}")
    return PreemptionPlan(
        id=f"plan/{preemptor}/{based_on}",
        at=at,
        preemptor=preemptor,
        victims=[str(v) for v in _field(item, "victims", ())],
        reasons={str(k): str(v) for k, v in dict(_field(item, "reasons", {}) or {}).items()},
        based_on=based_on,
    )


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
        planner: Planner | None,
        fold: Fold | None = None,
        observer: Observer | None = None,
        consumer: str = "kuota-preemption",
    ) -> None:
        self.topics = topics
        self.consumer = consumer  # the kuota-consumer header of its dead letters
        self.planner = planner
        self.fold = fold if fold is not None else Fold()
        self.observer = observer
        self.next_offset = 0
        self.last_event_id = ""

    def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[OutRecord]:
        dead: list[OutRecord] = []
        news = self._fold_batch(records, live=True, dead=dead)
        if self.planner is None or not news or not self.last_event_id:
            return dead
        t0 = time.perf_counter()
        try:
            found = list(self.planner(self.fold))
            plans = [to_plan_event(p, based_on=self.last_event_id, at=self.fold.now) for p in found]
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
    ) -> int:
        """Fold the records; how many were events other than plans. Live, the
        dead letters of records that do not decode or fold go to ``dead``."""
        news = 0
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
                news += 1
        return news

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
