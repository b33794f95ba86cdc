"""kuota-preemption: journal -> Fold -> preemption plans -> journal (docs/design/preemption.md).

Wiring only: the settings (``kuota_preemption.settings``), the metrics
(``kuota_preemption.metrics``) and the loop (``kuota_preemption.loop``: a
silent replay to the committed offset, then one transaction per live batch
with the plans ``kuota_preemption.planning`` asks the core for) run under
``kuota.service.Runner``, which owns the metrics server, logging, the
start-up retry, the two-stage stop and the exit codes. The victim search is
``kuota.core.preemption.classical``, run by ``kuota.core.preemption.planner``
on this service's own ``Fold(preemption="plans")``.
"""

from __future__ import annotations

from kuota.bus.processor import ReplayError
from kuota.service import Runner
from kuota_preemption.loop import Service, log
from kuota_preemption.metrics import PreemptionMetrics
from kuota_preemption.settings import load_config

SERVICE = "kuota-preemption"


def main() -> None:
    metrics = PreemptionMetrics()
    runner = Runner(
        SERVICE, log, metrics.registry, finishing="the current transaction", errors=(ReplayError,)
    )
    runner.main(load_config, lambda cfg: Service(cfg, metrics))


if __name__ == "__main__":
    main()
