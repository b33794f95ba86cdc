"""``kuota simulate --export``: the journal and decisions pair that ``kuota explain
--file`` and ``kuota audit replay --file`` read, with no Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kuota.audit.files import read_decisions, read_header, read_journal
from kuota.cli import app

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("mode", ["inline", "plans"])
def test_an_export_replays_identical_in_the_mode_it_was_folded(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "journal.jsonl"
    scenario = str(SCENARIOS / "cohort-reclaim.yaml")  # a preemption: the modes differ
    code, out, err = invoke("simulate", scenario, "--preemption", mode, "--export", str(path))
    assert code == 0, err
    events = 27 if mode == "inline" else 28  # plans mode journals the plan too
    assert f"exported {events} journal events to {path}" in err
    header = read_header(path)
    assert header is not None and header.end == events and header.preemption == mode
    assert header.end_reason == "kuota simulate: settled at 1800s"
    assert [r.offset for r in read_journal(path)] == list(range(events))
    recorded = [r.decision for r in read_decisions(Path(f"{path}.decisions"))]
    assert len(recorded) == len(out.splitlines())  # every decision printed, in order
    assert [d.type for d in recorded if d] == [json.loads(x)["type"] for x in out.splitlines()]
    # replay takes the export's mode when --preemption is not given
    code, out, _ = invoke("audit", "replay", "--file", str(path), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["identical"] and doc["matched"] == len(recorded)
    other = "plans" if mode == "inline" else "inline"
    code, _, _ = invoke("audit", "replay", "--file", str(path), "--preemption", other)
    assert code == 1, "the other mode decides the reclaim differently"


def test_explain_reads_an_export(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    scenario = str(SCENARIOS / "cohort-reclaim.yaml")
    assert invoke("simulate", scenario, "--export", str(path))[0] == 0
    code, out, _ = invoke("explain", "team-beta/beta-3", "--file", str(path))
    assert code == 0, out
    assert "team-beta/beta-3  state: Finished" in out
    assert "(as preemptor)" in out and "InCohortReclamation" in out


def test_an_until_run_exports_what_it_applied(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    code, _, err = invoke(
        "simulate", str(SCENARIOS / "cohort-reclaim.yaml"), "--until", "3m", "--export", str(path)
    )
    assert code == 0, err
    header = read_header(path)
    assert header is not None and header.end_reason == "kuota simulate: stopped at --until 180s"
    assert max(r.event.at for r in read_journal(path) if r.event) <= 180
    assert invoke("audit", "replay", "--file", str(path))[0] == 0


def test_bad_input_writes_no_export(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n"
        "  annotations: {kuota.dev/run-for: later}\n"
    )
    path = tmp_path / "journal.jsonl"
    code, _, err = invoke("simulate", str(bad), "--export", str(path))
    assert code == 2 and "kuota.dev/run-for" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_an_export_into_a_missing_folder_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "journal.jsonl"
    code, _, err = invoke("simulate", str(SCENARIOS / "whole-gpu.yaml"), "--export", str(path))
    assert code == 2
    assert f"--export {path}: cannot write: No such file or directory" in err
