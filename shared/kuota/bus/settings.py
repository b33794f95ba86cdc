"""Kafka client settings, read from the environment.

Every service and CLI reads the same variables, so one env file (the local
stack's ``.stack/stack.env``, a Kubernetes ConfigMap, compose's
``environment:``) configures them all: ``KUOTA_KAFKA_BOOTSTRAP`` (required),
``KUOTA_TOPIC_PREFIX`` (``kuota.``), ``KUOTA_JOURNAL_PARTITIONS`` (1), the
replication of the topics kuota creates (``KUOTA_KAFKA_REPLICATION_FACTOR``, 1;
``KUOTA_KAFKA_MIN_INSYNC_REPLICAS``, 1 at 1 or 2 replicas, else 2) and the
security settings (``KUOTA_KAFKA_SECURITY``: PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL; ``KUOTA_KAFKA_SASL_MECHANISM``, ``_SASL_USERNAME``, ``_SASL_PASSWORD``;
``KUOTA_KAFKA_CA_FILE``, ``_CERT_FILE``, ``_KEY_FILE``,
``_SSL_CHECK_HOSTNAME``). The security settings go to every aiokafka client
kuota creates (``client_kwargs``). Every variable with its default and values:
docs/security.md (per broker setup) and docs/deploy.md.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """A required setting is missing or malformed."""


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def env_flag(e: Mapping[str, str], name: str, default: bool) -> bool:
    raw = e.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r}: want true or false")


def _count(e: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = e.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as err:
        raise SettingsError(f"{name}={raw!r} must be an integer") from err
    if value < 1:
        raise SettingsError(f"{name} must be at least 1")
    return value


def _file(e: Mapping[str, str], name: str) -> str | None:
    path = e.get(name, "").strip() or None
    if path is not None and not Path(path).is_file():
        raise SettingsError(f"{name}={path}: no such file")
    return path


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    topic_prefix: str = "kuota."
    journal_partitions: int = 1
    ssl_check_hostname: bool = True
    replication_factor: int = 1
    min_insync_replicas: int | None = None  # None: see ``topic_min_insync``

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSettings:
        e = os.environ if env is None else env
        bootstrap = e.get("KUOTA_KAFKA_BOOTSTRAP", "").strip()
        if not bootstrap:
            raise SettingsError(
                "KUOTA_KAFKA_BOOTSTRAP is not set (for the local stack: "
                "`scripts/stack up` then `. .stack/stack.env`)"
            )
        protocol = e.get("KUOTA_KAFKA_SECURITY", "").strip().upper() or "PLAINTEXT"
        if protocol not in PROTOCOLS:
            raise SettingsError(
                f"KUOTA_KAFKA_SECURITY={protocol!r} is not a Kafka security protocol "
                f"({' | '.join(PROTOCOLS)})"
            )
        partitions = _count(e, "KUOTA_JOURNAL_PARTITIONS", 1)
        assert partitions is not None
        mechanism = e.get("KUOTA_KAFKA_SASL_MECHANISM", "").strip().upper() or None
        username = e.get("KUOTA_KAFKA_SASL_USERNAME") or None
        password = e.get("KUOTA_KAFKA_SASL_PASSWORD") or None
        if protocol.startswith("SASL_"):
            if mechanism is not None and mechanism not in SASL_MECHANISMS:
                raise SettingsError(
                    f"KUOTA_KAFKA_SASL_MECHANISM={mechanism!r}: kuota supports "
                    f"{' | '.join(SASL_MECHANISMS)}"
                )
            if username is None or password is None:
                raise SettingsError(
                    f"KUOTA_KAFKA_SECURITY={protocol} needs KUOTA_KAFKA_SASL_USERNAME "
                    "and KUOTA_KAFKA_SASL_PASSWORD"
                )
        ca_file = _file(e, "KUOTA_KAFKA_CA_FILE")
        cert_file = _file(e, "KUOTA_KAFKA_CERT_FILE")
        key_file = _file(e, "KUOTA_KAFKA_KEY_FILE")
        if key_file is not None and cert_file is None:
            raise SettingsError("KUOTA_KAFKA_KEY_FILE is set without KUOTA_KAFKA_CERT_FILE")
        replication = _count(e, "KUOTA_KAFKA_REPLICATION_FACTOR", 1)
        assert replication is not None
        min_isr = _count(e, "KUOTA_KAFKA_MIN_INSYNC_REPLICAS", None)
        if min_isr is not None and min_isr > replication:
            raise SettingsError(
                f"KUOTA_KAFKA_MIN_INSYNC_REPLICAS={min_isr} is more than "
                f"KUOTA_KAFKA_REPLICATION_FACTOR={replication}: no write could succeed"
            )
        return cls(
            bootstrap=bootstrap,
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=username,
            sasl_password=password,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
            topic_prefix=e.get("KUOTA_TOPIC_PREFIX", "kuota."),
            journal_partitions=partitions,
            ssl_check_hostname=env_flag(e, "KUOTA_KAFKA_SSL_CHECK_HOSTNAME", True),
            replication_factor=replication,
            min_insync_replicas=min_isr,
        )

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def topic_min_insync(self) -> int:
        """``min.insync.replicas`` of the topics kuota creates: as set, else one
        less than the replication factor but at most 2 (2 of 3), 1 for one or two
        replicas."""
        if self.min_insync_replicas is not None:
            return self.min_insync_replicas
        return max(1, min(2, self.replication_factor - 1))

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context for SSL / SASL_SSL: the CA bundle (or the system's),
        the client certificate for mTLS, hostname checking as configured."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as err:
            files = ", ".join(f for f in (self.ca_file, self.cert_file, self.key_file) if f)
            raise SettingsError(f"Kafka TLS files ({files or 'system CAs'}): {err}") from None
        ctx.check_hostname = self.ssl_check_hostname
        return ctx

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments shared by aiokafka producers, consumers and admin clients."""
        kw: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.uses_tls:
            kw["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            kw["sasl_mechanism"] = self.sasl_mechanism or "SCRAM-SHA-512"
            kw["sasl_plain_username"] = self.sasl_username
            kw["sasl_plain_password"] = self.sasl_password
        return kw

    def describe(self) -> str:
        """Where and how kuota connects, for messages (no secrets)."""
        how = self.security_protocol
        if self.uses_sasl:
            how += f" {self.sasl_mechanism or 'SCRAM-SHA-512'} user {self.sasl_username!r}"
        if self.uses_tls and self.cert_file:
            how += " with a client certificate"
        return f"Kafka at {self.bootstrap} ({how})"

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"
