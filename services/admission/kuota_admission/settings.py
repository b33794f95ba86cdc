"""Admission's settings, from the environment (docs/design/admission.md, *Settings*).

Theory of operation: :func:`load_config` reads every variable once, at
start-up, and refuses a bad one with a one-line ``SettingsError`` (exit 2,
``kuota.service``): Kafka (``kuota.bus.settings``) and Redis
(``KUOTA_REDIS_URL``, the fold's snapshots), both required; the snapshot
cadence; the batch size; the metrics server and the log level. The consumer
group is ``<instance>-admission``, the transactional id and the snapshot name
``<instance>-admission-<partition>``, where ``<instance>`` is the topic prefix
without its trailing dot (``kuota.service.Identity``), so deployments and
tests with their own topic prefix never share a group, fence each other, or
load each other's snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from kuota import service
from kuota.bus.settings import KafkaSettings
from kuota.store.keys import SNAPSHOT_KEY, signing_key
from kuota.store.settings import RedisSettings


@dataclass(frozen=True, slots=True)
class Config(service.Identity):
    ROLE: ClassVar[str] = "admission"

    kafka: KafkaSettings
    redis_url: str
    metrics_port: int
    snapshot_every: int
    snapshot_seconds: float
    max_batch: int
    log_level: str
    metrics_host: str = "0.0.0.0"

    def snapshot_name(self, partition: int) -> str:
        return self.transactional_id(partition)


def load_config(env: Mapping[str, str] | None = None) -> Config:
    e = os.environ if env is None else env
    kafka = KafkaSettings.from_env(e)
    redis_url = service.required(
        e, "KUOTA_REDIS_URL", "for the local stack: `scripts/stack up` then `. .stack/stack.env`"
    )
    RedisSettings.from_env(e)  # the ACL user and TLS settings: refused here, not at first use
    signing_key(SNAPSHOT_KEY, e)  # the snapshots' HMAC key: missing or empty, exit 2
    return Config(
        kafka=kafka,
        redis_url=redis_url,
        metrics_port=service.metrics_port(e, 9102),
        metrics_host=service.metrics_host(e),
        snapshot_every=service.integer(e, "KUOTA_SNAPSHOT_EVERY", 5000, minimum=1),
        snapshot_seconds=service.number(e, "KUOTA_SNAPSHOT_SECONDS", 30, minimum=0.001),
        max_batch=service.integer(e, "KUOTA_MAX_BATCH", 500, minimum=1),
        log_level=service.log_level(e),
    )
