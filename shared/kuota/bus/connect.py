"""Starting Kafka clients with a clear reason when the broker refuses them.

aiokafka reports a refused SASL password, an untrusted broker certificate or a
listener that speaks another protocol as ``KafkaConnectionError("Unable to
bootstrap from [...]")`` and logs the cause at ERROR; a service that retries
retriable errors would then retry a wrong password forever. ``start`` starts a
client and, when bootstrapping fails, connects once more by hand to learn why:
a refusal of kuota's credentials or TLS settings becomes
:class:`KafkaAuthError` (not retriable, the message names the settings to
check); a broker that is merely unreachable stays a retriable
``KafkaConnectionError``.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Protocol

from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    BrokerResponseError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedSaslMechanismError,
)

from kuota.bus.settings import KafkaSettings

PROBE_TIMEOUT_S = 10.0


class KafkaAuthError(AuthenticationFailedError):  # type: ignore[misc]
    """The broker refused kuota's credentials or TLS settings (not retriable)."""


class _Startable(Protocol):
    async def start(self) -> None: ...


async def start(client: _Startable, settings: KafkaSettings) -> None:
    """``await client.start()``; a bootstrap failure caused by security
    settings raises :class:`KafkaAuthError` with the reason."""
    try:
        await client.start()
    except KafkaConnectionError:
        reason = await refusal(settings)
        if reason is not None:
            raise KafkaAuthError(reason) from None
        raise


def _hint(settings: KafkaSettings, err: BaseException) -> str | None:
    who = settings.describe()
    if isinstance(err, ssl.SSLCertVerificationError):
        return (
            f"{who}: the broker's TLS certificate is not trusted ({err.verify_message}); "
            "check KUOTA_KAFKA_CA_FILE (and KUOTA_KAFKA_SSL_CHECK_HOSTNAME)"
        )
    if isinstance(err, ssl.SSLError):
        return (
            f"{who}: TLS handshake failed ({err.reason or err}); the listener may want a "
            "client certificate (KUOTA_KAFKA_CERT_FILE / KUOTA_KAFKA_KEY_FILE) it trusts, "
            "or not speak TLS (KUOTA_KAFKA_SECURITY)"
        )
    if isinstance(err, UnsupportedSaslMechanismError):
        return f"{who}: {err}; check KUOTA_KAFKA_SASL_MECHANISM"
    if isinstance(err, BrokerResponseError | AuthenticationFailedError):
        text = str(err) or type(err).__name__
        if "SASL" in type(err).__name__.upper() or "auth" in text.lower():
            return (
                f"{who}: SASL authentication failed: {text}; check "
                "KUOTA_KAFKA_SASL_USERNAME / KUOTA_KAFKA_SASL_PASSWORD"
            )
    return None


async def _probe(settings: KafkaSettings, host: str, port: int) -> BaseException | None:
    """Connect once as the clients do (TLS, ApiVersions, SASL); the error, if any."""
    kw = settings.client_kwargs()
    try:
        conn = await asyncio.wait_for(
            create_conn(
                host,
                port,
                client_id="kuota-probe",
                request_timeout_ms=int(PROBE_TIMEOUT_S * 1000),
                ssl_context=kw.get("ssl_context"),
                security_protocol=settings.security_protocol,
                sasl_mechanism=kw.get("sasl_mechanism"),
                sasl_plain_username=settings.sasl_username,
                sasl_plain_password=settings.sasl_password,
            ),
            PROBE_TIMEOUT_S,
        )
    except (KafkaError, OSError, TimeoutError) as err:
        return err
    conn.close()
    return None


def _closed_hint(settings: KafkaSettings, err: BaseException) -> str:
    who = settings.describe()
    if not settings.uses_tls:
        return (
            f"{who}: the broker closes the connection during the handshake ({err}); "
            "is the listener TLS (KUOTA_KAFKA_SECURITY=SSL or SASL_SSL)?"
        )
    if settings.cert_file is None:
        return (
            f"{who}: the broker closes the connection after the TLS handshake ({err}); "
            "the listener may require a client certificate (KUOTA_KAFKA_CERT_FILE / "
            "KUOTA_KAFKA_KEY_FILE) or SASL (KUOTA_KAFKA_SECURITY=SASL_SSL)"
        )
    return (
        f"{who}: the broker closes the connection after the TLS handshake ({err}); does "
        "it trust the CA of KUOTA_KAFKA_CERT_FILE, and is KUOTA_KAFKA_SECURITY right?"
    )


async def refusal(settings: KafkaSettings) -> str | None:
    """Why the first bootstrap broker refuses kuota's security settings, or
    None if it accepts them or cannot be reached at all."""
    first = settings.bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        return None
    err = await _probe(settings, host.strip("[]"), int(port))
    if err is None:
        return None
    hint = _hint(settings, err)
    if hint is not None or not isinstance(err, KafkaConnectionError):
        return hint
    # Closed during the handshake: a protocol or client-certificate mismatch,
    # or a broker going down. Only the first happens again a moment later.
    await asyncio.sleep(1.0)
    again = await _probe(settings, host.strip("[]"), int(port))
    if isinstance(again, KafkaConnectionError):
        return _closed_hint(settings, again)
    return None if again is None else _hint(settings, again)
