"""Kafka client settings, read from the environment.

Every service and CLI reads the same variables, so one env file (the local
stack's ``.stack/stack.env``, a Kubernetes ConfigMap, or compose's
``environment:``) configures them all:

==============================  ==============================================
``KUOTA_KAFKA_BOOTSTRAP``       ``host:port[,host:port]`` (required)
``KUOTA_KAFKA_SECURITY``        PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
``KUOTA_KAFKA_SASL_MECHANISM``  SCRAM-SHA-256 | SCRAM-SHA-512 | PLAIN
``KUOTA_KAFKA_SASL_USERNAME``   / ``KUOTA_KAFKA_SASL_PASSWORD``
``KUOTA_KAFKA_CA_FILE``         CA bundle for SSL; ``KUOTA_KAFKA_CERT_FILE`` /
                                ``KUOTA_KAFKA_KEY_FILE`` for mTLS
``KUOTA_TOPIC_PREFIX``          prefix of every topic name (default ``kuota.``)
``KUOTA_JOURNAL_PARTITIONS``    partitions of the journal (default 1)
==============================  ==============================================
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SettingsError(ValueError):
    """A required setting is missing or malformed."""


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSettings:
        e = os.environ if env is None else env
        bootstrap = e.get("KUOTA_KAFKA_BOOTSTRAP", "").strip()
        if not bootstrap:
            raise SettingsError(
                "KUOTA_KAFKA_BOOTSTRAP is not set (for the local stack: "
                "`scripts/stack up` then `. .stack/stack.env`)"
            )
        protocol = e.get("KUOTA_KAFKA_SECURITY", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise SettingsError(
                f"KUOTA_KAFKA_SECURITY={protocol!r} is not a Kafka security protocol"
            )
        try:
            partitions = int(e.get("KUOTA_JOURNAL_PARTITIONS", "1"))
        except ValueError as err:
            raise SettingsError("KUOTA_JOURNAL_PARTITIONS must be an integer") from err
        if partitions < 1:
            raise SettingsError("KUOTA_JOURNAL_PARTITIONS must be at least 1")
        return cls(
            bootstrap=bootstrap,
            security_protocol=protocol,
            sasl_mechanism=e.get("KUOTA_KAFKA_SASL_MECHANISM") or None,
            sasl_username=e.get("KUOTA_KAFKA_SASL_USERNAME") or None,
            sasl_password=e.get("KUOTA_KAFKA_SASL_PASSWORD") or None,
            ca_file=e.get("KUOTA_KAFKA_CA_FILE") or None,
            cert_file=e.get("KUOTA_KAFKA_CERT_FILE") or None,
            key_file=e.get("KUOTA_KAFKA_KEY_FILE") or None,
            topic_prefix=e.get("KUOTA_TOPIC_PREFIX", "kuota."),
            journal_partitions=partitions,
        )

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments shared by aiokafka producers, consumers and admin clients."""
        kw: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
            kw["ssl_context"] = ctx
        if self.security_protocol.startswith("SASL"):
            kw["sasl_mechanism"] = self.sasl_mechanism or "SCRAM-SHA-512"
            kw["sasl_plain_username"] = self.sasl_username
            kw["sasl_plain_password"] = self.sasl_password
        return kw

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"
