"""bench_vs_kueue's figures: /proc parsing, percentiles, CPU per Job, the baseline shape's
time to admission and usage %, and the last line's exact shape."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from bench_vs_kueue_figures import (
    JobTimeline,
    cpu_used,
    last_line,
    ms_per_job,
    parse_cpu_table,
    parse_peak_rss,
    per_process_line,
    percentile,
    shape_figures,
    stat_cpu_seconds,
    status_hwm_mb,
)

# /proc/<pid>/stat of a process whose name holds a space and a parenthesis
STAT = "4242 (kube (api) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 9 0 1 2 3"


def test_stat_counts_fields_after_the_last_parenthesis() -> None:
    assert stat_cpu_seconds(STAT, 100) == pytest.approx(4.0)  # (250 + 150) / 100


def test_stat_fields_shifted_by_the_name_would_be_wrong() -> None:
    # the same stat with a plain name gives the same figure: the name does not shift fields
    assert stat_cpu_seconds(STAT.replace("(kube (api) x)", "(etcd)"), 100) == pytest.approx(4.0)


def test_vm_hwm_in_mib() -> None:
    status = "Name:\tkueue\nVmPeak:\t 900000 kB\nVmHWM:\t  419840 kB\nVmRSS:\t 300000 kB\n"
    assert status_hwm_mb(status) == pytest.approx(410.0)
    assert status_hwm_mb("Name:\tgone\n") == 0.0


def test_percentile_uses_the_index_bench_e2e_uses() -> None:
    xs = [float(i) for i in range(1, 201)]  # 1..200
    assert percentile(xs, 99) == 199.0
    assert percentile(xs, 50) == 101.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 3.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 99) == 0.0
    assert percentile(xs, 100) == 200.0  # clamped to the last


def test_cpu_table_of_bench_e2e() -> None:
    line = (
        "bench_e2e: CPU in the 12s window (load average 3.1 -> 4.0 on 2 cores): "
        "kube-apiserver 9.1s (76%), kuota-admission 3.2s (27%), kafka 1s (8%), "
        "bench_e2e 0.4s (3%)"
    )
    assert parse_cpu_table(line) == {
        "kube-apiserver": 9.1,
        "kuota-admission": 3.2,
        "kafka": 1.0,
        "bench_e2e": 0.4,
    }
    assert parse_cpu_table("no table here") == {}


def test_peak_rss_of_bench_e2e() -> None:
    text = "bench_e2e: created 5 in 1.0s (...), services' peak RSS 412 MB\nbench_e2e: x"
    assert parse_peak_rss(text) == 412.0
    assert parse_peak_rss("nothing") is None


def test_cpu_used_leaves_out_gone_and_new_processes() -> None:
    before = {"etcd": 10.0, "kueue": 5.0, "gone": 1.0}
    after = {"etcd": 12.5, "kueue": 5.0, "gone": None, "new": 3.0}
    assert cpu_used(before, after) == {"etcd": 2.5, "kueue": 0.0}


def test_ms_per_job_largest_first_and_no_jobs_is_an_error() -> None:
    per = ms_per_job({"kueue": 1.0, "kube-apiserver": 3.0, "etcd": 1.0}, 500)
    assert list(per) == ["kube-apiserver", "etcd", "kueue"]
    assert per["kube-apiserver"] == pytest.approx(6.0)
    with pytest.raises(ValueError):
        ms_per_job({"kueue": 1.0}, 0)
    line = per_process_line("kueue", per)
    assert line == "kueue cpu_ms_per_job total=10.0 kube-apiserver=6.0 etcd=2.0 kueue=2.0"


def test_last_line_is_the_issues_format() -> None:
    kuota = {"admitted_per_s": 168.0, "p99_ms": 11915.0, "cpu_ms_per_job": 8.5, "rss_mb": 801.0}
    kueue = {"admitted_per_s": 29.0, "p99_ms": 68756.0, "cpu_ms_per_job": 43.5, "rss_mb": 413.0}
    line = last_line(2000, kuota, kueue)
    keys = re.findall(r"(\w+)=", line)
    assert keys == [
        "kueue",
        "jobs",
        "kuota_admitted_per_s",
        "kueue_admitted_per_s",
        "throughput_ratio",
        "kuota_p99_ms",
        "kueue_p99_ms",
        "kuota_cpu_ms_per_job",
        "kueue_cpu_ms_per_job",
        "kuota_rss_mb",
        "kueue_rss_mb",
    ]
    assert "throughput_ratio=5.79 " in line
    assert line.startswith("kueue=v0.19.2 jobs=2000 ")


def test_timeline_ignores_repeats_and_ends_runs() -> None:
    t = JobTimeline(0.0, "small", 1000)
    t.observe(0.0, suspended=True, done=False)
    t.observe(1.0, suspended=False, done=False)
    t.observe(1.5, suspended=False, done=False)  # a status write: same run
    t.observe(2.0, suspended=True, done=False)  # preempted
    t.observe(3.0, suspended=False, done=False)
    t.observe(4.0, suspended=False, done=True)
    t.observe(5.0, suspended=False, done=True)
    assert t.runs == [(1.0, 2.0), (3.0, 4.0)]
    assert t.finished == 4.0
    assert t.admitted == 3.0


def test_shape_figures_usage_and_time_to_admission() -> None:
    a = JobTimeline(0.0, "small", 1000, [(1.0, 3.0)], 3.0)  # waited 1 s, 1 CPU x 2 s
    b = JobTimeline(0.0, "large", 2000, [(0.0, 1.0), (2.0, 4.0)], 4.0)  # preempted once
    c = JobTimeline(1.0, "small", 1000, [(3.0, None)])  # still running: held to the end
    f = shape_figures([a, b, c], nominal_milli=4000)
    assert f.total == 3 and f.finished == 2 and f.preempted == 1
    assert f.span_s == 4.0
    # held: a 2000, b 2000 + 4000, c 1000 x (4 - 3) = 9000 milli-CPU-s of 4000 x 4
    assert f.usage_pct == pytest.approx(100 * 9000 / 16000)
    assert f.tta_s == {"large": 2.0, "small": 1.0}  # b's last admission; c unfinished
    with pytest.raises(ValueError):
        shape_figures([], 1000)


def test_stack_pids_leave_out_the_operators_of_other_kinds(tmp_path: Path) -> None:
    # Both stacks may run the training-operator and KubeRay; they queue nothing,
    # so the CPU and memory figures never count them.
    from bench_e2e_report import stack_pids

    run = tmp_path / "run"
    run.mkdir()
    for name, pid in (("kueue", 11), ("kube-apiserver", 12), ("training", 13), ("kuberay", 14)):
        (run / f"{name}.pid").write_text(f"{pid}\n")
    assert stack_pids(tmp_path) == {"kube-apiserver": 12, "kueue": 11}
