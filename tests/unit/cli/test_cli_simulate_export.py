"""``kuota simulate --export``: the journal and decisions pair that ``kuota explain
--file`` and ``kuota audit replay --file`` read, with no Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from builders.manifests import (
    cluster_queue,
    configuration,
    device,
    device_class,
    flavor,
    job,
    local_queue,
    node,
    resource_claim,
    resource_claim_template,
    resource_slice,
)
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


def test_a_scenarios_resource_claims_are_folded_explained_and_replayed(tmp_path: Path) -> None:
    """#17: a claim of someone else's takes node-a's GPUs until it is deleted; the
    Job waits NoNodePlacement meanwhile; explain and replay read the export."""
    gpu = "gpu.nvidia.com"
    theirs = resource_claim(
        "theirs",
        namespace="other",
        device_class=gpu,
        count=2,
        node="node-a",
        allocated=[("node-a", "gpu-0"), ("node-a", "gpu-1")],
    )
    theirs["metadata"]["annotations"] = {"kuota.dev/delete-at": "60s"}
    train = job(
        "train",
        namespace="team",
        claims={"gpu": "two"},
        annotations={"kuota.dev/submit-at": "10s", "kuota.dev/run-for": "30s"},
    )
    documents = [
        configuration(
            resources={"deviceClassMappings": [{"name": "gpus", "deviceClassNames": [gpu]}]}
        ),
        device_class(gpu),
        flavor("default"),
        cluster_queue("cq", quotas={"gpus": 8}, flavor="default"),
        local_queue("lq", namespace="team", cluster_queue="cq"),
        resource_claim_template("two", namespace="team", device_class=gpu, count=2),
        node("node-a"),
        resource_slice("node-a", devices=[device("gpu-0"), device("gpu-1")]),
        theirs,
        train,
    ]
    scenario = tmp_path / "claims.yaml"
    scenario.write_text(yaml.safe_dump_all(documents))
    path = tmp_path / "journal.jsonl"
    code, out, err = invoke("simulate", str(scenario), "--export", str(path))
    assert code == 0, err
    decisions = [json.loads(x) for x in out.splitlines()]
    train = [(d["type"], d.get("reason"), d["at"]) for d in decisions if d.get("workload")]
    assert train == [
        ("Inadmissible", "NoNodePlacement", 10),
        ("Admitted", None, 60),
        ("Finished", "Succeeded", 90),
    ]
    code, out, _ = invoke("explain", "team/train", "--file", str(path))
    assert code == 0 and "NoNodePlacement" in out and "node-a has 0 free" in out, out
    code, out, _ = invoke("audit", "replay", "--file", str(path), "--json")
    assert code == 0 and json.loads(out)["identical"], out
