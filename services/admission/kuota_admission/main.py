"""kuota-admission: journal -> Fold -> decisions, exactly once (docs/design/admission.md).

Wiring only: the settings (``kuota_admission.settings``), the metrics
(``kuota_admission.metrics``) and the loop (``kuota_admission.loop``: recovery
from a snapshot and a silent replay, then live transactions) run under
``kuota.service.Runner``, which owns the metrics server, logging, the
start-up retry, the two-stage stop (the first signal lets the current
transaction finish) and the exit codes.
"""

from __future__ import annotations

from redis.exceptions import RedisError

from kuota.bus.processor import ReplayError
from kuota.service import Runner
from kuota_admission.loop import Service, log
from kuota_admission.metrics import AdmissionMetrics
from kuota_admission.settings import load_config

SERVICE = "kuota-admission"


def main() -> None:
    metrics = AdmissionMetrics()
    runner = Runner(
        SERVICE,
        log,
        metrics.registry,
        finishing="the current transaction",
        errors=(ReplayError, RedisError),
    )
    runner.main(load_config, lambda cfg: Service(cfg, metrics))


if __name__ == "__main__":
    main()
