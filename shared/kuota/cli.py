"""The ``kuota`` command line (``kuota.cli:main``).

Theory of operation: one typer app; each subcommand is a thin shell over a
library function (``simulate`` over ``kuota.sim``), so that what the command
does can be tested without a process. Exit codes: 0 done, 1 the run could not
finish (e.g. a scenario that never settles), 2 bad input (malformed YAML, a bad
timing annotation or option). Machine output goes to stdout, people's output
(summaries, errors) to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

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
) -> None:
    """Fold a scenario through the admission core; print one JSON decision per line."""
    # Imported here: `kuota --help` and the other subcommands need not load the core.
    from kuota.core.fold import Fold
    from kuota.sim.duration import DurationError, parse_duration
    from kuota.sim.engine import SimulationError, Simulator
    from kuota.sim.output import decision_json
    from kuota.sim.report import PeakUsage, render_summary
    from kuota.sim.scenario import ScenarioError, load_scenario

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
    fold = Fold()
    counts: dict[str, int] = {}
    peaks = PeakUsage()
    out = sys.stdout
    try:
        simulator = Simulator(load_scenario(text, source=source), fold=fold)
        for step in simulator.steps(
            until=until, max_steps=None if until is not None else max_events
        ):
            for decision in step.decisions:
                out.write(decision_json(decision))
                out.write("\n")
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
        )


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
