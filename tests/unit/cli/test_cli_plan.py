"""``kuota plan`` and ``kuota simulate --report``: the command lines, their output and errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kuota.cli import app
from kuota.sim.models import MPS
from kuota.sim.plan import probe

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
TINY = (
    "submit_s,duration_s,gpus,gpu_memory_gib,priority,team\n"
    + "0,1000,,10,0,inference\n" * 4
    + "0,1000,2,,0,training\n"
)


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_plan_on_a_tiny_trace_last_line(tmp_path: Path) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text(TINY)
    code, out, err = run(
        "plan", str(trace), "--gpus-per-node", "1", "--report", str(tmp_path / "r")
    )
    assert code == 0, err
    lines = out.splitlines()
    mps = "3" if probe(MPS) is None else "n/a"
    assert lines[-1] == (
        f"jobs=5 slo=p95_wait<=300s gpus_whole=6 gpus_mig=3 gpus_mps={mps} saving_mig_pct=50"
    )
    assert lines[0].startswith("whole: 6 GPUs (6 nodes x 1)")
    if mps == "n/a":
        assert any(line.startswith("mps: n/a:") and "capacity" in line for line in lines)
    plan = json.loads((tmp_path / "r" / "plan.json").read_text())
    assert plan["line"] == lines[-1]
    assert next(r["nodes"] for r in plan["models"]["whole"]["runs"] if r["met"]) == 6
    assert (tmp_path / "r" / "mig" / "report.html").exists()
    summary = json.loads((tmp_path / "r" / "mig" / "summary.json").read_text())
    assert summary["gpus"] == 3 and summary["waitSeconds"]["p95"] == 0


def test_plan_generates_a_trace_and_writes_it() -> None:
    code, out, err = run(
        "plan", "--jobs", "40", "--seed", "3", "--load-gpus", "6", "--models", "whole,mig",
        "--write-trace", "-",
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("submit_s,duration_s,gpus,gpu_memory_gib,priority,team\n")
    last = out.splitlines()[-1]
    assert last.startswith("jobs=40 slo=p95_wait<=300s gpus_whole=") and "gpus_mps=n/a" in last


def test_plan_bad_csv_names_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text(TINY + "10,-5,1,,0,training\n")
    code, out, err = run("plan", str(trace))
    assert code == 2 and out == ""
    assert f"{trace}:7: duration_s: -5 is negative" in err


def test_plan_bad_options() -> None:
    for args, message in [
        (["--models", "whole,tpu"], "unknown model 'tpu'"),
        (["--percentile", "0"], "--percentile"),
        (["--gpus-per-node", "0"], "--gpus-per-node"),
        (["--jobs", "0"], "jobs: 0"),
    ]:
        code, _, err = run("plan", *args)
        assert code == 2 and message in err, (args, err)


def test_simulate_report(tmp_path: Path) -> None:
    code, out, err = run(
        "simulate", str(SCENARIOS / "mig-memory-quota.yaml"), "--report", str(tmp_path)
    )
    assert code == 0, err
    assert out.count("\n") >= 18  # the decisions are still printed
    assert f"report: {tmp_path}/report.html" in err
    assert "simulating" not in err  # no progress bar when stderr is not a terminal
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["scenario"].endswith("mig-memory-quota.yaml")
    assert summary["waitSeconds"]["max"] == 270
