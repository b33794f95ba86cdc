"""``kuota dashboard``: the live, read-only web dashboard.

Theory of operation: a shell over :mod:`kuota.dashboard`. It reads the same
settings as ``kuota status`` and ``kuota explain`` (``KUOTA_REDIS_URL``, the
``KUOTA_KAFKA_*`` and ``KUOTA_REDIS_*`` variables, ``KUOTA_TOPIC_PREFIX``),
starts :class:`~kuota.dashboard.live.Live` and the aiohttp server, prints the
URL on stdout (one line, flushed: scripts and tests read it) and runs until
Ctrl-C or SIGTERM. It binds 127.0.0.1 unless told otherwise; a bind to
another address without a token or TLS is refused unless ``--insecure``
says that an auth proxy stands in front (docs/design/dashboard.md).
"""

from __future__ import annotations

import os
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kuota.cli._common import fail, kafka_settings, run_async

if TYPE_CHECKING:
    from kuota.audit.explain import Explanation
    from kuota.bus.settings import KafkaSettings

PREEMPTION_HELP = "How the workload page re-folds: plans (the services' mode, default) or inline."
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def dashboard(
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port.")] = 8080,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="Require this bearer token (the file's first line; or KUOTA_DASHBOARD_TOKEN).",
        ),
    ] = None,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="Serve HTTPS.")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="Its key.")] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure", help="Allow a non-loopback bind without token or TLS (an auth proxy)."
        ),
    ] = False,
    preemption: Annotated[str, typer.Option("--preemption", help=PREEMPTION_HELP)] = "plans",
) -> None:
    """Serve the live dashboard: quota bars, pending workloads, decisions, explain."""
    from kuota.audit.status import redis_key
    from kuota.core.fold.preempting import INLINE, PLANS
    from kuota.store.acl import instance

    if preemption not in (INLINE, PLANS):
        raise fail(f"--preemption: {preemption!r} is not one of {PLANS}, {INLINE}")
    redis_url = os.environ.get("KUOTA_REDIS_URL", "").strip()
    if not redis_url:
        raise fail(
            "KUOTA_REDIS_URL is not set (for the local stack: `scripts/stack up` then "
            "`. .stack/stack.env`)"
        )
    token = _token(token_file)
    if (tls_cert is None) != (tls_key is None):
        raise fail("--tls-cert and --tls-key go together")
    if host not in LOOPBACK and token is None and tls_cert is None and not insecure:
        raise fail(
            f"--host {host}: a bind beyond loopback needs --token-file (and --tls-cert) "
            "or --insecure behind an auth proxy"
        )
    ssl_context = None
    if tls_cert is not None and tls_key is not None:
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            ssl_context.load_cert_chain(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as err:
            raise fail(f"--tls-cert/--tls-key: {err}") from None
    settings = kafka_settings()
    prefix = os.environ.get("KUOTA_TOPIC_PREFIX", "kuota.")
    key = redis_key(instance(prefix))
    run_async(
        lambda: _serve(
            settings, redis_url, key, host, port, token, ssl_context, preemption=preemption
        )
    )


def _token(token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            lines = token_file.read_text().splitlines()
        except OSError as err:
            raise fail(f"--token-file: {err}") from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise fail(f"--token-file {token_file}: the first line is empty")
        return token
    token = os.environ.get("KUOTA_DASHBOARD_TOKEN", "").strip()
    return token or None


async def _serve(
    settings: KafkaSettings,
    redis_url: str,
    key: str,
    host: str,
    port: int,
    token: str | None,
    ssl_context: ssl.SSLContext | None,
    *,
    preemption: str,
) -> None:
    import asyncio
    import signal

    from aiohttp import web

    from kuota.audit.kafka import explain_workload
    from kuota.dashboard.live import Live, LiveConfig
    from kuota.dashboard.server import make_app

    live = Live(LiveConfig(kafka=settings, redis_url=redis_url, redis_key=key))

    async def explain(workload: str) -> Explanation:
        return await explain_workload(settings, workload, preemption)

    app = make_app(live, explain, token=token)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0][1] if runner.addresses else port
    scheme = "https" if ssl_context is not None else "http"
    shown = f"[{host}]" if ":" in host else host
    sys.stdout.write(f"kuota: dashboard on {scheme}://{shown}:{bound}/\n")
    sys.stdout.flush()
    try:
        await live.run(stop)
    finally:
        await runner.cleanup()
