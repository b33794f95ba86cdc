"""``kuota.sim.trace``: the seeded generator and the CSV reader's errors (with line numbers)."""

from __future__ import annotations

import pytest

from kuota.sim.trace import (
    FRACTIONAL_SHARE,
    GPU_MEMORY_GIB,
    TraceError,
    generate,
    read_csv,
    write_csv,
)

HEADER = "submit_s,duration_s,gpus,gpu_memory_gib,priority,team\n"
COLS = "submit_s,duration_s,gpus,gpu_memory_gib,priority"


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    one = write_csv(generate(jobs=300, seed=5))
    assert one == write_csv(generate(jobs=300, seed=5))
    assert one != write_csv(generate(jobs=300, seed=6))


def test_generated_distributions_follow_the_published_trace() -> None:
    trace = generate(jobs=5000, seed=1, load_gpus=50)
    fractional = [job for job in trace if job.fractional]
    assert abs(len(fractional) / len(trace) - FRACTIONAL_SHARE) < 0.03
    assert all(1 <= job.gpu_memory_gib <= 72 for job in fractional)  # gpu_milli <= 900
    assert all(job.gpus in (1, 2, 4, 8) for job in trace if not job.fractional)
    durations = sorted(job.duration_s for job in trace)
    median = durations[len(durations) // 2]
    assert 450 < median < 950  # the published median is 655 s
    submits = [job.submit_s for job in trace]
    assert submits == sorted(submits) and submits[0] == 0
    # the offered load, in whole GPUs, is about what was asked
    span = submits[-1]
    gpu_seconds = sum(job.duration_s * (job.gpus or 1) for job in trace)
    assert 35 < gpu_seconds / span < 70


def test_csv_round_trip() -> None:
    trace = generate(jobs=50, seed=2)
    assert read_csv(write_csv(trace)) == trace


def test_columns_in_any_order_blank_lines_skipped() -> None:
    text = (
        "team,priority,gpu_memory_gib,gpus,duration_s,submit_s\n\nml,5,20,,60,0\nml,0,,2,30.5,1\n"
    )
    jobs = read_csv(text)
    assert [(j.team, j.priority, j.gpu_memory_gib, j.gpus, j.duration_s) for j in jobs] == [
        ("ml", 5, 20, 0, 60.0),
        ("ml", 0, 0, 2, 30.5),
    ]


BAD = [
    ("negative duration", HEADER + "0,10,1,,0,a\n5,-3,1,,0,a\n", "t.csv:3: duration_s: -3 is"),
    ("zero duration", HEADER + "0,0,1,,0,a\n", "t.csv:2: duration_s: 0"),
    ("not a number", HEADER + "0,ten,1,,0,a\n", "t.csv:2: duration_s: 'ten' is not a number"),
    ("negative submit", HEADER + "-1,10,1,,0,a\n", "t.csv:2: submit_s: -1 is negative"),
    ("infinite", HEADER + "0,inf,1,,0,a\n", "t.csv:2: duration_s: 'inf' is not a finite"),
    ("unclosed quote", HEADER + "0,10,1,,0,a\n0,\"10,1,,0,a\n", "t.csv:3: malformed CSV"),
    ("too few fields", HEADER + "0,10,1,,0,a\n0,10,1\n", "t.csv:3: 3 fields, the header has 6"),
    ("gpus and memory", HEADER + "0,10,1,20,0,a\n", "t.csv:2: give gpus"),
    ("neither", HEADER + "0,10,,,0,a\n", "t.csv:2: give gpus"),
    ("fractional gpus", HEADER + "0,10,1.5,,0,a\n", "t.csv:2: gpus: 1.5 is not a whole number"),
    ("memory over a GPU", HEADER + "0,10,,81,0,a\n", "t.csv:2: gpu_memory_gib: 81 is absurdly"),
    ("absurd gpus", HEADER + "0,10,99999,,0,a\n", "t.csv:2: gpus: 99999 is absurdly large"),
    ("bad priority", HEADER + "0,10,1,,high,a\n", "t.csv:2: priority: 'high' is not an integer"),
    ("bad team", HEADER + "0,10,1,,0,Team A\n", "t.csv:2: team: 'Team A' is not a namespace"),
    ("unknown column", COLS + ",team,x\n", "t.csv:1: unknown column 'x'"),
    ("missing column", COLS + "\n", "t.csv:1: missing column 'team'"),
    ("empty file", "", "t.csv: empty file"),
    ("no jobs", HEADER, "t.csv: no jobs"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in BAD], ids=[c[0] for c in BAD])
def test_bad_input_names_the_line(text: str, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        read_csv(text, source="t.csv")
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    "kwargs", [{"jobs": 0}, {"load_gpus": 0}, {"teams": 0}, {"duration_scale": -1}]
)
def test_generator_refuses_absurd_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(TraceError):
        generate(**{"jobs": 10, "seed": 1, **kwargs})  # type: ignore[arg-type]


def test_fraction_is_memory_of_an_80_gib_gpu() -> None:
    assert GPU_MEMORY_GIB == 80
    jobs = read_csv(HEADER + "0,10,,80,0,a\n")
    assert jobs[0].fractional and jobs[0].gpu_memory_gib == 80


def test_fractional_share_can_be_changed() -> None:
    assert all(job.fractional for job in generate(jobs=100, seed=1, fractional_share=1.0))
    assert not any(job.fractional for job in generate(jobs=100, seed=1, fractional_share=0.0))
    with pytest.raises(TraceError, match="fractional share"):
        generate(jobs=10, seed=1, fractional_share=1.5)


def test_the_example_trace_reads() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / "traces" / "tiny.csv"
    jobs = read_csv(path.read_text(), source=str(path))
    assert [(j.gpus, j.gpu_memory_gib) for j in jobs] == [(0, 10)] * 4 + [(2, 0)]
