"""Per-workload lanes: decisions of different Jobs in parallel, of one Job in order.

Theory of operation: every consumed decision record is submitted in offset
order. It joins its partition's in-flight list and, keyed by its workload (or
object), a lane: one asyncio task per key that applies the key's decisions one
after the other and ends when its queue is empty, so a stop waiting for the Job
controller holds up only its own Job. One wait crosses lanes: an Admitted
decision with victims waits for the victims' earlier decisions (the fold admits
a preemptor only once its victims' pods are gone, so this is a second guard);
waits point only to earlier entries, so they cannot form a cycle. A stop's
quota is kept by the fold until its pods are gone (``kuota_actuator.drains``),
so no admission waits for other Jobs' stops. :meth:`Lanes.done_prefix`
pops, per partition, the longest prefix already applied: folded into the read
model in offset order, its end is the offset to commit. An unexpected exception
in a lane is kept in ``error`` and ends the service. Why: docs/design/actuator.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiokafka import ConsumerRecord, TopicPartition

from kuota.events.schema import Decision

log = logging.getLogger("kuota.actuator")

Apply = Callable[[Decision, int], Awaitable[object]]


@dataclass(slots=True)
class _Entry:
    record: ConsumerRecord[bytes, bytes]
    decision: Decision | None
    done: bool = False
    after: tuple[_Entry, ...] = ()  # entries of other lanes to be applied first
    applied: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def decision_type(self) -> str:
        return self.decision.type if self.decision is not None else ""


class Lanes:
    def __init__(self, apply: Apply, stop: asyncio.Event) -> None:
        self._apply = apply
        self._stop = stop
        self._pending: dict[TopicPartition, deque[_Entry]] = {}
        self._queues: dict[str, deque[_Entry]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.in_flight = 0
        self.progress = asyncio.Event()
        self.error: Exception | None = None  # a lane's unexpected failure; the service stops

    def submit(
        self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes], d: Decision | None
    ) -> None:
        entry = _Entry(record, d, done=d is None)
        self._pending.setdefault(tp, deque()).append(entry)
        if d is None:
            return
        self.in_flight += 1
        key = d.workload or d.object or ""
        if d.type == "Admitted" and d.victims:
            victims = [e for v in d.victims if v != key for e in self._queues.get(v, ())]
            entry.after = tuple(victims)
        queue = self._queues.setdefault(key, deque())
        queue.append(entry)
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._run(key, queue), name=f"lane {key}")

    async def _run(self, key: str, queue: deque[_Entry]) -> None:
        try:
            while queue and not self._stop.is_set():
                entry = queue[0]
                assert entry.decision is not None
                for earlier in entry.after:
                    await earlier.applied.wait()
                try:
                    await self._apply(entry.decision, entry.record.offset)
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # not an API error (those are handled): stop
                    log.error("%s: applying decision %s failed: %r", key, entry.decision.id, err)
                    self.error = err
                    self.progress.set()
                    return
                entry.done = True
                entry.applied.set()
                queue.popleft()
                self.in_flight -= 1
                self.progress.set()
        finally:
            # No await between the last queue check and here: a decision
            # submitted meanwhile would have kept the loop running.
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]
                if not queue:
                    self._queues.pop(key, None)

    def done_prefix(self) -> tuple[list[Decision], dict[TopicPartition, int]]:
        """Applied decisions in offset order, and the offsets to commit."""
        decisions: list[Decision] = []
        commit: dict[TopicPartition, int] = {}
        for tp in sorted(self._pending):
            entries = self._pending[tp]
            while entries and entries[0].done:
                entry = entries.popleft()
                if entry.decision is not None:
                    decisions.append(entry.decision)
                commit[tp] = entry.record.offset + 1
        return decisions, commit

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def drain(self, timeout: float) -> None:
        """Let the lanes finish the decision each is applying (they stop after it)."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        for t in late:
            t.cancel()
        if late:
            await asyncio.wait(late)
