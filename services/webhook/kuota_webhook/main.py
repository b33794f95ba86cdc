"""kuota-webhook: the mutating webhook, a stateless process apart from ingest.

Wiring only (docs/design/webhook-registration.md, "A process of its own"): the
settings (``kuota_webhook.settings``) and the service (``kuota_webhook.service``:
the HTTPS server, the view's own watches, the certificate reload) run under
``kuota.service.Runner``, which owns the metrics server, logging, the start-up
retry, the two-stage stop and the exit codes. The answer to a review is
``kuota.kube.admission_review.mutate_job``. Any number of replicas may run:
each keeps its own view from the apiserver and shares nothing.
"""

from __future__ import annotations

import time

from prometheus_client import REGISTRY

from kuota.service import Runner
from kuota_webhook.service import Service, log
from kuota_webhook.settings import WebhookSettings

SERVICE = "kuota-webhook"


def main() -> None:
    started = time.monotonic()

    def make(settings: WebhookSettings) -> Service:
        return Service(settings, started=started)

    Runner(SERVICE, log, REGISTRY, finishing="the open reviews").main(
        WebhookSettings.from_env, make
    )


if __name__ == "__main__":
    main()
