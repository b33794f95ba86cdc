"""``kuota simulate``: rejected objects in the summary, ``--strict``, and the
messages a newcomer reads (``--help``, the ``--until`` cut-off, the runaway guard)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kuota.cli import app

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"

BAD_TEAM = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: lots}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: team-a}
spec: {clusterQueue: team-a-cq}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train-1
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {requests: {cpu: "1"}}}
"""


def simulate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_rejected_objects_are_in_the_summary_and_the_workload_says_why(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(BAD_TEAM)
    code, out, err = simulate(str(path))
    assert code == 0  # without --strict a rejection is an outcome, not a failure
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in records] == ["Rejected", "Inadmissible"]
    assert records[1]["message"].startswith("ClusterQueue team-a-cq was rejected: spec.")
    assert "Rejected" in err
    row = next(line for line in err.splitlines() if "team-a-cq" in line).split()
    assert row[:3] == ["ClusterQueue", "team-a-cq", "InvalidObject"]


def test_strict_fails_a_run_with_anything_rejected(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(BAD_TEAM)
    code, out, err = simulate(str(path), "--strict", "--no-summary")
    assert code == 1
    assert out.count("\n") == 2, "the decisions are printed all the same"
    assert "kuota: error: --strict: 1 Rejected decision, 1 still rejected at the end" in err
    code, _, err = simulate(str(SCENARIOS / "whole-gpu.yaml"), "--strict", "--no-summary")
    assert code == 0 and err == ""


def test_until_names_the_cut_off() -> None:
    code, _, err = simulate(str(SCENARIOS / "cohort-borrowing.yaml"), "--until", "2m")
    assert code == 0
    assert "stopped at --until 120s after" in err


def test_the_runaway_guard_names_until(tmp_path: Path) -> None:
    code, _, err = simulate(str(SCENARIOS / "whole-gpu.yaml"), "--max-events", "5")
    assert code == 1
    assert "did not settle within 5 events" in err and "--until" in err


def test_help_lists_the_annotations_and_links_the_page() -> None:
    result = CliRunner().invoke(app, ["simulate", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for annotation in ("submit-at", "run-for", "ready-after", "delete-at", "stop-after"):
        assert f"kuota.dev/{annotation}:" in text
    assert "docs/scenarios.md" in text
    assert "--export" in text and "--strict" in text
