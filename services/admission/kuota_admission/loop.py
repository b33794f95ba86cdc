"""Admission's loop: recover (snapshot + silent replay), then fold live, exactly once.

1. Recover. Start the transactional producer first: ``init_transactions``
   fences a predecessor with the same transactional id and aborts whatever it
   left open, so the group's committed journal offset is final. Load the fold
   snapshot (or start empty at offset 0, saying why: ``choose_start``) and
   silently fold the journal from the snapshot's offset up to the committed
   offset: the previous incarnation committed those decisions.
2. Live. Join the consumer group and run the transactional processor: each
   batch's decisions and dead letters, and its offsets, in one transaction.
3. Snapshot. Every ``snapshot_every`` events or ``snapshot_seconds``, and at
   shutdown, always after the transaction covering those events committed,
   so a snapshot is never ahead of the decisions topic. One pickled by another
   build of ``kuota.core`` / ``kuota.api`` is not loaded (full replay).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from redis.exceptions import RedisError

import kuota.api
import kuota.core
from kuota.bus.processor import Replayer
from kuota.bus.topics import ensure_topics
from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.service import Fatal, JournalProcessor, committed_offset
from kuota.store.settings import redis_client
from kuota.store.snapshots import Snapshot, SnapshotStore, code_build
from kuota_admission.metrics import AdmissionMetrics
from kuota_admission.records import JournalFolder
from kuota_admission.settings import Config

log = logging.getLogger("kuota.admission")

PARTITION = 0  # one journal partition today (see kuota.bus.topics)


#: Stop the service with one log line and exit status 1.
FatalError = Fatal


def new_fold() -> Fold:
    """Admission's fold: the victim search is the preemption service's."""
    return Fold(preemption=PLANS)


def choose_start(
    snapshot: Snapshot | None, reason: str, committed: int | None
) -> tuple[Fold, int, str]:
    """The fold and offset to replay from, and a sentence saying why."""
    if snapshot is None:
        return new_fold(), 0, f"{reason}; replaying the journal from offset 0"
    if not isinstance(snapshot.state, Fold):
        kind = type(snapshot.state).__name__
        return new_fold(), 0, f"snapshot holds a {kind}, not a Fold; replaying from offset 0"
    if snapshot.state.preemption_mode != PLANS:
        mode = snapshot.state.preemption_mode
        return new_fold(), 0, f"snapshot of a {mode!r}-mode fold; replaying from offset 0"
    if committed is None:
        if snapshot.offset == 0:
            return snapshot.state, 0, "empty snapshot, no committed offset yet"
        return (
            new_fold(),
            0,
            f"snapshot at offset {snapshot.offset} but the group has no committed "
            f"offset (a new journal?); replaying from offset 0",
        )
    if snapshot.offset > committed:
        return (
            new_fold(),
            0,
            f"snapshot at offset {snapshot.offset} is ahead of the committed offset "
            f"{committed}; replaying from offset 0",
        )
    return snapshot.state, snapshot.offset, f"snapshot at offset {snapshot.offset}"


class Processor(Protocol):
    """What :class:`Service` uses of :class:`JournalProcessor` (a seam for tests)."""

    async def start_producer(self) -> None: ...
    async def start_consumer(self) -> None: ...
    async def committed_offsets(self) -> dict[int, int | None]: ...
    async def replay(self, *, partition: int, start: int, end: int, apply: Replayer) -> int: ...
    async def run_once(self, timeout_ms: int = 500) -> int: ...
    async def lag(self, partition: int) -> int | None: ...


class Service:
    def __init__(self, cfg: Config, metrics: AdmissionMetrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.live = False  # the runner's start-up retry and two-stage stop read it
        self._last_snapshot = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        """Wire the real adapters and serve until ``stop``."""
        cfg = self.cfg
        log.info(
            "starting: journal %sjournal, group %s, metrics on :%d",
            cfg.kafka.topic_prefix,
            cfg.group_id,
            cfg.metrics_port,
        )
        topics = await ensure_topics(cfg.kafka)
        redis = redis_client(cfg.redis_url)
        store = SnapshotStore(
            redis, name=cfg.snapshot_name(PARTITION), build=code_build(kuota.core, kuota.api)
        )
        folder = JournalFolder(topics=topics, observer=self.metrics, consumer=cfg.group_id)
        proc = JournalProcessor(
            cfg,
            journal=topics.journal,
            handle=folder.handle,
            max_batch=cfg.max_batch,
            partition=PARTITION,
        )
        try:
            await self.serve(proc, store, folder, stop)
        finally:
            await proc.consumer.stop()  # also when never started: releases its client
            await proc.producer.stop()
            await redis.aclose()

    async def serve(
        self, proc: Processor, store: SnapshotStore, folder: JournalFolder, stop: asyncio.Event
    ) -> None:
        """Recover (snapshot + silent replay to the committed offset), then live."""
        t0 = time.monotonic()
        committed = await committed_offset(
            proc, journal=folder.topics.journal, name="kuota-admission", partition=PARTITION
        )
        snapshot, reason = await self._load_snapshot(store)
        fold, start, why = choose_start(snapshot, reason, committed)
        log.info("recovery: %s; committed offset %s", why, committed)
        folder.fold, folder.next_offset, folder.since_snapshot = fold, start, 0
        end = committed if committed is not None else start
        replayed = await proc.replay(partition=PARTITION, start=start, end=end, apply=folder.replay)
        folder.next_offset = max(folder.next_offset, end)
        elapsed = time.monotonic() - t0
        self.metrics.recovery_seconds.set(elapsed)
        self.metrics.journal.replayed.set(replayed)
        if snapshot is not None and start == snapshot.offset and start > 0:
            self.metrics.snapshot_saved(offset=start, size=None)
        log.info(
            "recovered: replayed %d events (offsets %d..%d) in %.2f s; live from offset %d",
            replayed,
            start,
            end,
            elapsed,
            folder.next_offset,
        )
        self.live = True
        if stop.is_set():
            return
        await proc.start_consumer()
        self._last_snapshot = time.monotonic()
        first = True
        while not stop.is_set():
            n = await proc.run_once()
            if n:
                if first:
                    first = False
                    log.info(
                        "live: first batch committed (%d events, to offset %d) %.2f s after start",
                        n,
                        folder.next_offset,
                        time.monotonic() - t0,
                    )
                self.metrics.refresh(
                    folder.fold,
                    next_offset=folder.next_offset,
                    lag=await proc.lag(PARTITION),
                )
            # run_once returned: the transaction covering these events committed.
            await self._maybe_snapshot(store, folder, force=False)
        await self._maybe_snapshot(store, folder, force=True)

    async def _load_snapshot(self, store: SnapshotStore) -> tuple[Snapshot | None, str]:
        try:
            return await store.load()
        except RedisError as err:
            return None, f"snapshot store unavailable ({err})"

    async def _maybe_snapshot(
        self, store: SnapshotStore, folder: JournalFolder, *, force: bool
    ) -> None:
        if folder.since_snapshot == 0:
            return
        now = time.monotonic()
        due = (
            force
            or folder.since_snapshot >= self.cfg.snapshot_every
            or now - self._last_snapshot >= self.cfg.snapshot_seconds
        )
        if not due:
            return
        self._last_snapshot = now
        offset = folder.next_offset
        t0 = time.perf_counter()
        try:
            size = await store.save(Snapshot(offset=offset, state=folder.fold))
        except RedisError as err:
            log.warning("snapshot at offset %d not saved: %s", offset, err)
            return
        folder.since_snapshot = 0
        self.metrics.snapshot_saved(offset=offset, size=size)
        log.info(
            "snapshot saved at offset %d (%d bytes, %.3f s)",
            offset,
            size,
            time.perf_counter() - t0,
        )
