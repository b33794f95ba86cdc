"""The dashboard's live state: three readers and the subscribers they wake.

Theory of operation: :class:`Live` runs three tasks, each a reader as
read-only as the CLI command it follows:

- ``redis``: every ``poll_s`` the actuator's status hash with ``HGETALL``
  (what ``kuota status`` reads; the actuator writes it at most every
  ``KUOTA_STATUS_INTERVAL``), parsed by :func:`kuota.audit.status.parse_status`;
- ``decisions``: the decision topic from its beginning, ``read_committed``,
  joining no group (as ``kuota events tail`` does): each decision goes to
  :class:`~kuota.dashboard.view.Reasons` and to the stream;
- ``journal``: the journal from its beginning, folded with the services'
  fold (:func:`kuota.audit.replay.service_fold`, as ``kuota explain``
  re-folds it): the queue order of the pending workloads. A record the fold
  refuses is skipped, as admission dead-letters it.

Each change bumps a version; :meth:`Live.publish` sends the whole state to
every subscriber when the version moved (at most every ``poll_s``), and each
decision at once. A subscriber is an ``asyncio.Queue`` of
``(event, json)`` pairs with a bound: a browser that does not read is
dropped, never allowed to hold memory. A reader that fails (Kafka or Redis
away) is retried every ``retry_s`` and its error is part of the state, shown
on the page. Nothing here writes anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kuota.audit.kafka import consumer, single_partition
from kuota.audit.replay import decode_event, service_fold
from kuota.audit.status import QueueStatus, parse_status
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics
from kuota.core.fold.fold import Fold
from kuota.dashboard.view import (
    Reasons,
    cohort_views,
    decision_view,
    pending_views,
    queue_views,
)
from kuota.events.schema import parse_decision

__all__ = ["CLOSE", "Live", "LiveConfig"]

CLOSE = "close"  # the event that ends a subscriber's stream (the server is stopping)
QUEUE_BOUND = 256  # events waiting for one browser before it is dropped


@dataclass(frozen=True, slots=True)
class LiveConfig:
    kafka: KafkaSettings
    redis_url: str
    redis_key: str
    history: int = 200  # decisions kept for a page that opens
    poll_s: float = 0.25
    retry_s: float = 2.0


@dataclass(slots=True)
class Live:
    config: LiveConfig
    queues: list[QueueStatus] = field(default_factory=list)
    reasons: Reasons = field(default_factory=Reasons)
    fold: Fold = field(default_factory=service_fold)
    recent: deque[dict[str, Any]] = field(default_factory=deque)
    errors: dict[str, str] = field(default_factory=dict)  # reader -> its last error
    journal_offset: int | None = None
    decision_offset: int | None = None
    version: int = 0
    subscribers: set[asyncio.Queue[tuple[str, str]]] = field(default_factory=set)

    # ---------------------------------------------------------------- state

    def state(self) -> dict[str, Any]:
        queued = [(s.name, self.fold.pending_workloads(s.name)) for s in self.fold.summary()]
        return {
            "cluster_queues": queue_views(self.queues),
            "cohorts": cohort_views(self.queues),
            "pending": pending_views(queued, self.reasons),
            "decisions": list(self.recent),
            "journal_offset": self.journal_offset,
            "decision_offset": self.decision_offset,
            "errors": dict(self.errors),
            "read_model": self.config.redis_key,
            "version": self.version,
        }

    def subscribe(self) -> asyncio.Queue[tuple[str, str]]:
        q: asyncio.Queue[tuple[str, str]] = asyncio.Queue(QUEUE_BOUND)
        self.subscribers.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[tuple[str, str]]) -> None:
        self.subscribers.discard(q)

    def _send(self, event: str, data: str) -> None:
        for q in list(self.subscribers):
            try:
                q.put_nowait((event, data))
            except asyncio.QueueFull:
                self.subscribers.discard(q)  # a reader that does not read is dropped

    def _changed(self) -> None:
        self.version += 1

    # ---------------------------------------------------------------- tasks

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [
            asyncio.create_task(self._retrying("redis", self._poll_redis), name="redis"),
            asyncio.create_task(self._retrying("decisions", self._follow_decisions)),
            asyncio.create_task(self._retrying("journal", self._follow_journal)),
            asyncio.create_task(self.publish(stop), name="publish"),
        ]
        try:
            await stop.wait()
        finally:
            self._send(CLOSE, "")  # every open event stream ends: shutdown waits for none
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    async def publish(self, stop: asyncio.Event) -> None:
        sent = -1
        while not stop.is_set():
            if self.version != sent:
                sent = self.version
                self._send("state", json.dumps(self.state()))
            await asyncio.sleep(self.config.poll_s)

    async def _retrying(self, name: str, reader: Any) -> None:
        while True:
            try:
                await reader()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # Kafka or Redis away: say so on the page, try again
                self.errors[name] = f"{type(err).__name__}: {err}"
                self._changed()
                await asyncio.sleep(self.config.retry_s)

    async def _poll_redis(self) -> None:
        from kuota.store.settings import redis_client

        client: Any = redis_client(self.config.redis_url, socket_timeout=5)
        last: dict[Any, Any] | None = None
        try:
            while True:
                raw: dict[Any, Any] = await client.hgetall(self.config.redis_key)
                if self.errors.pop("redis", None) is not None:
                    self._changed()
                if raw != last:
                    last = raw
                    self.queues = parse_status(raw)
                    self._changed()
                await asyncio.sleep(self.config.poll_s)
        finally:
            await client.aclose()

    async def _follow(self, topic: str, start: int, handle: Any, name: str) -> None:
        settings = self.config.kafka
        tp = await single_partition(settings, topic)
        reader = consumer(settings)
        await reader.start()
        try:
            reader.assign([tp])
            reader.seek(tp, start)
            self.errors.pop(name, None)
            self._changed()
            while True:
                fetched = await reader.getmany(tp, timeout_ms=200, max_records=2000)
                records = fetched.get(tp, [])
                for record in records:
                    handle(record.offset, record.value)
                if records:
                    self._changed()
        finally:
            await reader.stop()

    async def _follow_decisions(self) -> None:
        topic = Topics.from_settings(self.config.kafka).decisions
        start = 0 if self.decision_offset is None else self.decision_offset + 1

        def handle(offset: int, value: bytes | None) -> None:
            self.decision_offset = offset
            try:
                d = parse_decision(value or b"")
            except ValidationError:
                return  # not a decision: the dead-letter topic's business, not ours
            self.reasons.apply(d)
            view = decision_view(d, offset)
            self.recent.append(view)
            while len(self.recent) > self.config.history:
                self.recent.popleft()
            self._send("decision", json.dumps(view))

        await self._follow(topic, start, handle, "decisions")

    async def _follow_journal(self) -> None:
        topic = Topics.from_settings(self.config.kafka).journal
        start = 0 if self.journal_offset is None else self.journal_offset + 1

        def handle(offset: int, value: bytes | None) -> None:
            self.journal_offset = offset
            record = decode_event(offset, value)
            if record.event is None:
                return
            with contextlib.suppress(Exception):  # admission dead-letters it; so do we
                self.fold.apply(record.event, offset=offset)

        await self._follow(topic, start, handle, "journal")
