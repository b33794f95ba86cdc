"""``kuota healthcheck``: the container image's probe.

Theory of operation: the Dockerfile's ``HEALTHCHECK`` (and docker-compose)
runs ``kuota healthcheck`` in a service's container. It finds the port of the
service's Prometheus page (``--port``, else ``KUOTA_METRICS_PORT``, else the
default port of the kuota service running as PID 1, read from
``/proc/1/cmdline``) and asks for it, with nothing but the standard library.
Exit codes (:mod:`kuota.cli._common`): 0 the page answers, 1 it does not (or
metrics are off), 2 no way to tell which port to probe.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kuota.cli._common import EXIT_FAILED, fail

#: Each service's default ``KUOTA_METRICS_PORT`` (the services' settings readers
#: hold the same numbers; tests/integration/test_deploy_settings.py keeps them equal).
SERVICE_METRICS_PORTS = {
    "kuota-ingest": 9101,
    "kuota-admission": 9102,
    "kuota-preemption": 9103,
    "kuota-actuator": 9104,
    "kuota-webhook": 9105,
}


def service_of_cmdline(cmdline: bytes) -> str | None:
    """The kuota service a ``/proc/<pid>/cmdline`` runs (``python .../kuota-ingest``)."""
    for arg in cmdline.split(b"\0"):
        name = arg.decode(errors="replace").rsplit("/", 1)[-1]
        if name in SERVICE_METRICS_PORTS:
            return name
    return None


def metrics_port(
    port: int | None, env: dict[str, str], cmdline: bytes | None
) -> tuple[int | None, str]:
    """The port to probe and where it came from (None: no way to tell, or metrics off)."""
    if port is not None:
        return port, "--port"
    raw = env.get("KUOTA_METRICS_PORT", "").strip()
    if raw:
        try:
            return int(raw), "KUOTA_METRICS_PORT"
        except ValueError:
            return None, f"KUOTA_METRICS_PORT={raw!r} is not a port number"
    service = service_of_cmdline(cmdline) if cmdline is not None else None
    if service is not None:
        return SERVICE_METRICS_PORTS[service], f"the default of {service} (PID 1)"
    return None, "no --port, no KUOTA_METRICS_PORT, and PID 1 is no kuota service"


def healthcheck(
    port: Annotated[
        int | None,
        typer.Option(
            help="Metrics port; default: $KUOTA_METRICS_PORT, else the default port "
            "of the kuota service running as PID 1."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address of the metrics server.")] = "127.0.0.1",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 3.0,
) -> None:
    """Exit 0 if the service's Prometheus endpoint answers (the image's HEALTHCHECK)."""
    import os
    import urllib.error
    import urllib.request

    try:
        with open("/proc/1/cmdline", "rb") as f:
            cmdline: bytes | None = f.read()
    except OSError:
        cmdline = None
    chosen, source = metrics_port(port, dict(os.environ), cmdline)
    if chosen is None:
        raise fail(f"healthcheck: {source}")
    if chosen == 0:
        raise fail("healthcheck: metrics are off (port 0): nothing to probe", EXIT_FAILED)
    url = f"http://{host}:{chosen}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            head = resp.read(65536)
            status = resp.status
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise fail(f"healthcheck: {url}: {reason}", EXIT_FAILED) from None
    if status != 200 or b"# TYPE " not in head:
        raise fail(f"healthcheck: {url}: HTTP {status}, not a Prometheus page", EXIT_FAILED)
    sys.stderr.write(f"kuota: healthcheck: {url} answers (port from {source})\n")
