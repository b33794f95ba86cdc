"""``kuota audit replay`` and ``kuota explain`` offline (``--file``): output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_audit_files import write_export
from typer.testing import CliRunner

from kuota.cli import app

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_commands_are_registered() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    for name in ("audit", "journal", "explain", "events", "status", "simulate"):
        assert name in out, name


def test_offline_replay_of_an_identical_export(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    n = write_export(path, end=10_000)
    code, out, _ = invoke("audit", "replay", "--file", str(path))
    assert code == 0, out
    assert "audit: identical" in out and f"{n} of {n} recomputed decisions matched" in out
    assert out.strip().splitlines()[-1].startswith("events_per_s=")


def test_offline_replay_of_a_tampered_export_exits_1_with_the_divergence(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_export(path, tamper=5)  # #0 is the ClusterQueue's QuotaChanged
    code, out, _ = invoke("audit", "replay", "--file", str(path))
    assert code == 1
    assert "DIVERGENCE at decision #5 (changed): same decision id, different content" in out
    assert "differs:  message: expected \"couldn't assign flavors" in out
    assert "recorded 'forged'" in out
    assert "expected JSON:" in out and "recorded JSON:" in out and "event JSON:" in out
    assert "events_per_s=" in out


def test_replay_json(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_export(path, tamper=2)
    code, out, _ = invoke("audit", "replay", "--file", str(path), "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["identical"] is False and doc["divergence"]["index"] == 2
    assert isinstance(doc["events_per_s"], int)
    code, out, _ = invoke("audit", "replay", "--file", str(path), "--json", "--from-offset", "9")
    doc = json.loads(out)
    assert code == 0 and doc["identical"] and doc["ignored"] > 0, "the tamper is before offset 9"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["audit", "replay", "--file", "/nonexistent/j"], "no such file"),
        (["audit", "replay", "--snapshot", "--from-offset", "3"], "exclude each other"),
        (["explain", "no-namespace"], "give the workload as namespace/name"),
        (["explain", "ns/nosuchkind/x"], "namespace/<kind>/name, <kind> one of"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    code, _, err = invoke(*args)
    assert code == 2 and message in err and "Traceback" not in err


def test_explain_from_an_export(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_export(path)
    code, out, _ = invoke("explain", "team-a/j7", "--file", str(path))
    assert code == 0, out
    assert "team-a/j7  state: Inadmissible" in out
    assert "Inadmissible" in out and "InsufficientQuota" in out
    assert "quota after: cq-gpu: gpu-a/nvidia.com/gpu 4/4 · admitted 4 · pending" in out
    # 1-based for people (j6 is ahead, so j7 is second); --json keeps the 0-based 1
    assert (
        "waiting: position 2 of 3 in ClusterQueue cq-gpu (1 is the next to be tried), "
        "position 2 in LocalQueue lq"
    ) in out
    assert "just ahead: team-a/j6" in out
    assert "why (since 2026-01-01T00:00:" in out
    code, out, _ = invoke("explain", "team-a/j7", "--file", str(path), "--json")
    waiting = json.loads(out)["waiting"]
    assert waiting["position_in_cluster_queue"] == 1 and waiting["position_in_local_queue"] == 1
    code, out, _ = invoke("explain", "team-a/j0", "--file", str(path), "--json")
    doc = json.loads(out)
    assert [s["decision"]["type"] for s in doc["history"]] == ["Admitted", "Finished"]
    assert doc["state"] == "Finished" and doc["waiting"] is None
