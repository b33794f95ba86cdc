"""Ingest's Prometheus metrics, in the default registry (served by ``kuota.service``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import Counter, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

EVENTS = Counter(
    "kuota_ingest_events",
    "Journal events produced (acknowledged by Kafka), by event type",
    ["type"],
)
SKIPPED = Counter(
    "kuota_ingest_skipped_changes",
    "Observed changes not journaled because nothing the fold reads changed, by kind",
    ["kind"],
)
OVERSIZED = Counter(
    "kuota_ingest_oversized_events",
    "Journal events over the journal's record limit, by kind (an upsert is journaled as "
    "a stand-in the fold rejects)",
    ["kind"],
)
LAST_TICK = Gauge(
    "kuota_ingest_last_tick_timestamp_seconds",
    "Event time of the last Tick acknowledged by Kafka",
)
WATCH_UP = Gauge(
    "kuota_ingest_watch_up",
    "1 while a kind's list+watch is running, 0 while it retries (e.g. CRD missing)",
    ["kind"],
)


class RelistCollector(Collector):
    """``kuota_ingest_watch_relists_total{kind}``: LISTs done per kind (the
    initial list, and every relist after a ``410 Gone`` or a broken watch)."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kuota_ingest_watch_relists",
            "LISTs done by the watches, by kind (the first list included)",
            labels=["kind"],
        )
        for kind, n in sorted(self._counts().items()):
            family.add_metric([kind], n)
        yield family
