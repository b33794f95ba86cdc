"""The preemption service's Prometheus metrics (``KUOTA_METRICS_PORT``, default 9103)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from kuota.events.schema import JournalEvent
from kuota.service import JournalMetrics


class PreemptionMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        self.journal = JournalMetrics(r)  # lag, position, fold latency, events, replayed
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

    def folded(self, event: JournalEvent, seconds: float, *, live: bool) -> None:
        self.journal.folded(event, seconds, live=live)

    def skipped(self, reason: str) -> None:
        self.skipped_records.inc()

    def searched(self, seconds: float, plans: int, *, failed: bool) -> None:
        self.search_latency.observe(seconds)
        self.searches.labels("error" if failed else "ok").inc()
        self.plans.inc(plans)
