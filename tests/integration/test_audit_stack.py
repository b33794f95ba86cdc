"""``kuota audit``, ``journal export``, ``explain``, ``events tail`` and ``status``
on the real Kafka and Redis, against decisions made by ``kuota-admission``.

The journal is produced under a unique ``KUOTA_TOPIC_PREFIX``; the admission
service (a subprocess, as in ``test_admission_service.py``) decides it in two
runs, so its Redis snapshot after the first run is a real mid-journal start
for ``audit replay --snapshot``. The commands run as ``.venv/bin/kuota``
processes with the same environment.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from builders.journal import journaled_job, upserted
from pipeline_helpers import Service, free_port, pipeline_env
from stack_helpers import delete_pipeline_topics
from test_admission_service import (
    Bus,
    Journal,
    assert_same,
    expected,
)

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent
from kuota.status.model import ClusterQueueReadModel, statuses

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KUOTA = REPO / ".venv" / "bin" / "kuota"


@dataclass
class Rig:
    env: dict[str, str]
    bus: Bus
    admission: Service
    redis: aioredis.Redis
    instance: str

    @property
    def snapshot_key(self) -> str:
        return f"kuota:snapshot:{self.instance}-admission-0"


@pytest.fixture
async def rig(kafka_bootstrap: str, redis_url: str, tmp_path: Path) -> AsyncIterator[Rig]:
    prefix, env = pipeline_env(
        kafka_bootstrap,
        redis_url,
        KUOTA_METRICS_PORT=str(free_port()),
        KUOTA_SNAPSHOT_KEY="test-audit-key",
        # Snapshots only at shutdown: the test knows their offsets.
        KUOTA_SNAPSHOT_EVERY="1000000",
        KUOTA_SNAPSHOT_SECONDS="3600",
        KUOTA_MAX_BATCH="25",
        COLUMNS="200",
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    redis = aioredis.from_url(redis_url)
    instance = prefix.rstrip(".")
    r = Rig(
        env,
        Bus(settings, topics),
        Service("admission", env, tmp_path / "admission.log"),
        redis,
        instance,
    )
    try:
        yield r
    finally:
        proc = r.admission.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if r.admission.log.exists():
            print(r.admission.text()[-4000:])
        await r.bus.close()
        await redis.delete(r.snapshot_key, f"{instance}:status:clusterqueues")
        await redis.aclose()
        await delete_pipeline_topics(settings, topics)


async def kuota(rig: Rig, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``kuota ARGS`` off the event loop (it talks to the same broker)."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUOTA), *args], env=rig.env, capture_output=True, text=True, timeout=timeout
        )

    return await asyncio.to_thread(run)


def as_json(r: subprocess.CompletedProcess[str]) -> Any:
    assert r.stdout.strip(), f"no output; stderr:\n{r.stderr}"
    return json.loads(r.stdout)


async def decide(rig: Rig, events: list[JournalEvent]) -> list[Decision]:
    """Produce ``events``, let kuota-admission decide them, stop it (SIGTERM: it
    saves its snapshot at the committed offset), and return every decision."""
    await rig.bus.produce(events)
    want = expected(rig.bus.written)
    rig.admission.start()
    got = await rig.bus.decisions(expect=len(want))
    assert_same(got, want)
    assert rig.admission.terminate() == 0, "SIGTERM is a clean exit"
    return got


def big_job(name: str, at: float) -> JournalEvent:
    return upserted(journaled_job(name, namespace="team-a", gpus=4, created=at), at)


async def test_audit_explain_export_and_tail_on_decisions_made_by_admission(
    rig: Rig, tmp_path: Path
) -> None:
    j = Journal()
    first = await decide(rig, j.queues() + j.jobs_and_finishes(30))
    raw = await rig.redis.hgetall(rig.snapshot_key)  # type: ignore[misc]
    assert raw, "admission saved a snapshot at shutdown"
    snapshot_offset = int(raw[b"offset"])
    # Two 4-GPU Jobs at the end cannot fit beside the four running ones: they wait.
    tail_events = [*j.jobs_and_finishes(30), big_job("big", j.t + 1), big_job("big2", j.t + 2)]
    want = await decide(rig, tail_events)
    assert len(want) > len(first) and snapshot_offset > 0
    await rig.redis.hset(rig.snapshot_key, mapping=raw)  # type: ignore[misc]
    after_snapshot = [d for d in want if (d.cause_offset or 0) >= snapshot_offset]
    assert after_snapshot, "the second run decided something"

    # ------------------------------------------------------------ identical
    r = await kuota(rig, "audit", "replay")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "audit: identical" in r.stdout
    assert f"{len(want)} of {len(want)} recomputed decisions matched" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("events_per_s=")

    doc = as_json(await kuota(rig, "audit", "replay", "--json"))
    assert doc["identical"] and doc["matched"] == len(want) == doc["recorded"]
    assert doc["events"] == len(rig.bus.written) and doc["events_per_s"] > 0
    assert "committed offset of group" in doc["source"]

    r = await kuota(rig, "audit", "replay", "--snapshot", "--json")
    doc = as_json(r)
    assert r.returncode == 0 and doc["identical"], r.stdout
    assert doc["matched"] == len(after_snapshot), "compares only what follows the snapshot"
    assert doc["events"] == len([o for o, _ in rig.bus.written if o >= snapshot_offset])
    assert f"from snapshot {rig.instance}-admission-0 at offset {snapshot_offset}" in doc["source"]

    doc = as_json(
        await kuota(rig, "audit", "replay", "--from-offset", str(snapshot_offset), "--json")
    )
    assert doc["identical"] and doc["matched"] == len(after_snapshot)
    assert doc["ignored"] == len(want) - len(after_snapshot)

    # ------------------------------------------------------------ export, offline replay
    export = tmp_path / "journal.jsonl"
    r = await kuota(rig, "journal", "export", str(export))
    assert r.returncode == 0, r.stderr
    assert f"exported {len(rig.bus.written)} journal records" in r.stderr
    assert f"{len(want)} decisions to {export}.decisions" in r.stderr
    offline = dict(rig.env, KUOTA_KAFKA_BOOTSTRAP="127.0.0.1:1")  # no Kafka needed
    r = subprocess.run(
        [str(KUOTA), "audit", "replay", "--file", str(export), "--json"],
        env=offline,
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = as_json(r)
    assert r.returncode == 0 and doc["identical"] and doc["matched"] == len(want), r.stdout

    # ------------------------------------------------------------ explain
    by_workload: dict[str, list[Decision]] = {}
    for d in want:
        by_workload.setdefault(d.workload or "", []).append(d)
    busy = next(k for k, ds in by_workload.items() if len({d.type for d in ds}) == 3)
    doc = as_json(await kuota(rig, "explain", busy, "--json"))
    history = [Decision.model_validate(s["decision"]) for s in doc["history"]]
    assert history == by_workload[busy], "explain shows exactly the workload's decisions"
    assert all(s["quota"] and s["quota"][0]["name"] == "cq-gpu" for s in doc["history"])
    assert doc["state"] == "Finished"
    r = await kuota(rig, "explain", busy)
    assert r.returncode == 0
    for d in by_workload[busy]:
        assert f" {d.type}" in r.stdout and f"@{d.cause_offset}" in r.stdout
    assert "quota after: cq-gpu: gpu-a/nvidia.com/gpu" in r.stdout
    print(f"kuota explain {busy}:\n{r.stdout}")

    doc = as_json(await kuota(rig, "explain", "team-a/big2", "--json"))
    waiting = doc["waiting"]
    assert doc["state"] == "Inadmissible" and waiting is not None
    # The oracle for the queue: the in-process fold of the same journal, in the
    # admission service's mode (as explain folds it).
    fold = Fold(preemption="plans")
    for offset, event in rig.bus.written:
        fold.apply(event, offset=offset)
    queue = [k for k, _ in fold.pending_workloads("cq-gpu")]
    position = queue.index("team-a/big2")
    assert queue[position - 1] == "team-a/big", "created just before it, same priority"
    assert waiting["cluster_queue"] == "cq-gpu" and waiting["position_in_cluster_queue"] == position
    assert waiting["ahead"] == queue[max(0, position - 5) : position]
    assert waiting["queued_in_cluster_queue"] == len(queue)
    assert waiting["reason"] == "InsufficientQuota"
    r = await kuota(rig, "explain", "team-a/big2")
    # people count from 1, --json keeps Kueue's 0-based position
    assert f"waiting: position {position + 1} of {len(queue)} in ClusterQueue cq-gpu" in r.stdout
    print(f"kuota explain team-a/big2:\n{r.stdout}")
    r = subprocess.run(
        [str(KUOTA), "explain", "team-a/big2", "--json", "--file", str(export)],
        env=offline,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert as_json(r) == doc, "the same explanation from the export"

    # ------------------------------------------------------------ events tail
    r = await kuota(
        rig, "events", "tail", "--from-beginning", "--json", "--max", str(len(want)),
        "--timeout", "30",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [Decision.model_validate_json(line) for line in r.stdout.splitlines()] == want
    r = await kuota(rig, "events", "tail", "--from-beginning", "--workload", busy, "--timeout", "5")
    assert len(r.stdout.strip().splitlines()) == len(by_workload[busy])
    assert all(busy in line for line in r.stdout.splitlines())

    # ------------------------------------------------------------ a tampered record
    forged = want[3].model_copy(update={"reason": "Forged", "message": "not what kuota decided"})
    producer = AIOKafkaProducer(
        transactional_id=f"{rig.instance}-forger", **rig.bus.settings.client_kwargs()
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(
                rig.bus.topics.decisions,
                key=(forged.workload or "").encode(),
                value=forged.model_dump_json().encode(),
            )
    finally:
        await producer.stop()
    r = await kuota(rig, "audit", "replay")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"DIVERGENCE at decision #{len(want)} (extra)" in r.stdout
    assert "Forged: not what kuota decided" in r.stdout
    assert f"journal offset {want[3].cause_offset}: " in r.stdout, "the event that it names"
    assert "events_per_s=" in r.stdout
    print(f"kuota audit replay, tampered:\n{r.stdout}")
    doc = as_json(await kuota(rig, "audit", "replay", "--json"))
    assert doc["divergence"]["kind"] == "extra"
    assert doc["divergence"]["recorded"]["reason"] == "Forged"
    assert doc["divergence"]["event"]["id"] == want[3].cause

    export2 = tmp_path / "tampered.jsonl"
    assert (await kuota(rig, "journal", "export", str(export2))).returncode == 0
    r = subprocess.run(
        [str(KUOTA), "audit", "replay", "--file", str(export2)],
        env=offline,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "(extra)" in r.stdout, r.stdout


async def test_events_tail_follows_new_decisions_live(rig: Rig) -> None:
    j = Journal()
    await decide(rig, j.queues() + j.jobs_and_finishes(5))
    events = j.jobs_and_finishes(10)
    proc = subprocess.Popen(
        [str(KUOTA), "events", "tail", "--cluster-queue", "cq-gpu", "--timeout", "60",
         "--max", "5"],
        env=rig.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 30)
        assert "following" in line, line
        new = await decide(rig, events)
        out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    lines = out.strip().splitlines()
    fresh = [d for d in new if (d.cause_offset or 0) > rig.bus.written[-len(events) - 1][0]]
    assert len(lines) == 5, out
    for line, d in zip(lines, fresh, strict=False):
        assert d.type in line and (d.workload or "") in line and f"@{d.cause_offset}" in line


async def test_status_renders_the_actuator_read_model_from_redis(rig: Rig) -> None:
    """The hash as the actuator writes it (``kuota_actuator.status``), read back
    by ``kuota status`` under the test's instance name."""
    j = Journal()
    j.queues()
    j.jobs_and_finishes(12)
    model = ClusterQueueReadModel()
    for d in expected(list(enumerate(j.events))):
        model.apply(d)
    key = f"{rig.instance}:status:clusterqueues"
    docs = {}
    for name, status in statuses(model).items():
        doc = {"name": name, **status, "pendingByStatus": model.pending(name)}
        docs[name] = json.dumps({**doc, "updated_at": 1_767_225_600.0})
    await rig.redis.hset(key, mapping=docs)  # type: ignore[misc]
    r = await kuota(rig, "status", "--json")
    assert r.returncode == 0, r.stderr
    doc = as_json(r)
    assert doc["key"] == key
    (cq,) = doc["cluster_queues"]
    assert cq["name"] == "cq-gpu" and cq["admitted"] == model.admitted("cq-gpu")
    assert cq["pending"] == sum(model.pending("cq-gpu").values())
    usage = model.usage("cq-gpu")[("gpu-a", "nvidia.com/gpu")]
    assert cq["resources"][0]["usage"] == str(usage // 1000)
    assert doc["actuator_lag"] is None, "no actuator group under this prefix"
    assert doc["last_change_age_s"] > 0
    r = await kuota(rig, "status")
    assert "cq-gpu" in r.stdout and "gpu-a/nvidia.com/gpu" in r.stdout
    assert f"read model {key}: last change" in r.stdout
    r = subprocess.run(
        [str(KUOTA), "status"],
        env={k: v for k, v in rig.env.items() if k != "KUOTA_REDIS_URL"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "KUOTA_REDIS_URL is not set" in r.stderr
