"""kuota-ingest: Kubernetes watches, a clock and a mutating webhook -> the journal.

Wiring only (see docs/design/ingest.md): settings from the environment
(``kuota_ingest.settings``), the journal topics, Redis memory of what was
journaled, one list+watch per kind (``kuota_ingest.sources``), the single
journal writer (``kuota_ingest.journal``), the webhook and the metrics
servers. The translation of objects into events is ``kuota.kube.translate``.

Exit codes: 0 after SIGTERM/SIGINT, 2 for a missing or malformed setting, 1
when a dependency is unreachable at startup or the journal cannot be written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import web
from aiokafka import AIOKafkaProducer
from kubernetes_asyncio import client, config
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from kuota.bus.settings import SettingsError
from kuota.bus.topics import ensure_topics
from kuota.kube.translate import Seen
from kuota.store.settings import redis_client
from kuota_ingest.journal import JournalWriter
from kuota_ingest.metrics import RelistCollector, metrics_app
from kuota_ingest.settings import IngestSettings
from kuota_ingest.sources import (
    WATCHED,
    Clock,
    Sources,
    config_map_watch,
    file_config_error,
    jobs_watch,
)
from kuota_ingest.webhook import PATH, tls_context, webhook_app

log = logging.getLogger("kuota_ingest")

STARTUP_TIMEOUT = 30.0
T = TypeVar("T")


class StartupError(Exception):
    """A dependency is unreachable or a port is taken: one line, exit 1."""


async def _within(what: str, aw: Awaitable[T], timeout: float = STARTUP_TIMEOUT) -> T:
    try:
        return await asyncio.wait_for(aw, timeout)
    except TimeoutError:
        raise StartupError(f"{what}: no answer within {timeout:.0f}s") from None
    except StartupError:
        raise
    except Exception as e:
        text = str(e)
        name = type(e).__name__
        raise StartupError(
            f"{what}: {text if text.startswith(name) else f'{name}: {text}'}"
        ) from None


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
        raise StartupError(f"{what}: cannot listen on {host}:{port}: {e.strerror or e}") from None
    return runner


async def run(settings: IngestSettings, stop: asyncio.Event, *, started: float) -> int:
    kafka = settings.kafka
    topics = await _within(f"Kafka at {kafka.bootstrap}", ensure_topics(kafka))
    journal = topics.journal

    async with contextlib.AsyncExitStack() as stack:
        redis = redis_client(settings.redis_url)
        stack.push_async_callback(redis.aclose)
        await _within(f"Redis at {settings.redis_url}", redis.ping())
        memory = await _load_memory(redis, settings.seen_key)

        api = await _within("kubeconfig", _kube_client(settings))
        stack.push_async_callback(api.close)
        version = await _within(
            f"kube-apiserver ({settings.kubeconfig or 'in-cluster'})",
            client.VersionApi(api).get_code(),
        )

        producer = AIOKafkaProducer(
            enable_idempotence=True, acks="all", linger_ms=5, **kafka.client_kwargs()
        )
        await _within(f"Kafka producer at {kafka.bootstrap}", producer.start())
        stack.push_async_callback(producer.stop)
        writer = JournalWriter(producer, topic=journal, redis=redis, seen_key=settings.seen_key)
        sources = Sources(
            api, writer, memory=memory, clock=Clock(), crd_retry_seconds=settings.crd_retry_seconds
        )
        collector = RelistCollector(sources.relist_counts)
        REGISTRY.register(collector)
        stack.callback(REGISTRY.unregister, collector)

        if settings.metrics_port:
            runner = await _serve(
                metrics_app(), settings.metrics_host, settings.metrics_port, "metrics"
            )
            stack.push_async_callback(runner.cleanup)
        if settings.webhook_enabled:
            assert settings.webhook_cert is not None and settings.webhook_key is not None
            try:
                ctx = tls_context(settings.webhook_cert, settings.webhook_key)
            except (OSError, ValueError) as e:
                raise StartupError(f"webhook certificate: {e}") from None
            runner = await _serve(
                webhook_app(settings.webhook_trusted_users),
                settings.webhook_host,
                settings.webhook_port,
                "webhook",
                ssl_context=ctx,
            )
            stack.push_async_callback(runner.cleanup)
            log.info(
                "webhook serving https://%s:%d%s; kuota.dev/ annotations writable by %s",
                settings.webhook_host,
                settings.webhook_port,
                PATH,
                ", ".join(sorted(settings.webhook_trusted_users)),
            )
        else:
            log.info(
                "webhook off (KUOTA_WEBHOOK_CERT_FILE/KEY_FILE unset or KUOTA_WEBHOOK_PORT=0): "
                "Jobs must be created suspended"
            )

        watched = [
            jobs_watch(settings.job_label_selector) if w.resource.kind == "Job" else w
            for w in WATCHED
        ]
        if settings.config_map is not None:
            watched.append(config_map_watch(*settings.config_map))
        kinds = [w.resource.kind for w in watched]
        sources_tasks = [
            asyncio.create_task(sources.watch(w), name=f"watch {w.resource.kind}") for w in watched
        ]
        sources_tasks.append(
            asyncio.create_task(sources.ticks(settings.tick_seconds), name="ticks")
        )
        sources_tasks.append(asyncio.create_task(sources.monitor(kinds), name="monitor"))
        if settings.config_file is not None:
            sources_tasks.append(
                asyncio.create_task(sources.config_file(settings.config_file), name="config file")
            )
        writer_task = asyncio.create_task(writer.run(), name="journal writer")
        stop_task = asyncio.create_task(stop.wait(), name="stop")
        ready_task = asyncio.create_task(
            _log_ready(
                sources,
                kinds,
                started,
                journal,
                memory_size=len(memory),
                version=getattr(version, "git_version", "?"),
            ),
            name="ready",
        )
        code = 0
        try:
            done, _ = await asyncio.wait(
                {stop_task, writer_task, *sources_tasks}, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is stop_task:
                    continue
                err = task.exception()
                log.error(
                    "%s stopped: %s",
                    task.get_name(),
                    f"{type(err).__name__}: {err}" if err else "returned",
                )
                code = 1
        finally:
            for task in (*sources_tasks, ready_task, stop_task):
                task.cancel()
            await asyncio.gather(*sources_tasks, ready_task, stop_task, return_exceptions=True)
            if code == 0 and not writer_task.done():
                try:
                    await asyncio.wait_for(writer.idle(), 10)
                except TimeoutError:
                    log.warning("shutdown: %d journal items not written", writer.pending())
            writer_task.cancel()
            await asyncio.gather(writer_task, return_exceptions=True)
        log.info("stopped (%d events journaled)", writer.produced)
        return code


async def _log_ready(
    sources: Sources,
    kinds: list[str],
    started: float,
    journal: str,
    *,
    memory_size: int,
    version: str,
) -> None:
    while not all(sources.listed(k) or k in sources.missing for k in kinds):
        await asyncio.sleep(0.05)
    missing = sorted(k for k in kinds if not sources.listed(k))
    log.info(
        "ready in %.2fs: journal %s, kube-apiserver %s, %d objects remembered%s",
        time.monotonic() - started,
        journal,
        version,
        memory_size,
        f", waiting for CRDs of {', '.join(missing)}" if missing else "",
    )


async def _main(settings: IngestSettings, started: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await run(settings, stop, started=started)
    except StartupError as e:
        log.error("cannot start: %s", e)
        return 1


def main() -> None:
    started = time.monotonic()
    try:
        settings = IngestSettings.from_env()
        if settings.config_file is not None:
            problem = file_config_error(settings.config_file)
            if problem is not None:
                raise SettingsError(f"KUOTA_CONFIG_FILE={settings.config_file}: {problem}")
    except SettingsError as e:
        print(f"kuota-ingest: {e}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(
        level=getattr(logging, settings.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("aiokafka", "kafka"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.root.level))
    sys.exit(asyncio.run(_main(settings, started)))


if __name__ == "__main__":
    main()
