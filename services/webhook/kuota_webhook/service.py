"""The webhook process: serve HTTPS, keep the view current, reload the certificate.

``Service.run`` loads the serving certificate (a bad one is ``Fatal``),
builds the apiserver client, starts the HTTPS server (a taken port is
``Fatal``) and is then live: it answers at once, guarding every unlabelled Job
as possibly managed until its own watches (``kuota_webhook.feed``) have read
their inputs once, and logs ``ready`` then. It never waits for, nor talks
to, Kafka or Redis, and a watch that fails is retried while the webhook keeps
answering. The first task to end other than the view ends the service: a
stop request (exit 0) or a failure (``Fatal``, exit 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from typing import Any

from aiohttp import web

from kuota.kube.client import api_client
from kuota.kube.cluster_view import ClusterView
from kuota.service import Fatal, describe, within
from kuota_webhook.feed import Feed, namespace_jobs
from kuota_webhook.server import PATH, webhook_app
from kuota_webhook.settings import WebhookSettings
from kuota_webhook.tls import ServingCertificate

log = logging.getLogger("kuota_webhook")

STARTUP_TIMEOUT = 30.0


async def serve(
    app: web.Application, host: str, port: int, context: ssl.SSLContext
) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=context).start()
    except OSError as e:
        await runner.cleanup()
        raise Fatal(f"webhook: cannot listen on {host}:{port}: {e.strerror or e}") from None
    return runner


class Service:
    def __init__(self, settings: WebhookSettings, *, started: float) -> None:
        self.settings = settings
        self.started = started
        self.live = False  # the runner's start-up retry and two-stage stop read it

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        try:
            cert = ServingCertificate(s.cert_file, s.key_file)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise Fatal(f"webhook certificate {s.cert_file}: {e}") from None
        async with contextlib.AsyncExitStack() as stack:
            api = await within("kubeconfig", api_client(s.kubeconfig), STARTUP_TIMEOUT)
            stack.push_async_callback(api.close)
            view = ClusterView()
            feed = Feed(
                api,
                view,
                job_selector=s.job_label_selector,
                config_map=s.config_map,
                config_file=s.config_file,
            )

            async def jobs_of(namespace: str) -> list[dict[str, Any]] | str:
                return await namespace_jobs(api, namespace)

            app = webhook_app(s.trusted_users, view, jobs_of)
            runner = await serve(app, s.host, s.port, cert.context)
            stack.push_async_callback(runner.cleanup)
            log.info(
                "serving https://%s:%d%s; the door open to (trusted) %s",
                s.host,
                s.port,
                PATH,
                ", ".join(sorted(s.trusted_users)),
            )
            self.live = True
            await self._supervise(feed, cert, stop)

    async def _supervise(self, feed: Feed, cert: ServingCertificate, stop: asyncio.Event) -> None:
        tasks = feed.tasks()
        tasks.append(
            asyncio.create_task(cert.watch(self.settings.cert_check_seconds), name="certificate")
        )
        ready = asyncio.create_task(self._ready(feed), name="ready")
        stop_task = asyncio.create_task(stop.wait(), name="stop")
        failures: list[str] = []
        try:
            done, _ = await asyncio.wait({stop_task, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stop_task}:
                err = task.exception()
                failures.append(
                    f"{task.get_name()} stopped: {describe(err) if err else 'returned'}"
                )
        finally:
            for task in (*tasks, ready, stop_task):
                task.cancel()
            await asyncio.gather(*tasks, ready, stop_task, return_exceptions=True)
        if failures:
            raise Fatal("; ".join(failures))

    async def _ready(self, feed: Feed) -> None:
        await feed.complete()
        sizes = feed.sizes()
        log.info(
            "ready in %.2fs: the view is complete (%d namespaces, %d Jobs listed)",
            time.monotonic() - self.started,
            sizes.get("Namespace", 0),
            sizes.get("Job", 0),
        )
