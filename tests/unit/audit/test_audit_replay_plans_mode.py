"""The audit re-folds in the admission service's mode: plans (docs/design/plans-mode.md).

The journal of :func:`audit_builders.preempting_journal` holds the preemption
service's ``PreemptionPlan`` events; its recorded decisions are what a
plans-mode admission writes. ``kuota audit replay`` (default
``--preemption plans``) matches them; an inline re-fold does not, at the first
decision where the modes differ. ``kuota explain`` re-folds the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_builders import as_recorded, fold_all, preempting_journal
from typer.testing import CliRunner

from kuota.audit.files import (
    DECISIONS_KIND,
    JOURNAL_KIND,
    ExportHeader,
    decision_line,
    decisions_path,
    header_line,
    journal_line,
)
from kuota.audit.replay import CHANGED, Auditor, JournalRecord, run, service_fold
from kuota.cli import app
from kuota.core.fold.preempting import INLINE, PLANS, WAITING_FOR_PLAN
from kuota.events.schema import PreemptionPlan

runner = CliRunner()


@pytest.fixture
def recs() -> list[JournalRecord]:
    return preempting_journal().records()


def test_the_journal_holds_plans_and_the_record_their_decisions(
    recs: list[JournalRecord],
) -> None:
    plans = [r.event for r in recs if isinstance(r.event, PreemptionPlan)]
    assert [(p.preemptor, p.victims) for p in plans] == [
        ("team-a/high-1", ["team-a/low-2"]),
        ("team-a/low-2", []),  # the requeued victim: nothing to preempt
    ]
    decisions = fold_all(recs)
    assert ("Preempted", "team-a/low-2") in [(d.type, d.workload) for d in decisions]
    assert any(d.reason == WAITING_FOR_PLAN for d in decisions)


def test_replay_folds_in_plans_mode_by_default_and_matches(recs: list[JournalRecord]) -> None:
    decisions = fold_all(recs)
    auditor = Auditor()
    assert auditor.fold.preemption_mode == PLANS
    result = run(auditor, recs, as_recorded(decisions))
    assert result.identical, result.divergence
    assert result.matched == len(decisions) and result.events == len(recs)


def test_an_inline_replay_of_a_plans_journal_diverges_where_the_modes_differ(
    recs: list[JournalRecord],
) -> None:
    decisions = fold_all(recs)
    result = run(Auditor(fold=service_fold(INLINE)), recs, as_recorded(decisions))
    div = result.divergence
    assert div is not None and div.kind == CHANGED
    assert div.recorded is not None and div.recorded.reason == WAITING_FOR_PLAN
    assert div.expected is not None and div.expected.type == "Preempted"  # inline preempts
    assert div.recorded.workload == "team-a/high-1"
    assert div.event is not None and div.event.id == "Job/team-a/high-1@1"


def write_export(path: Path, recs: list[JournalRecord], *, end: int | None = None) -> int:
    decisions = fold_all(recs)
    with path.open("wb") as f:
        f.write(header_line(ExportHeader(JOURNAL_KIND, "t.journal", 0, 0, end, "test")))
        for r in recs:
            assert r.event is not None
            f.write(journal_line(r.offset, r.event.model_dump_json().encode()))
    with decisions_path(path).open("wb") as f:
        f.write(header_line(ExportHeader(DECISIONS_KIND, "t.decisions")))
        for i, d in enumerate(decisions):
            f.write(decision_line(i, 0, d.model_dump_json().encode()))
    return len(decisions)


def invoke(*args: str) -> tuple[int, str, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_cli_replay_of_an_export_with_plans(tmp_path: Path, recs: list[JournalRecord]) -> None:
    path = tmp_path / "j.jsonl"
    n = write_export(path, recs)
    code, out, _ = invoke("audit", "replay", "--file", str(path))
    assert code == 0, out
    assert f"{n} of {n} recomputed decisions matched" in out
    code, out, _ = invoke("audit", "replay", "--file", str(path), "--preemption", "plans")
    assert code == 0, out
    code, out, _ = invoke("audit", "replay", "--file", str(path), "--preemption", "inline")
    assert code == 1
    assert "(changed): same decision id, different content" in out
    code, _, err = invoke("audit", "replay", "--file", str(path), "--preemption", "later")
    assert code == 2 and "--preemption" in err and "Traceback" not in err


def test_cli_explain_of_a_head_waiting_for_its_plan(
    tmp_path: Path, recs: list[JournalRecord]
) -> None:
    # The export ends before the plan: high-1 waits for it.
    plan = next(r.offset for r in recs if isinstance(r.event, PreemptionPlan))
    path = tmp_path / "j.jsonl"
    write_export(path, recs, end=plan)
    code, out, _ = invoke("explain", "team-a/high-1", "--file", str(path), "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["state"] == "Inadmissible"
    assert doc["waiting"]["reason"] == WAITING_FOR_PLAN
    assert [s["decision"]["type"] for s in doc["history"]] == ["Inadmissible"]
    # Folded inline, the same journal would have preempted already (and wait for
    # the victim's pods, whose report the export does not reach): not what was decided.
    code, out, _ = invoke(
        "explain", "team-a/high-1", "--file", str(path), "--json", "--preemption", "inline"
    )
    assert code == 0, out
    inline = json.loads(out)
    assert inline["state"] == "Inadmissible"
    assert inline["history"] != doc["history"]
