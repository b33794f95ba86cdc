"""Ingest's settings, from the environment (docs/design/ingest.md, *Settings*).

Theory of operation: :meth:`IngestSettings.from_env` reads every variable once,
at start-up, and refuses a bad one with a one-line ``SettingsError`` (exit 2,
``kuota.service``), so a mistake shows before anything connects: Kafka
(``kuota.bus.settings``) and Redis (``KUOTA_REDIS_URL``), both required;
``KUBECONFIG`` or the in-cluster service account; the metrics server and the
``Tick`` period; the Kueue Configuration (``KUOTA_CONFIG_FILE`` or
``KUOTA_CONFIG_CONFIGMAP``, not both); the extra Job label selector; the CRD
retry period; and the Redis hash of what was journaled.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kuota import service
from kuota.bus.settings import KafkaSettings, SettingsError
from kuota.store.keys import SEEN_KEY, signing_key
from kuota.store.settings import RedisSettings

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
DEFAULT_SEEN_KEY = "kuota:ingest:seen"


@dataclass(frozen=True, slots=True)
class IngestSettings:
    kafka: KafkaSettings
    redis_url: str
    kubeconfig: str | None  # None: in-cluster
    metrics_port: int
    metrics_host: str
    tick_seconds: float
    config_file: str | None
    config_map: tuple[str, str] | None
    crd_retry_seconds: float
    seen_key: str
    job_label_selector: str | None
    log_level: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> IngestSettings:
        e = os.environ if env is None else env
        kafka = KafkaSettings.from_env(e)
        redis_url = service.required(
            e, "KUOTA_REDIS_URL", "for the local stack: `. .stack/stack.env`"
        )
        RedisSettings.from_env(e)  # the ACL user and TLS settings: refused here
        signing_key(SEEN_KEY, e)  # the seen-memory's HMAC key: missing or empty, exit 2
        kubeconfig = e.get("KUBECONFIG", "").strip() or None
        if kubeconfig is not None:
            first = kubeconfig.split(os.pathsep)[0]
            if not Path(first).is_file():
                raise SettingsError(f"KUBECONFIG={kubeconfig}: no such file")
        elif not SERVICE_ACCOUNT_TOKEN.is_file():
            raise SettingsError(
                "KUBECONFIG is not set and there is no in-cluster service account token"
            )
        config_file, config_map = service.config_source(e)
        journal = kafka.topic("journal")
        seen_key = e.get("KUOTA_INGEST_SEEN_KEY", "").strip() or (
            DEFAULT_SEEN_KEY if journal == "kuota.journal" else f"{DEFAULT_SEEN_KEY}:{journal}"
        )
        return cls(
            kafka=kafka,
            redis_url=redis_url,
            kubeconfig=kubeconfig,
            metrics_port=service.metrics_port(e, 9101),
            metrics_host=service.metrics_host(e),
            tick_seconds=service.number(e, "KUOTA_TICK_SECONDS", 1.0, positive=True),
            config_file=config_file,
            config_map=config_map,
            crd_retry_seconds=service.number(e, "KUOTA_CRD_RETRY_SECONDS", 30.0, positive=True),
            seen_key=seen_key,
            job_label_selector=e.get("KUOTA_JOB_LABEL_SELECTOR", "").strip() or None,
            log_level=service.log_level(e),
        )
