"""``kuota audit replay``, ``kuota journal export`` and ``kuota explain``.

Theory of operation: thin shells over :mod:`kuota.audit` (see
``docs/design/audit.md``). Each reads its sources (Kafka, chosen by the same
``KUOTA_*`` variables as the services, or an export file), drives the pure
auditor/explainer, and prints: the answer on stdout (rich text for people,
one JSON document with ``--json``), progress on stderr when it is a terminal.

Exit codes (:mod:`kuota.cli._common`): 0 done (``audit replay``: identical),
1 ``audit replay`` found a divergence, 2 bad input or a source that cannot be
read (a missing setting, an unreadable file, an unknown topic, Kafka or Redis
unreachable).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kuota.cli._common import (
    EXIT_FAILED,
    check_workload,
    fail,
    kafka_settings,
    progress_bar,
    run_async,
    stdout_console,
)

if TYPE_CHECKING:
    from aiokafka import TopicPartition

    from kuota.audit.explain import Explanation
    from kuota.audit.files import ExportHeader
    from kuota.audit.kafka import AuditRange
    from kuota.audit.replay import AuditResult
    from kuota.bus.settings import KafkaSettings

audit_app = typer.Typer(
    help="Re-fold the journal and compare with the decision topic.", no_args_is_help=True
)
journal_app = typer.Typer(help="The journal topic.", no_args_is_help=True)

PREEMPTION_HELP = (
    "The mode the admission service folded in: plans (the services since plans mode; "
    "the journal's PreemptionPlan events are folded like any other) or inline "
    "(journals written before). Default: plans, or with --file the mode the export's "
    "header names (`kuota simulate --export` writes it)."
)


def check_mode(preemption: str | None, header: ExportHeader | None = None) -> str:
    """The fold's mode: the option, else the export header's, else plans."""
    from kuota.core.fold.preempting import INLINE, PLANS

    if preemption is None:
        recorded = header.preemption if header is not None else None
        preemption = recorded if recorded in (INLINE, PLANS) else PLANS
    if preemption not in (INLINE, PLANS):
        raise fail(f"--preemption: {preemption!r} is neither {PLANS!r} nor {INLINE!r}")
    return preemption


# ---------------------------------------------------------------------- audit replay


@audit_app.command("replay")
def replay(
    from_offset: Annotated[
        int | None,
        typer.Option(
            "--from-offset",
            min=0,
            help="Fold from the start, compare only decisions caused at this offset or later.",
        ),
    ] = None,
    snapshot: Annotated[
        bool,
        typer.Option(
            "--snapshot",
            help="Start from the admission service's Redis snapshot; compare what follows it.",
        ),
    ] = False,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Replay an export (FILE + FILE.decisions) with no Kafka."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    preemption: Annotated[str | None, typer.Option("--preemption", help=PREEMPTION_HELP)] = None,
) -> None:
    """Re-fold the journal, recompute every decision, and diff with the decision topic."""
    from kuota.audit.files import ExportError, decisions_path, read_decisions, read_header
    from kuota.audit.files import read_journal as file_journal
    from kuota.audit.replay import Auditor, run, service_fold

    check_mode(preemption)  # a bad value fails before anything is read
    if snapshot and from_offset is not None:
        raise fail("--snapshot and --from-offset exclude each other")
    if snapshot and file is not None:
        raise fail("--snapshot reads the admission service's Redis snapshot; not with --file")
    compare_from = from_offset or 0
    started = time.perf_counter()
    if file is not None:
        dfile = decisions_path(file)
        for p in (file, dfile):
            if not p.is_file():
                raise fail(f"{p}: no such file (written by `kuota journal export {file}`)")
        try:
            header = read_header(file)
        except (ExportError, OSError) as err:
            raise fail(str(err)) from None
        end = header.end if header is not None else None
        source = str(file)
        if end is not None:
            source += f" (to offset {end}: {header.end_reason})" if header else ""
        mode = check_mode(preemption, header)
        auditor = Auditor(fold=service_fold(mode), compare_from=compare_from, compare_to=end)
        total = end if end is not None else None
        with progress_bar("replaying", total) as bar:
            task = bar.add_task("replay", total=total)
            try:
                result = run(
                    auditor,
                    file_journal(file),
                    read_decisions(dfile),
                    progress=lambda n, off: bar.update(task, completed=off + 1),
                )
            except (ExportError, OSError) as err:
                raise fail(str(err)) from None
        elapsed = time.perf_counter() - started
    else:
        settings = kafka_settings()
        redis_url = os.environ.get("KUOTA_REDIS_URL", "").strip()
        if snapshot and not redis_url:
            raise fail("--snapshot needs KUOTA_REDIS_URL (where the admission snapshot is)")
        result, source, elapsed = run_async(
            lambda: _replay_kafka(
                settings,
                compare_from=compare_from,
                snapshot=snapshot,
                redis_url=redis_url,
                preemption=check_mode(preemption),
            )
        )
    _report(result, source=source, elapsed=elapsed, json_out=json_out)
    if not result.identical:
        raise typer.Exit(code=EXIT_FAILED)


async def _journal_and_decisions(
    settings: KafkaSettings,
) -> tuple[TopicPartition, TopicPartition, AuditRange]:
    from kuota.audit.kafka import journal_and_decisions

    return await journal_and_decisions(settings)


async def _replay_kafka(
    settings: KafkaSettings,
    *,
    compare_from: int,
    snapshot: bool,
    redis_url: str,
    preemption: str,
) -> tuple[AuditResult, str, float]:
    from kuota.audit.kafka import AuditSourceError, load_snapshot, run_audit, snapshot_name
    from kuota.audit.replay import Auditor, service_fold

    journal, decisions, rng = await _journal_and_decisions(settings)
    fold, start = service_fold(preemption), 0
    source = f"{journal.topic} to offset {rng.end} ({rng.reason})"
    if snapshot:
        name = snapshot_name(settings)
        fold, start = await load_snapshot(redis_url, name)
        if fold.preemption_mode != preemption:
            raise AuditSourceError(
                f"snapshot {name} folds in {fold.preemption_mode!r} mode, "
                f"not --preemption {preemption!r}"
            )
        if start > rng.end:
            raise AuditSourceError(
                f"snapshot {name} is at offset {start}, past the audited end {rng.end}"
            )
        compare_from = start
        source += f", from snapshot {name} at offset {start}"
    elif compare_from:
        source += f", comparing from offset {compare_from}"
    auditor = Auditor(fold=fold, compare_from=compare_from, compare_to=rng.end)
    t0 = time.perf_counter()
    with progress_bar("replaying", rng.end - start) as bar:
        task = bar.add_task("replay", total=rng.end - start)
        result = await run_audit(
            settings,
            auditor,
            journal=journal,
            decisions=decisions,
            start=start,
            end=rng.end,
            decisions_end=rng.decisions_end,
            progress=lambda n, off: bar.update(task, completed=off + 1 - start),
        )
    return result, source, time.perf_counter() - t0


def _report(result: AuditResult, *, source: str, elapsed: float, json_out: bool) -> None:
    from kuota.audit.render import divergence_text, result_text

    rate = result.events / elapsed if elapsed > 0 else 0.0
    if json_out:
        doc = {
            **result.to_dict(),
            "source": source,
            "elapsed_s": round(elapsed, 3),
            "events_per_s": round(rate),
        }
        sys.stdout.write(json.dumps(doc) + "\n")
        return
    out = stdout_console()
    out.print(result_text(result, source=source))
    if result.divergence is not None:
        out.print(divergence_text(result.divergence), soft_wrap=True)
    out.print(
        f"events_per_s={rate:.0f} events={result.events} decisions={result.matched} "
        f"elapsed_s={elapsed:.2f}",
        markup=False,
    )


# ---------------------------------------------------------------------- journal export


@journal_app.command("export")
def export(
    file: Annotated[
        Path, typer.Argument(help="Journal JSON lines; decisions go to FILE.decisions.")
    ],
) -> None:
    """Write the journal and the decision topic as JSON lines (for `audit replay --file`)."""
    settings = kafka_settings()
    journal_n, decisions_n, end, reason = run_async(lambda: _export(settings, file))
    sys.stderr.write(
        f"kuota: exported {journal_n} journal records (to offset {end}: {reason}) to {file} "
        f"and {decisions_n} decisions to {file}.decisions\n"
    )


async def _export(settings: KafkaSettings, file: Path) -> tuple[int, int, int, str]:
    from kuota.audit.files import (
        DECISIONS_KIND,
        JOURNAL_KIND,
        ExportHeader,
        decision_line,
        decisions_path,
        header_line,
        journal_line,
    )
    from kuota.audit.kafka import read_batches

    journal, decisions, rng = await _journal_and_decisions(settings)
    dfile = decisions_path(file)
    tmp, dtmp = file.with_name(file.name + ".tmp"), dfile.with_name(dfile.name + ".tmp")
    journal_n = decisions_n = 0
    with progress_bar("exporting", rng.end + rng.decisions_end) as bar:
        task = bar.add_task("export", total=rng.end + rng.decisions_end)
        with tmp.open("wb") as f:
            header = ExportHeader(JOURNAL_KIND, journal.topic, 0, 0, rng.end, rng.reason)
            f.write(header_line(header))
            async for batch in read_batches(settings, journal, start=0, end=rng.end):
                f.writelines(journal_line(r.offset, r.value) for r in batch)
                journal_n += len(batch)
                bar.update(task, completed=batch[-1].offset + 1)
        with dtmp.open("wb") as f:
            f.write(header_line(ExportHeader(DECISIONS_KIND, decisions.topic, 0, 0, None, "")))
            async for batch in read_batches(settings, decisions, start=0, end=rng.decisions_end):
                f.writelines(decision_line(r.offset, r.partition, r.value) for r in batch)
                decisions_n += len(batch)
                bar.update(task, completed=rng.end + batch[-1].offset + 1)
    tmp.replace(file)
    dtmp.replace(dfile)
    return journal_n, decisions_n, rng.end, rng.reason


# ---------------------------------------------------------------------- explain


def explain(
    workload: Annotated[
        str,
        typer.Argument(
            help="The workload: namespace/name for a Job, namespace/<kind>/name for another kind."
        ),
    ],
    file: Annotated[
        Path | None, typer.Option("--file", help="Read an export (FILE + FILE.decisions).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    preemption: Annotated[str | None, typer.Option("--preemption", help=PREEMPTION_HELP)] = None,
) -> None:
    """A workload's history: every decision, the quota state at each, and why it waits."""
    from kuota.audit.explain import Explainer, relevant
    from kuota.audit.files import ExportError, decisions_path, read_decisions, read_header
    from kuota.audit.files import read_journal as file_journal
    from kuota.audit.render import explanation
    from kuota.audit.replay import service_fold

    key = check_workload(workload)
    mode = check_mode(preemption)  # a bad value fails before anything is read
    ex: Explanation
    if file is not None:
        dfile = decisions_path(file)
        for p in (file, dfile):
            if not p.is_file():
                raise fail(f"{p}: no such file (written by `kuota journal export {file}`)")
        try:
            header = read_header(file)
            end = header.end if header is not None else None
            recorded = (
                r.decision
                for r in read_decisions(dfile)
                if r.decision is not None and _before(r.decision.cause_offset, end)
            )
            mode = check_mode(preemption, header)
            explainer = Explainer(key, relevant(key, recorded), service_fold(mode))
            until = explainer.needed_until
            for record in file_journal(file):
                if (until is not None and record.offset > until) or (
                    end is not None and record.offset >= end
                ):
                    break
                explainer.event(record)
        except (ExportError, OSError) as err:
            raise fail(str(err)) from None
        ex = explainer.explain()
    else:
        settings = kafka_settings()
        ex = run_async(lambda: _explain_kafka(settings, key, mode))
    if json_out:
        sys.stdout.write(json.dumps(ex.to_dict()) + "\n")
    else:
        stdout_console().print(explanation(ex))


def _before(offset: int | None, end: int | None) -> bool:
    return end is None or offset is None or offset < end


async def _explain_kafka(settings: KafkaSettings, key: str, preemption: str) -> Explanation:
    from kuota.audit.kafka import explain_workload

    with progress_bar("re-folding", None) as bar:
        task = bar.add_task("refold", total=None)
        return await explain_workload(
            settings,
            key,
            preemption,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
