"""Ingest's pipeline: connect, then run the watches, the clock and the journal writer.

``Service.run`` connects to Kafka (the topics), Redis (the memory of what was
journaled), the apiserver, starts the idempotent producer, the single journal
writer (``kuota_ingest.journal``), one list+watch per kind and the Tick
clock (``kuota_ingest.sources``); the webhook is a process of its own
(``kuota_webhook``). Until it is live, a dependency that does not answer is
``Unavailable`` (retried by ``kuota.service.Runner``). Live, the first task
to end ends the service: a stop request drains the writer (at most
``DRAIN_SECONDS``); a failed watch or writer is ``Fatal`` (exit 1; a restart
relists).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from aiokafka import AIOKafkaProducer
from kubernetes_asyncio import client
from prometheus_client import REGISTRY
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from kuota import kinds as registry
from kuota.bus.topics import ensure_topics
from kuota.kube.client import api_client
from kuota.kube.translate import Seen
from kuota.service import Fatal, describe, within
from kuota.store.settings import redis_client
from kuota_ingest import seen_store
from kuota_ingest.journal import MAX_REQUEST_BYTES, JournalWriter
from kuota_ingest.metrics import RelistCollector
from kuota_ingest.settings import IngestSettings
from kuota_ingest.sources import (
    WATCHED,
    Clock,
    Sources,
    config_map_watch,
    jobs_watch,
    workload_watch,
)

log = logging.getLogger("kuota_ingest")

STARTUP_TIMEOUT = 30.0  # per dependency, per attempt
DRAIN_SECONDS = 10.0


async def _load_memory(redis: Redis, key: str) -> dict[str, Seen]:
    return await seen_store.load(redis, key)  # signed entries only are trusted


def _settled(counts: Callable[[], dict[str, int]]) -> Callable[[], dict[str, int]]:
    """``counts`` as read from the metrics server's thread: a watch may be added
    on the event loop meanwhile (``dictionary changed size``): read again."""

    def read() -> dict[str, int]:
        for _ in range(10):
            with contextlib.suppress(RuntimeError):
                return counts()
        return {}

    return read


class Service:
    def __init__(self, settings: IngestSettings, *, started: float) -> None:
        self.settings = settings
        self.started = started
        self.live = False  # the runner's start-up retry and two-stage stop read it

    async def run(self, stop: asyncio.Event) -> None:
        settings = self.settings
        kafka = settings.kafka
        topics = await within(f"Kafka at {kafka.bootstrap}", ensure_topics(kafka), STARTUP_TIMEOUT)
        async with contextlib.AsyncExitStack() as stack:
            redis = redis_client(settings.redis_url)
            stack.push_async_callback(redis.aclose)
            await within(
                f"Redis at {settings.redis_url}",
                redis.ping(),
                STARTUP_TIMEOUT,
                transient=(RedisConnectionError, RedisTimeoutError),
            )
            memory = await _load_memory(redis, settings.seen_key)

            api = await within("kubeconfig", api_client(settings.kubeconfig), STARTUP_TIMEOUT)
            stack.push_async_callback(api.close)
            version = await within(
                f"kube-apiserver ({settings.kubeconfig or 'in-cluster'})",
                client.VersionApi(api).get_code(),
                STARTUP_TIMEOUT,
            )
            producer = AIOKafkaProducer(
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
                max_request_size=MAX_REQUEST_BYTES,  # the writer keeps each record under it
                **kafka.client_kwargs(),
            )
            await within(f"Kafka producer at {kafka.bootstrap}", producer.start(), STARTUP_TIMEOUT)
            stack.push_async_callback(producer.stop)
            writer = JournalWriter(
                producer, topic=topics.journal, redis=redis, seen_key=settings.seen_key
            )
            sources = Sources(
                api,
                writer,
                memory=memory,
                clock=Clock(),
                crd_retry_seconds=settings.crd_retry_seconds,
            )
            collector = RelistCollector(_settled(sources.relist_counts))
            REGISTRY.register(collector)
            stack.callback(REGISTRY.unregister, collector)
            self.live = True
            await self._supervise(sources, writer, stop, topics.journal, len(memory), version)

    async def _supervise(
        self,
        sources: Sources,
        writer: JournalWriter,
        stop: asyncio.Event,
        journal: str,
        remembered: int,
        version: object,
    ) -> None:
        """Run the watches, the clock and the writer until a stop or a failure."""
        s = self.settings
        try:
            jobs = jobs_watch(s.job_label_selector)
        except ValueError as e:
            raise Fatal(f"KUOTA_JOB_LABEL_SELECTOR: {e}") from None
        workloads = {k.kind for k in registry.WATCHED if k.role == "workload"}
        watched = [
            jobs
            if w.resource.kind == "Job"
            else workload_watch(w.resource.kind, s.job_label_selector)
            if w.resource.kind in workloads
            else w
            for w in WATCHED
        ]
        if s.config_map is not None:
            watched.append(config_map_watch(*s.config_map))
        kinds = [w.resource.kind for w in watched]
        tasks = [
            asyncio.create_task(sources.watch(w), name=f"watch {w.resource.kind}") for w in watched
        ]
        tasks.append(asyncio.create_task(sources.ticks(s.tick_seconds), name="ticks"))
        tasks.append(asyncio.create_task(sources.monitor(kinds), name="monitor"))
        if s.config_file is not None:
            tasks.append(
                asyncio.create_task(sources.config_file(s.config_file), name="config file")
            )
        writer_task = asyncio.create_task(writer.run(), name="journal writer")
        stop_task = asyncio.create_task(stop.wait(), name="stop")
        ready = asyncio.create_task(
            self._log_ready(
                sources, kinds, journal, remembered, getattr(version, "git_version", "?")
            ),
            name="ready",
        )
        failures: list[str] = []
        try:
            done, _ = await asyncio.wait(
                {stop_task, writer_task, *tasks}, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done - {stop_task}:
                err = task.exception()
                failures.append(
                    f"{task.get_name()} stopped: {describe(err) if err else 'returned'}"
                )
        finally:
            for task in (*tasks, ready, stop_task):
                task.cancel()
            await asyncio.gather(*tasks, ready, stop_task, return_exceptions=True)
            try:
                if not failures and not writer_task.done():
                    await asyncio.wait_for(writer.idle(), DRAIN_SECONDS)
            except TimeoutError:
                log.warning("shutdown: %d journal items not written", writer.pending())
            finally:
                writer_task.cancel()
                await asyncio.gather(writer_task, return_exceptions=True)
                log.info("stopped (%d events journaled)", writer.produced)
        if failures:
            raise Fatal("; ".join(failures))

    async def _log_ready(
        self, sources: Sources, kinds: list[str], journal: str, remembered: int, version: str
    ) -> None:
        while not all(sources.listed(k) or k in sources.missing for k in kinds):
            await asyncio.sleep(0.05)
        missing = sorted(k for k in kinds if not sources.listed(k))
        log.info(
            "ready in %.2fs: journal %s, kube-apiserver %s, %d objects remembered%s",
            time.monotonic() - self.started,
            journal,
            version,
            remembered,
            f", waiting for kinds not served yet (a CRD not installed, an API not enabled): "
            f"{', '.join(missing)}"
            if missing
            else "",
        )
