from __future__ import annotations

import io

import pytest
from rich.console import Console

from kuota.core.quota.rows import ClusterQueueSummary, QuotaRow
from kuota.events.schema import Decision
from kuota.sim.report import PeakUsage, render_summary


def decision(kind: str, workload: str, gpus: str | None = None) -> Decision:
    usage = {"h100": {"nvidia.com/gpu": gpus}} if gpus is not None else None
    return Decision(
        id="d", cause="c", at=0, type=kind, workload=workload, cluster_queue="cq", usage=usage
    )  # type: ignore[arg-type]


PEAKS = {
    "admissions add up": ([("Admitted", "a", "4"), ("Admitted", "b", "2")], 6000),
    "finish frees": (
        [("Admitted", "a", "4"), ("Finished", "a", None), ("Admitted", "b", "2")],
        4000,
    ),
    "preemption frees": (
        [("Admitted", "a", "4"), ("Preempted", "a", None), ("Admitted", "b", "3")],
        4000,
    ),
    "re-admission replaces": (
        [("Admitted", "a", "4"), ("Admitted", "a", "1"), ("Admitted", "b", "2")],
        4000,
    ),
    "inadmissible holds nothing": ([("Inadmissible", "a", None)], 0),
}


@pytest.mark.parametrize("steps, peak", PEAKS.values(), ids=PEAKS.keys())
def test_peak_usage(steps: list[tuple[str, str, str | None]], peak: int) -> None:
    tracker = PeakUsage()
    for kind, workload, gpus in steps:
        tracker.observe(decision(kind, workload, gpus))
    assert tracker.peak.get(("cq", "h100", "nvidia.com/gpu"), 0) == peak


def test_render_summary() -> None:
    buffer = io.StringIO()
    render_summary(
        [
            ClusterQueueSummary(
                "team-alpha-cq",
                "gpu-pool",
                (QuotaRow("team-alpha-cq", "h100", "nvidia.com/gpu", 8000, 4000, None, 12000),),
                pending=3,
                admitted=3,
            )
        ],
        counts={"Finished": 1, "Admitted": 3},
        end=90.5,
        events=7,
        settled=False,
        peaks={("team-alpha-cq", "h100", "nvidia.com/gpu"): 12000},
        console=Console(file=buffer, width=200),
    )
    text = buffer.getvalue()
    row = next(line for line in text.splitlines() if "team-alpha-cq" in line).split()
    # The table of `kuota status` (kuota.status.render): usage, nominal (+limit),
    # borrowed, then the run's peak.
    assert row == [
        "team-alpha-cq",
        "gpu-pool",
        "h100/nvidia.com/gpu",
        "12",
        "8",
        "(+4)",
        "4",
        "12",
        "3",
        "3",
    ]
    assert "decisions: Admitted 3, Finished 1" in text  # schema order, not insertion order
    assert "stopped at 90.5s after 7 events" in text
    # what the Admitted column counts (the end state, not the run's admissions)
    assert "Admitted: workloads still holding quota then" in " ".join(text.split())


def test_render_summary_names_the_until_cut_off_and_the_rejected_objects() -> None:
    buffer = io.StringIO()
    render_summary(
        [],
        counts={"Rejected": 1},
        end=60,
        events=7,
        settled=False,
        until=90,
        rejections=[("ClusterQueue team-a-cq", "InvalidObject", "ClusterQueue team-a-cq: bad")],
        console=Console(file=buffer, width=200),
    )
    text = buffer.getvalue()
    assert "stopped at --until 90s after 7 events (the last at 60s)" in text
    row = next(line for line in text.splitlines() if "team-a-cq" in line).split()
    assert row[:3] == ["ClusterQueue", "team-a-cq", "InvalidObject"]
