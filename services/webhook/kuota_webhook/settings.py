"""The webhook's settings, from the environment (docs/deploy.md, "Settings").

Theory of operation: :meth:`WebhookSettings.from_env` reads every variable
once, at start-up, and refuses a bad one with a one-line ``SettingsError``
(exit 2, ``kuota.service``), so a mistake shows before anything listens:
``KUBECONFIG`` or the in-cluster service account; the metrics server; the
HTTPS port and host; the serving certificate and key (required: serving is
all this process does) and how often their files are checked for a new pair;
the trusted users; the Kueue Configuration (``KUOTA_CONFIG_FILE`` or
``KUOTA_CONFIG_CONFIGMAP``, not both); and the Job label selector. No Kafka
and no Redis: the webhook depends on neither.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kuota import service
from kuota.bus.settings import SettingsError

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
#: deploy/base's actuator: the identity that unsuspends Jobs and writes kuota.dev/ annotations.
DEFAULT_TRUSTED_USERS = frozenset({"system:serviceaccount:kuota-system:kuota-actuator"})
DEFAULT_METRICS_PORT = 9105


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    kubeconfig: str | None  # None: in-cluster
    metrics_port: int
    metrics_host: str
    port: int
    host: str
    cert_file: str
    key_file: str
    cert_check_seconds: float
    trusted_users: frozenset[str]
    config_file: str | None
    config_map: tuple[str, str] | None
    job_label_selector: str | None
    log_level: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WebhookSettings:
        e = os.environ if env is None else env
        kubeconfig = e.get("KUBECONFIG", "").strip() or None
        if kubeconfig is not None:
            first = kubeconfig.split(os.pathsep)[0]
            if not Path(first).is_file():
                raise SettingsError(f"KUBECONFIG={kubeconfig}: no such file")
        elif not SERVICE_ACCOUNT_TOKEN.is_file():
            raise SettingsError(
                "KUBECONFIG is not set and there is no in-cluster service account token"
            )
        hint = "make them: scripts/webhook-certs"
        cert = service.required(e, "KUOTA_WEBHOOK_CERT_FILE", hint)
        key = service.required(e, "KUOTA_WEBHOOK_KEY_FILE", hint)
        for var, path in (("KUOTA_WEBHOOK_CERT_FILE", cert), ("KUOTA_WEBHOOK_KEY_FILE", key)):
            if not Path(path).is_file():
                raise SettingsError(f"{var}={path}: no such file ({hint})")
        port = service.port(e, "KUOTA_WEBHOOK_PORT", 9443)
        if port == 0:
            raise SettingsError("KUOTA_WEBHOOK_PORT=0: the webhook must listen on a port")
        trusted_raw = e.get("KUOTA_WEBHOOK_TRUSTED_USERS", "").strip()
        trusted = frozenset(u.strip() for u in trusted_raw.split(",") if u.strip())
        if trusted_raw and not trusted:
            raise SettingsError(
                f"KUOTA_WEBHOOK_TRUSTED_USERS={trusted_raw!r} names no user (want user,user,...)"
            )
        config_file, config_map = service.config_source(e)
        return cls(
            kubeconfig=kubeconfig,
            metrics_port=service.metrics_port(e, DEFAULT_METRICS_PORT),
            metrics_host=service.metrics_host(e),
            port=port,
            host=e.get("KUOTA_WEBHOOK_HOST", "").strip() or "0.0.0.0",
            cert_file=cert,
            key_file=key,
            cert_check_seconds=service.number(
                e, "KUOTA_WEBHOOK_CERT_CHECK_SECONDS", 10.0, positive=True
            ),
            trusted_users=trusted or DEFAULT_TRUSTED_USERS,
            config_file=config_file,
            config_map=config_map,
            job_label_selector=e.get("KUOTA_JOB_LABEL_SELECTOR", "").strip() or None,
            log_level=service.log_level(e),
        )
