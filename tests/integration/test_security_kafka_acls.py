"""Each Kafka user of kuota can do its job under its own ACLs, and nothing else (#23 item 9).

The local stack's broker runs Kafka's StandardAuthorizer with
``allow.everyone.if.no.acl.found=true`` and PLAINTEXT clients as super users
(scripts/stack.d/kafka.sh): where no ACL exists, everything is allowed as
before; where ACLs exist, only they count. The table is the production one,
``deploy/kafka/strimzi/users.yaml`` (a KafkaUser per service, the CLI and the
ledger subscriber). Each test makes those users as SCRAM users of its own
(``<instance>-<role>``) with exactly those ACLs, every name made unique to the
test (``kuota.`` / ``kuota-`` -> ``<instance>.`` / ``<instance>-``, other
names prefixed), over PLAINTEXT (CreateAcls, AlterUserScramCredentials), the
topics made beforehand as Strimzi's Topic Operator would; all removed after.

- Their jobs: ingest journals with its idempotent producer; kuota-admission
  and kuota-preemption run as processes and make a preemption (plans on the
  journal, decisions in transactions, their groups); the actuator's consumer
  group reads the decisions and it reports to the journal and dead letters;
  the ledger's group reads the decisions; ``kuota audit replay`` as the CLI
  user finds the decisions identical.
- The rest, each refused by the broker: ingest writing decisions, admission
  using preemption's transactional id or group, a subscriber reading the
  journal, the CLI writing, anybody creating a topic, ...

Not covered: cluster-level operations (no cluster ACL exists on the stack, so
the broker allows them to everyone; Strimzi allows them to nobody but its
own super users).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import struct
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from pipeline_helpers import Decisions, Service, free_port, read_topic
from preemption_journal import Journal, within_cluster_queue
from test_security_kafka import _delete_topics, scram_env

from kuota.bus import connect
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics, ensure_topics, shard_key
from kuota.events.schema import JournalEvent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["scram_env"]  # a fixture, imported for pytest

REPO = Path(__file__).resolve().parents[2]
USERS = REPO / "deploy" / "kafka" / "strimzi" / "users.yaml"


def _scram_module() -> Any:
    """scripts/kafka/kafka_scram.py, which the stack makes its SCRAM user with."""
    path = REPO / "scripts" / "kafka" / "kafka_scram.py"
    spec = importlib.util.spec_from_file_location("kafka_scram", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kafka_scram = _scram_module()

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
ALLOW, ANY_PATTERN, ANY_OPERATION, ANY_PERMISSION = 3, 1, 1, 1
REFUSED = (TopicAuthorizationFailedError, GroupAuthorizationFailedError)
WAIT = 60.0


# --------------------------------------------------------------------------- the admin API


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


def delete_acls(bootstrap: str, principal: str) -> None:
    """Every ACL of ``principal`` (a principal unique to the test)."""
    body = struct.pack(">i", 1) + struct.pack(">b", 1) + _string(None)  # any resource type
    body += struct.pack(">b", ANY_PATTERN) + _string(principal) + _string(None)
    body += struct.pack(">bb", ANY_OPERATION, ANY_PERMISSION)
    resp = _call(bootstrap, 31, body)  # DeleteAcls v1
    (code,) = struct.unpack_from(">h", resp, 8)
    assert code == 0, f"DeleteAcls: error {code}"


# --------------------------------------------------------------------------- the table


def kafka_users() -> dict[str, list[dict[str, Any]]]:
    """users.yaml: KafkaUser name -> its ACLs."""
    out = {}
    for doc in yaml.safe_load_all(USERS.read_text()):
        if doc and doc["kind"] == "KafkaUser":
            assert doc["spec"]["authentication"]["type"] == "scram-sha-512"
            out[doc["metadata"]["name"]] = doc["spec"]["authorization"]["acls"]
    return out


def unique(name: str, instance: str) -> str:
    """A users.yaml resource name, made this test's own."""
    if name.startswith("kuota."):
        return f"{instance}.{name[len('kuota.') :]}"
    if name.startswith("kuota-"):
        return f"{instance}-{name[len('kuota-') :]}"
    return f"{instance}-{name}"


def acls_of(user: str, instance: str, principal: str) -> list[Acl]:
    out: list[Acl] = []
    for acl in kafka_users()[user]:
        r = acl["resource"]
        name = unique(r["name"], instance)
        for op in acl["operations"]:
            out.append(
                (RESOURCE[r["type"]], name, PATTERN[r["patternType"]], principal, OPERATION[op])
            )
    return out


def test_the_table_is_one_user_per_service_with_its_own_ids() -> None:
    """Offline: each service's group and transactional ids are its own, and no
    user but the CLI and the dashboard sees another's group (Describe only, for
    admission's committed offset); nobody may create topics."""
    users = kafka_users()
    roles = ("ingest", "admission", "preemption", "actuator")
    readers = {"kuota-cli", "kuota-dashboard"}
    assert set(users) == {f"kuota-{r}" for r in roles} | readers | {"kuota-ledger"}
    for user, acls in users.items():
        for acl in acls:
            r, ops = acl["resource"], set(acl["operations"])
            assert "Create" not in ops and "All" not in ops, (user, acl)
            if r["type"] == "transactionalId":
                assert r == {"type": r["type"], "name": f"{user}-", "patternType": "prefix"}
            if r["type"] == "group" and user in readers:
                assert ops == {"Describe"}, (user, acl)
            elif r["type"] == "group":
                assert r["name"] in (user, "gpu-ledger"), (user, r)
            if r["type"] == "topic" and r["patternType"] == "prefix":
                assert ops == {"Describe"}, (user, acl)
    writers = {u for u, acls in users.items() for a in acls if "Write" in a["operations"]} - {
        "kuota-admission",
        "kuota-preemption",
    }
    assert writers == {"kuota-ingest", "kuota-actuator"}  # idempotent, not transactional


# --------------------------------------------------------------------------- fixtures


@dataclass
class Users:
    instance: str
    topics: Topics
    plain: KafkaSettings  # the super user (PLAINTEXT), to look
    env: dict[str, dict[str, str]]  # role -> its Kafka settings

    def settings(self, role: str, **extra: str) -> KafkaSettings:
        return KafkaSettings.from_env(self.env[role] | extra)


@pytest.fixture
async def users(scram_env: dict[str, str], kafka_bootstrap: str) -> AsyncIterator[Users]:
    instance = f"test-acl-{uuid.uuid4().hex[:8]}"
    plain = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=f"{instance}.")
    topics = await ensure_topics(plain)  # the Topic Operator's job in production
    host, _, port = kafka_bootstrap.rpartition(":")
    made: list[str] = []
    env: dict[str, dict[str, str]] = {}
    try:
        for user in kafka_users():
            role = user.removeprefix("kuota-")
            name, password = f"{instance}-{role}", uuid.uuid4().hex
            kafka_scram.upsert(host, int(port), name, password)
            made.append(name)
            create_acls(kafka_bootstrap, acls_of(user, instance, f"User:{name}"))
            env[role] = scram_env | {
                "KUOTA_KAFKA_SASL_USERNAME": name,
                "KUOTA_KAFKA_SASL_PASSWORD": password,
                "KUOTA_TOPIC_PREFIX": f"{instance}.",
            }
        await asyncio.sleep(1.5)  # users and ACLs reach the broker through the metadata log
        yield Users(instance, topics, plain, env)
    finally:
        for name in made:
            delete_acls(kafka_bootstrap, f"User:{name}")
            kafka_scram.delete(host, int(port), name)
        await _delete_topics(plain, topics)


async def refused(what: str, attempt: Callable[[], Awaitable[object]]) -> KafkaError | None:
    """``attempt`` fails with an authorization error (within 30 s), or reads
    nothing of a topic that holds a record (a topic the user may not even
    Describe is never fetched: aiokafka logs it, raises nothing)."""
    try:
        got = await asyncio.wait_for(attempt(), 30)
    except (*REFUSED, TransactionalIdAuthorizationFailed) as err:
        return err
    if got == 0:
        return None
    raise AssertionError(f"{what}: allowed")


async def produce(settings: KafkaSettings, topic: str, values: list[bytes], **kw: Any) -> None:
    producer = AIOKafkaProducer(**kw, **settings.client_kwargs())
    await connect.start(producer, settings)
    try:
        if "transactional_id" in kw:
            async with producer.transaction():
                for v in values:
                    await producer.send(topic, v, key=shard_key(""))
        else:
            for v in values:
                await producer.send_and_wait(topic, v, key=shard_key(""))
    finally:
        await producer.stop()


async def consume(settings: KafkaSettings, topic: str, group: str | None) -> int:
    """Read ``topic`` from the start (in ``group``, committing), return how many."""
    consumer = AIOKafkaConsumer(
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        **settings.client_kwargs(),
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        if group is None:
            consumer.assign([tp])
        else:
            consumer.subscribe([topic])
        got = 0
        for _ in range(20):
            batch = await consumer.getmany(timeout_ms=500)
            got += sum(len(v) for v in batch.values())
            if got and not batch:
                break
        if group is not None:
            await consumer.commit()
        return got
    finally:
        await consumer.stop()


def journal_bytes(events: list[JournalEvent]) -> list[bytes]:
    return [e.model_dump_json().encode() for e in events]


# --------------------------------------------------------------------------- the jobs


async def test_each_user_does_its_job_under_its_own_acls(
    users: Users, redis_url: str, tmp_path: Path
) -> None:
    inst, topics = users.instance, users.topics
    base = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_KAFKA_")}
    base.update(KUOTA_REDIS_URL=redis_url, KUOTA_MAX_BATCH="10")

    def service(role: str) -> Service:
        env = base | users.env[role] | {"KUOTA_METRICS_PORT": str(free_port())}
        return Service(role, env, tmp_path / f"{role}.log")

    # ingest: topics seen (not created), the journal written idempotently, acks=all
    ingest = users.settings("ingest")
    assert await ensure_topics(ingest) == topics
    j = Journal()
    await produce(
        ingest, topics.journal, journal_bytes(within_cluster_queue(j)), enable_idempotence=True
    )
    decisions = Decisions(users.plain, topics.decisions)
    await decisions.start()
    admission, preemption = service("admission"), service("preemption")
    try:
        admission.start()
        preemption.start()
        await decisions.admitted("team-a/mid")
        high = j.job("high", namespace="team-a", gpus=2, priority="high")
        await produce(ingest, topics.journal, journal_bytes(high), enable_idempotence=True)
        # (admitted once the victim's pods are gone: not this test's business)
        pre = await decisions.until(
            lambda ds: next((d for d in ds if d.type == "Preempted"), None), "a Preempted"
        )
        assert (pre.workload, pre.preemptor) == ("team-a/low", "team-a/high"), pre
        plans = [
            r
            for r in await read_topic(users.plain, topics.journal)
            if dict(r.headers).get("kuota-type") == b"PreemptionPlan"
        ]
        assert pre.cause in {json.loads(r.value)["id"] for r in plans}, (
            "admission preempted on the plan kuota-preemption wrote to the journal"
        )
        await decisions.settle()
        recorded = len(decisions.all)

        # the CLI: the audit reads journal, decisions and admission's committed offset
        audit = await asyncio.to_thread(
            subprocess.run,
            [str(REPO / ".venv" / "bin" / "kuota"), "audit", "replay", "--json"],
            env=base | users.env["cli"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
        report = json.loads(audit.stdout)
        assert report["identical"] is True and report["recorded"] == recorded, report
    finally:
        await decisions.stop()
        for svc in (admission, preemption):
            code = svc.terminate()
            if code != 0 or "Traceback" in svc.text():
                print(svc.text()[-6000:])
            assert code == 0, f"kuota-{svc.name} exited {code}"

    # the actuator: its group reads the decisions; it reports to the journal
    actuator = users.settings("actuator")
    assert await ensure_topics(actuator) == topics
    assert await consume(actuator, topics.decisions, f"{inst}-actuator") == recorded
    await produce(actuator, topics.journal, [b'{"report": 1}'], enable_idempotence=True)
    await produce(actuator, topics.deadletter, [b"undecodable"], enable_idempotence=True)

    # the ledger: its own group prefix, the decisions only
    ledger = users.settings("ledger")
    assert await consume(ledger, topics.decisions, f"{inst}-gpu-ledger-1") == recorded

    # the dashboard: journal and decisions in no group, admission's committed offset
    from kuota.audit.kafka import committed_offset

    dashboard = users.settings("dashboard")
    assert await consume(dashboard, topics.decisions, None) == recorded
    assert await consume(dashboard, topics.journal, None) > 0
    journal_tp = TopicPartition(topics.journal, 0)
    assert await committed_offset(dashboard, f"{inst}-admission", journal_tp) is not None


# --------------------------------------------------------------------------- the rest


async def test_each_user_is_refused_what_is_not_its_job(users: Users) -> None:
    inst, t = users.instance, users.topics
    for topic in (t.journal, t.decisions):  # one record each, written by the super user
        await produce(users.plain, topic, [b"first"])
    s = {role: users.settings(role) for role in users.env}
    idem = {"enable_idempotence": True}

    def txn(role: str) -> dict[str, Any]:
        return {"transactional_id": f"{inst}-{role}-0"}

    checks: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        # ingest writes the journal, nothing else
        ("ingest writes decisions", lambda: produce(s["ingest"], t.decisions, [b"x"], **idem)),
        ("ingest reads the journal", lambda: consume(s["ingest"], t.journal, None)),
        (
            "ingest uses admission's transactional id",
            lambda: produce(s["ingest"], t.journal, [b"x"], **txn("admission")),
        ),
        # admission: its own transactional id and group only
        (
            "admission uses preemption's transactional id",
            lambda: produce(s["admission"], t.decisions, [b"x"], **txn("preemption")),
        ),
        ("admission writes the journal", lambda: produce(s["admission"], t.journal, [b"x"])),
        (
            "admission joins preemption's group",
            lambda: consume(s["admission"], t.journal, f"{inst}-preemption"),
        ),
        # preemption: plans to the journal, never decisions
        ("preemption writes decisions", lambda: produce(s["preemption"], t.decisions, [b"x"])),
        (
            "preemption uses admission's transactional id",
            lambda: produce(s["preemption"], t.journal, [b"x"], **txn("admission")),
        ),
        # the actuator: reads decisions, never writes them, reads no journal
        ("actuator writes decisions", lambda: produce(s["actuator"], t.decisions, [b"x"])),
        ("actuator reads the journal", lambda: consume(s["actuator"], t.journal, None)),
        (
            "actuator uses admission's transactional id",
            lambda: produce(s["actuator"], t.journal, [b"x"], **txn("admission")),
        ),
        (
            "actuator joins admission's group",
            lambda: consume(s["actuator"], t.decisions, f"{inst}-admission"),
        ),
        # a subscriber: decisions in its own groups only
        ("ledger reads the journal", lambda: consume(s["ledger"], t.journal, None)),
        (
            "ledger joins the actuator's group",
            lambda: consume(s["ledger"], t.decisions, f"{inst}-actuator"),
        ),
        ("ledger writes decisions", lambda: produce(s["ledger"], t.decisions, [b"x"])),
        # the CLI reads
        ("cli writes the journal", lambda: produce(s["cli"], t.journal, [b"x"])),
        ("cli writes decisions", lambda: produce(s["cli"], t.decisions, [b"x"])),
        (
            "cli commits in admission's group",
            lambda: consume(s["cli"], t.journal, f"{inst}-admission"),
        ),
        # the dashboard reads, like the CLI
        ("dashboard writes the journal", lambda: produce(s["dashboard"], t.journal, [b"x"])),
        ("dashboard writes decisions", lambda: produce(s["dashboard"], t.decisions, [b"x"])),
        (
            "dashboard commits in admission's group",
            lambda: consume(s["dashboard"], t.journal, f"{inst}-admission"),
        ),
    ]
    allowed = []
    for what, attempt in checks:
        try:
            await refused(what, attempt)
        except AssertionError as e:
            allowed.append(str(e))
    assert allowed == [], allowed
    # and nothing of it reached the topics
    for topic in (t.journal, t.decisions):
        assert [r.value for r in await read_topic(users.plain, topic)] == [b"first"], topic
