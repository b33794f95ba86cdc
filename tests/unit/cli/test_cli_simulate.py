"""``kuota simulate``: output format, determinism and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kuota.cli import app

REPO = Path(__file__).resolve().parents[3]
SCENARIOS = REPO / "examples" / "scenarios"
KUOTA = Path(sys.executable).parent / "kuota"

KEY_ORDER = [
    "at", "type", "workload", "object", "clusterQueue", "flavors", "usage",
    "reason", "message", "preemptor", "policy", "victims", "requeueAt", "cohort", "quota",
]  # fmt: skip


def simulate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_same_file_same_bytes_across_processes() -> None:
    runs = [
        subprocess.run(
            [str(KUOTA), "simulate", str(SCENARIOS / "cohort-borrowing.yaml")],
            capture_output=True,
            check=True,
            timeout=120,
        )
        for _ in range(2)
    ]
    assert runs[0].stdout == runs[1].stdout
    assert runs[0].stdout.count(b"\n") >= 14  # 7 admissions + 7 finishes at least


def test_lines_are_compact_json_with_keys_in_a_fixed_order() -> None:
    code, out, _ = simulate(str(SCENARIOS / "mig-memory-quota.yaml"))
    assert code == 0
    lines = out.splitlines()
    times = []
    for line in lines:
        record = json.loads(line)
        assert list(record) == [k for k in KEY_ORDER if k in record]
        assert line == json.dumps(record, separators=(",", ":"), ensure_ascii=False)
        assert None not in record.values() and "" not in record.values()
        times.append(record["at"])
    assert times == sorted(times)
    quota = json.loads(lines[0])  # the ClusterQueue's quota takes effect first
    assert quota["type"] == "QuotaChanged" and quota["clusterQueue"] == "gpu-shared"
    assert quota["quota"] and quota["object"] == "ClusterQueue gpu-shared"
    first = next(r for r in map(json.loads, lines) if r["type"] != "QuotaChanged")
    assert first["at"] == 0 and isinstance(first["at"], int)
    assert first["type"] == "Admitted" and first["workload"] == "training/train-1"
    assert first["clusterQueue"] == "gpu-shared"


def test_summary_goes_to_stderr() -> None:
    code, out, err = simulate(str(SCENARIOS / "cohort-borrowing.yaml"))
    assert code == 0
    assert "team-alpha-cq" in err and "gpu-pool" in err
    assert "decisions: Admitted 7, Finished 7, Inadmissible 2" in err
    assert "settled at 1320s" in err
    alpha = next(line for line in err.splitlines() if "team-alpha-cq" in line).split()
    # usage, nominal (+borrowing limit), borrowed at the end, then the peak:
    # 12 = nominal 8 + borrowed 4 (the table of `kuota status`, docs/design/quota-rows.md)
    assert alpha[3:9] == ["0", "8", "(+4)", "0", "12", "0"]
    decided = out.replace('"clusterQueue":"team-alpha-cq"', "")
    assert "team-alpha-cq" not in decided.replace('"object":"ClusterQueue team-alpha-cq"', "")


def test_until_stops_early() -> None:
    code, out, _ = simulate(str(SCENARIOS / "cohort-borrowing.yaml"), "--until", "2m")
    assert code == 0
    times = [json.loads(line)["at"] for line in out.splitlines()]
    assert times and max(times) <= 120
    assert not any(json.loads(line)["type"] == "Finished" for line in out.splitlines())


def test_unknown_kind_is_a_rejected_decision(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    code, out, _ = simulate(str(path), "--no-summary")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in records] == ["Rejected"]
    assert "Gadget" in records[0]["object"]


ERRORS = {
    "malformed YAML": ("kind: Job\nmetadata: {name: [\n", "malformed YAML"),
    "bad duration": (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: ns\n"
        "  annotations: {kuota.dev/run-for: 5 minutes}\n",
        "Job ns/j (document 1): annotation kuota.dev/run-for",
    ),
    "not a mapping": ("- a\n- b\n", "not a mapping"),
}


@pytest.mark.parametrize(("text", "message"), ERRORS.values(), ids=ERRORS.keys())
def test_bad_input_exits_2_with_a_clear_message(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, out, err = simulate(str(path))
    assert code == 2
    assert out == ""
    assert message in err and "Traceback" not in err
    assert str(path) in err


def test_missing_file_and_bad_until_exit_2(tmp_path: Path) -> None:
    code, _, err = simulate(str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read" in err
    code, _, err = simulate(str(SCENARIOS / "whole-gpu.yaml"), "--until", "soon")
    assert code == 2 and "until" in err
