"""Prometheus metrics of the admission service (Kueue's names, ``kuota_`` prefix).

Counters and histograms count what THIS process decided live: decisions
re-derived during the silent replay were counted by the incarnation that
committed them, so replay only refreshes the bookkeeping the metrics need
(when a workload was created or requeued, which ClusterQueue it is queued
for). Gauges (pending workloads, usage) are read from ``Fold.summary()``.
The wall clock is read here, for metrics only (snapshot age); the plan
latency's clock is read by the folder (``kuota_admission.records.PlanWaits``).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from kuota.api.duration import DurationError, parse_rfc3339
from kuota.api.parse import CREATED_AT_ANNOTATION, QUEUE_NAME_LABEL
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent, ObjectDeleted, ObjectUpserted
from kuota.service import JournalMetrics

# Kueue's admission wait-time buckets: exponential from 1 s, doubling, 14 of them.
WAIT_BUCKETS = tuple(float(2**i) for i in range(14))
# Plan latency: tens of milliseconds with the preemption service up, minutes without it.
PLAN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 600.0)
UNKNOWN = "unknown"


def _created_at(manifest: dict[str, object], at: float) -> float:
    """Creation time as the fold reads it: annotation, creationTimestamp, or first seen."""
    meta = manifest.get("metadata")
    if not isinstance(meta, dict):
        return at
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict) and CREATED_AT_ANNOTATION in annotations:
        try:
            return float(annotations[CREATED_AT_ANNOTATION])
        except (TypeError, ValueError):
            return at
    stamp = meta.get("creationTimestamp")
    if isinstance(stamp, str):
        try:
            return parse_rfc3339(stamp)
        except DurationError:
            return at
    return at


class AdmissionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.registry = r
        if registry is None:
            ProcessCollector(registry=r)
        self.pending = Gauge(
            "kuota_pending_workloads",
            "Workloads waiting for a ClusterQueue (queued or held), per status",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.admitted = Counter(
            "kuota_admitted_workloads",
            "Workloads admitted",
            ["cluster_queue"],
            registry=r,
        )
        self.wait = Histogram(
            "kuota_admission_wait_time_seconds",
            "Event time from a workload's creation (or last requeue) to its admission",
            ["cluster_queue"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.evicted = Counter(
            "kuota_evicted_workloads",
            "Workloads evicted (preemption included, as reason Preempted)",
            ["cluster_queue", "reason"],
            registry=r,
        )
        self.preempted = Counter(
            "kuota_preempted_workloads",
            "Workloads preempted, by the preemptor's ClusterQueue and Kueue's reason",
            ["preempting_cluster_queue", "reason"],
            registry=r,
        )
        self.usage = Gauge(
            "kuota_cluster_queue_resource_usage",
            "Quota charged by admitted workloads (resource units)",
            ["cluster_queue", "flavor", "resource"],
            registry=r,
        )
        self.plan_latency = Histogram(
            "kuota_preemption_plan_latency_seconds",
            "Wall time from folding the journal record that made a head await a "
            "preemption plan to its preemption (the Admitted decision with victims)",
            buckets=PLAN_BUCKETS,
            registry=r,
        )
        self.journal = JournalMetrics(r)  # lag, position, fold latency, events, replayed
        self.decisions = Counter("kuota_decisions", "Decisions produced", ["type"], registry=r)
        self.deadletters = Counter(
            "kuota_deadletter_records", "Journal records sent to the dead-letter topic", registry=r
        )
        self.snapshot_size = Gauge(
            "kuota_snapshot_size_bytes", "Size of the last saved fold snapshot", registry=r
        )
        self.snapshot_offset = Gauge(
            "kuota_snapshot_offset", "Journal offset of the last saved fold snapshot", registry=r
        )
        self.snapshot_age = Gauge(
            "kuota_snapshot_age_seconds",
            "Seconds since the last snapshot was saved (or loaded)",
            registry=r,
        )
        self.snapshot_age.set_function(self._snapshot_age)
        self.recovery_seconds = Gauge(
            "kuota_recovery_seconds",
            "Start-up time: snapshot load plus silent replay to the committed offset",
            registry=r,
        )
        self._snapshot_at: float | None = None
        self._created: dict[str, float] = {}  # pending workload -> created or requeued at
        self._queue_of: dict[str, str] = {}  # workload -> ClusterQueue it was last decided for
        self._gauge_labels: set[tuple[str, ...]] = set()
        self._usage_labels: set[tuple[str, ...]] = set()

    # ------------------------------------------------------------------ Observer

    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None:
        if isinstance(event, ObjectUpserted):
            obj = event.object
            if obj.get("kind") == "Job":
                meta = obj.get("metadata") or {}
                labels = meta.get("labels") or {}
                if isinstance(labels, dict) and QUEUE_NAME_LABEL in labels:
                    key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
                    if key not in self._created:
                        self._created[key] = _created_at(obj, event.at)
        elif isinstance(event, ObjectDeleted) and event.kind == "Job":
            key = f"{event.namespace or 'default'}/{event.name}"
            self._created.pop(key, None)
            self._queue_of.pop(key, None)
        self.journal.folded(event, seconds, live=live)

    def decided(self, decision: Decision, *, live: bool) -> None:
        d = decision
        key = d.workload
        cq = d.cluster_queue or UNKNOWN
        if key is not None and d.cluster_queue:
            self._queue_of[key] = d.cluster_queue
        if d.type == "Admitted" and key is not None:
            created = self._created.pop(key, None)
            if live:
                self.admitted.labels(cq).inc()
                if created is not None:
                    self.wait.labels(cq).observe(max(0.0, d.at - created))
        elif d.type == "Requeued" and key is not None:
            self._created[key] = d.at
        elif d.type == "Finished" and key is not None:
            self._created.pop(key, None)
            self._queue_of.pop(key, None)
        if not live:
            return
        self.decisions.labels(d.type).inc()
        if d.type == "Evicted":
            self.evicted.labels(cq, d.reason or UNKNOWN).inc()
        elif d.type == "Preempted":
            self.evicted.labels(cq, "Preempted").inc()
            preempting = self._queue_of.get(d.preemptor or "", UNKNOWN)
            self.preempted.labels(preempting, d.reason or UNKNOWN).inc()

    def dead_lettered(self, reason: str) -> None:
        self.deadletters.inc()

    def plan_waited(self, seconds: float) -> None:
        self.plan_latency.observe(seconds)

    # ------------------------------------------------------------------ gauges

    def refresh(self, fold: Fold, *, next_offset: int, lag: int | None) -> None:
        """Gauges from the fold's summary; call after each batch."""
        pending: set[tuple[str, ...]] = set()
        usage: set[tuple[str, ...]] = set()
        for s in fold.summary():
            # The fold's summary counts every waiting workload together; Kueue
            # splits "active" from "inadmissible", which needs a split summary.
            labels = (s.name, "pending")
            self.pending.labels(*labels).set(s.pending)
            pending.add(labels)
            for row in s.resources:
                ulabels = (s.name, row.flavor, row.resource)
                self.usage.labels(*ulabels).set(row.usage / 1000)
                usage.add(ulabels)
        for gone in self._gauge_labels - pending:
            self.pending.remove(*gone)
        for gone in self._usage_labels - usage:
            self.usage.remove(*gone)
        self._gauge_labels, self._usage_labels = pending, usage
        self.journal.advanced(next_offset, lag)

    def snapshot_saved(self, *, offset: int, size: int | None) -> None:
        self._snapshot_at = time.time()
        self.snapshot_offset.set(offset)
        if size is not None:
            self.snapshot_size.set(size)

    def _snapshot_age(self) -> float:
        return -1.0 if self._snapshot_at is None else time.time() - self._snapshot_at
