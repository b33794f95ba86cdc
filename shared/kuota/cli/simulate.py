"""``kuota simulate``: fold a scenario file through the admission core.

Theory of operation: a thin shell over :mod:`kuota.sim`, so that what the
command does can be tested without a process. It loads the scenario
(Kubernetes manifests with ``kuota.dev/`` timing annotations), steps the
simulator, and prints one JSON decision per line on stdout as it goes; the
per-ClusterQueue summary goes to stderr. With ``--preemption plans`` a head
that needs preemption waits for a plan from an in-process preemption service,
as the services fold. ``--report DIR`` also records the run's series
(:mod:`kuota.sim.series`) and writes an offline HTML report with plots, a
CSV of every series and a JSON summary (:mod:`kuota.sim.htmlreport`); a
progress bar (workloads finished) shows on a terminal only. Exit codes
(:mod:`kuota.cli._common`): 0 done, 1 the run could not finish (e.g. a
scenario that never settles), 2 bad input (malformed YAML, a bad timing
annotation or option). See ``docs/design/simulate.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kuota.cli._common import EXIT_FAILED, fail, progress_bar

#: Events a run without ``--until`` may apply before it is called a runaway.
DEFAULT_MAX_EVENTS = 2_000_000


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
    report: Annotated[
        Path | None,
        typer.Option(
            help="Also write an offline HTML report with plots, a CSV of every series and "
            "a JSON summary into this directory (docs/design/capacity-planning.md)."
        ),
    ] = None,
) -> None:
    """Fold a scenario through the admission core; print one JSON decision per line."""
    # Imported here: `kuota --help` and the other subcommands need not load the core.
    from kuota.core.fold.fold import Fold
    from kuota.core.fold.preempting import INLINE, PLANS
    from kuota.events.schema import PreemptionPlan
    from kuota.sim.duration import DurationError, parse_duration
    from kuota.sim.engine import SimulationError, Simulator, workload_key
    from kuota.sim.output import decision_json
    from kuota.sim.planning import PreemptionService
    from kuota.sim.report import PeakUsage, plans_line, render_summary
    from kuota.sim.scenario import ScenarioError, load_scenario
    from kuota.sim.series import Recorder

    if preemption not in (INLINE, PLANS):
        raise fail(f"--preemption: {preemption!r} is neither {INLINE!r} nor {PLANS!r}")

    if until is not None:
        try:
            parse_duration(until)
        except DurationError as err:
            raise fail(f"--until: {err}") from None
    source = "<stdin>" if str(file) == "-" else str(file)
    try:
        text = sys.stdin.read() if source == "<stdin>" else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise fail(f"{source}: cannot read: {err}") from None
    fold = Fold(preemption=preemption)
    service = PreemptionService() if preemption == PLANS else None
    counts: dict[str, int] = {}
    peaks = PeakUsage()
    planned = 0  # preemptions decided through a plan
    out = sys.stdout
    recorder = Recorder() if report is not None else None
    try:
        manifests = load_scenario(text, source=source)
        simulator = Simulator(manifests, fold=fold, planning=service)
        jobs = sum(1 for key in map(workload_key, manifests) if key is not None)
        with progress_bar("simulating (workloads finished)", jobs) as bar:
            task = bar.add_task("simulate", total=jobs)
            for step in simulator.steps(
                until=until, max_steps=None if until is not None else max_events
            ):
                plan = step.event.id if isinstance(step.event, PreemptionPlan) else None
                finished = 0
                for decision in step.decisions:
                    out.write(decision_json(decision, plan=plan))
                    out.write("\n")
                    if plan is not None and decision.type == "Preempted":
                        planned += 1
                    finished += decision.type == "Finished"
                    counts[decision.type] = counts.get(decision.type, 0) + 1
                    peaks.observe(decision)
                if recorder is not None:
                    recorder.observe(step.event, step.decisions)
                if finished:
                    bar.advance(task, finished)
    except ScenarioError as err:
        message = str(err)
        raise fail(message if message.startswith(source) else f"{source}: {message}") from None
    except SimulationError as err:
        out.flush()
        raise fail(str(err), EXIT_FAILED) from None
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
    if report is not None and recorder is not None:
        from kuota.sim.htmlreport import write_report

        try:
            written = write_report(
                report,
                recorder.series,
                title=f"kuota simulate {source}",
                context={"scenario": source, "settled": simulator.settled},
            )
        except OSError as err:
            raise fail(f"--report {report}: cannot write: {err}", EXIT_FAILED) from None
        print(f"report: {', '.join(str(path) for path in written)}", file=sys.stderr)
