"""Kafka and Redis security settings: what the environment gives the clients,
and the clear refusals of incomplete or malformed settings (no broker needed)."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from kuota.bus.settings import KafkaSettings, SettingsError
from kuota.bus.topics import wanted_topics
from kuota.store.settings import RedisSettings

BOOT = {"KUOTA_KAFKA_BOOTSTRAP": "k:9093"}


def _pem_pair(tmp: Path, name: str = "c") -> tuple[Path, Path]:
    """A self-signed CA certificate and its key (openssl, as scripts/webhook-certs)."""
    crt, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    out = ["-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=test"]
    subprocess.run(
        ["openssl", "req", "-x509", *ec, *out, "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True,
        capture_output=True,
    )
    return crt, key


def test_plaintext_is_the_default_and_passes_no_tls_or_sasl() -> None:
    s = KafkaSettings.from_env(BOOT)
    assert s.client_kwargs() == {"bootstrap_servers": "k:9093", "security_protocol": "PLAINTEXT"}
    assert (s.replication_factor, s.topic_min_insync) == (1, 1)


def test_scram_over_tls_goes_to_the_client(tmp_path: Path) -> None:
    crt, _ = _pem_pair(tmp_path)
    s = KafkaSettings.from_env(
        BOOT
        | {
            "KUOTA_KAFKA_SECURITY": "sasl_ssl",
            "KUOTA_KAFKA_SASL_USERNAME": "kuota",
            "KUOTA_KAFKA_SASL_PASSWORD": "pw",
            "KUOTA_KAFKA_CA_FILE": str(crt),
        }
    )
    kw = s.client_kwargs()
    assert kw["security_protocol"] == "SASL_SSL"
    assert (kw["sasl_mechanism"], kw["sasl_plain_username"], kw["sasl_plain_password"]) == (
        "SCRAM-SHA-512",
        "kuota",
        "pw",
    )
    ctx = kw["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext) and ctx.check_hostname
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "test"),),)]
    assert "pw" not in s.describe() and "'kuota'" in s.describe()


def test_mtls_loads_the_client_certificate(tmp_path: Path) -> None:
    crt, key = _pem_pair(tmp_path)
    env = BOOT | {
        "KUOTA_KAFKA_SECURITY": "SSL",
        "KUOTA_KAFKA_CA_FILE": str(crt),
        "KUOTA_KAFKA_CERT_FILE": str(crt),
        "KUOTA_KAFKA_KEY_FILE": str(key),
        "KUOTA_KAFKA_SSL_CHECK_HOSTNAME": "false",
    }
    s = KafkaSettings.from_env(env)
    assert "sasl_mechanism" not in s.client_kwargs()
    assert not s.ssl_context().check_hostname
    # a key that does not belong to the certificate: refused when the context is built
    _, other_key = _pem_pair(tmp_path, "other")
    bad = KafkaSettings.from_env(env | {"KUOTA_KAFKA_KEY_FILE": str(other_key)})
    with pytest.raises(SettingsError, match="Kafka TLS files"):
        bad.client_kwargs()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUOTA_KAFKA_SECURITY": "TLS"}, "not a Kafka security protocol"),
        ({"KUOTA_KAFKA_SECURITY": "SASL_SSL"}, "needs KUOTA_KAFKA_SASL_USERNAME"),
        (
            {
                "KUOTA_KAFKA_SECURITY": "SASL_SSL",
                "KUOTA_KAFKA_SASL_USERNAME": "u",
                "KUOTA_KAFKA_SASL_PASSWORD": "p",
                "KUOTA_KAFKA_SASL_MECHANISM": "GSSAPI",
            },
            "kuota supports",
        ),
        ({"KUOTA_KAFKA_CA_FILE": "/nonexistent/ca.crt"}, "no such file"),
        ({"KUOTA_KAFKA_SSL_CHECK_HOSTNAME": "maybe"}, "want true or false"),
        ({"KUOTA_KAFKA_REPLICATION_FACTOR": "0"}, "at least 1"),
        ({"KUOTA_KAFKA_REPLICATION_FACTOR": "three"}, "must be an integer"),
        (
            {"KUOTA_KAFKA_REPLICATION_FACTOR": "3", "KUOTA_KAFKA_MIN_INSYNC_REPLICAS": "4"},
            "no write could succeed",
        ),
        ({"KUOTA_JOURNAL_PARTITIONS": "0"}, "at least 1"),
    ],
)
def test_malformed_settings_are_refused_with_the_reason(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        KafkaSettings.from_env(BOOT | env)


def test_a_key_without_its_certificate_is_refused(tmp_path: Path) -> None:
    _, key = _pem_pair(tmp_path)
    with pytest.raises(SettingsError, match="without KUOTA_KAFKA_CERT_FILE"):
        KafkaSettings.from_env(BOOT | {"KUOTA_KAFKA_KEY_FILE": str(key)})


def test_unreadable_tls_files_are_refused_when_the_context_is_built(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    s = KafkaSettings.from_env(
        BOOT | {"KUOTA_KAFKA_SECURITY": "SSL", "KUOTA_KAFKA_CA_FILE": str(junk)}
    )
    with pytest.raises(SettingsError, match="Kafka TLS files"):
        s.client_kwargs()


@pytest.mark.parametrize(
    ("rf", "min_isr", "want"),
    [("1", "", 1), ("2", "", 1), ("3", "", 2), ("5", "", 2), ("3", "3", 3)],
)
def test_topics_get_the_configured_replication(rf: str, min_isr: str, want: int) -> None:
    s = KafkaSettings.from_env(
        BOOT | {"KUOTA_KAFKA_REPLICATION_FACTOR": rf, "KUOTA_KAFKA_MIN_INSYNC_REPLICAS": min_isr}
    )
    topics = wanted_topics(s)
    assert [t.name for t in topics] == ["kuota.journal", "kuota.decisions", "kuota.deadletter"]
    for t in topics:
        assert t.replication_factor == int(rf)
        assert t.topic_configs["min.insync.replicas"] == str(want)
    assert topics[0].topic_configs["retention.ms"] == "-1"
    # an explicit replication factor (tests, tools) wins, min ISR stays within it
    assert {t.replication_factor for t in wanted_topics(s, 1)} == {1}
    assert {t.topic_configs["min.insync.replicas"] for t in wanted_topics(s, 1)} == {"1"}


# --------------------------------------------------------------------------- Redis


def test_redis_acl_user_and_password_from_the_environment() -> None:
    s = RedisSettings.from_env(
        {
            "KUOTA_REDIS_URL": "redis://r:6379/0",
            "KUOTA_REDIS_USERNAME": "kuota",
            "KUOTA_REDIS_PASSWORD": "secret",
        }
    )
    assert s.client_kwargs() == {"username": "kuota", "password": "secret"}
    assert s.address == "Redis at redis://r:6379 as 'kuota'" and "secret" not in s.address
    client = s.client()
    kw = client.connection_pool.connection_kwargs
    assert (kw["username"], kw["password"], kw["host"]) == ("kuota", "secret", "r")


def test_redis_tls_by_flag_or_scheme(tmp_path: Path) -> None:
    crt, key = _pem_pair(tmp_path)
    env = {
        "KUOTA_REDIS_URL": "redis://r:6380/0",
        "KUOTA_REDIS_TLS": "true",
        "KUOTA_REDIS_CA_FILE": str(crt),
        "KUOTA_REDIS_CERT_FILE": str(crt),
        "KUOTA_REDIS_KEY_FILE": str(key),
    }
    s = RedisSettings.from_env(env)
    assert s.tls and s.address.startswith("Redis at rediss://r:6380")
    pool = s.client().connection_pool
    assert pool.connection_class.__name__ == "SSLConnection"
    kw = pool.connection_kwargs
    assert (kw["ssl_ca_certs"], kw["ssl_certfile"], kw["ssl_keyfile"]) == (
        str(crt),
        str(crt),
        str(key),
    )
    # rediss:// alone turns TLS on, with the system CAs
    s2 = RedisSettings.from_env({"KUOTA_REDIS_URL": "rediss://u:p@r:6380/0"})
    assert s2.tls and s2.client().connection_pool.connection_class.__name__ == "SSLConnection"
    assert s2.address == "Redis at rediss://r:6380 as 'u'"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "KUOTA_REDIS_URL is not set"),
        ({"KUOTA_REDIS_URL": "http://r"}, "want redis://"),
        ({"KUOTA_REDIS_URL": "redis://r", "KUOTA_REDIS_CA_FILE": "__CRT__"}, "TLS is off"),
        (
            {"KUOTA_REDIS_URL": "rediss://r", "KUOTA_REDIS_KEY_FILE": "__CRT__"},
            "without KUOTA_REDIS_CERT_FILE",
        ),
        ({"KUOTA_REDIS_URL": "rediss://r", "KUOTA_REDIS_CA_FILE": "/nonexistent"}, "no such file"),
        ({"KUOTA_REDIS_URL": "redis://r", "KUOTA_REDIS_TLS": "sometimes"}, "want true or false"),
    ],
)
def test_malformed_redis_settings_are_refused(
    env: dict[str, str], message: str, tmp_path: Path
) -> None:
    crt, _ = _pem_pair(tmp_path)
    env = {k: v.replace("__CRT__", str(crt)) for k, v in env.items()}
    with pytest.raises(SettingsError, match=message):
        RedisSettings.from_env(env)
