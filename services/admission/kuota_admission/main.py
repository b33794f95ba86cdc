"""kuota-admission: journal -> Fold -> decisions, exactly once.

Theory of operation (docs/design/admission.md):

1. Recover. Start the transactional producer first: ``init_transactions``
   fences a predecessor with the same transactional id and aborts whatever
   it left open, so the group's committed journal offset is final. Load the
   fold snapshot from Redis (or start empty at offset 0 if it is missing or
   unusable, saying why) and silently fold the journal from the snapshot's
   offset up to the committed offset: those decisions were committed by the
   previous incarnation, and the fold, being deterministic, recreates the
   state they came from.
2. Live. Join the consumer group (which resumes at the committed offset) and
   run the transactional processor: each batch's decisions and dead letters
   are produced, and its offsets committed, in one Kafka transaction.
3. Snapshot. Every ``KUOTA_SNAPSHOT_EVERY`` events or ``KUOTA_SNAPSHOT_SECONDS``
   seconds, whichever first, and at shutdown, save the fold with the offset
   of the next record to fold — always after the transaction covering those
   events committed, so a snapshot is never ahead of the decisions topic.
   A snapshot records the build of ``kuota.core`` and ``kuota.api`` it was
   pickled by; one of another build is not loaded (full replay instead): an
   older fold unpickles into the new classes and fails on the first event.

Configuration (environment): ``KUOTA_KAFKA_BOOTSTRAP`` and the other Kafka
settings (``kuota.bus.settings``), ``KUOTA_REDIS_URL`` (required),
``KUOTA_SNAPSHOT_KEY``, ``KUOTA_METRICS_PORT`` (9102), ``KUOTA_LOG_LEVEL``
(INFO), ``KUOTA_SNAPSHOT_EVERY`` (5000), ``KUOTA_SNAPSHOT_SECONDS`` (30),
``KUOTA_MAX_BATCH`` (500). The consumer group is ``<instance>-admission``, the
transactional id and the snapshot name ``<instance>-admission-<partition>``,
where ``<instance>`` is the topic prefix without its trailing dot (``kuota``
by default), so deployments and tests that use their own topic prefix never
share a group, fence each other, or load each other's snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import start_http_server
from redis.exceptions import RedisError

import kuota.api
import kuota.core
from kuota.bus.processor import Replayer, ReplayError, TransactionalProcessor, journal_lag
from kuota.bus.settings import KafkaSettings, SettingsError
from kuota.bus.topics import ensure_topics
from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.store.settings import RedisSettings, redis_client
from kuota.store.snapshots import Snapshot, SnapshotStore, code_build
from kuota_admission.metrics import AdmissionMetrics
from kuota_admission.records import JournalFolder

log = logging.getLogger("kuota.admission")

SERVICE = "kuota-admission"
PARTITION = 0  # one journal partition today (see kuota.bus.topics)


class _KafkaProcessor(TransactionalProcessor):
    async def lag(self, partition: int) -> int | None:
        """Journal records not consumed yet, as of the last fetch (the lag metric):
        the end offset minus the consumer's position, which steps over
        transaction markers (the offset after the last record folded does not:
        a trailing commit marker would count as one record forever)."""
        return await journal_lag(self.consumer, TopicPartition(self._input_topic, partition))


class FatalError(RuntimeError):
    """Stop the service with one log line and exit status 1."""


@dataclass(frozen=True, slots=True)
class Config:
    kafka: KafkaSettings
    redis_url: str
    metrics_port: int
    snapshot_every: int
    snapshot_seconds: float
    max_batch: int
    log_level: str

    @property
    def instance(self) -> str:
        return self.kafka.topic_prefix.rstrip(".").replace(".", "-") or "kuota"

    @property
    def group_id(self) -> str:
        return f"{self.instance}-admission"

    def transactional_id(self, partition: int) -> str:
        return f"{self.instance}-admission-{partition}"

    def snapshot_name(self, partition: int) -> str:
        return f"{self.instance}-admission-{partition}"


def _number(env: Mapping[str, str], name: str, default: str, kind: type, minimum: float) -> float:
    raw = env.get(name, "").strip() or default
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return float(value)


def load_config(env: Mapping[str, str] | None = None) -> Config:
    e = os.environ if env is None else env
    kafka = KafkaSettings.from_env(e)
    redis_url = e.get("KUOTA_REDIS_URL", "").strip()
    if not redis_url:
        raise SettingsError(
            "KUOTA_REDIS_URL is not set (for the local stack: "
            "`scripts/stack up` then `. .stack/stack.env`)"
        )
    RedisSettings.from_env(e)  # the ACL user and TLS settings: refused here, not at first use
    level = (e.get("KUOTA_LOG_LEVEL", "").strip() or "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise SettingsError(f"KUOTA_LOG_LEVEL={level!r} is not a log level")
    port = int(_number(e, "KUOTA_METRICS_PORT", "9102", int, 0))
    if port > 65535:
        raise SettingsError(f"KUOTA_METRICS_PORT={port} is not a port")
    return Config(
        kafka=kafka,
        redis_url=redis_url,
        metrics_port=port,
        snapshot_every=int(_number(e, "KUOTA_SNAPSHOT_EVERY", "5000", int, 1)),
        snapshot_seconds=_number(e, "KUOTA_SNAPSHOT_SECONDS", "30", float, 0.001),
        max_batch=int(_number(e, "KUOTA_MAX_BATCH", "500", int, 1)),
        log_level=level,
    )


# ---------------------------------------------------------------------- recovery


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
    """What :class:`Service` uses of :class:`TransactionalProcessor` (a seam for tests)."""

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
        self.phase = "starting"
        self.went_live = False
        self._last_snapshot = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        """Wire the real adapters and serve until ``stop``."""
        cfg = self.cfg
        topics = await ensure_topics(cfg.kafka)
        redis = redis_client(cfg.redis_url)
        store = SnapshotStore(
            redis, name=cfg.snapshot_name(PARTITION), build=code_build(kuota.core, kuota.api)
        )
        folder = JournalFolder(topics=topics, observer=self.metrics, consumer=cfg.group_id)
        proc = _KafkaProcessor(
            cfg.kafka,
            group_id=cfg.group_id,
            transactional_id=cfg.transactional_id(PARTITION),
            input_topic=topics.journal,
            group_instance_id=cfg.transactional_id(PARTITION),
            handle=folder.handle,
            max_batch=cfg.max_batch,
        )
        try:
            await self.serve(proc, store, folder, stop)
        finally:
            self.phase = "stopping"
            await proc.consumer.stop()  # also when never started: releases its client
            await proc.producer.stop()
            await redis.aclose()

    async def serve(
        self, proc: Processor, store: SnapshotStore, folder: JournalFolder, stop: asyncio.Event
    ) -> None:
        """Recover (snapshot + silent replay to the committed offset), then live."""
        t0 = time.monotonic()
        self.phase = "recovering"
        await proc.start_producer()  # fences the predecessor: committed offsets are final
        committed_all = await proc.committed_offsets()
        if set(committed_all) != {PARTITION}:
            raise FatalError(
                f"{folder.topics.journal} has partitions {sorted(committed_all)}; "
                f"kuota-admission folds exactly one partition today"
            )
        committed = committed_all[PARTITION]
        snapshot, reason = await self._load_snapshot(store)
        fold, start, why = choose_start(snapshot, reason, committed)
        log.info("recovery: %s; committed offset %s", why, committed)
        folder.fold, folder.next_offset, folder.since_snapshot = fold, start, 0
        end = committed if committed is not None else start
        replayed = await proc.replay(partition=PARTITION, start=start, end=end, apply=folder.replay)
        folder.next_offset = max(folder.next_offset, end)
        elapsed = time.monotonic() - t0
        self.metrics.recovery_seconds.set(elapsed)
        self.metrics.replayed.set(replayed)
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
        self.phase = "live"
        self.went_live = True
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


async def _serve(cfg: Config) -> int:
    metrics = AdmissionMetrics()
    try:
        server, _thread = start_http_server(cfg.metrics_port, registry=metrics.registry)
    except OSError as err:
        log.error("cannot serve metrics on port %d: %s", cfg.metrics_port, err)
        return 1
    service = Service(cfg, metrics)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_signal(signame: str) -> None:
        # The first signal lets the current transaction finish; a second one (or
        # one during recovery, which only reads) cancels, and an open
        # transaction is aborted by the producer's transaction context.
        again = stop.is_set()
        stop.set()
        if (again or service.phase != "live") and task is not None:
            log.info("%s received; stopping now", signame)
            task.cancel()
        else:
            log.info("%s received; stopping after the current transaction", signame)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    log.info(
        "starting: journal %sjournal, group %s, metrics on :%d",
        cfg.kafka.topic_prefix,
        cfg.group_id,
        cfg.metrics_port,
    )
    try:
        for attempt in range(1, 31):
            try:
                await service.run(stop)
                break
            except KafkaError as err:
                # A broker that has just started may not have its group coordinator
                # yet (GroupCoordinatorNotAvailable); before going live nothing was
                # produced, so starting over is safe.
                went_live = service.phase == "live" or getattr(service, "went_live", False)
                if not getattr(err, "retriable", False) or stop.is_set() or went_live:
                    raise
                if attempt == 30:
                    raise
                log.warning("start-up: %s (retriable); retrying in 1s", type(err).__name__)
                service.phase = "starting"
                await asyncio.sleep(1)
    except asyncio.CancelledError:
        if not stop.is_set():
            raise
    except FatalError as err:
        log.error("%s", err)
        return 1
    except ReplayError as err:
        log.error("recovery failed: %s", err)
        return 1
    except (KafkaError, OSError, RedisError) as err:
        log.error("stopping on %s: %s", type(err).__name__, err)
        return 1
    except Exception:
        log.exception("stopping on an unexpected error")
        return 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        server.shutdown()
    log.info("stopped")
    return 0


def main() -> None:
    try:
        cfg = load_config()
    except SettingsError as err:
        print(f"{SERVICE}: {err}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(
        level=cfg.log_level,
        format=f"%(asctime)s %(levelname)s {SERVICE} %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiokafka").setLevel(
        max(logging.WARNING, logging.getLevelName(cfg.log_level))
    )
    sys.exit(asyncio.run(_serve(cfg)))


if __name__ == "__main__":
    main()
