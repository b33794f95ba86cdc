"""The Kafka ACLs documented for kuota are enough, and they are enforced.

The local stack's broker runs Kafka's StandardAuthorizer with
``allow.everyone.if.no.acl.found=true`` and PLAINTEXT clients as super users
(scripts/stack.d/kafka.sh): where no ACL exists, everything is allowed as
before; where ACLs exist, only they count. Here the ACLs of
``deploy/kafka/strimzi/users.yaml`` (the production KafkaUser) are created for
the SCRAM user ``kuota`` with this test's own prefix in place of ``kuota.`` /
``kuota-`` (CreateAcls over PLAINTEXT), and then:

- kuota-admission runs as that user and commits exactly the fold's decisions
  (topics created and described, transactional writes, its consumer group);
- ``kuota audit replay`` reads the journal, the decisions and the group's
  offsets as that user and finds them identical;
- a principal without ACLs there (the mTLS client certificate) is refused
  (TopicAuthorizationFailed), so the ACLs are really enforced.

What this does not cover: cluster-level operations (the stack grants those to
everyone, as no cluster ACL exists), ingest, preemption and the actuator (the
same kinds of operations on the same resources as admission).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError, TransactionalIdAuthorizationFailed
from pipeline_helpers import Service, free_port
from test_admission_service import Bus, Journal, assert_same, expected
from test_security_kafka import (
    _base_env,
    _delete_topics,
    mtls_env,
    redis_acl,
    scram_env,
)

from kuota.bus import connect
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
__all__ = ["mtls_env", "redis_acl", "scram_env"]  # fixtures, imported for pytest

REPO = Path(__file__).resolve().parents[2]
RESOURCE = {"topic": 2, "group": 3, "cluster": 4, "transactionalId": 5}
PATTERN = {"literal": 3, "prefix": 4}
OPERATION = {
    "All": 2,
    "Read": 3,
    "Write": 4,
    "Create": 5,
    "Delete": 6,
    "Alter": 7,
    "Describe": 8,
    "ClusterAction": 9,
    "DescribeConfigs": 10,
    "AlterConfigs": 11,
    "IdempotentWrite": 12,
}
ALLOW = 3


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _call(bootstrap: str, api_key: int, body: bytes) -> bytes:
    """One request (version 1, header v1) over PLAINTEXT; the response body."""
    host, _, port = bootstrap.rpartition(":")
    header = struct.pack(">hhi", api_key, 1, 99) + _string("kuota-test-acls")
    request = header + body
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        payload = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", payload, 0)[0] == 99
    return payload[4:]


Acl = tuple[int, str, int, str, int]  # resource type, name, pattern, principal, operation


def create_acls(bootstrap: str, acls: list[Acl]) -> None:
    body = struct.pack(">i", len(acls))
    for rtype, name, pattern, principal, op in acls:
        body += struct.pack(">b", rtype) + _string(name) + struct.pack(">b", pattern)
        body += _string(principal) + _string("*") + struct.pack(">bb", op, ALLOW)
    resp = _call(bootstrap, 30, body)  # CreateAcls v1
    (count,) = struct.unpack_from(">i", resp, 4)
    off = 8
    for _ in range(count):
        (code,) = struct.unpack_from(">h", resp, off)
        (n,) = struct.unpack_from(">h", resp, off + 2)
        message = resp[off + 4 : off + 4 + max(n, 0)].decode()
        off += 4 + max(n, 0)
        assert code == 0, f"CreateAcls: error {code}: {message}"


def delete_acls(bootstrap: str, principal: str, names: list[tuple[int, str]]) -> None:
    body = struct.pack(">i", len(names))
    for rtype, name in names:
        body += struct.pack(">b", rtype) + _string(name) + struct.pack(">b", PATTERN["prefix"])
        body += _string(principal) + _string(None) + struct.pack(">bb", 1, 1)  # any op / perm
    resp = _call(bootstrap, 31, body)  # DeleteAcls v1
    (code,) = struct.unpack_from(">h", resp, 8)
    assert code == 0, f"DeleteAcls: error {code}"


def documented_acls(instance: str, principal: str) -> list[Acl]:
    """users.yaml's ACLs with ``kuota.`` / ``kuota-`` replaced by this instance."""
    doc: dict[str, Any] = yaml.safe_load((REPO / "deploy/kafka/strimzi/users.yaml").read_text())
    out: list[Acl] = []
    for acl in doc["spec"]["authorization"]["acls"]:
        r = acl["resource"]
        name = r["name"].replace("kuota.", f"{instance}.").replace("kuota-", f"{instance}-")
        for op in acl["operations"]:
            out.append(
                (RESOURCE[r["type"]], name, PATTERN[r["patternType"]], principal, OPERATION[op])
            )
    return out


@pytest.fixture
async def acl_instance(
    scram_env: dict[str, str], kafka_bootstrap: str
) -> AsyncIterator[tuple[str, dict[str, str]]]:
    instance = f"test-acl-{uuid.uuid4().hex[:8]}"
    principal = f"User:{scram_env['KUOTA_KAFKA_SASL_USERNAME']}"
    acls = documented_acls(instance, principal)
    assert {a[0] for a in acls} == {
        RESOURCE["topic"],
        RESOURCE["group"],
        RESOURCE["transactionalId"],
    }
    create_acls(kafka_bootstrap, acls)
    await asyncio.sleep(1.0)  # the ACLs reach the broker through the metadata log
    try:
        yield instance, scram_env | {"KUOTA_TOPIC_PREFIX": f"{instance}."}
    finally:
        delete_acls(kafka_bootstrap, principal, sorted({(a[0], a[1]) for a in acls}))


async def test_the_documented_acls_are_enough_and_enforced(
    acl_instance: tuple[str, dict[str, str]],
    mtls_env: dict[str, str],
    kafka_bootstrap: str,
    redis_url: str,
    redis_acl: Callable[[], dict[str, str]],
    tmp_path: Path,
) -> None:
    instance, kafka_env = acl_instance
    env = _base_env(f"{instance}.") | kafka_env | redis_acl()
    env.update(
        KUOTA_REDIS_URL=redis_url,
        KUOTA_METRICS_PORT=str(free_port()),
        KUOTA_SNAPSHOT_KEY="test-acl-key",
        KUOTA_MAX_BATCH="10",
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)  # Create + Describe on the prefix, as the user
    bus = Bus(settings, topics)
    admission = Service("admission", env, tmp_path / "admission.log")
    try:
        # a principal without ACLs on this prefix is refused
        other = KafkaSettings.from_env(mtls_env | {"KUOTA_TOPIC_PREFIX": f"{instance}."})
        intruder = AIOKafkaProducer(**other.client_kwargs())
        await connect.start(intruder, other)
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                await intruder.send_and_wait(topics.journal, b"not allowed")
        finally:
            await intruder.stop()

        j = Journal()
        await bus.produce(j.queues() + j.jobs_and_finishes(20))
        admission.start()
        want = expected(bus.written)
        assert_same(await bus.decisions(expect=len(want), timeout=90), want)
        audit = await asyncio.to_thread(
            subprocess.run,
            [str(REPO / ".venv" / "bin" / "kuota"), "audit", "replay", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
        report = json.loads(audit.stdout)
        assert report["identical"] is True and report["recorded"] == len(want), report
    finally:
        admission.terminate()
        if admission.log.exists():
            print(admission.text()[-8000:])
        await bus.close()
        await _delete_topics(KafkaSettings(bootstrap=kafka_bootstrap), topics)


async def test_an_operation_left_out_of_the_acls_is_refused(
    scram_env: dict[str, str], kafka_bootstrap: str
) -> None:
    """The control: the same ACLs without Write on the transactional ids, and
    admission's transactional producer cannot start (so the test above would
    catch an operation missing from users.yaml on any resource it names)."""
    instance = f"test-acl-{uuid.uuid4().hex[:8]}"
    principal = f"User:{scram_env['KUOTA_KAFKA_SASL_USERNAME']}"
    acls = [
        a
        for a in documented_acls(instance, principal)
        if (a[0], a[4]) != (RESOURCE["transactionalId"], OPERATION["Write"])
    ]
    create_acls(kafka_bootstrap, acls)
    await asyncio.sleep(1.0)
    settings = KafkaSettings.from_env(scram_env | {"KUOTA_TOPIC_PREFIX": f"{instance}."})
    topics = await ensure_topics(settings)
    producer = AIOKafkaProducer(
        transactional_id=f"{instance}-admission-0", **settings.client_kwargs()
    )
    try:
        with pytest.raises(TransactionalIdAuthorizationFailed):
            await producer.start()
    finally:
        await producer.stop()
        delete_acls(kafka_bootstrap, principal, sorted({(a[0], a[1]) for a in acls}))
        await _delete_topics(KafkaSettings(bootstrap=kafka_bootstrap), topics)
