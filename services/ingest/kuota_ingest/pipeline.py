"""Ingest's pipeline: connect, then run the watches, the clock and the journal writer.

``Service.run`` connects to Kafka (the topics), Redis (the memory of what was
journaled), the apiserver, starts the idempotent producer, the single journal
writer (``kuota_ingest.journal``), the webhook (``kuota_ingest.webhook``), one
list+watch per kind and the Tick clock (``kuota_ingest.sources``). Until it is
live, a dependency that does not answer is ``Unavailable`` (retried by
``kuota.service.Runner``); a bad certificate or a taken webhook port is
``Fatal``. Live, the first task to end ends the service: a stop request
drains the writer (at most ``DRAIN_SECONDS``); a failed watch or writer is
``Fatal`` (exit 1; a restart relists).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

from aiohttp import web
from aiokafka import AIOKafkaProducer
from kubernetes_asyncio import client, config
from prometheus_client import REGISTRY
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from kuota.bus.topics import ensure_topics
from kuota.kube.translate import Seen
from kuota.service import Fatal, describe, within
from kuota.store.settings import redis_client
from kuota_ingest.cluster_view import ClusterView
from kuota_ingest.journal import JournalWriter
from kuota_ingest.metrics import RelistCollector
from kuota_ingest.settings import IngestSettings
from kuota_ingest.sources import WATCHED, Clock, Sources, config_map_watch, jobs_watch
from kuota_ingest.webhook import PATH, tls_context, webhook_app

log = logging.getLogger("kuota_ingest")

STARTUP_TIMEOUT = 30.0  # per dependency, per attempt
DRAIN_SECONDS = 10.0


async def _kube_client(settings: IngestSettings) -> client.ApiClient:
    cfg = client.Configuration()
    if settings.kubeconfig is not None:
        await config.load_kube_config(
            config_file=settings.kubeconfig.split(os.pathsep)[0], client_configuration=cfg
        )
    else:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return client.ApiClient(cfg)


async def _load_memory(redis: Redis, key: str) -> dict[str, Seen]:
    raw: dict[bytes, bytes] = await redis.hgetall(key)  # type: ignore[misc]
    memory: dict[str, Seen] = {}
    for k, v in raw.items():
        seen = Seen.loads(v)
        if seen is not None:
            memory[k.decode()] = seen
    return memory


async def _serve(
    app: web.Application, host: str, port: int, what: str, **kw: object
) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, **kw).start()  # type: ignore[arg-type]
    except OSError as e:
        await runner.cleanup()
        raise Fatal(f"{what}: cannot listen on {host}:{port}: {e.strerror or e}") from None
    return runner


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

            api = await within("kubeconfig", _kube_client(settings), STARTUP_TIMEOUT)
            stack.push_async_callback(api.close)
            version = await within(
                f"kube-apiserver ({settings.kubeconfig or 'in-cluster'})",
                client.VersionApi(api).get_code(),
                STARTUP_TIMEOUT,
            )
            producer = AIOKafkaProducer(
                enable_idempotence=True, acks="all", linger_ms=5, **kafka.client_kwargs()
            )
            await within(f"Kafka producer at {kafka.bootstrap}", producer.start(), STARTUP_TIMEOUT)
            stack.push_async_callback(producer.stop)
            writer = JournalWriter(
                producer, topic=topics.journal, redis=redis, seen_key=settings.seen_key
            )
            view = ClusterView()  # fed by the watches, read by the webhook
            sources = Sources(
                api,
                writer,
                memory=memory,
                clock=Clock(),
                crd_retry_seconds=settings.crd_retry_seconds,
                view=view,
            )
            collector = RelistCollector(_settled(sources.relist_counts))
            REGISTRY.register(collector)
            stack.callback(REGISTRY.unregister, collector)
            if settings.webhook_enabled:
                stack.push_async_callback((await self._webhook(view)).cleanup)
            else:
                log.info(
                    "webhook off (KUOTA_WEBHOOK_CERT_FILE/KEY_FILE unset or KUOTA_WEBHOOK_PORT=0): "
                    "Jobs must be created suspended"
                )
            self.live = True
            await self._supervise(sources, writer, stop, topics.journal, len(memory), version)

    async def _webhook(self, view: ClusterView) -> web.AppRunner:
        s = self.settings
        assert s.webhook_cert is not None and s.webhook_key is not None
        try:
            ctx = tls_context(s.webhook_cert, s.webhook_key)
        except (OSError, ValueError) as e:
            raise Fatal(f"webhook certificate: {e}") from None
        runner = await _serve(
            webhook_app(s.webhook_trusted_users, view),
            s.webhook_host,
            s.webhook_port,
            "webhook",
            ssl_context=ctx,
        )
        log.info(
            "webhook serving https://%s:%d%s; the door open to (trusted) %s",
            s.webhook_host,
            s.webhook_port,
            PATH,
            ", ".join(sorted(s.webhook_trusted_users)),
        )
        return runner

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
        watched = [
            jobs_watch(s.job_label_selector) if w.resource.kind == "Job" else w for w in WATCHED
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
        view = asyncio.create_task(  # ends when the view is complete, not the service
            sources.complete_view(
                config_kind="ConfigMap" if s.config_map is not None else None,
                config_file=s.config_file is not None,
            ),
            name="view",
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
            for task in (*tasks, ready, view, stop_task):
                task.cancel()
            await asyncio.gather(*tasks, ready, view, stop_task, return_exceptions=True)
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
            f", waiting for CRDs of {', '.join(missing)}" if missing else "",
        )
