"""The webhook's Prometheus metrics, in the default registry (served by ``kuota.service``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

REQUESTS = Counter(
    "kuota_webhook_requests",
    "Mutating webhook requests, by outcome (suspended, gated, labelled, unchanged, refused, "
    "malformed)",
    ["outcome"],
)
RELOADS = Counter(
    "kuota_webhook_certificate_reloads",
    "Serving certificate reloads after its files changed, by result (loaded, failed)",
    ["result"],
)
VIEW_COMPLETE = Gauge(
    "kuota_webhook_view_complete",
    "1 once the view's first LISTs are done (the webhook is ready), else 0",
)
WATCH_UP = Gauge(
    "kuota_webhook_watch_up",
    "1 while a kind's list+watch runs, 0 while it retries",
    ["kind"],
)
