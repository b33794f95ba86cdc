"""The preemption service's settings, from the environment (docs/design/preemption.md).

============================  ==================================================
``KUOTA_KAFKA_BOOTSTRAP`` ... Kafka (``kuota.bus.settings``), required
``KUOTA_MAX_BATCH``           journal records per transaction (default 500)
``KUOTA_METRICS_PORT``        Prometheus ``/metrics`` (default 9103; 0: off),
``KUOTA_METRICS_HOST``        on this address (default all)
``KUOTA_LOG_LEVEL``           default INFO
============================  ==================================================

No Redis and no apiserver: the service's state is its fold of the journal.
The consumer group is ``<instance>-preemption``, the transactional id
``<instance>-preemption-<partition>`` (``kuota.service.Identity``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from kuota import service
from kuota.bus.settings import KafkaSettings


@dataclass(frozen=True, slots=True)
class Config(service.Identity):
    ROLE: ClassVar[str] = "preemption"

    kafka: KafkaSettings
    metrics_port: int
    max_batch: int
    log_level: str
    metrics_host: str = "0.0.0.0"


def load_config(env: Mapping[str, str] | None = None) -> Config:
    e = os.environ if env is None else env
    return Config(
        kafka=KafkaSettings.from_env(e),
        metrics_port=service.metrics_port(e, 9103),
        metrics_host=service.metrics_host(e),
        max_batch=service.integer(e, "KUOTA_MAX_BATCH", 500, minimum=1, maximum=1_000_000),
        log_level=service.log_level(e),
    )
