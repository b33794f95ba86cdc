"""kuota-actuator: decisions -> Jobs, Kubernetes Events, ClusterQueue status.

Theory of operation (docs/design/actuator.md):

1. Mirror the ResourceFlavors, the ClusterQueues and the queued Jobs
   (list+watch; ``kuota_actuator.jobcache``) and wait for the first lists of
   the flavors and the Jobs: an Admitted decision needs its flavors'
   nodeLabels and tolerations, and is planned against the cached Job.
2. Rebuild the ClusterQueue read model: read the decision topic from the
   beginning up to the consumer group's committed offsets, folding each
   decision into the model and applying nothing (that was done by the
   previous incarnation).
3. Live: consume decisions (``read_committed``, group ``<instance>-actuator``)
   into per-workload lanes (``kuota_actuator.lanes``: different workloads
   concurrently, one workload's decisions in order, a preemptor after its
   victims), apply each (``kuota_actuator.apply``: one merge PATCH with a
   resourceVersion precondition per admission; transient API errors retried
   forever), and fold into the read model and commit the longest prefix of
   each partition that is applied — so a crash re-applies only decisions not
   yet committed, and the Job annotations make that a no-op. Permanent
   failures go to the journal as ``ActuationFailed`` before the commit.
   Kubernetes Events are written by background workers
   (``kuota_actuator.events``), never on the way of a Job write.
4. Every ``KUOTA_STATUS_INTERVAL`` seconds, write what changed of each
   ClusterQueue's status and of the Redis hash ``<instance>:status:clusterqueues``
   (``kuota:status:clusterqueues`` by default).

Configuration (environment):

- ``KUOTA_KAFKA_BOOTSTRAP`` and the other Kafka settings (``kuota.bus.settings``);
- ``KUOTA_REDIS_URL`` (required); ``KUBECONFIG`` (or the in-cluster service account);
- ``KUOTA_METRICS_PORT`` (9104), ``KUOTA_LOG_LEVEL`` (INFO);
- ``KUOTA_STATUS_INTERVAL`` (1 s) between ClusterQueue status syncs, so
  `kuota status` is at most about 1 s stale;
- ``KUOTA_ACTUATOR_MAX_ATTEMPTS`` (8): 409 conflicts in a row (each followed by a
  fresh GET) before a decision is reported as failed; transient errors (the
  apiserver unreachable, 429, 5xx) are retried without limit;
- ``KUOTA_ACTUATOR_MAX_BACKOFF`` (5 s): the cap of the backoff between retries;
- ``KUOTA_ACTUATOR_CONCURRENCY`` (64): API steps in flight at once;
- ``KUOTA_ACTUATOR_EVENT_QUEUE`` (10000): Kubernetes Events queued for the
  background writers; beyond it Events are dropped and counted;
- ``KUOTA_JOB_LABEL_SELECTOR``: a label selector ANDed with the queue label for
  the Jobs this actuator caches (as ingest's; pipelines sharing an apiserver);
- ``KUOTA_ACTUATOR_MAX_IN_FLIGHT`` (1000): decisions consumed but not yet
  applied before fetching pauses; ``KUOTA_MAX_BATCH`` (100) records per fetch;
- ``KUOTA_ACTUATOR_STOP_TIMEOUT`` (60 s): how long a stop waits for the Job
  controller to take a suspended Job's pods down so the template can be restored;
- ``KUOTA_CLUSTERQUEUE_SELECTOR``: a label selector for the ClusterQueues whose
  ``/status`` this actuator writes (all by default; tests sharing an apiserver
  narrow it to their own).

``<instance>`` is the topic prefix without its trailing dot (``kuota``), so a
test with its own prefix never shares the group of another actuator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import start_http_server

from kuota.bus.deadletter import dead_letter_record
from kuota.bus.settings import KafkaSettings, SettingsError
from kuota.bus.topics import Topics, ensure_topics, shard_key
from kuota.events.decode import DecodeError, decode_decision
from kuota.events.schema import ActuationFailed, Decision
from kuota.kube.watch import Resource
from kuota.status.model import ClusterQueueReadModel
from kuota.store.settings import RedisSettings, redis_client
from kuota_actuator.apply import FLAVORS_PATH, Actuator
from kuota_actuator.events import EventSink
from kuota_actuator.jobcache import JobCache
from kuota_actuator.kubeapi import SERVICE_ACCOUNT_TOKEN, Kube, Mirror, api_client
from kuota_actuator.lanes import Lanes
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.status import CQ_PATH, StatusWriter

log = logging.getLogger("kuota.actuator")

TYPE_HEADER = "kuota-type"


@dataclass(frozen=True, slots=True)
class Config:
    kafka: KafkaSettings
    redis_url: str
    kubeconfig: str | None
    metrics_port: int
    log_level: str
    status_interval: float
    max_attempts: int
    max_batch: int
    concurrency: int = 64
    max_in_flight: int = 1000
    stop_timeout: float = 60.0
    cq_selector: str | None = None
    job_selector: str | None = None
    max_backoff: float = 5.0
    event_queue: int = 10_000

    @property
    def instance(self) -> str:
        return self.kafka.topic_prefix.rstrip(".").replace(".", "-") or "kuota"

    @property
    def group_id(self) -> str:
        return f"{self.instance}-actuator"

    @property
    def redis_key(self) -> str:
        return f"{self.instance}:status:clusterqueues"


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
    if redis_url:
        RedisSettings.from_env(e)  # the ACL user and TLS settings: refused here
    if not redis_url:
        raise SettingsError(
            "KUOTA_REDIS_URL is not set (for the local stack: "
            "`scripts/stack up` then `. .stack/stack.env`)"
        )
    kubeconfig = e.get("KUBECONFIG", "").strip() or None
    if kubeconfig is None and not SERVICE_ACCOUNT_TOKEN.exists():
        raise SettingsError(
            "KUBECONFIG is not set and there is no in-cluster service account token "
            f"({SERVICE_ACCOUNT_TOKEN})"
        )
    if kubeconfig is not None and not os.path.isfile(kubeconfig.split(os.pathsep)[0]):
        raise SettingsError(f"KUBECONFIG={kubeconfig}: no such file")
    level = (e.get("KUOTA_LOG_LEVEL", "").strip() or "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise SettingsError(f"KUOTA_LOG_LEVEL={level!r} is not a log level")
    port = int(_number(e, "KUOTA_METRICS_PORT", "9104", int, 0))
    if port > 65535:
        raise SettingsError(f"KUOTA_METRICS_PORT={port} is not a port")
    return Config(
        kafka=kafka,
        redis_url=redis_url,
        kubeconfig=kubeconfig,
        metrics_port=port,
        log_level=level,
        status_interval=_number(e, "KUOTA_STATUS_INTERVAL", "1", float, 0.05),
        max_attempts=int(_number(e, "KUOTA_ACTUATOR_MAX_ATTEMPTS", "8", int, 1)),
        max_batch=int(_number(e, "KUOTA_MAX_BATCH", "100", int, 1)),
        concurrency=int(_number(e, "KUOTA_ACTUATOR_CONCURRENCY", "64", int, 1)),
        max_in_flight=int(_number(e, "KUOTA_ACTUATOR_MAX_IN_FLIGHT", "1000", int, 1)),
        stop_timeout=_number(e, "KUOTA_ACTUATOR_STOP_TIMEOUT", "60", float, 0.1),
        cq_selector=e.get("KUOTA_CLUSTERQUEUE_SELECTOR", "").strip() or None,
        job_selector=e.get("KUOTA_JOB_LABEL_SELECTOR", "").strip() or None,
        max_backoff=_number(e, "KUOTA_ACTUATOR_MAX_BACKOFF", "5", float, 0.01),
        event_queue=int(_number(e, "KUOTA_ACTUATOR_EVENT_QUEUE", "10000", int, 1)),
    )


def decode(record: ConsumerRecord[bytes, bytes]) -> Decision | None:
    decision = decode_reason(record)
    return decision if isinstance(decision, Decision) else None


def decode_reason(record: ConsumerRecord[bytes, bytes]) -> Decision | str:
    """The decision, or why the record is not one (kuota.events.decode)."""
    try:
        return decode_decision(record.value)
    except DecodeError as err:
        log.warning(
            "decision record at offset %d is not a Decision (%s); skipped",
            record.offset,
            err.reason,
        )
        return err.reason


class Service:
    def __init__(self, cfg: Config, metrics: ActuatorMetrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.model = ClusterQueueReadModel()

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.cfg
        topics = await ensure_topics(cfg.kafka)
        api = await api_client(cfg.kubeconfig)
        kube = Kube(api, self.metrics.observe_request)
        flavors = Mirror(api, Resource("ResourceFlavor", FLAVORS_PATH))
        queues = Mirror(api, Resource("ClusterQueue", CQ_PATH, label_selector=cfg.cq_selector))
        jobs = JobCache(api, cfg.job_selector)
        # Job writes first: Events wait while the actuator's API slots are busy.
        gate: list[Actuator] = []
        events = EventSink(
            kube,
            self.metrics,
            capacity=cfg.event_queue,
            busy=lambda: bool(gate) and gate[0].busy(),
        )
        tasks = [
            asyncio.create_task(flavors.run(), name="flavors"),
            asyncio.create_task(queues.run(), name="clusterqueues"),
            asyncio.create_task(jobs.run(), name="jobs"),
            asyncio.create_task(events.run(stop), name="events"),
        ]
        redis = redis_client(cfg.redis_url)
        kw = cfg.kafka.client_kwargs()
        producer = AIOKafkaProducer(enable_idempotence=True, **kw)
        consumer = AIOKafkaConsumer(
            topics.decisions,
            group_id=cfg.group_id,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            max_poll_records=cfg.max_batch,
            **kw,
        )
        started: list[AIOKafkaProducer | AIOKafkaConsumer] = []
        try:
            if not await self._wait(flavors.synced, stop, "the ResourceFlavor list"):
                return
            if not await self._wait(jobs.synced, stop, "the Job list"):
                return
            await producer.start()
            started.append(producer)
            replayed = await self._replay(topics, stop)
            log.info(
                "read model rebuilt from %d decisions: %d ClusterQueues",
                replayed,
                len(self.model.cluster_queues()),
            )
            await consumer.start()
            started.append(consumer)

            async def report(event: ActuationFailed) -> None:
                await producer.send_and_wait(
                    topics.journal,
                    value=event.model_dump_json().encode(),
                    key=shard_key(event.workload),
                    headers=[(TYPE_HEADER, event.type.encode())],
                )

            def cluster_queue_of(key: str) -> str | None:
                place = self.model.workload(key)
                return place.cluster_queue if place else None

            actuator = Actuator(
                kube,
                flavors=lambda: flavors.objects,
                report=report,
                metrics=self.metrics,
                jobs=jobs,
                events=events,
                cluster_queue_of=cluster_queue_of,
                max_conflicts=cfg.max_attempts,
                wait_timeout=cfg.stop_timeout,
                slots=cfg.concurrency,
                max_backoff=cfg.max_backoff,
            )
            gate.append(actuator)
            writer = StatusWriter(
                kube, redis, self.model, queues, self.metrics, redis_key=cfg.redis_key
            )
            tasks.append(asyncio.create_task(writer.run(stop, cfg.status_interval), name="status"))
            log.info("live: consuming %s as group %s", topics.decisions, cfg.group_id)
            await self._consume(
                consumer, actuator, stop, producer=producer, deadletter=topics.deadletter
            )
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            for client in reversed(started):
                with contextlib.suppress(KafkaError, OSError):
                    await client.stop()
            await redis.aclose()
            await kube.close()
            await api.close()

    async def _wait(self, event: asyncio.Event, stop: asyncio.Event, what: str) -> bool:
        waited = 0.0
        while not event.is_set():
            if stop.is_set():
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), 1.0)
            waited += 1.0
            if not event.is_set() and waited % 10 == 0:
                log.info("waiting for %s (%.0f s)", what, waited)
        return True

    async def _consume(
        self,
        consumer: AIOKafkaConsumer,
        actuator: Actuator,
        stop: asyncio.Event,
        *,
        producer: AIOKafkaProducer | None = None,
        deadletter: str | None = None,
    ) -> None:
        """Fetch decisions into per-workload lanes; fold and commit what is done.
        A record that is not a decision is dead-lettered (``kuota.bus.deadletter``)
        before its offset can be committed: at least once."""
        lanes = Lanes(actuator.apply, stop)
        try:
            while not stop.is_set():
                if lanes.error is not None:
                    raise lanes.error
                if lanes.in_flight >= self.cfg.max_in_flight:
                    lanes.progress.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lanes.progress.wait(), 0.5)
                else:
                    fetched = await consumer.getmany(
                        timeout_ms=100 if lanes.busy else 500, max_records=self.cfg.max_batch
                    )
                    for tp in sorted(fetched):
                        for record in fetched[tp]:
                            decoded = decode_reason(record)
                            decision = decoded if isinstance(decoded, Decision) else None
                            if isinstance(decoded, str):
                                self.metrics.decisions.labels("undecodable", "skipped").inc()
                                if producer is not None and deadletter is not None:
                                    dl = dead_letter_record(
                                        deadletter, record, decoded, consumer=self.cfg.group_id
                                    )
                                    await producer.send_and_wait(
                                        dl.topic,
                                        value=dl.value,
                                        key=dl.key,
                                        headers=list(dl.headers),
                                    )
                            lanes.submit(tp, record, decision)
                    await self._lag(consumer, list(fetched))
                self.metrics.in_flight.set(lanes.in_flight)
                await self._commit(consumer, lanes)
        finally:
            await lanes.drain(timeout=10.0)
            with contextlib.suppress(KafkaError):
                await self._commit(consumer, lanes)

    async def _commit(self, consumer: AIOKafkaConsumer, lanes: Lanes) -> None:
        decisions, commit = lanes.done_prefix()
        for decision in decisions:
            self.model.apply(decision)
        if commit:
            await consumer.commit(commit)

    async def _lag(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            with contextlib.suppress(AssertionError, KeyError, TypeError):
                high = consumer.highwater(tp)
                position = await consumer.position(tp)
                if high is not None:
                    self.metrics.lag.labels(tp.topic, str(tp.partition)).set(
                        max(0, high - position)
                    )

    async def _replay(self, topics: Topics, stop: asyncio.Event) -> int:
        """Fold decisions ``[0, committed)`` of every partition into the read model."""
        kw = self.cfg.kafka.client_kwargs()
        probe = AIOKafkaConsumer(group_id=self.cfg.group_id, enable_auto_commit=False, **kw)
        await probe.start()
        try:
            await probe.topics()  # loads every topic's metadata
            parts = sorted(probe.partitions_for_topic(topics.decisions) or set())
            committed = {
                p: await probe.committed(TopicPartition(topics.decisions, p)) for p in parts
            }
        finally:
            await probe.stop()
        ranges = {p: end for p, end in committed.items() if end}
        if not ranges:
            return 0
        reader = AIOKafkaConsumer(
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            **kw,
        )
        await reader.start()
        folded = 0
        try:
            tps = [TopicPartition(topics.decisions, p) for p in ranges]
            reader.assign(tps)
            await reader.seek_to_beginning(*tps)
            pending = set(tps)
            while pending and not stop.is_set():
                fetched = await reader.getmany(*pending, timeout_ms=500, max_records=1000)
                for tp in sorted(fetched):
                    end = ranges[tp.partition]
                    for record in fetched[tp]:
                        if record.offset >= end:
                            break
                        decision = decode(record)
                        if decision is not None:
                            self.model.apply(decision)
                            folded += 1
                for tp in list(pending):
                    if await reader.position(tp) >= ranges[tp.partition]:
                        pending.discard(tp)
        finally:
            await reader.stop()
        return folded


def main() -> None:
    try:
        cfg = load_config()
    except SettingsError as err:
        print(f"kuota-actuator: {err}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(
        level=cfg.log_level,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    for noisy in ("aiokafka", "kafka"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    metrics = ActuatorMetrics()
    start_http_server(cfg.metrics_port, registry=metrics.registry)
    log.info("metrics on :%d/metrics", cfg.metrics_port)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await Service(cfg, metrics).run(stop)

    try:
        asyncio.run(run())
    except (KafkaError, OSError) as err:
        log.error("stopped: %s", err)
        sys.exit(1)
    log.info("stopped")


if __name__ == "__main__":
    main()
