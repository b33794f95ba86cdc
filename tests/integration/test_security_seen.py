"""Ingest's memory in Redis is signed, and its HMAC keys are required (#23 item 10).

kuota-ingest runs as a process on the real stack, logged in to Redis as its
own ACL user (``kuota.store.acl``'s ingest rules, a name of the test's own).

- The forged finish: a Job is journaled while suspended; with ingest stopped,
  someone who can write Redis rewrites its seen entry to say "finished"
  (unsigned, as before this change, and signed with another key); the Job
  then runs and completes on kwok. Restarted, ingest trusts neither entry,
  and journals the Job's ``WorkloadFinished`` (before, the forged entry hid
  it for good: the fold kept charging a finished Job). An entry for an object
  that does not exist is reported deleted, a malformed one ignored; what
  ingest signed itself is trusted (unchanged objects are not journaled again).
- Without ``KUOTA_SEEN_KEY`` ingest, and without ``KUOTA_SNAPSHOT_KEY``
  admission and ``kuota audit replay --snapshot``, refuse to start with exit 2
  and the reason.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from kubernetes_asyncio import client
from test_ingest_service import (
    KWOK_POD,
    IngestProcess,
    Journal,
    _job,
    api,
    certs,
    ingest_environment,
    namespace,
)
from test_security_kafka import _delete_topics

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.events.schema import ObjectDeleted, ObjectUpserted, WorkloadFinished
from kuota.kube.translate import Seen
from kuota.store import acl
from kuota_ingest import seen_store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
__all__ = ["api", "certs", "namespace"]  # fixtures, imported for pytest

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"


@pytest.fixture
async def ingest_as_its_user(
    kafka_bootstrap: str, redis_url: str, kubeconfig: str, certs: dict[str, str], tmp_path: Path
) -> AsyncIterator[tuple[IngestProcess, str]]:
    """kuota-ingest as the Redis ACL user of its role; its seen hash."""
    env = ingest_environment(kafka_bootstrap, redis_url, kubeconfig, certs)
    prefix = env["KUOTA_TOPIC_PREFIX"]
    user, password = f"{prefix.rstrip('.')}-ingest", uuid.uuid4().hex
    plain = aioredis.from_url(redis_url)
    rules = acl.rules("ingest", prefix)
    await plain.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    env.update(KUOTA_REDIS_USERNAME=user, KUOTA_REDIS_PASSWORD=password)
    p = IngestProcess(env, tmp_path / "ingest.log")
    try:
        yield p, acl.seen_hash(prefix)
    finally:
        code = p.stop()
        await plain.execute_command("ACL", "DELUSER", user)
        await plain.delete(acl.seen_hash(prefix))
        await plain.aclose()
        admin = subprocess.run(  # the test's topics
            [str(BIN / "python"), "-c", DELETE_TOPICS, kafka_bootstrap, prefix],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert admin.returncode == 0, admin.stderr
        assert code in (0, None), f"kuota-ingest exited with {code}:\n{p.log_text()[-3000:]}"


DELETE_TOPICS = """
import asyncio, sys
from aiokafka.admin import AIOKafkaAdminClient
async def main(bootstrap, prefix):
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        mine = [t for t in await admin.list_topics() if t.startswith(prefix)]
        if mine:
            await admin.delete_topics(mine)
    finally:
        await admin.close()
asyncio.run(main(*sys.argv[1:]))
"""


async def test_a_forged_seen_entry_hides_no_finish(
    ingest_as_its_user: tuple[IngestProcess, str],
    api: client.ApiClient,
    namespace: str,
    redis_url: str,
) -> None:
    ingest, seen_hash = ingest_as_its_user
    batch = client.BatchV1Api(api)
    journal = Journal(
        ingest.env["KUOTA_KAFKA_BOOTSTRAP"], f"{ingest.env['KUOTA_TOPIC_PREFIX']}journal"
    )
    await ingest.start()
    await journal.start()
    plain = aioredis.from_url(redis_url)
    try:
        jobs = {}
        for name in ("unsigned", "other-key"):
            jobs[name] = await batch.create_namespaced_job(
                namespace, _job(name, queue="lq", suspend=True, pod=KWOK_POD)
            )
            await journal.wait(
                lambda e, n=name: isinstance(e, ObjectUpserted) and f"/{namespace}/{n}@" in e.id,
                f"the Job {name}",
            )
        await asyncio.sleep(1.0)  # the seen entries follow the journal write
        field = {name: f"Job/{namespace}/{name}" for name in jobs}
        raw = await plain.hgetall(seen_hash)
        mine = {f: seen_store.loads(seen_hash, f, raw[f.encode()]) for f in field.values()}
        assert all(mine.values()), f"ingest's own entries verify: {raw}"
        assert ingest.stop() == 0, ingest.log_text()[-2000:]

        # a Redis writer marks both Jobs finished, then the Jobs really run and finish
        forged = {
            "unsigned": Seen(**{**_fields(mine[field["unsigned"]]), "finished": True}).dumps(),
            "other-key": seen_store.dumps(
                seen_hash,
                field["other-key"],
                Seen(**{**_fields(mine[field["other-key"]]), "finished": True}),
                secret=b"not-ingest's-key",
            ),
        }
        await plain.hset(
            seen_hash,
            mapping={
                field["unsigned"]: forged["unsigned"],
                field["other-key"]: forged["other-key"],
                f"Job/{namespace}/ghost": forged["unsigned"],
                "garbage": "s1.x.[]",
            },
        )
        for name in jobs:
            await batch.patch_namespaced_job(name, namespace, {"spec": {"suspend": False}})
        for name in jobs:
            await _wait_complete(batch, namespace, name)

        before = len(journal.events)
        await ingest.start()
        for name in jobs:
            uid = jobs[name].metadata.uid
            finished = await journal.wait(
                lambda e, n=name, u=uid: e.id == f"finished/{namespace}/{n}/{u}",
                f"WorkloadFinished of {name} despite its forged entry",
                timeout=60,
            )
            assert isinstance(finished, WorkloadFinished) and finished.succeeded
        ghost = await journal.wait(
            lambda e: isinstance(e, ObjectDeleted) and e.name == "ghost", "the ghost reported gone"
        )
        assert ghost.namespace == namespace
        log = ingest.log_text()
        assert "4 of " in log and "do not verify" in log, log[-3000:]
        # the forged entries are replaced by what ingest signs
        raw = await plain.hgetall(seen_hash)
        assert b"garbage" in raw and f"Job/{namespace}/ghost".encode() not in raw
        for f in field.values():
            now = seen_store.loads(seen_hash, f, raw[f.encode()])
            assert now is not None and now.finished, f
        again = [
            e.id
            for e in journal.events[before:]
            if isinstance(e, ObjectUpserted) and f"Namespace//{namespace}@" in e.id
        ]
        assert again == [], f"what ingest signed itself is trusted: {again}"
    finally:
        await journal.stop()
        await plain.aclose()


def _fields(seen: Seen | None) -> dict[str, object]:
    assert seen is not None
    return {k: getattr(seen, k) for k in ("rv", "digest", "uid", "finished", "ready")}


async def _wait_complete(batch: client.BatchV1Api, namespace: str, name: str) -> None:
    for _ in range(120):
        job = await batch.read_namespaced_job_status(name, namespace)
        if any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or []):
            return
        await asyncio.sleep(0.5)
    pytest.fail(f"Job {name} did not complete on kwok")


# --------------------------------------------------------------------------- the keys are required


def _run(binary: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / binary), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("empty", [None, "", "  "])
def test_ingest_refuses_to_start_without_its_seen_key(
    kafka_bootstrap: str,
    redis_url: str,
    kubeconfig: str,
    certs: dict[str, str],
    empty: str | None,
) -> None:
    env = ingest_environment(kafka_bootstrap, redis_url, kubeconfig, certs)
    env.pop("KUOTA_SEEN_KEY")
    if empty is not None:
        env["KUOTA_SEEN_KEY"] = empty
    r = _run("kuota-ingest", env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "KUOTA_SEEN_KEY is not set" in r.stderr and "openssl rand" in r.stderr, r.stderr


@pytest.mark.parametrize("empty", [None, ""])
async def test_admission_and_the_audit_refuse_to_start_without_the_snapshot_key(
    kafka_bootstrap: str, redis_url: str, empty: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUOTA_SNAPSHOT_KEY"}
    env.update(
        KUOTA_KAFKA_BOOTSTRAP=kafka_bootstrap,
        KUOTA_REDIS_URL=redis_url,
        KUOTA_TOPIC_PREFIX=f"test-key-{uuid.uuid4().hex[:8]}.",
    )
    if empty is not None:
        env["KUOTA_SNAPSHOT_KEY"] = empty
    r = await asyncio.to_thread(_run, "kuota-admission", env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "KUOTA_SNAPSHOT_KEY is not set" in r.stderr, r.stderr
    # the audit's snapshot check, once there is a journal to audit: a clear error
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    try:
        r = await asyncio.to_thread(_run, "kuota", env, "audit", "replay", "--snapshot")
    finally:
        await _delete_topics(settings, topics)
    assert r.returncode != 0 and "KUOTA_SNAPSHOT_KEY is not set" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
