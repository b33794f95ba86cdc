"""The fragmentation bench's figures, as pure functions over what the watches recorded.

A ``Recording`` is what one system's run saw, every item stamped with the wall
clock of the watch delivery that showed it:

- ``jobs``: each change of a Job (suspended or not, finished or not);
- ``pods``: each change of a pod, reduced by ``pod_state`` (bound to a node,
  done, Pending for a DRA reason) or its deletion;
- ``events``: each ``FailedScheduling`` Event of a pod, with its message;
- ``claims``: the devices allocated to each pod's ResourceClaims;
- ``created``: when each Job was first seen.

From it:

- **admitted-but-unplaceable Job-seconds**: for each Job, the time during
  which it is admitted (unsuspended, not finished) *and* one of its pods is
  Pending for a DRA reason, summed over Jobs (a gang's two pods waiting at once
  count once). A pod is Pending for a DRA reason from the first observation of
  either its ``PodScheduled`` condition ``False``/``Unschedulable`` or a
  ``FailedScheduling`` Event whose message speaks of claims or devices
  (``dra_reason``; Kubernetes' "cannot allocate all claims", "resourceclaim not
  available on the node"), until it is seen bound to a node, done or gone. The
  two transient messages of the DRA plugin that say nothing of capacity (the
  claim is not created yet, or is being allocated) do not count.
- **GPU utilisation %**: allocated device-seconds over capacity-seconds. A
  pod holds its devices from when it is first seen bound until it is first
  seen done (or gone, or the end of the recording). Its devices are its
  claims' allocation results, each worth its share of a GPU through the
  shared counters (``device_shares``): the fraction of its counter set it
  consumes, 80Gi of an 80Gi GPU being 1, a 1g.10gb slice 10/80 = 0.125, a
  3g.40gb slice 40/80 = 0.5. Capacity is the number of counter sets (the
  GPUs) times the makespan, from the first Job's creation to the last pod's end.
- **wait**: from a Job's creation to its first unsuspension (admission);
  mean and p95 (``bench_vs_kueue_figures.percentile``).

Checked by ``tests/unit/bench/test_bench_fragmentation.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_vs_kueue_figures import percentile

_DRA_WORDS = re.compile(r"claim|device", re.IGNORECASE)
# The DRA plugin's transient messages: nothing about capacity.
_TRANSIENT = re.compile(r"not created yet|in the process of being allocated", re.IGNORECASE)

Interval = tuple[float, float]
DeviceKey = tuple[str, str, str]  # driver, pool, device


def dra_reason(message: str | None) -> bool:
    """Whether a scheduling failure's message is about DRA devices or claims."""
    return (
        bool(message)
        and bool(_DRA_WORDS.search(message or ""))
        and not _TRANSIENT.search(message or "")
    )


@dataclass(frozen=True)
class PodState:
    node: str | None  # spec.nodeName once bound
    done: bool  # Succeeded or Failed
    dra_pending: bool  # unbound, PodScheduled False/Unschedulable with a DRA message
    gone: bool = False


def pod_state(pod: Mapping[str, Any]) -> PodState:
    """One pod object as the figures read it."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName") or None
    done = status.get("phase") in ("Succeeded", "Failed")
    dra = False
    if node is None and not done:
        for c in status.get("conditions") or []:
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                and dra_reason(c.get("message"))
            ):
                dra = True
    return PodState(node, done, dra)


@dataclass(frozen=True)
class JobObs:
    at: float
    job: str
    suspended: bool
    done: bool


@dataclass(frozen=True)
class PodObs:
    at: float
    pod: str
    job: str
    state: PodState


@dataclass(frozen=True)
class EventObs:
    at: float
    pod: str
    message: str


@dataclass
class Recording:
    created: dict[str, float] = field(default_factory=dict)  # job -> first seen
    jobs: list[JobObs] = field(default_factory=list)
    pods: list[PodObs] = field(default_factory=list)
    events: list[EventObs] = field(default_factory=list)
    claims: dict[str, set[DeviceKey]] = field(default_factory=dict)  # pod -> devices

    def end(self) -> float:
        """The last time anything was seen."""
        times = [*self.created.values(), *(o.at for o in self.jobs), *(o.at for o in self.pods)]
        return max(times, default=0.0)


def _clip(a: float, b: float) -> Interval | None:
    return (a, b) if b > a else None


def admitted_intervals(jobs: Iterable[JobObs], end: float) -> dict[str, list[Interval]]:
    """Per Job, the periods it was unsuspended and not finished."""
    out: dict[str, list[Interval]] = {}
    since: dict[str, float] = {}
    closed: set[str] = set()
    for o in sorted(jobs, key=lambda o: o.at):
        if o.job in closed:
            continue
        running = not o.suspended and not o.done
        if running and o.job not in since:
            since[o.job] = o.at
        elif not running and o.job in since and (iv := _clip(since.pop(o.job), o.at)):
            out.setdefault(o.job, []).append(iv)
        if o.done:
            closed.add(o.job)
    for job, a in since.items():
        if (iv := _clip(a, end)) is not None:
            out.setdefault(job, []).append(iv)
    return out


def dra_pending_intervals(
    pods: Iterable[PodObs], events: Iterable[EventObs], end: float
) -> dict[str, list[Interval]]:
    """Per pod, the periods it was Pending for a DRA reason (see the module)."""
    timeline: list[tuple[float, int, str, str]] = []  # at, order, pod, what
    for o in pods:
        what = (
            "gone"
            if o.state.gone
            else "done"
            if o.state.done
            else "bound"
            if o.state.node
            else "dra"
            if o.state.dra_pending
            else "pending"
        )
        timeline.append((o.at, 0, o.pod, what))
    for e in events:
        if dra_reason(e.message):
            timeline.append((e.at, 1, e.pod, "dra"))
    out: dict[str, list[Interval]] = {}
    since: dict[str, float] = {}
    placed: set[str] = set()  # bound, done or gone: no longer Pending
    for at, _, pod, what in sorted(timeline):
        if what == "dra":
            if pod not in placed:
                since.setdefault(pod, at)
        elif what in ("bound", "done", "gone"):
            placed.add(pod)
            if pod in since and (iv := _clip(since.pop(pod), at)) is not None:
                out.setdefault(pod, []).append(iv)
    for pod, a in since.items():
        if (iv := _clip(a, end)) is not None:
            out.setdefault(pod, []).append(iv)
    return out


def _union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _intersect(xs: Sequence[Interval], ys: Sequence[Interval]) -> list[Interval]:
    out = []
    for a, b in xs:
        for c, d in ys:
            if (iv := _clip(max(a, c), min(b, d))) is not None:
                out.append(iv)
    return out


def unplaceable_job_seconds(rec: Recording) -> dict[str, float]:
    """Per Job with any, the seconds it was admitted with a pod Pending for DRA."""
    end = rec.end()
    admitted = admitted_intervals(rec.jobs, end)
    pending = dra_pending_intervals(rec.pods, rec.events, end)
    job_of = {o.pod: o.job for o in rec.pods}
    per_job: dict[str, list[Interval]] = {}
    for pod, ivs in pending.items():
        job = job_of.get(pod)
        if job is not None:
            per_job.setdefault(job, []).extend(ivs)
    out = {}
    for job, ivs in per_job.items():
        both = _union(_intersect(_union(ivs), admitted.get(job, [])))
        if both:
            out[job] = sum(b - a for a, b in both)
    return out


def device_shares(hardware: Iterable[Mapping[str, Any]]) -> dict[DeviceKey, float]:
    """Each device of the ResourceSlices as a share of a GPU: the largest fraction of a
    counter set it consumes (counter sets read from any slice of its pool)."""
    slices = [o for o in hardware if o.get("kind") == "ResourceSlice"]
    totals: dict[tuple[str, str, str, str], float] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        for cs in spec.get("sharedCounters") or []:
            for counter, v in (cs.get("counters") or {}).items():
                totals[(spec.get("driver", ""), pool, cs["name"], counter)] = _gi(v["value"])
    shares: dict[DeviceKey, float] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        for d in spec.get("devices") or []:
            share = 0.0
            for use in d.get("consumesCounters") or []:
                for counter, v in (use.get("counters") or {}).items():
                    total = totals.get((driver, pool, use["counterSet"], counter))
                    if total:
                        share = max(share, _gi(v["value"]) / total)
            shares[(driver, pool, d["name"])] = share
    return shares


def gpus_of(hardware: Iterable[Mapping[str, Any]]) -> int:
    """The GPUs of the hardware: its counter sets."""
    return sum(
        len((o.get("spec") or {}).get("sharedCounters") or [])
        for o in hardware
        if o.get("kind") == "ResourceSlice"
    )


_UNITS = {"": 1.0, "Ki": 2.0**-20, "Mi": 2.0**-10, "Gi": 1.0, "Ti": 2.0**10}


def _gi(quantity: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti)?", str(quantity).strip())
    if m is None:
        raise ValueError(f"not a binary quantity: {quantity!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or ""]


def held_intervals(pods: Iterable[PodObs], end: float) -> dict[str, Interval]:
    """Per pod that was bound, from first seen bound to first seen done or gone."""
    bound: dict[str, float] = {}
    out: dict[str, Interval] = {}
    for o in sorted(pods, key=lambda o: o.at):
        if o.pod in out:
            continue
        if o.state.node and not o.state.done and not o.state.gone:
            bound.setdefault(o.pod, o.at)
        elif (o.state.done or o.state.gone) and o.pod in bound:
            out[o.pod] = (bound[o.pod], o.at)
    for pod, a in bound.items():
        out.setdefault(pod, (a, max(a, end)))
    return out


@dataclass(frozen=True)
class Figures:
    jobs: int
    admitted: int
    unplaceable_job_s: float
    unplaceable_jobs: int  # Jobs with any such time
    gpu_util_pct: float
    gpu_s: float
    makespan_s: float
    wait_mean_s: float
    wait_p95_s: float
    pods_without_claims: int  # bound pods whose allocation was not seen (share 0)


def figures(rec: Recording, shares: Mapping[DeviceKey, float], gpus: int) -> Figures:
    end = rec.end()
    start = min(rec.created.values(), default=end)
    held = held_intervals(rec.pods, end)
    gpu_s = 0.0
    missing = 0
    for pod, (a, b) in held.items():
        devices = rec.claims.get(pod)
        if not devices:
            missing += 1
            continue
        gpu_s += (b - a) * sum(shares.get(d, 0.0) for d in devices)
    makespan = max(0.0, max((b for _, b in held.values()), default=end) - start)
    first_run: dict[str, float] = {}
    for o in sorted(rec.jobs, key=lambda o: o.at):
        if not o.suspended:
            first_run.setdefault(o.job, o.at)
    waits = sorted(max(0.0, first_run[j] - c) for j, c in rec.created.items() if j in first_run)
    unplaceable = unplaceable_job_seconds(rec)
    return Figures(
        jobs=len(rec.created),
        admitted=len(waits),
        unplaceable_job_s=sum(unplaceable.values()),
        unplaceable_jobs=len(unplaceable),
        gpu_util_pct=100 * gpu_s / (gpus * makespan) if gpus and makespan else 0.0,
        gpu_s=gpu_s,
        makespan_s=makespan,
        wait_mean_s=sum(waits) / len(waits) if waits else 0.0,
        wait_p95_s=percentile(waits, 95),
        pods_without_claims=missing,
    )


def summary(system: str, f: Figures) -> str:
    """One system's figures on one line (printed before the last line)."""
    return (
        f"{system}: jobs={f.jobs} admitted={f.admitted} "
        f"unplaceable_job_s={f.unplaceable_job_s:.1f} unplaceable_jobs={f.unplaceable_jobs} "
        f"gpu_util_pct={f.gpu_util_pct:.1f} gpu_s={f.gpu_s:.0f} makespan_s={f.makespan_s:.1f} "
        f"wait_mean_s={f.wait_mean_s:.1f} wait_p95_s={f.wait_p95_s:.1f}"
        + (f" pods_without_claims={f.pods_without_claims}" if f.pods_without_claims else "")
    )


def last_line(jobs: int, kuota: Figures, kueue: Figures) -> str:
    return (
        f"jobs={jobs} kuota_unplaceable_job_s={kuota.unplaceable_job_s:.1f} "
        f"kueue_unplaceable_job_s={kueue.unplaceable_job_s:.1f} "
        f"kuota_gpu_util_pct={kuota.gpu_util_pct:.1f} kueue_gpu_util_pct={kueue.gpu_util_pct:.1f} "
        f"kuota_wait_p95_s={kuota.wait_p95_s:.1f} kueue_wait_p95_s={kueue.wait_p95_s:.1f}"
    )


def mean_lines(kuota: Figures, kueue: Figures) -> list[str]:
    """The means, on their own lines before the last."""
    return [
        f"kuota_wait_mean_s={kuota.wait_mean_s:.1f}",
        f"kueue_wait_mean_s={kueue.wait_mean_s:.1f}",
    ]


def goals(kuota: Figures, kueue: Figures) -> list[str]:
    """The issue's two goals, met or not."""
    return [
        f"goal kuota_unplaceable_job_s == 0: "
        f"{'met' if round(kuota.unplaceable_job_s, 1) == 0 else 'NOT met'}",
        f"goal kuota_gpu_util_pct >= kueue_gpu_util_pct: "
        f"{'met' if round(kuota.gpu_util_pct, 1) >= round(kueue.gpu_util_pct, 1) else 'NOT met'}",
    ]
