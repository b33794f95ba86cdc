"""kuota-actuator: decisions -> Jobs, Kubernetes Events, ClusterQueue status.

Wiring only (docs/design/actuator.md): the settings (``kuota_actuator.settings``),
the metrics (``kuota_actuator.metrics``) and the loop (``kuota_actuator.loop``:
mirrors, the read-model replay, decisions applied in per-workload lanes, the
status writer) run under ``kuota.service.Runner``, which owns the metrics
server, logging, the start-up retry, the two-stage stop (the first signal lets
the decisions in flight finish and commits them) and the exit codes.
"""

from __future__ import annotations

from kuota.service import Runner
from kuota_actuator.loop import Service, log
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.settings import Config, load_config

SERVICE = "kuota-actuator"


def main() -> None:
    metrics = ActuatorMetrics()

    def make(cfg: Config) -> Service:
        return Service(cfg, metrics)

    runner = Runner(SERVICE, log, metrics.registry, finishing="the decisions in flight")
    runner.main(load_config, make)


if __name__ == "__main__":
    main()
