"""The ``kuota`` command line (``kuota.cli:main``).

Theory of operation: one typer app; each subcommand is a thin shell over a
library function (``simulate`` over ``kuota.sim``), so that what the command
does can be tested without a process. Exit codes: 0 done, 1 the run could not
finish (e.g. a scenario that never settles), 2 bad input (malformed YAML, a bad
timing annotation or option). Machine output goes to stdout, people's output
(summaries, errors) to stderr.

``healthcheck`` is the container image's probe (Dockerfile ``HEALTHCHECK``,
docker-compose): it asks the service in the same container for its Prometheus
page, so it needs nothing but the standard library.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kuota.cli_audit import register as register_audit_commands

app = typer.Typer(
    name="kuota",
    help="Quota admission, borrowing and preemption for DRA GPU jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Events a run without ``--until`` may apply before it is called a runaway.
DEFAULT_MAX_EVENTS = 2_000_000


@app.callback()
def _root() -> None:
    """Quota admission, borrowing and preemption for DRA GPU jobs."""


def _fail(message: str, code: int) -> typer.Exit:
    sys.stderr.write(f"kuota: error: {message}\n")
    return typer.Exit(code=code)


@app.command()
def simulate(
    file: Annotated[
        Path,
        typer.Argument(
            help="Scenario: Kubernetes manifests with kuota.dev/ timing annotations ('-' = stdin)."
        ),
    ],
    until: Annotated[
        str | None,
        typer.Option(help="Stop at this simulated time (e.g. 90s, 1h30m); default: until settled."),
    ] = None,
    summary: Annotated[
        bool, typer.Option(help="Print the per-ClusterQueue summary table to stderr.")
    ] = True,
    max_events: Annotated[
        int, typer.Option(help="Without --until, give up after this many events.")
    ] = DEFAULT_MAX_EVENTS,
    preemption: Annotated[
        str,
        typer.Option(
            help="inline: the victim search runs in the admission cycle; plans: as the "
            "services run, a head that needs preemption waits for a plan from the "
            "preemption service (simulated in-process, with no lag)."
        ),
    ] = "inline",
) -> None:
    """Fold a scenario through the admission core; print one JSON decision per line."""
    # Imported here: `kuota --help` and the other subcommands need not load the core.
    from kuota.core.fold.fold import Fold
    from kuota.core.fold.preempting import INLINE, PLANS
    from kuota.events.schema import PreemptionPlan
    from kuota.sim.duration import DurationError, parse_duration
    from kuota.sim.engine import SimulationError, Simulator
    from kuota.sim.output import decision_json
    from kuota.sim.planning import PreemptionService
    from kuota.sim.report import PeakUsage, plans_line, render_summary
    from kuota.sim.scenario import ScenarioError, load_scenario

    if preemption not in (INLINE, PLANS):
        raise _fail(f"--preemption: {preemption!r} is neither {INLINE!r} nor {PLANS!r}", 2)

    if until is not None:
        try:
            parse_duration(until)
        except DurationError as err:
            raise _fail(f"--until: {err}", 2) from None
    source = "<stdin>" if str(file) == "-" else str(file)
    try:
        text = sys.stdin.read() if source == "<stdin>" else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(f"{source}: cannot read: {err}", 2) from None
    fold = Fold(preemption=preemption)
    service = PreemptionService() if preemption == PLANS else None
    counts: dict[str, int] = {}
    peaks = PeakUsage()
    planned = 0  # preemptions decided through a plan
    out = sys.stdout
    try:
        simulator = Simulator(load_scenario(text, source=source), fold=fold, planning=service)
        for step in simulator.steps(
            until=until, max_steps=None if until is not None else max_events
        ):
            plan = step.event.id if isinstance(step.event, PreemptionPlan) else None
            for decision in step.decisions:
                out.write(decision_json(decision, plan=plan))
                out.write("\n")
                if plan is not None and decision.type == "Preempted":
                    planned += 1
                counts[decision.type] = counts.get(decision.type, 0) + 1
                peaks.observe(decision)
    except ScenarioError as err:
        message = str(err)
        raise _fail(message if message.startswith(source) else f"{source}: {message}", 2) from None
    except SimulationError as err:
        out.flush()
        raise _fail(str(err), 1) from None
    out.flush()
    if summary:
        render_summary(
            fold.summary(),
            counts=counts,
            end=simulator.now,
            events=simulator.applied,
            settled=simulator.settled,
            peaks=peaks.peak,
            notes=[plans_line(service.counts, preempted=planned)] if service else [],
        )


#: Each service's default ``KUOTA_METRICS_PORT`` (the services' settings readers
#: hold the same numbers; tests/integration/test_deploy_settings.py keeps them equal).
SERVICE_METRICS_PORTS = {
    "kuota-ingest": 9101,
    "kuota-admission": 9102,
    "kuota-preemption": 9103,
    "kuota-actuator": 9104,
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


@app.command()
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
        raise _fail(f"healthcheck: {source}", 2)
    if chosen == 0:
        raise _fail("healthcheck: metrics are off (port 0): nothing to probe", 1)
    url = f"http://{host}:{chosen}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            head = resp.read(65536)
            status = resp.status
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise _fail(f"healthcheck: {url}: {reason}", 1) from None
    if status != 200 or b"# TYPE " not in head:
        raise _fail(f"healthcheck: {url}: HTTP {status}, not a Prometheus page", 1)
    sys.stderr.write(f"kuota: healthcheck: {url} answers (port from {source})\n")


# audit replay, journal export, explain, events tail, status (kuota.cli_audit).
register_audit_commands(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
