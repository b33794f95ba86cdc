"""Kafka with TLS and authentication, on the local stack's extra listeners.

``scripts/stack up`` opens two listeners next to the PLAINTEXT one
(scripts/stack.d/kafka.sh): SSL with mutual TLS (a client certificate signed
by the stack's dev CA is required) and SASL_SSL with SCRAM-SHA-512 (user
``kuota``). Their addresses, the CA, the client certificate and the SCRAM
password are in stack.env under ``KUOTA_KAFKA_SSL_BOOTSTRAP``,
``KUOTA_KAFKA_SASL_BOOTSTRAP`` and ``KUOTA_KAFKA_STACK_*``; every test here
configures kuota as a user would, through the ``KUOTA_KAFKA_*`` variables read
by ``KafkaSettings.from_env``.

- produce, consume and a Kafka transaction (committed and aborted batches,
  ``read_committed``) through each listener;
- a wrong SCRAM password, a missing client certificate and an untrusted broker
  certificate are refused at once with a reason naming the setting to check
  (``KafkaAuthError``), never retried as if the broker were down;
- kuota-admission runs on the SCRAM listener with Redis as the ACL user, and
  ``kuota audit replay --snapshot`` (CLI: Kafka consumer and admin client,
  Redis) finds its decisions identical to a re-fold, and the example
  subscriber (examples/consumer/ledger.py) reads them all; ``kuota status``
  works the same way; a service given a wrong password exits with the reason.

A broker started by an older ``scripts/stack`` has no such listeners: the
tests then FAIL and say how to restart it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from pipeline_helpers import Service, free_port
from test_admission_service import Bus, Journal, assert_same, expected

from kuota.bus import connect
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics, ensure_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
RESTART = "scripts/stack down kafka && scripts/stack up kafka"


def _listener(var: str) -> str:
    value = os.environ.get(var, "").strip()
    if not value:
        pytest.fail(
            f"{var} is not in the stack's env file: the stack was written by an older "
            f"scripts/stack; restart Kafka to get the SSL/SASL listeners: {RESTART}",
            pytrace=False,
        )
    host, _, port = value.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as err:
        pytest.fail(
            f"no Kafka listener at {var}={value} ({err}): the broker was started by an "
            f"older scripts/stack, without the SSL/SASL listeners; restart it: {RESTART}",
            pytrace=False,
        )
    return value


def _stack(var: str) -> str:
    value = os.environ.get(var, "").strip()
    if not value:
        pytest.fail(f"{var} is not in the stack's env file; restart Kafka: {RESTART}")
    return value


@pytest.fixture(scope="module")
def mtls_env() -> dict[str, str]:
    """What a user sets for the mutual-TLS listener."""
    return {
        "KUOTA_KAFKA_BOOTSTRAP": _listener("KUOTA_KAFKA_SSL_BOOTSTRAP"),
        "KUOTA_KAFKA_SECURITY": "SSL",
        "KUOTA_KAFKA_CA_FILE": _stack("KUOTA_KAFKA_STACK_CA_FILE"),
        "KUOTA_KAFKA_CERT_FILE": _stack("KUOTA_KAFKA_STACK_CLIENT_CERT_FILE"),
        "KUOTA_KAFKA_KEY_FILE": _stack("KUOTA_KAFKA_STACK_CLIENT_KEY_FILE"),
    }


@pytest.fixture(scope="module")
def scram_env() -> dict[str, str]:
    """What a user sets for the SASL_SSL / SCRAM-SHA-512 listener."""
    return {
        "KUOTA_KAFKA_BOOTSTRAP": _listener("KUOTA_KAFKA_SASL_BOOTSTRAP"),
        "KUOTA_KAFKA_SECURITY": "SASL_SSL",
        "KUOTA_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KUOTA_KAFKA_SASL_USERNAME": _stack("KUOTA_KAFKA_STACK_SCRAM_USERNAME"),
        "KUOTA_KAFKA_SASL_PASSWORD": _stack("KUOTA_KAFKA_STACK_SCRAM_PASSWORD"),
        "KUOTA_KAFKA_CA_FILE": _stack("KUOTA_KAFKA_STACK_CA_FILE"),
    }


@pytest.fixture
def prefix() -> str:
    return f"test-sec-{uuid.uuid4().hex[:10]}."


async def _delete_topics(settings: KafkaSettings, topics: Topics) -> None:
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        await admin.delete_topics([topics.journal, topics.decisions, topics.deadletter])
    finally:
        await admin.close()


@pytest.fixture
async def secured(
    request: pytest.FixtureRequest, prefix: str, kafka_bootstrap: str
) -> AsyncIterator[tuple[KafkaSettings, Topics]]:
    """Settings for the listener named by the test's parameter, and its topics,
    created through that listener; deleted afterwards over PLAINTEXT."""
    env = dict(request.getfixturevalue(f"{request.param}_env"), KUOTA_TOPIC_PREFIX=prefix)
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    yield settings, topics
    await _delete_topics(KafkaSettings(bootstrap=kafka_bootstrap), topics)


@pytest.mark.parametrize("secured", ["mtls", "scram"], indirect=True)
async def test_produce_consume_and_transactions(secured: tuple[KafkaSettings, Topics]) -> None:
    settings, topics = secured
    kw = settings.client_kwargs()
    assert kw["security_protocol"] in ("SSL", "SASL_SSL") and "ssl_context" in kw
    producer = AIOKafkaProducer(
        transactional_id=f"{settings.topic_prefix}tx", enable_idempotence=True, **kw
    )
    await connect.start(producer, settings)
    try:
        async with producer.transaction():
            for i in range(5):
                await producer.send(topics.journal, f"committed-{i}".encode(), key=b"kuota")
        with pytest.raises(RuntimeError, match="abort me"):
            async with producer.transaction():
                for i in range(3):
                    await producer.send(topics.journal, f"aborted-{i}".encode(), key=b"kuota")
                await producer.flush()
                raise RuntimeError("abort me")
        async with producer.transaction():
            await producer.send(topics.journal, b"committed-5", key=b"kuota")
        # a plain (non-transactional) write on the same secured connection settings
        plain = AIOKafkaProducer(acks="all", **settings.client_kwargs())
        await connect.start(plain, settings)
        try:
            await plain.send_and_wait(topics.deadletter, b"plain")
        finally:
            await plain.stop()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topics.journal,
        group_id=f"{settings.topic_prefix}group",
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **settings.client_kwargs(),
    )
    await connect.start(consumer, settings)
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            for recs in (await consumer.getmany(timeout_ms=300)).values():
                got += [r.value for r in recs]
        await consumer.commit()  # the group coordinator works through this listener too
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            for recs in (await consumer.getmany(timeout_ms=300)).values():
                got += [r.value for r in recs]
    finally:
        await consumer.stop()
    assert got == [f"committed-{i}".encode() for i in range(6)], got


async def _refusal(env: dict[str, str]) -> tuple[str, float]:
    """ensure_topics with these settings must fail with KafkaAuthError, fast."""
    settings = KafkaSettings.from_env(env)
    t0 = time.monotonic()
    with pytest.raises(connect.KafkaAuthError) as caught:
        await asyncio.wait_for(ensure_topics(settings), 30)
    assert not caught.value.retriable  # a service must not retry it forever
    return str(caught.value), time.monotonic() - t0


async def test_wrong_scram_password_is_refused_with_the_reason(
    scram_env: dict[str, str], prefix: str
) -> None:
    text, took = await _refusal(
        dict(scram_env, KUOTA_KAFKA_SASL_PASSWORD="not-the-password", KUOTA_TOPIC_PREFIX=prefix)
    )
    assert "SASL authentication failed" in text and "invalid credentials" in text, text
    assert "KUOTA_KAFKA_SASL_PASSWORD" in text and scram_env["KUOTA_KAFKA_BOOTSTRAP"] in text
    assert "not-the-password" not in text  # no secret in messages
    assert took < 15, f"refusal took {took:.1f}s"
    # an unknown user reads the same (the broker does not tell which one is wrong)
    text, _ = await _refusal(dict(scram_env, KUOTA_KAFKA_SASL_USERNAME="nobody"))
    assert "SASL authentication failed" in text and "'nobody'" in text, text


async def test_mtls_listener_refuses_a_client_without_certificate(
    mtls_env: dict[str, str],
) -> None:
    env = {
        k: v
        for k, v in mtls_env.items()
        if k not in ("KUOTA_KAFKA_CERT_FILE", "KUOTA_KAFKA_KEY_FILE")
    }
    text, took = await _refusal(env)
    assert "client certificate" in text and "KUOTA_KAFKA_CERT_FILE" in text, text
    assert took < 15, f"refusal took {took:.1f}s"


async def test_an_untrusted_broker_certificate_is_refused(
    scram_env: dict[str, str], tmp_path: Path
) -> None:
    # the system CAs (no KUOTA_KAFKA_CA_FILE) do not know the stack's dev CA
    env = {k: v for k, v in scram_env.items() if k != "KUOTA_KAFKA_CA_FILE"}
    text, _ = await _refusal(env)
    assert "TLS certificate is not trusted" in text and "KUOTA_KAFKA_CA_FILE" in text, text


async def test_plaintext_client_on_a_tls_listener_is_told_so(scram_env: dict[str, str]) -> None:
    text, _ = await _refusal({"KUOTA_KAFKA_BOOTSTRAP": scram_env["KUOTA_KAFKA_BOOTSTRAP"]})
    assert "is the listener TLS" in text and "KUOTA_KAFKA_SECURITY" in text, text


def _base_env(prefix: str) -> dict[str, str]:
    """The test process's environment minus kuota's client settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_KAFKA_")}
    env["KUOTA_TOPIC_PREFIX"] = prefix
    return env


def test_a_service_with_a_wrong_password_exits_with_the_reason(
    scram_env: dict[str, str], prefix: str
) -> None:
    env = _base_env(prefix) | scram_env | {"KUOTA_KAFKA_SASL_PASSWORD": "wrong"}
    env["KUOTA_METRICS_PORT"] = str(free_port())
    t0 = time.monotonic()
    r = subprocess.run(
        [str(REPO / ".venv" / "bin" / "kuota-preemption")],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode != 0, r.stderr[-3000:]
    assert "SASL authentication failed" in r.stderr, r.stderr[-3000:]
    assert time.monotonic() - t0 < 60


async def test_admission_and_audit_over_scram_with_the_redis_acl_user(
    scram_env: dict[str, str],
    prefix: str,
    kafka_bootstrap: str,
    redis_url: str,
    tmp_path: Path,
    redis_acl: Callable[[], dict[str, str]],
) -> None:
    """The whole admission path on SASL_SSL: its transactional producer,
    consumer group and admin client; Redis snapshots written and read as the
    ACL user; the CLI's audit reads both the same way."""
    env = _base_env(prefix) | scram_env | redis_acl()
    env.update(
        KUOTA_REDIS_URL=redis_url,
        KUOTA_METRICS_PORT=str(free_port()),
        KUOTA_SNAPSHOT_KEY="test-security-key",
        KUOTA_SNAPSHOT_EVERY="20",
        KUOTA_SNAPSHOT_SECONDS="1",
        KUOTA_MAX_BATCH="10",
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    bus = Bus(settings, topics)
    admission = Service("admission", env, tmp_path / "admission.log")
    snapshot_key = f"kuota:snapshot:{prefix.rstrip('.')}-admission-0"
    plain = aioredis.from_url(redis_url)  # the default user, to look and clean up
    try:
        j = Journal()
        await bus.produce(j.queues() + j.jobs_and_finishes(40))
        admission.start()
        want = expected(bus.written)
        assert_same(await bus.decisions(expect=len(want), timeout=90), want)
        deadline = time.monotonic() + 30
        while not await plain.exists(snapshot_key) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert await plain.exists(snapshot_key), f"no snapshot {snapshot_key}:\n{admission.text()}"

        # the example subscriber reads the decisions with the same settings
        ledger_log = tmp_path / "ledger.log"
        with ledger_log.open("wb") as out:
            ledger = subprocess.Popen(
                [sys.executable, str(REPO / "examples" / "consumer" / "ledger.py")],
                env=env
                | {"LEDGER_DB": str(tmp_path / "ledger.sqlite"), "LEDGER_GROUP": f"{prefix}ledger"},
                stderr=out,
            )
        try:
            deadline = time.monotonic() + 60
            read = 0
            while read < len(want) and time.monotonic() < deadline and ledger.poll() is None:
                await asyncio.sleep(0.3)
                read = sum(
                    int(n) for n in re.findall(r"ledger: (\d+) decisions", ledger_log.read_text())
                )
            assert read == len(want), ledger_log.read_text()[-3000:]
        finally:
            ledger.terminate()
            ledger.wait(timeout=30)
        for args, recorded in (([], len(want)), (["--snapshot"], None)):
            audit = await asyncio.to_thread(
                subprocess.run,
                [str(REPO / ".venv" / "bin" / "kuota"), "audit", "replay", "--json", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert audit.returncode == 0, (args, audit.stdout[-2000:] + audit.stderr[-2000:])
            report = json.loads(audit.stdout)
            assert report["identical"] is True, (args, report)
            if recorded is not None:
                assert report["recorded"] == recorded, report
    finally:
        admission.terminate()
        if admission.log.exists():
            print(admission.text()[-8000:])
        await bus.close()
        await plain.delete(snapshot_key)
        await plain.aclose()
        await _delete_topics(KafkaSettings(bootstrap=kafka_bootstrap), topics)


@pytest.fixture
def redis_acl() -> Callable[[], dict[str, str]]:
    def env() -> dict[str, str]:
        user = os.environ.get("KUOTA_REDIS_STACK_USERNAME", "").strip()
        password = os.environ.get("KUOTA_REDIS_STACK_PASSWORD", "").strip()
        if not user or not password:
            pytest.fail(
                "KUOTA_REDIS_STACK_USERNAME / _PASSWORD are not in the stack's env file: "
                "run `scripts/stack up` (it adds the ACL user to a running Redis)",
                pytrace=False,
            )
        return {"KUOTA_REDIS_USERNAME": user, "KUOTA_REDIS_PASSWORD": password}

    return env


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))


def test_cli_status_over_scram_with_the_redis_acl_user(
    scram_env: dict[str, str],
    redis_url: str,
    redis_acl: Callable[[], dict[str, str]],
) -> None:
    """``kuota status`` reads the read model from Redis as the ACL user and the
    actuator's lag from Kafka over SCRAM (the default instance, ``kuota``: its
    keys are under ``kuota:*``)."""
    env = _base_env("kuota.") | scram_env | redis_acl() | {"KUOTA_REDIS_URL": redis_url}
    r = subprocess.run(
        [str(REPO / ".venv" / "bin" / "kuota"), "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["key"] == "kuota:status:clusterqueues", doc
    # the same with a wrong Redis password: one clear line, exit 2
    bad = env | {"KUOTA_REDIS_PASSWORD": "wrong"}
    r = subprocess.run(
        [str(REPO / ".venv" / "bin" / "kuota"), "status", "--json"],
        env=bad,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 2 and "invalid username-password pair" in r.stderr, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
