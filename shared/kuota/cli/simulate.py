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
progress bar (workloads finished) shows on a terminal only. ``--export FILE``
also writes the events it applied and the decisions as the export pair
``kuota explain --file`` and ``kuota audit replay --file`` read
(:class:`kuota.audit.files.ExportWriter`); ``--strict`` fails a run in which
anything was Rejected (a CI lint of a team's manifests). Exit codes
(:mod:`kuota.cli._common`): 0 done, 1 the run could not finish (e.g. a
scenario that never settles) or, with ``--strict``, something was Rejected,
2 bad input (malformed YAML, a bad timing annotation or option). The scenario
format: ``docs/scenarios.md``; the design: ``docs/design/simulate.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kuota.cli._common import EXIT_FAILED, fail, progress_bar

if TYPE_CHECKING:
    from kuota.audit.files import ExportWriter
    from kuota.sim.engine import Simulator

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
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            help="Also write the events applied to FILE and the decisions to FILE.decisions, "
            "for `kuota explain --file FILE` and `kuota audit replay --file FILE`.",
        ),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 if anything was Rejected (a lint of the manifests)."),
    ] = False,
) -> None:
    """Fold a scenario through the admission core; print one JSON decision per line.

    A scenario is ordinary manifests (multi-document YAML, kind: List expanded)
    with timing annotations (durations such as 90s, 1m30s, or bare seconds):

    - kuota.dev/submit-at: when the object is applied (default 0s)

    - kuota.dev/run-for: a Job finishes this long after its latest admission (default: never)

    - kuota.dev/ready-after: its pods are ready this long after admission, or never (default 0s)

    - kuota.dev/delete-at: when the object is deleted (default: never)

    - kuota.dev/stop-after: a stopped Job's pods are gone this long after the stop (default 0s)

    The format, a worked example and the output: docs/scenarios.md.
    """
    # Imported here: `kuota --help` and the other subcommands need not load the core.
    from kuota.audit.files import ExportWriter
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
    try:
        manifests = load_scenario(text, source=source)
    except ScenarioError as err:
        raise fail(_scenario_message(err, source)) from None
    writer: ExportWriter | None = None
    if export is not None:
        try:
            writer = ExportWriter(export, topic=f"kuota simulate {source}", preemption=preemption)
        except OSError as err:
            raise fail(f"--export {export}: cannot write: {err.strerror or err}") from None
    fold = Fold(preemption=preemption)
    service = PreemptionService() if preemption == PLANS else None
    counts: dict[str, int] = {}
    peaks = PeakUsage()
    planned = 0  # preemptions decided through a plan
    out = sys.stdout
    recorder = Recorder() if report is not None else None
    try:
        simulator = Simulator(manifests, fold=fold, planning=service)
        jobs = sum(1 for key in map(workload_key, manifests) if key is not None)
        with progress_bar("simulating (workloads finished)", jobs) as bar:
            task = bar.add_task("simulate", total=jobs)
            for step in simulator.steps(
                until=until, max_steps=None if until is not None else max_events
            ):
                plan = step.event.id if isinstance(step.event, PreemptionPlan) else None
                if writer is not None:
                    writer.event(step.event, offset=simulator.applied - 1)
                finished = 0
                for decision in step.decisions:
                    out.write(decision_json(decision, plan=plan))
                    out.write("\n")
                    if writer is not None:
                        writer.decision(decision)
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
        if writer is not None:
            writer.discard()
        raise fail(_scenario_message(err, source)) from None
    except SimulationError as err:
        out.flush()
        if writer is not None:  # what was applied: explain can say why it never settled
            _close(writer, simulator, f"could not finish: {err}")
        raise fail(str(err), EXIT_FAILED) from None
    out.flush()
    cut_off = parse_duration(until) / 1_000_000 if until is not None else None
    if writer is not None:
        _close(writer, simulator, _ending(simulator, cut_off))
    rejections = fold.rejections()
    if summary:
        render_summary(
            fold.summary(),
            counts=counts,
            end=simulator.now,
            events=simulator.applied,
            settled=simulator.settled,
            peaks=peaks.peak,
            notes=[plans_line(service.counts, preempted=planned)] if service else [],
            until=cut_off,
            rejections=rejections,
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
    rejected = counts.get("Rejected", 0)
    if strict and rejected:
        still = f", {len(rejections)} still rejected at the end" if rejections else ""
        raise fail(
            f"--strict: {rejected} Rejected decision{'' if rejected == 1 else 's'}{still} "
            "(the Rejected lines on stdout say what and why)",
            EXIT_FAILED,
        )


def _scenario_message(err: Exception, source: str) -> str:
    message = str(err)
    return message if message.startswith(source) else f"{source}: {message}"


def _ending(simulator: Simulator, cut_off: float | None) -> str:
    from kuota.sim.duration import format_seconds

    if simulator.settled:
        return f"settled at {format_seconds(simulator.now)}s"
    if cut_off is not None:
        return f"stopped at --until {format_seconds(cut_off)}s"
    return f"stopped at {format_seconds(simulator.now)}s"


def _close(writer: ExportWriter, simulator: Simulator, ending: str) -> None:
    try:
        writer.close(end=simulator.applied, end_reason=f"kuota simulate: {ending}")
    except OSError as err:
        raise fail(f"--export: cannot write: {err}") from None
    sys.stderr.write(
        f"kuota: exported {writer.events} journal events to {writer.path} and "
        f"{writer.decisions} decisions to {writer.path}.decisions\n"
    )
