"""``kuota plan``: the fewest GPUs meeting a wait-time SLO, per accounting model.

Theory of operation: a thin shell over :mod:`kuota.sim.plan`. It reads a
trace (a CSV file, ``kuota.sim.trace.read_csv``) or generates one from the
published PAI distributions (``--jobs``, ``--seed``, ``--load-gpus``), then
for each accounting model (``--models``, default all of
``kuota.sim.models.MODELS``) searches the node count; a model the fold cannot
charge is reported ``n/a`` with the reason. stdout: one line per model, then
the last line ``jobs=… slo=p95_wait<=300s gpus_whole=… gpus_mig=…
gpus_mps=… saving_mig_pct=…``. ``--report DIR`` writes a simulation report
(``kuota.sim.htmlreport``) per model at the size found, in ``DIR/<model>/``,
and ``DIR/plan.json`` with every size tried. A progress bar on stderr when it
is a terminal. Exit codes: 0 done, 1 no size meets the SLO or a run failed,
2 bad input (a malformed trace names the line). See
docs/capacity-planning.md and docs/design/capacity-planning.md.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from kuota.cli._common import EXIT_FAILED, fail, progress_bar


def plan(
    trace: Annotated[
        Path | None,
        typer.Argument(
            help="Trace CSV (submit_s,duration_s,gpus,gpu_memory_gib,priority,team; '-' = "
            "stdin). Without it a trace is generated from Alibaba's PAI GPU trace."
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="Generated trace: number of jobs.")] = 2000,
    seed: Annotated[int, typer.Option(help="Generated trace: random seed.")] = 1,
    load_gpus: Annotated[
        float,
        typer.Option(help="Generated trace: offered load, in busy whole GPUs on average."),
    ] = 100.0,
    teams: Annotated[int, typer.Option(help="Generated trace: teams (namespaces).")] = 4,
    fractional_share: Annotated[
        float | None,
        typer.Option(
            help="Generated trace: share of jobs needing a fraction of a GPU "
            "(default: the published 0.436)."
        ),
    ] = None,
    gpus_per_node: Annotated[
        int, typer.Option(help="GPUs per node: the search steps by whole nodes.")
    ] = 8,
    percentile: Annotated[float, typer.Option(help="SLO: this percentile of the waits ...")] = 95.0,
    max_wait: Annotated[float, typer.Option(help="SLO: ... is at most this many seconds.")] = 300.0,
    models: Annotated[
        str, typer.Option(help="Accounting models to size, comma-separated (whole,mig,mps).")
    ] = "whole,mig,mps",
    report: Annotated[
        Path | None,
        typer.Option(help="Write a simulation report per model, at the size found, here."),
    ] = None,
    write_trace: Annotated[
        Path | None, typer.Option(help="Write the trace used as CSV here ('-' = stdout).")
    ] = None,
) -> None:
    """Size a GPU cluster for a trace: the fewest GPUs meeting a wait-time SLO, per model."""
    from kuota.sim.models import MODELS, AccountingModel, model_named
    from kuota.sim.plan import PlanError, Run, Slo, plan_line, probe, saving_pct, search, wait_text
    from kuota.sim.trace import TraceError, generate, read_csv, write_csv

    if not 0 < percentile <= 100:
        raise fail(f"--percentile: {percentile} (more than 0, at most 100)")
    if not 0 <= max_wait < 1e9:
        raise fail(f"--max-wait: {max_wait} (0 or more)")
    if not 1 <= gpus_per_node <= 64:
        raise fail(f"--gpus-per-node: {gpus_per_node} (1 to 64)")
    wanted = [name.strip() for name in models.split(",") if name.strip()]
    known = [m.name for m in MODELS]
    for name in wanted:
        if name not in known:
            raise fail(f"--models: unknown model {name!r} (known: {', '.join(known)})")
    if not wanted:
        raise fail("--models: none given")
    slo = Slo(percentile=percentile, max_wait_s=max_wait)
    try:
        if trace is not None:
            source = "<stdin>" if str(trace) == "-" else str(trace)
            try:
                text = sys.stdin.read() if source == "<stdin>" else trace.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise fail(f"{source}: cannot read: {err}") from None
            jobs_list = read_csv(text, source=source)
        else:
            shares = {} if fractional_share is None else {"fractional_share": fractional_share}
            jobs_list = generate(jobs=jobs, seed=seed, load_gpus=load_gpus, teams=teams, **shares)
    except TraceError as err:
        raise fail(str(err)) from None
    if write_trace is not None:
        csv_text = write_csv(jobs_list)
        if str(write_trace) == "-":
            sys.stdout.write(csv_text)
        else:
            write_trace.write_text(csv_text, encoding="utf-8")

    out = sys.stdout
    gpus: dict[str, int | None] = {name: None for name in known}
    tried: dict[str, object] = {}
    with progress_bar("sizing", None) as bar:
        task = bar.add_task("plan", total=None)
        for name in known:
            if name not in wanted:
                continue
            model = model_named(name)
            why = probe(model)
            if why is not None:
                out.write(f"{name}: n/a: {model.title} cannot be charged here: {why}\n")
                tried[name] = {"notAvailable": why}
                continue

            def progressed(model_: AccountingModel, run: Run) -> None:
                bar.update(task, description=f"{model_.name}: {run.nodes} nodes")
                bar.advance(task)

            try:
                found = search(
                    jobs_list, model, slo=slo, gpus_per_node=gpus_per_node, on_run=progressed
                )
            except PlanError as err:
                raise fail(f"{name}: {err}", EXIT_FAILED) from None
            best = found.best
            assert best is not None
            gpus[name] = best.gpus
            sizes = ", ".join(f"{n}:{wait_text(found.runs[n].wait)}" for n in sorted(found.runs))
            note = (
                f"; not monotonic: {', '.join(map(str, found.non_monotonic))} failed above a "
                "meeting size"
                if found.non_monotonic
                else ""
            )
            out.write(
                f"{name}: {best.gpus} GPUs ({best.nodes} nodes x {gpus_per_node}), "
                f"p{percentile:g} wait {wait_text(best.wait)} ({model.title}); "
                f"nodes tried: {sizes}{note}\n"
            )
            tried[name] = {
                "gpus": best.gpus,
                "nodes": best.nodes,
                "wait": None if math.isinf(best.wait) else best.wait,
                "nonMonotonic": found.non_monotonic,
                "runs": [
                    {
                        "nodes": n,
                        "gpus": found.runs[n].gpus,
                        "wait": None if math.isinf(found.runs[n].wait) else found.runs[n].wait,
                        "met": found.runs[n].met,
                    }
                    for n in sorted(found.runs)
                ],
            }
            if report is not None:
                from kuota.sim.htmlreport import write_report

                write_report(
                    report / name,
                    best.series,
                    title=f"kuota plan: {model.title}, {best.gpus} GPUs",
                    context={
                        "model": name,
                        "gpus": best.gpus,
                        "nodes": best.nodes,
                        "slo": str(slo),
                        "jobs": len(jobs_list),
                    },
                )
    line = plan_line(
        jobs=len(jobs_list),
        slo=slo,
        gpus=gpus,
        saving_mig=saving_pct(gpus.get("whole"), gpus.get("mig")),
    )
    if report is not None:
        report.mkdir(parents=True, exist_ok=True)
        (report / "plan.json").write_text(
            json.dumps({"line": line, "slo": str(slo), "models": tried}, indent=2) + "\n",
            encoding="utf-8",
        )
    out.write(line + "\n")
    out.flush()
