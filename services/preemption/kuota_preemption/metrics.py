"""The preemption service's Prometheus metrics (``KUOTA_METRICS_PORT``, default 9103)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from kuota.events.schema import JournalEvent

FOLD_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.05, 0.25, 1.0)


class PreemptionMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        self.lag = Gauge(
            "kuota_consumer_lag", "Journal end offset minus the next offset to fold", registry=r
        )
        self.position = Gauge(
            "kuota_journal_position", "Journal offset of the next record to fold", registry=r
        )
        self.fold_latency = Histogram(
            "kuota_fold_latency_seconds",
            "Time to fold one journal event (live)",
            buckets=FOLD_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "kuota_journal_events", "Journal events folded live", ["type"], registry=r
        )
        self.skipped_records = Counter(
            "kuota_skipped_records",
            "Journal records that do not decode or fold (dead-lettered, then skipped)",
            registry=r,
        )
        self.searches = Counter(
            "kuota_preemption_searches", "Preemption searches run", ["result"], registry=r
        )
        self.search_latency = Histogram(
            "kuota_preemption_search_seconds", "Time of one preemption search", registry=r
        )
        self.plans = Counter(
            "kuota_preemption_plans", "PreemptionPlan events written to the journal", registry=r
        )
        self.recovery_seconds = Gauge(
            "kuota_recovery_seconds", "Start-up replay to the committed offset", registry=r
        )
        self.replayed = Gauge(
            "kuota_replayed_events", "Journal events replayed silently at start-up", registry=r
        )

    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None:
        if live:
            self.fold_latency.observe(seconds)
            self.events.labels(event.type).inc()

    def skipped(self, reason: str) -> None:
        self.skipped_records.inc()

    def searched(self, seconds: float, plans: int, *, failed: bool) -> None:
        self.search_latency.observe(seconds)
        self.searches.labels("error" if failed else "ok").inc()
        self.plans.inc(plans)
