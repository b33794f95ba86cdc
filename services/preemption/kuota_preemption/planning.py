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
it returns. Records that do not decode are skipped here (admission
dead-letters them). A batch made only of plans (this service's own output
coming back) does not trigger a search: nothing about the cluster changed.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiokafka import ConsumerRecord
from pydantic import ValidationError

from kuota.bus.processor import OutRecord
from kuota.bus.topics import Topics, shard_key
from kuota.core.fold import Fold
from kuota.events.schema import SCHEMA_VERSION, JournalEvent, PreemptionPlan, parse_event

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
    if not value:
        return "empty record value"
    try:
        event = parse_event(value)
    except ValidationError as err:
        return f"not a journal event ({err.error_count()} error(s))"
    if event.schema_version != SCHEMA_VERSION:
        return f"schema_version {event.schema_version} is not supported"
    return event


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
    ) -> None:
        self.topics = topics
        self.planner = planner
        self.fold = fold if fold is not None else Fold()
        self.observer = observer
        self.next_offset = 0
        self.last_event_id = ""

    def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[OutRecord]:
        news = self._fold_batch(records, live=True)
        if self.planner is None or not news or not self.last_event_id:
            return []
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
            return []
        if self.observer is not None:
            self.observer.searched(time.perf_counter() - t0, len(plans), failed=False)
        for plan in plans:
            log.info("plan %s: preempt %s", plan.id, ", ".join(plan.victims) or "nothing")
        return [plan_record(self.topics.journal, p) for p in plans]

    def replay(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        self._fold_batch(records, live=False)

    def _fold_batch(self, records: Sequence[ConsumerRecord[bytes, bytes]], *, live: bool) -> int:
        """Fold the records; how many were events other than plans."""
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
                if live and self.observer is not None:
                    self.observer.skipped(event)
                continue
            t0 = time.perf_counter()
            try:
                self.fold.apply(event, offset=record.offset)
            except Exception as err:  # admission dead-letters it; keep folding
                log.error(
                    "fold failed on journal offset %d (event %s): %s: %s",
                    record.offset,
                    event.id,
                    type(err).__name__,
                    err,
                )
                continue
            if self.observer is not None:
                self.observer.folded(event, time.perf_counter() - t0, live=live)
            self.last_event_id = event.id
            if not isinstance(event, PreemptionPlan):
                news += 1
        return news
