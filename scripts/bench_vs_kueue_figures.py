"""The figures of ``scripts/bench_vs_kueue.py``, as pure functions over what was read.

/proc parsing (CPU seconds, peak RSS), percentiles, CPU per admitted Job per
process, and the baseline shape's per-class time to admission and usage %
from a watch's timeline of every Job. No clock, no I/O beyond the /proc reads
the callers hand in as text: ``tests/unit/test_bench_vs_kueue_figures.py``
checks each one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# bench_e2e's CPU table: "kuota-admission 3.2s (40%), kube-apiserver 9.1s (113%), ..."
_CPU_ITEM = re.compile(r"(\S+) (\d+(?:\.\d+)?)s \(\d+%\)")
# bench_e2e's summary: "... services' peak RSS 412 MB"
_PEAK_RSS = re.compile(r"services' peak RSS (\d+(?:\.\d+)?) MB")


def percentile(sorted_values: list[float], p: float) -> float:
    """The value at index ``floor(p% x n)`` of an ascending list (0.0 when empty), the
    definition ``bench_e2e`` uses, so both systems' p99 are read the same way: p99 of
    200 values is the 199th smallest (index 198), p50 of 4 the third."""
    if not sorted_values:
        return 0.0
    n = len(sorted_values)
    return sorted_values[max(0, min(n - 1, int(p * n / 100)))]


def stat_cpu_seconds(stat_text: str, ticks_per_s: int) -> float:
    """User + system seconds from the text of ``/proc/<pid>/stat``.

    The command name (field 2) may hold spaces and parentheses, so fields are
    counted after its LAST ``)``: utime and stime are fields 14 and 15.
    """
    fields = stat_text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def status_hwm_mb(status_text: str) -> float:
    """Peak resident set (``VmHWM``) in MiB from the text of ``/proc/<pid>/status``."""
    for line in status_text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def parse_cpu_table(line: str) -> dict[str, float]:
    """bench_e2e's "CPU in the Ns window (...): name Ns (P%), ..." line -> seconds per process."""
    _, sep, table = line.partition("):")
    return {name: float(s) for name, s in _CPU_ITEM.findall(table if sep else line)}


def parse_peak_rss(text: str) -> float | None:
    """bench_e2e's "services' peak RSS N MB" (the five services' VmHWM summed)."""
    m = _PEAK_RSS.search(text)
    return float(m.group(1)) if m else None


def cpu_used(before: Mapping[str, float], after: Mapping[str, float | None]) -> dict[str, float]:
    """CPU seconds each process used in the window (a process gone or new is left out)."""
    return {
        name: now - before[name]
        for name, now in after.items()
        if now is not None and name in before and now >= before[name]
    }


def ms_per_job(used: Mapping[str, float], jobs: int) -> dict[str, float]:
    """Per process, CPU-milliseconds per admitted Job, largest first."""
    if jobs <= 0:
        raise ValueError("no Job was admitted")
    per = {name: 1000 * s / jobs for name, s in used.items()}
    return dict(sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))


def per_process_line(system: str, per: Mapping[str, float]) -> str:
    """``kuota cpu_ms_per_job total=8.5 kube-apiserver=3.1 ...`` (processes largest first)."""
    parts = " ".join(f"{name}={ms:.1f}" for name, ms in per.items())
    return f"{system} cpu_ms_per_job total={sum(per.values()):.1f} {parts}".rstrip()


def last_line(jobs: int, kuota: Mapping[str, float], kueue: Mapping[str, float]) -> str:
    """The issue's line, exactly: the ten figures in its order."""
    ratio = kuota["admitted_per_s"] / max(kueue["admitted_per_s"], 1e-9)
    return (
        f"kueue=v0.19.2 jobs={jobs} "
        f"kuota_admitted_per_s={kuota['admitted_per_s']:.0f} "
        f"kueue_admitted_per_s={kueue['admitted_per_s']:.0f} "
        f"throughput_ratio={ratio:.2f} "
        f"kuota_p99_ms={kuota['p99_ms']:.0f} kueue_p99_ms={kueue['p99_ms']:.0f} "
        f"kuota_cpu_ms_per_job={kuota['cpu_ms_per_job']:.1f} "
        f"kueue_cpu_ms_per_job={kueue['cpu_ms_per_job']:.1f} "
        f"kuota_rss_mb={kuota['rss_mb']:.0f} kueue_rss_mb={kueue['rss_mb']:.0f}"
    )


@dataclass
class JobTimeline:
    """What a watch saw of one Job: created, each unsuspension and suspension, the end."""

    created: float
    cls: str = ""
    cpu_milli: int = 0
    runs: list[tuple[float, float | None]] = field(default_factory=list)  # (from, to)
    finished: float | None = None

    def observe(self, at: float, *, suspended: bool, done: bool) -> None:
        """One watch event: ``suspended`` is ``spec.suspend``, ``done`` a Complete/Failed
        condition. Repeated states are ignored; a run ends at re-suspension or the end."""
        running = bool(self.runs) and self.runs[-1][1] is None
        if not suspended and not running and self.finished is None:
            self.runs.append((at, None))
        elif (suspended or done) and running:
            self.runs[-1] = (self.runs[-1][0], at)
        if done and self.finished is None:
            self.finished = at

    @property
    def admitted(self) -> float | None:
        """The start of the last run: the admission it ran to completion under."""
        return self.runs[-1][0] if self.runs else None


@dataclass(frozen=True)
class ShapeFigures:
    finished: int
    total: int
    preempted: int  # runs that ended before the Job did
    span_s: float
    usage_pct: float
    tta_s: dict[str, float]  # class -> mean seconds from creation to the last admission


def shape_figures(jobs: Iterable[JobTimeline], nominal_milli: int) -> ShapeFigures:
    """Kueue's baseline figures from the timelines: mean time to admission per class
    (finished Jobs, to the admission they ran to completion under), and usage % =
    quota-seconds held by running Jobs over total nominal quota x the span from the
    first creation to the last end."""
    items = list(jobs)
    if not items:
        raise ValueError("no Job")
    first = min(j.created for j in items)
    ends = [j.finished for j in items if j.finished is not None]
    last = max(ends) if ends else first
    held = 0.0
    preempted = 0
    tta: dict[str, list[float]] = {}
    for j in items:
        for start, stop in j.runs:
            held += j.cpu_milli * ((stop if stop is not None else last) - start)
        preempted += sum(1 for _, stop in j.runs if stop is not None and stop != j.finished)
        if j.finished is not None and j.admitted is not None:
            tta.setdefault(j.cls, []).append(j.admitted - j.created)
    span = last - first
    usage = 100 * held / (nominal_milli * span) if span > 0 and nominal_milli > 0 else 0.0
    return ShapeFigures(
        finished=len(ends),
        total=len(items),
        preempted=preempted,
        span_s=span,
        usage_pct=usage,
        tta_s={c: sum(v) / len(v) for c, v in sorted(tta.items())},
    )
