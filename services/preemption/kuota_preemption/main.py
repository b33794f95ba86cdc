"""kuota-preemption: journal -> Fold -> preemption plans -> journal (a thin shell).

Theory of operation: the service keeps its own fold of the journal (consumer
group ``<instance>-preemption``, ``read_committed``). On start it fences its
predecessor (``init_transactions``), reads the group's committed offset and
silently folds the journal from offset 0 up to it (no snapshot yet: the
search state is the fold, and the fold is rebuilt by replay), then joins the
group. After each live batch it asks the core for plans
(``kuota_preemption.planning``) and produces them to the journal in the
transaction that commits the batch's offsets. The victim search itself lives
in ``kuota.core.preemption.classical``, run by ``kuota.core.preemption.planner`` on this
service's own ``Fold(preemption="plans")``.

Configuration (environment): the Kafka settings (``kuota.bus.settings``),
``KUOTA_METRICS_PORT`` (9103), ``KUOTA_LOG_LEVEL`` (INFO), ``KUOTA_MAX_BATCH``
(500). ``<instance>`` is the topic prefix without its trailing dot.
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

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.process_collector import ProcessCollector

from kuota.bus.processor import ReplayError, TransactionalProcessor, journal_lag
from kuota.bus.settings import KafkaSettings, SettingsError
from kuota.bus.topics import ensure_topics
from kuota.events.schema import JournalEvent
from kuota_preemption.planning import PlanningFolder

log = logging.getLogger("kuota.preemption")

SERVICE = "kuota-preemption"
PARTITION = 0
FOLD_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.05, 0.25, 1.0)


class FatalError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Config:
    kafka: KafkaSettings
    metrics_port: int
    max_batch: int
    log_level: str

    @property
    def instance(self) -> str:
        return self.kafka.topic_prefix.rstrip(".").replace(".", "-") or "kuota"

    @property
    def group_id(self) -> str:
        return f"{self.instance}-preemption"

    def transactional_id(self, partition: int) -> str:
        return f"{self.instance}-preemption-{partition}"


def _integer(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name, "").strip() or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}={raw!r} must be between {lo} and {hi}")
    return value


def load_config(env: Mapping[str, str] | None = None) -> Config:
    e = os.environ if env is None else env
    kafka = KafkaSettings.from_env(e)
    level = (e.get("KUOTA_LOG_LEVEL", "").strip() or "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise SettingsError(f"KUOTA_LOG_LEVEL={level!r} is not a log level")
    return Config(
        kafka=kafka,
        metrics_port=_integer(e, "KUOTA_METRICS_PORT", 9103, 0, 65535),
        max_batch=_integer(e, "KUOTA_MAX_BATCH", 500, 1, 1_000_000),
        log_level=level,
    )


class PreemptionMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        self.lag = Gauge(
            "kuota_consumer_lag", "Journal end offset minus the next offset to fold", registry=r
        )
        self.position = Gauge(
            "kuota_journal_position", "Journal offset of the next record to fold", registry=r
        )
        self.fold_latency = Histogram(
            "kuota_fold_latency_seconds",
            "Time to fold one journal event (live)",
            buckets=FOLD_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "kuota_journal_events", "Journal events folded live", ["type"], registry=r
        )
        self.skipped_records = Counter(
            "kuota_skipped_records",
            "Journal records that do not decode or fold (dead-lettered, then skipped)",
            registry=r,
        )
        self.searches = Counter(
            "kuota_preemption_searches", "Preemption searches run", ["result"], registry=r
        )
        self.search_latency = Histogram(
            "kuota_preemption_search_seconds", "Time of one preemption search", registry=r
        )
        self.plans = Counter(
            "kuota_preemption_plans", "PreemptionPlan events written to the journal", registry=r
        )
        self.recovery_seconds = Gauge(
            "kuota_recovery_seconds", "Start-up replay to the committed offset", registry=r
        )
        self.replayed = Gauge(
            "kuota_replayed_events", "Journal events replayed silently at start-up", registry=r
        )

    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None:
        if live:
            self.fold_latency.observe(seconds)
            self.events.labels(event.type).inc()

    def skipped(self, reason: str) -> None:
        self.skipped_records.inc()

    def searched(self, seconds: float, plans: int, *, failed: bool) -> None:
        self.search_latency.observe(seconds)
        self.searches.labels("error" if failed else "ok").inc()
        self.plans.inc(plans)


async def run(
    cfg: Config, metrics: PreemptionMetrics, stop: asyncio.Event, state: dict[str, str]
) -> None:
    topics = await ensure_topics(cfg.kafka)
    folder = PlanningFolder(topics=topics, observer=metrics, consumer=cfg.group_id)
    proc = TransactionalProcessor(
        cfg.kafka,
        group_id=cfg.group_id,
        transactional_id=cfg.transactional_id(PARTITION),
        input_topic=topics.journal,
        group_instance_id=cfg.transactional_id(PARTITION),
        handle=folder.handle,
        max_batch=cfg.max_batch,
    )
    try:
        t0 = time.monotonic()
        await proc.start_producer()
        committed_all = await proc.committed_offsets()
        if set(committed_all) != {PARTITION}:
            raise FatalError(
                f"{topics.journal} has partitions {sorted(committed_all)}; "
                f"kuota-preemption folds exactly one partition today"
            )
        end = committed_all[PARTITION] or 0
        replayed = await proc.replay(partition=PARTITION, start=0, end=end, apply=folder.replay)
        folder.next_offset = max(folder.next_offset, end)
        metrics.recovery_seconds.set(time.monotonic() - t0)
        metrics.replayed.set(replayed)
        log.info(
            "recovered: replayed %d events in %.2f s; live from offset %d",
            replayed,
            time.monotonic() - t0,
            end,
        )
        state["phase"] = "live"
        state["went_live"] = "yes"
        if stop.is_set():
            return
        await proc.start_consumer()
        tp = TopicPartition(topics.journal, PARTITION)
        while not stop.is_set():
            if await proc.run_once():
                metrics.position.set(folder.next_offset)
                lag = await journal_lag(proc.consumer, tp)
                if lag is not None:
                    metrics.lag.set(lag)
    finally:
        state["phase"] = "stopping"
        await proc.consumer.stop()  # also when never started: releases its client
        await proc.producer.stop()


async def _serve(cfg: Config) -> int:
    metrics = PreemptionMetrics()
    try:
        server, _thread = start_http_server(cfg.metrics_port, registry=metrics.registry)
    except OSError as err:
        log.error("cannot serve metrics on port %d: %s", cfg.metrics_port, err)
        return 1
    stop = asyncio.Event()
    state = {"phase": "recovering"}
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_signal(signame: str) -> None:
        again = stop.is_set()
        stop.set()
        if (again or state["phase"] != "live") and task is not None:
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
                await run(cfg, metrics, stop, state)
                break
            except KafkaError as err:
                # A freshly started broker may have no group coordinator yet; before
                # going live nothing was produced, so starting over is safe.
                live = state.get("phase") == "live" or state.get("went_live")
                if not getattr(err, "retriable", False) or stop.is_set() or live:
                    raise
                if attempt == 30:
                    raise
                log.warning("start-up: %s (retriable); retrying in 1s", type(err).__name__)
                await asyncio.sleep(1)
    except asyncio.CancelledError:
        if not stop.is_set():
            raise
    except (FatalError, ReplayError) as err:
        log.error("%s", err)
        return 1
    except (KafkaError, OSError) as err:
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
