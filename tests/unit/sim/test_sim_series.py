"""``kuota.sim.series``: the report's figures checked against the decisions they come from."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision
from kuota.quantity import parse_quantity
from kuota.sim.engine import Simulator
from kuota.sim.models import MIG, WHOLE, ScenarioBuilder
from kuota.sim.scenario import load_scenario
from kuota.sim.series import Recorder, Series, integral, percentile, summary, value_at, waits
from kuota.sim.trace import generate

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
GIB = 1024**3


def record(manifests: list[dict[str, object]]) -> tuple[Series, list[Decision]]:
    recorder = Recorder()
    decisions: list[Decision] = []
    for step in Simulator(manifests, fold=Fold()).steps(max_steps=1_000_000):
        recorder.observe(step.event, step.decisions)
        decisions.extend(step.decisions)
    return recorder.series, decisions


def scenario(name: str) -> tuple[Series, list[Decision]]:
    return record(load_scenario((SCENARIOS / name).read_text()))


def usage_integrals_from_decisions(decisions: list[Decision]) -> dict[tuple[str, str, str], float]:
    """Usage x time straight from the decisions: each admission holds its usage
    until the workload's Finished or, after a stop, the QuotaReleased."""
    held: dict[str, tuple[float, dict[tuple[str, str, str], float]]] = {}
    kept: dict[str, list[tuple[float, dict[tuple[str, str, str], float]]]] = {}
    area: dict[tuple[str, str, str], float] = {}

    def close(start: float, usage: dict[tuple[str, str, str], float], end: float) -> None:
        for key, amount in usage.items():
            area[key] = area.get(key, 0.0) + amount * (end - start)

    for d in decisions:
        key = d.workload or ""
        if d.type == "Admitted":
            usage = {
                (d.cluster_queue or "", flavor, resource): parse_quantity(q) / 1000
                for flavor, resources in (d.usage or {}).items()
                for resource, q in resources.items()
            }
            held[key] = (d.at, usage)
        elif d.type == "Finished" and key in held:
            close(*held.pop(key), d.at)
        elif d.type in ("Preempted", "Evicted") and key in held:
            kept.setdefault(key, []).append(held.pop(key))
        elif d.type == "QuotaReleased" and kept.get(key):
            close(*kept[key].pop(0), d.at)
    return area


def test_mig_article_usage_integral_and_waits_by_hand() -> None:
    series, _ = scenario("mig-memory-quota.yaml")
    key = ("gpu-shared", "h100", "gpu-memory")
    # train-1 80Gi 0-600 s, seven 10Gi slices 30-330 s, train-2 80Gi 330-930 s
    assert integral(series.usage[key], end=series.end) == (80 * 600 + 70 * 300 + 80 * 600) * GIB
    assert max(v for _, v in series.usage[key]) == 160 * GIB
    assert value_at(series.usage[key], series.end) == 0
    assert value_at(series.quota[key], 0) == 160 * GIB
    assert series.workloads["training/train-2"].wait == 270  # submitted at 60 s, admitted at 330 s
    values = waits(series)
    assert sorted(values) == [0.0] * 8 + [270.0]
    figures = summary(series)
    assert figures["waitSeconds"]["p50"] == 0  # type: ignore[index]
    assert figures["waitSeconds"]["p95"] == 270  # type: ignore[index]
    assert figures["queueLengthPeak"] == {"gpu-shared": 1.0}


def test_priority_preemption_waits_per_class_and_preemptions() -> None:
    series, decisions = scenario("priority-preemption.yaml")
    preempted = [d.at for d in decisions if d.type == "Preempted"]
    assert preempted and sorted(series.preemptions["research-cq"]) == sorted(preempted)
    figures = summary(series)
    by_class = figures["waitSecondsByPriorityClass"]
    assert set(by_class) == {"high", "low"}  # type: ignore[arg-type]
    # a low job waits its first wait plus the time from its preemption to its re-admission
    for name, record_ in series.workloads.items():
        admitted = [d.at for d in decisions if d.type == "Admitted" and d.workload == name]
        stopped = [d.at for d in decisions if d.type == "Preempted" and d.workload == name]
        expected = (
            admitted[0]
            - record_.submitted
            + sum(a - s for s, a in zip(stopped, admitted[1:], strict=True))
        )
        assert record_.wait == pytest.approx(expected)
    queue = series.queue_length["research-cq"]
    assert value_at(queue, series.end) == 0 and max(v for _, v in queue) >= 1


@pytest.mark.parametrize("model", [WHOLE, MIG], ids=lambda m: m.name)
def test_generated_trace_usage_integrals_match_the_decisions(model: object) -> None:
    trace = generate(jobs=150, seed=7, load_gpus=30)
    builder = ScenarioBuilder(trace, model=model, gpus_per_node=8)  # type: ignore[arg-type]
    manifests = builder.manifests(2)
    for manifest in manifests:  # a stopped Job's pods take 30 s to go: its quota is kept
        if manifest["kind"] == "Job":
            manifest["metadata"]["annotations"]["kuota.dev/stop-after"] = "30s"
    series, decisions = record(manifests)
    released = [d for d in decisions if d.type == "QuotaReleased"]
    assert released and all(
        any(
            p.at == r.at - 30 and p.workload == r.workload
            for p in decisions
            if p.type == "Preempted"
        )
        for r in released
    )
    expected = usage_integrals_from_decisions(decisions)
    assert expected and set(expected) == set(series.usage)
    for key, area in expected.items():
        assert integral(series.usage[key], end=series.end) == pytest.approx(area, rel=1e-12)
        assert value_at(series.usage[key], series.end) == 0  # everything finished
    # waits: percentiles of (admission - submission) where nothing was preempted
    first_admitted = {}
    for d in decisions:
        if d.type == "Admitted":
            first_admitted.setdefault(d.workload, d.at)
    assert len(first_admitted) == len(trace)
    preempted = {d.workload for d in decisions if d.type == "Preempted"}
    for job in trace:
        key = f"{job.team}/{job.name}"
        if key not in preempted:
            assert series.workloads[key].wait == pytest.approx(first_admitted[key] - job.submit_s)
    assert summary(series)["finished"] == len(trace)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2
    assert percentile([1, 2, 3, 4], 95) == 4
    assert percentile([5], 99) == 5
    assert percentile([1, math.inf], 50) == 1 and percentile([1, math.inf], 95) == math.inf
    assert math.isnan(percentile([], 95))


def test_a_job_never_admitted_waits_forever() -> None:
    trace = generate(jobs=5, seed=3, load_gpus=2)
    series, _ = record(ScenarioBuilder(trace, model=WHOLE, gpus_per_node=1).manifests(0))
    assert waits(series) == [math.inf] * 5
    figures = summary(series)
    assert figures["waitSeconds"]["neverAdmitted"] == 5  # type: ignore[index]
    assert figures["waitSeconds"]["p95"] is None  # type: ignore[index]
