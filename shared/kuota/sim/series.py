"""Time series of a simulation run, read from its events and decisions.

Theory of operation: :class:`Recorder` watches every step of a run (the
journal event and the decisions it caused) and keeps what the report plots,
all as step functions (change points ``(t, value)``):

- **usage** per (ClusterQueue, flavor, resource): an ``Admitted`` adds its
  usage; a ``Finished`` gives back what the workload's running admission held,
  a ``QuotaReleased`` what its decision names (a stopped workload keeps its
  quota until its pods are gone, docs/design/quota-until-pods-gone.md);
- **quota**: the nominal quota (and borrowing limit) from ``QuotaChanged``;
- **queue length** per ClusterQueue: a workload is pending from its Job's
  first upsert (its ClusterQueue is its LocalQueue's) until ``Admitted``, and
  again from a ``Preempted``/``Evicted`` until the next ``Admitted``; it
  leaves the queue when ``Finished``, ``Deactivated`` or ``Rejected``;
- **waits**: per workload, the time it spent pending before it finished (all
  pending periods added up); one still pending at the end has no wait (it was
  never admitted, or not again) and is counted apart;
- **preemptions**: the instants of ``Preempted`` decisions, per ClusterQueue.

Pure: no I/O, no clock. Percentiles are nearest-rank (:func:`percentile`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kuota.events.schema import Decision, JournalEvent, ObjectDeleted, ObjectUpserted
from kuota.quantity import QuantityError, parse_quantity
from kuota.sim.engine import workload_key

UsageKey = tuple[str, str, str]  # (ClusterQueue, flavor, resource)
Points = list[tuple[float, float]]  # change points of a step function
NO_CLUSTER_QUEUE = "(none)"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NO_PRIORITY_CLASS = "(none)"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; ``inf`` counts as
    larger than everything; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(slots=True)
class WorkloadRecord:
    """What the recorder knows of one workload."""

    key: str
    cluster_queue: str
    priority_class: str
    submitted: float
    first_admitted: float | None = None
    finished: float | None = None
    waited: float = 0.0  # pending time up to now (closed periods)
    pending_since: float | None = None
    admissions: int = 0
    preemptions: int = 0

    @property
    def wait(self) -> float | None:
        """Total pending time, or None while (or if never) done."""
        return self.waited if self.finished is not None else None


@dataclass(slots=True)
class Series:
    """Everything a report shows, as recorded (see the module docstring)."""

    usage: dict[UsageKey, Points] = field(default_factory=dict)
    quota: dict[UsageKey, Points] = field(default_factory=dict)
    borrowing_limit: dict[UsageKey, float] = field(default_factory=dict)
    queue_length: dict[str, Points] = field(default_factory=dict)
    preemptions: dict[str, list[float]] = field(default_factory=dict)
    workloads: dict[str, WorkloadRecord] = field(default_factory=dict)
    end: float = 0.0


def _amount(quantity: str) -> float | None:
    try:
        return parse_quantity(quantity) / 1000
    except QuantityError:
        return None


class Recorder:
    """Builds :class:`Series` from a run's steps (module docstring)."""

    def __init__(self) -> None:
        self.series = Series()
        self._local_queues: dict[tuple[str, str], str] = {}  # (ns, LocalQueue) -> CQ
        self._current: dict[UsageKey, float] = {}
        self._queued: dict[str, int] = {}
        # workload -> usage of its running admission (released by Finished)
        self._running: dict[str, dict[UsageKey, float]] = {}

    def observe(self, event: JournalEvent, decisions: Iterable[Decision]) -> None:
        """One applied event and the decisions it caused."""
        at = event.at
        self.series.end = max(self.series.end, at)
        if isinstance(event, ObjectUpserted):
            self._upserted(event.object, at)
        elif isinstance(event, ObjectDeleted) and event.kind == "LocalQueue":
            self._local_queues.pop((event.namespace, event.name), None)
        for decision in decisions:
            self._decided(decision)

    # ----------------------------------------------------------------- events

    def _upserted(self, obj: Mapping[str, object], at: float) -> None:
        kind = obj.get("kind")
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return
        namespace = str(metadata.get("namespace") or "default")
        name = str(metadata.get("name") or "")
        if kind == "LocalQueue":
            spec = obj.get("spec")
            if isinstance(spec, Mapping) and isinstance(spec.get("clusterQueue"), str):
                self._local_queues[(namespace, name)] = str(spec["clusterQueue"])
            return
        if kind == "LeaderWorkerSet":
            return  # several workloads, keyed by group: not drawn as one (yet)
        key = workload_key(obj)
        if key is None:
            return
        labels = metadata.get("labels")
        labels = labels if isinstance(labels, Mapping) else {}
        queue = labels.get(QUEUE_LABEL)
        if key in self.series.workloads or not isinstance(queue, str):
            return
        cluster_queue = self._local_queues.get((namespace, queue), NO_CLUSTER_QUEUE)
        priority_class = labels.get(PRIORITY_LABEL)
        record = WorkloadRecord(
            key=key,
            cluster_queue=cluster_queue,
            priority_class=priority_class if isinstance(priority_class, str) else NO_PRIORITY_CLASS,
            submitted=at,
            pending_since=at,
        )
        self.series.workloads[key] = record
        self._queue(cluster_queue, at, +1)

    # -------------------------------------------------------------- decisions

    def _decided(self, decision: Decision) -> None:
        at = decision.at
        kind = decision.type
        if kind == "QuotaChanged" and decision.cluster_queue is not None:
            self._quota(decision)
        key = decision.workload
        record = self.series.workloads.get(key) if key is not None else None
        if kind == "Admitted" and key is not None:
            held: dict[UsageKey, float] = {}
            cluster_queue = decision.cluster_queue or NO_CLUSTER_QUEUE
            for flavor, resources in sorted((decision.usage or {}).items()):
                for resource, quantity in sorted(resources.items()):
                    amount = _amount(quantity)
                    if amount is not None:
                        usage_key = (cluster_queue, flavor, resource)
                        held[usage_key] = held.get(usage_key, 0.0) + amount
            self._running[key] = held
            self._use(held, at, +1)
            if record is not None:
                if record.pending_since is not None:
                    record.waited += at - record.pending_since
                    record.pending_since = None
                    self._queue(record.cluster_queue, at, -1)
                record.admissions += 1
                if record.first_admitted is None:
                    record.first_admitted = at
        elif kind == "QuotaReleased":
            released: dict[UsageKey, float] = {}
            cluster_queue = decision.cluster_queue or (
                record.cluster_queue if record else NO_CLUSTER_QUEUE
            )
            for flavor, resources in sorted((decision.usage or {}).items()):
                for resource, quantity in sorted(resources.items()):
                    amount = _amount(quantity)
                    if amount is not None:
                        released[(cluster_queue, flavor, resource)] = amount
            self._use(released, at, -1)
        elif kind == "Finished" and key is not None:
            if decision.reason != "Deleted":  # a deletion keeps it until QuotaReleased
                self._use(self._running.pop(key, {}), at, -1)
            else:
                self._running.pop(key, None)
            if record is not None:
                self._leave(record, at)
                record.finished = at
        elif kind in ("Preempted", "Evicted") and key is not None:
            self._running.pop(key, None)  # its quota is kept until QuotaReleased
            if kind == "Preempted":
                cluster_queue = decision.cluster_queue or (
                    record.cluster_queue if record else NO_CLUSTER_QUEUE
                )
                self.series.preemptions.setdefault(cluster_queue, []).append(at)
            if record is not None:
                record.preemptions += kind == "Preempted"
                if record.pending_since is None and record.finished is None:
                    record.pending_since = at
                    self._queue(record.cluster_queue, at, +1)
        elif kind in ("Deactivated", "Rejected") and record is not None:
            if kind == "Deactivated":
                self._running.pop(record.key, None)
            self._leave(record, at)

    def _leave(self, record: WorkloadRecord, at: float) -> None:
        if record.pending_since is not None:
            record.waited += at - record.pending_since
            record.pending_since = None
            self._queue(record.cluster_queue, at, -1)

    def _quota(self, decision: Decision) -> None:
        cluster_queue = decision.cluster_queue or NO_CLUSTER_QUEUE
        for flavor, resources in sorted((decision.quota or {}).items()):
            for resource, limits in sorted(resources.items()):
                usage_key = (cluster_queue, flavor, resource)
                nominal = _amount(limits.get("nominalQuota", "0")) or 0.0
                _step(self.series.quota.setdefault(usage_key, []), decision.at, nominal)
                limit = limits.get("borrowingLimit")
                if limit is not None and (amount := _amount(limit)) is not None:
                    self.series.borrowing_limit[usage_key] = amount

    def _use(self, amounts: Mapping[UsageKey, float], at: float, sign: int) -> None:
        for usage_key, amount in sorted(amounts.items()):
            now = self._current.get(usage_key, 0.0) + sign * amount
            self._current[usage_key] = now
            _step(self.series.usage.setdefault(usage_key, [(0.0, 0.0)]), at, now)

    def _queue(self, cluster_queue: str, at: float, delta: int) -> None:
        now = self._queued.get(cluster_queue, 0) + delta
        self._queued[cluster_queue] = now
        _step(self.series.queue_length.setdefault(cluster_queue, [(0.0, 0.0)]), at, float(now))


def _step(points: Points, at: float, value: float) -> None:
    """Append a change point; a second change at one instant replaces the first."""
    if points and points[-1][0] == at:
        points[-1] = (at, value)
    else:
        points.append((at, value))


def integral(points: Points, *, end: float) -> float:
    """The area under a step function from its first point to ``end``."""
    total = 0.0
    for (t0, v0), (t1, _) in zip(points, [*points[1:], (end, 0.0)], strict=True):
        total += v0 * max(0.0, min(t1, end) - t0)
    return total


def value_at(points: Points, at: float) -> float:
    """The step function's value at ``at`` (0 before its first point)."""
    value = 0.0
    for t, v in points:
        if t > at:
            break
        value = v
    return value


def waits(series: Series) -> list[float]:
    """Every workload's wait: its pending time once finished, ``inf`` for one
    still pending at the end (never admitted, or not again); workloads admitted
    and still running at the end count with the time they waited."""
    out: list[float] = []
    for key in sorted(series.workloads):
        record = series.workloads[key]
        if record.pending_since is not None:
            out.append(math.inf)
        else:
            out.append(record.waited)
    return out


def _figure(value: float) -> float | None:
    """A JSON-safe figure: None for NaN or infinity, else rounded to 3 decimals."""
    return None if not math.isfinite(value) else round(value, 3)


def wait_figures(values: Sequence[float]) -> dict[str, object]:
    finite = [v for v in values if math.isfinite(v)]
    return {
        "workloads": len(values),
        "neverAdmitted": len(values) - len(finite),
        "p50": _figure(percentile(values, 50)),
        "p90": _figure(percentile(values, 90)),
        "p95": _figure(percentile(values, 95)),
        "p99": _figure(percentile(values, 99)),
        "max": _figure(max(values)) if values else None,
        "mean": _figure(sum(finite) / len(finite)) if finite else None,
    }


def summary(series: Series) -> dict[str, object]:
    """The report's figures (summary.json): waits overall and per priority class,
    usage integral, peak and mean against quota per (ClusterQueue, flavor,
    resource), queue length peak per ClusterQueue, preemptions. A ``null``
    percentile is one no finished workload reaches (never admitted)."""
    end = series.end
    records = [series.workloads[key] for key in sorted(series.workloads)]
    all_waits = waits(series)
    by_class: dict[str, list[float]] = {}
    for record, wait in zip(records, all_waits, strict=True):
        by_class.setdefault(record.priority_class, []).append(wait)
    usage: list[dict[str, object]] = []
    for usage_key in sorted(series.usage):
        points = series.usage[usage_key]
        area = integral(points, end=end)
        quota_points = series.quota.get(usage_key, [])
        nominal = quota_points[-1][1] if quota_points else None
        cluster_queue, flavor, resource = usage_key
        usage.append(
            {
                "clusterQueue": cluster_queue,
                "flavor": flavor,
                "resource": resource,
                "integral": round(area, 3),
                "peak": round(max((v for _, v in points), default=0.0), 3),
                "mean": round(area / end, 3) if end > 0 else 0.0,
                "nominalQuota": nominal,
                "meanOfNominal": round(area / end / nominal, 4) if nominal and end > 0 else None,
            }
        )
    return {
        "end": round(end, 3),
        "workloads": len(records),
        "finished": sum(r.finished is not None for r in records),
        "waitSeconds": wait_figures(all_waits),
        "waitSecondsByPriorityClass": {
            name: wait_figures(values) for name, values in sorted(by_class.items())
        },
        "usage": usage,
        "queueLengthPeak": {
            cq: max((v for _, v in points), default=0.0)
            for cq, points in sorted(series.queue_length.items())
        },
        "preemptions": {cq: len(ts) for cq, ts in sorted(series.preemptions.items())},
    }


__all__ = [
    "Recorder",
    "Series",
    "WorkloadRecord",
    "integral",
    "percentile",
    "summary",
    "value_at",
    "wait_figures",
    "waits",
]
