"""The actuator's settings, from the environment (docs/design/actuator.md, *Settings*).

Theory of operation: :func:`load_config` reads every variable once, at
start-up, and refuses a bad one with a one-line ``SettingsError`` (exit 2,
``kuota.service``): Kafka (``kuota.bus.settings``) and ``KUOTA_REDIS_URL``,
both required; ``KUBECONFIG`` or the in-cluster service account; the metrics
server; the status interval; the retry bounds; the concurrency, in-flight and
Event-queue limits; the stop timeout; and the Job and ClusterQueue selectors
of pipelines sharing an apiserver. The group is ``<instance>-actuator``, the
status hash ``<instance>:status:clusterqueues``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from kuota import service
from kuota.bus.settings import KafkaSettings, SettingsError, env_flag
from kuota.store.settings import RedisSettings
from kuota_actuator.kubeapi import SERVICE_ACCOUNT_TOKEN


@dataclass(frozen=True, slots=True)
class Config(service.Identity):
    ROLE: ClassVar[str] = "actuator"

    kafka: KafkaSettings
    redis_url: str
    kubeconfig: str | None
    metrics_port: int
    log_level: str
    status_interval: float
    max_attempts: int
    max_batch: int
    concurrency: int = 64
    max_in_flight: int = 1000
    stop_timeout: float = 60.0
    stop_quiet: float = 1.0
    cq_selector: str | None = None
    job_selector: str | None = None
    max_backoff: float = 5.0
    event_queue: int = 10_000
    events_name_preemptor: bool = False  # victims' Events name the preemptor
    metrics_host: str = "0.0.0.0"

    @property
    def redis_key(self) -> str:
        return f"{self.instance}:status:clusterqueues"


def load_config(env: Mapping[str, str] | None = None) -> Config:
    e = os.environ if env is None else env
    kafka = KafkaSettings.from_env(e)
    redis_url = service.required(
        e, "KUOTA_REDIS_URL", "for the local stack: `scripts/stack up` then `. .stack/stack.env`"
    )
    RedisSettings.from_env(e)  # the ACL user and TLS settings: refused here
    kubeconfig = e.get("KUBECONFIG", "").strip() or None
    if kubeconfig is None and not SERVICE_ACCOUNT_TOKEN.exists():
        raise SettingsError(
            "KUBECONFIG is not set and there is no in-cluster service account token "
            f"({SERVICE_ACCOUNT_TOKEN})"
        )
    if kubeconfig is not None and not os.path.isfile(kubeconfig.split(os.pathsep)[0]):
        raise SettingsError(f"KUBECONFIG={kubeconfig}: no such file")
    return Config(
        kafka=kafka,
        redis_url=redis_url,
        kubeconfig=kubeconfig,
        metrics_port=service.metrics_port(e, 9104),
        metrics_host=service.metrics_host(e),
        log_level=service.log_level(e),
        status_interval=service.number(e, "KUOTA_STATUS_INTERVAL", 1, minimum=0.05),
        max_attempts=service.integer(e, "KUOTA_ACTUATOR_MAX_ATTEMPTS", 8, minimum=1),
        max_batch=service.integer(e, "KUOTA_MAX_BATCH", 100, minimum=1),
        concurrency=service.integer(e, "KUOTA_ACTUATOR_CONCURRENCY", 64, minimum=1),
        max_in_flight=service.integer(e, "KUOTA_ACTUATOR_MAX_IN_FLIGHT", 1000, minimum=1),
        stop_timeout=service.number(e, "KUOTA_ACTUATOR_STOP_TIMEOUT", 60, minimum=0.1),
        stop_quiet=service.number(e, "KUOTA_ACTUATOR_STOP_QUIET", 1, minimum=0),
        cq_selector=e.get("KUOTA_CLUSTERQUEUE_SELECTOR", "").strip() or None,
        job_selector=e.get("KUOTA_JOB_LABEL_SELECTOR", "").strip() or None,
        max_backoff=service.number(e, "KUOTA_ACTUATOR_MAX_BACKOFF", 5, minimum=0.01),
        event_queue=service.integer(e, "KUOTA_ACTUATOR_EVENT_QUEUE", 10_000, minimum=1),
        events_name_preemptor=env_flag(e, "KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR", False),
    )
