"""Prometheus metrics of the actuator (Kueue's names with the ``kuota_`` prefix).

Counters count what THIS process applied; decisions folded during the
start-up replay of the read model are not counted again. Gauges come from the
ClusterQueue read model.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from kuota.status.model import ClusterQueueReadModel

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ActuatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.registry = r
        if registry is None:
            ProcessCollector(registry=r)
        self.latency = Histogram(
            "kuota_actuation_latency_seconds",
            "From a decision's event time (at) to its first effective Job write "
            "(unsuspend, or suspend)",
            ["type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.completion = Histogram(
            "kuota_actuation_completion_seconds",
            "From a decision's event time (at) to its final Job write (for a stop: the "
            "pod template restored once the Job controller took the pods down)",
            ["type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.decisions = Counter(
            "kuota_actuator_decisions_total",
            "Decisions consumed, by type and outcome (applied, skipped, failed, noted)",
            ["type", "outcome"],
            registry=r,
        )
        self.failures = Counter(
            "kuota_actuation_failures_total",
            "Decisions that could not be applied (reported to the journal), by reason",
            ["reason"],
            registry=r,
        )
        self.retries = Counter(
            "kuota_actuation_retries_total",
            "API calls retried, by cause (conflict, transient; stale: a cached Job was outdated)",
            ["cause"],
            registry=r,
        )
        self.events = Counter(
            "kuota_actuator_kube_events_total",
            "Kubernetes Events written, by reason and result (created, duplicate, error)",
            ["reason", "result"],
            registry=r,
        )
        self.admitted = Counter(
            "kuota_admitted_workloads_total",
            "Workloads admitted (their Job unsuspended)",
            ["cluster_queue"],
            registry=r,
        )
        self.evicted = Counter(
            "kuota_evicted_workloads_total",
            "Workloads evicted (their Job suspended), by reason",
            ["cluster_queue", "reason"],
            registry=r,
        )
        self.preempted = Counter(
            "kuota_preempted_workloads_total",
            "Workloads preempted, by the preemptor's ClusterQueue and the preemption reason",
            ["preempting_cluster_queue", "reason"],
            registry=r,
        )
        self.usage = Gauge(
            "kuota_cluster_queue_resource_usage",
            "Quota charged by admitted workloads, per ClusterQueue, flavor and resource",
            ["cluster_queue", "flavor", "resource"],
            registry=r,
        )
        self.pending = Gauge(
            "kuota_pending_workloads",
            "Pending workloads known from decisions, per ClusterQueue and status",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.lag = Gauge(
            "kuota_consumer_lag",
            "Decision records not yet consumed",
            ["topic", "partition"],
            registry=r,
        )
        self.status_writes = Counter(
            "kuota_actuator_status_writes_total",
            "ClusterQueue status patches and Redis writes, by target and result",
            ["target", "result"],
            registry=r,
        )
        self.api_seconds = Histogram(
            "kuota_actuator_api_request_seconds",
            "Duration of the actuator's apiserver requests (not the watches), by method",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.events_dropped = Counter(
            "kuota_actuator_events_dropped_total",
            "Kubernetes Events dropped because the background queue was full, by reason",
            ["reason"],
            registry=r,
        )
        self.event_queue = Gauge(
            "kuota_actuator_event_queue_depth",
            "Kubernetes Events waiting to be written",
            registry=r,
        )
        self.in_flight = Gauge(
            "kuota_actuator_decisions_in_flight",
            "Decisions consumed and not yet applied (waiting, retrying or writing)",
            registry=r,
        )
        self.apiserver_down = Gauge(
            "kuota_actuator_apiserver_unreachable",
            "1 while the last Job call failed with a transient error (the decisions "
            "wait and are retried), else 0",
            registry=r,
        )
        self._usage_labels: set[tuple[str, str, str]] = set()
        self._pending_labels: set[tuple[str, str]] = set()

    def observe_request(self, method: str, seconds: float) -> None:
        self.api_seconds.labels(method).observe(seconds)

    def refresh(self, model: ClusterQueueReadModel) -> None:
        usage_labels: set[tuple[str, str, str]] = set()
        pending_labels: set[tuple[str, str]] = set()
        for cq in model.cluster_queues():
            for (flavor, resource), milli in model.usage(cq).items():
                usage_labels.add((cq, flavor, resource))
                self.usage.labels(cq, flavor, resource).set(milli / 1000)
            pending = model.pending(cq)
            for status in ("active", "inadmissible"):
                pending_labels.add((cq, status))
                self.pending.labels(cq, status).set(pending.get(status, 0))
        for gone in self._usage_labels - usage_labels:
            self.usage.remove(*gone)
        for gone_p in self._pending_labels - pending_labels:
            self.pending.remove(*gone_p)
        self._usage_labels, self._pending_labels = usage_labels, pending_labels
