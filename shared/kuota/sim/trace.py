"""GPU job traces for capacity planning (``kuota plan``): generated or read from CSV.

Theory of operation: a trace is a list of :class:`TraceJob` — when a job is
submitted, how long it runs once admitted, what it needs (a count of whole
GPUs, or the GPU memory of a fraction of one GPU), its priority and its team.
It says nothing about accounting: ``kuota.sim.models`` turns one trace into a
scenario per accounting model (whole GPUs, MIG slices, MPS shares).

:func:`generate` draws a trace from distributions measured on Alibaba's
published PAI GPU trace (``cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv``,
released with the USENIX ATC '23 paper; docs/capacity-planning.md cites the
figures and how they were read): the share of GPU tasks asking for a fraction
of one GPU, the size of that fraction, the whole-GPU counts, the run times and
the share of best-effort tasks. A fraction becomes GPU memory on an 80 GiB
GPU (``ceil(fraction x 80)`` GiB). Arrivals are a Poisson process whose rate
gives the requested offered load. It draws from ``random.Random(seed)`` only,
so one seed gives one trace, byte for byte, on every machine.

:func:`read_csv` reads a user's trace; every bad cell is a :class:`TraceError`
naming the line and the column (``trace.csv:7: duration_s: -3 is negative``).
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: GiB of memory of the GPU the trace's fractions are taken of (an H100 80GB).
GPU_MEMORY_GIB = 80
#: Priority values of the two classes the generator writes (PAI's QoS:
#: latency-sensitive tasks above best-effort ones).
HIGH_PRIORITY = 1000
LOW_PRIORITY = 100
#: CSV columns, in order.
COLUMNS = ("submit_s", "duration_s", "gpus", "gpu_memory_gib", "priority", "team")
#: Teams are namespaces: a DNS label.
_TEAM = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: A job longer than this (a year) is a typo in a trace, not a job.
MAX_DURATION_S = 366 * 24 * 3600.0
#: More whole GPUs than this for one job is a typo too.
MAX_GPUS = 4096

# --- distributions from openb_pod_list_default.csv (8,152 tasks, 7,064 with GPUs) ---
#: GPU tasks asking for less than one GPU (num_gpu == 1, gpu_milli < 1000): 3,078 of 7,064.
FRACTIONAL_SHARE = 3078 / 7064
#: gpu_milli of those 3,078 tasks, as (upper bound of a bin, tasks in it).
FRACTION_BINS: tuple[tuple[int, int], ...] = (
    (100, 7),
    (200, 99),
    (250, 202),
    (300, 5),
    (400, 388),
    (500, 899),
    (600, 147),
    (700, 253),
    (900, 1078),
)
#: num_gpu of the 3,986 whole-GPU tasks.
WHOLE_GPU_COUNTS: tuple[tuple[int, int], ...] = ((1, 3911), (2, 16), (4, 15), (8, 44))
#: Run time (deletion - scheduled, seconds) of the 6,203 GPU tasks with both
#: times: (quantile, seconds). The generator caps at the 99th percentile.
DURATION_QUANTILES: tuple[tuple[float, float], ...] = (
    (0.0, 10.0),
    (0.10, 67.0),
    (0.25, 183.0),
    (0.50, 655.0),
    (0.75, 2303.0),
    (0.90, 7389.0),
    (0.99, 147608.0),
)
#: Best-effort (BE) among GPU tasks: 2,948 of 7,064; the rest are LS, Burstable, Guaranteed.
BEST_EFFORT_SHARE = 2948 / 7064


class TraceError(ValueError):
    """A trace that cannot be used: a malformed CSV, a bad value (line and column named)."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace. Exactly one of ``gpus`` (whole GPUs, > 0) and
    ``gpu_memory_gib`` (a fraction of one GPU, 1..80 GiB) is set."""

    name: str
    submit_s: float
    duration_s: float
    gpus: int  # whole GPUs; 0 for a fractional job
    gpu_memory_gib: int  # memory of a fractional job; 0 for a whole-GPU job
    priority: int
    team: str

    @property
    def fractional(self) -> bool:
        return self.gpus == 0


def _weighted(rng: random.Random, table: Sequence[tuple[int, int]]) -> int:
    total = sum(weight for _, weight in table)
    pick = rng.random() * total
    for value, weight in table:
        pick -= weight
        if pick < 0:
            return value
    return table[-1][0]


def _fraction_milli(rng: random.Random) -> int:
    """A gpu_milli drawn from the bins, uniform inside its bin."""
    upper = _weighted(rng, FRACTION_BINS)
    index = [bound for bound, _ in FRACTION_BINS].index(upper)
    lower = FRACTION_BINS[index - 1][0] if index else 0
    return rng.randint(lower + 1, upper)


def _duration(rng: random.Random, *, scale: float) -> float:
    """Inverse CDF of the run-time quantiles, log-linear between them."""
    u = rng.random() * DURATION_QUANTILES[-1][0]
    qs = [q for q, _ in DURATION_QUANTILES]
    i = max(1, bisect.bisect_right(qs, u))
    (q0, d0), (q1, d1) = DURATION_QUANTILES[i - 1], DURATION_QUANTILES[i]
    t = (u - q0) / (q1 - q0)
    seconds = math.exp(math.log(d0) + t * (math.log(d1) - math.log(d0))) * scale
    return float(max(1, round(seconds)))


def generate(
    *,
    jobs: int,
    seed: int,
    load_gpus: float = 100.0,
    teams: int = 4,
    duration_scale: float = 1.0,
    fractional_share: float = FRACTIONAL_SHARE,
) -> list[TraceJob]:
    """A trace of ``jobs`` jobs whose offered load, counted in whole GPUs, is
    about ``load_gpus`` busy GPUs (module docstring). ``fractional_share``
    replaces the published share of jobs needing a fraction of a GPU (to ask
    "what if": an inference-heavy cluster)."""
    if jobs < 1:
        raise TraceError(f"jobs: {jobs} (at least 1)")
    if not 0 < load_gpus < 1e6:
        raise TraceError(f"load: {load_gpus} GPUs (more than 0)")
    if not 1 <= teams <= 100:
        raise TraceError(f"teams: {teams} (1 to 100)")
    if not 0 < duration_scale <= 1000:
        raise TraceError(f"duration scale: {duration_scale} (more than 0, at most 1000)")
    if not 0 <= fractional_share <= 1:
        raise TraceError(f"fractional share: {fractional_share} (0 to 1)")
    rng = random.Random(seed)
    drafts: list[tuple[float, int, int, int, str]] = []
    for _ in range(jobs):
        if rng.random() < fractional_share:
            gpus = 0
            memory = max(1, math.ceil(_fraction_milli(rng) * GPU_MEMORY_GIB / 1000))
        else:
            gpus = _weighted(rng, WHOLE_GPU_COUNTS)
            memory = 0
        duration = _duration(rng, scale=duration_scale)
        priority = LOW_PRIORITY if rng.random() < BEST_EFFORT_SHARE else HIGH_PRIORITY
        team = f"team-{rng.randrange(teams)}"
        drafts.append((duration, gpus, memory, priority, team))
    # Offered load = arrival rate x mean GPU-seconds per job (Little's law).
    gpu_seconds = sum(duration * (gpus or 1) for duration, gpus, *_ in drafts) / jobs
    rate = load_gpus / gpu_seconds  # jobs per second
    out: list[TraceJob] = []
    now = 0.0
    for index, (duration, gpus, memory, priority, team) in enumerate(drafts):
        if index:
            now += rng.expovariate(rate)
        out.append(
            TraceJob(
                name=f"job-{index:06d}",
                submit_s=float(round(now)),
                duration_s=duration,
                gpus=gpus,
                gpu_memory_gib=memory,
                priority=priority,
                team=team,
            )
        )
    return out


def write_csv(trace: Sequence[TraceJob]) -> str:
    """The trace as CSV text (the format :func:`read_csv` reads)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for job in trace:
        writer.writerow(
            [
                _number(job.submit_s),
                _number(job.duration_s),
                job.gpus or "",
                job.gpu_memory_gib or "",
                job.priority,
                job.team,
            ]
        )
    return buffer.getvalue()


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def read_csv(text: str, *, source: str = "<trace>") -> list[TraceJob]:
    """Parse a trace CSV: a header naming :data:`COLUMNS` (any order; extra
    columns are refused), then one job per line. ``gpus`` (whole GPUs) or
    ``gpu_memory_gib`` (a fraction of one GPU), exactly one of them."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as err:
        raise TraceError(f"{source}:1: malformed CSV: {err}") from None
    if header is None:
        raise TraceError(f"{source}: empty file (a header line is needed: {','.join(COLUMNS)})")
    names = [cell.strip().lower() for cell in header]
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        raise TraceError(
            f"{source}:1: unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)})"
        )
    missing = [column for column in COLUMNS if column not in names]
    if missing:
        raise TraceError(f"{source}:1: missing column {missing[0]!r}")
    if len(set(names)) != len(names):
        raise TraceError(f"{source}:1: a column is named twice")
    position = {name: names.index(name) for name in COLUMNS}
    jobs: list[TraceJob] = []
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(names):
                raise TraceError(f"{source}:{line}: {len(row)} fields, the header has {len(names)}")
            jobs.append(_job(row, position, where=f"{source}:{line}", index=len(jobs)))
    except csv.Error as err:
        raise TraceError(f"{source}:{reader.line_num}: malformed CSV: {err}") from None
    if not jobs:
        raise TraceError(f"{source}: no jobs")
    return jobs


def _job(row: list[str], position: dict[str, int], *, where: str, index: int) -> TraceJob:
    def cell(column: str) -> str:
        return row[position[column]].strip()

    def number(column: str, *, maximum: float, required: bool = True) -> float | None:
        raw = cell(column)
        if not raw:
            if required:
                raise TraceError(f"{where}: {column}: empty")
            return None
        try:
            value = float(raw)
        except ValueError:
            raise TraceError(f"{where}: {column}: {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise TraceError(f"{where}: {column}: {raw!r} is not a finite number")
        if value < 0:
            raise TraceError(f"{where}: {column}: {raw} is negative")
        if value > maximum:
            raise TraceError(f"{where}: {column}: {raw} is absurdly large (at most {maximum:g})")
        return value

    def whole(column: str, value: float | None) -> int:
        if value is None:
            return 0
        if value != int(value):
            raise TraceError(f"{where}: {column}: {cell(column)} is not a whole number")
        return int(value)

    submit = number("submit_s", maximum=MAX_DURATION_S * 100)
    duration = number("duration_s", maximum=MAX_DURATION_S)
    assert submit is not None and duration is not None
    if duration == 0:
        raise TraceError(f"{where}: duration_s: 0 (a job runs for more than 0 s)")
    gpus = whole("gpus", number("gpus", maximum=MAX_GPUS, required=False))
    memory = whole(
        "gpu_memory_gib", number("gpu_memory_gib", maximum=GPU_MEMORY_GIB, required=False)
    )
    if bool(gpus) == bool(memory):
        raise TraceError(
            f"{where}: give gpus (whole GPUs) or gpu_memory_gib (a fraction of one "
            f"{GPU_MEMORY_GIB} GiB GPU), exactly one of them, more than 0"
        )
    raw_priority = cell("priority") or "0"
    try:
        priority = int(raw_priority)
    except ValueError:
        raise TraceError(f"{where}: priority: {raw_priority!r} is not an integer") from None
    if abs(priority) > 1_000_000_000:
        raise TraceError(f"{where}: priority: {priority} is out of range (|p| <= 1e9)")
    team = cell("team")
    if not _TEAM.match(team):
        raise TraceError(
            f"{where}: team: {team!r} is not a namespace name (lower case letters, digits, '-')"
        )
    return TraceJob(
        name=f"job-{index:06d}",
        submit_s=submit,
        duration_s=duration,
        gpus=gpus,
        gpu_memory_gib=memory,
        priority=priority,
        team=team,
    )


__all__ = [
    "COLUMNS",
    "GPU_MEMORY_GIB",
    "TraceError",
    "TraceJob",
    "generate",
    "read_csv",
    "write_csv",
]
