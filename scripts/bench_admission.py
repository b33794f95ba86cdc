"""Benchmark of kuota-admission as a process on the local stack: prints figures.

1. Produce a journal (a ResourceFlavor, a ClusterQueue with 4 GPUs, a
   LocalQueue, then N Jobs; from the 5th on, each new Job finishes the one 4
   before it; a Tick every 10 Jobs) to a fresh topic prefix.
2. Start ``kuota-admission`` and time how long it takes to commit every
   decision: events/s and decisions/s through the service (transactions,
   JSON, Kafka included), next to the in-process fold rate.
3. Restart recovery: SIGKILL, restart, time to live (the last periodic
   snapshot plus the tail); then delete the snapshot, restart, time to live
   (full silent replay).

Usage: ``set -a; . .stack/stack.env; set +a; .venv/bin/python scripts/bench_admission.py [JOBS]``
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics, shard_key
from kuota.core.fold.fold import Fold
from kuota.events.schema import JournalEvent, ObjectUpserted, Tick, WorkloadFinished

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin" / "kuota-admission"
GPU = "nvidia.com/gpu"
T0 = 1_767_225_600.0


def journal(jobs: int) -> list[JournalEvent]:
    t = T0
    out: list[JournalEvent] = []

    def up(obj: dict[str, Any]) -> None:
        nonlocal t
        t += 1
        m = obj["metadata"]
        m["resourceVersion"] = "1"
        rid = f"{obj['kind']}/{m.get('namespace', '')}/{m['name']}@1"
        out.append(ObjectUpserted(id=rid, at=t, object=obj))

    up(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu-a"},
            "spec": {},
        }
    )
    up(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "gpu-a", "resources": [{"name": GPU, "nominalQuota": 4}]}
                        ],
                    }
                ],
            },
        }
    )
    up(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        }
    )
    for i in range(jobs):
        stamp = datetime.fromtimestamp(t + 1, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        up(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"j{i}",
                    "namespace": "ns",
                    "uid": f"u{i}",
                    "creationTimestamp": stamp,
                    "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                },
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {GPU: "1"}}}
                            ],
                        }
                    },
                },
            }
        )
        if i >= 4:
            t += 1
            out.append(
                WorkloadFinished(
                    id=f"finished/ns/j{i - 4}/u{i - 4}", at=t, namespace="ns", name=f"j{i - 4}"
                )
            )
        if i % 10 == 9:
            t += 1
            out.append(Tick(id=f"tick@{t}", at=t))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_position(proc: subprocess.Popen[bytes], port: int, end: int, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"kuota-admission exited with {proc.returncode}")
        if (metric(port, "kuota_journal_position") or 0) >= end:
            return time.monotonic()
        time.sleep(0.05)
    raise SystemExit(f"not caught up with offset {end} within {timeout}s")


def wait_live(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"kuota-admission exited with {proc.returncode}")
        text = log.read_text().rsplit("---- start", 1)[-1]
        if "recovered:" in text:
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit("not live in time")


async def main(jobs: int) -> None:
    prefix = f"bench-{uuid.uuid4().hex[:8]}."
    env = dict(os.environ)
    port = free_port()
    env.update(KUOTA_TOPIC_PREFIX=prefix, KUOTA_METRICS_PORT=str(port))
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    events = journal(jobs)

    t = time.perf_counter()
    fold = Fold(preemption="plans")  # the service's mode
    n_dec = sum(len(fold.apply(e, offset=i)) for i, e in enumerate(events))
    fold_s = time.perf_counter() - t
    print(f"journal: {len(events)} events -> {n_dec} decisions")
    print(
        f"in-process fold: {len(events) / fold_s:,.0f} events/s, {n_dec / fold_s:,.0f} decisions/s"
    )

    producer = AIOKafkaProducer(linger_ms=5, max_batch_size=1 << 20, **settings.client_kwargs())
    await producer.start()
    for e in events:
        await producer.send(topics.journal, e.model_dump_json().encode(), key=shard_key(e.id))
    await producer.flush()
    await producer.stop()
    end = len(events)

    log = Path(tempfile.mkdtemp()) / "admission.log"
    redis = aioredis.from_url(env["KUOTA_REDIS_URL"])
    snap_key = f"kuota:snapshot:{prefix.rstrip('.')}-admission-0"
    try:

        def start() -> tuple[subprocess.Popen[bytes], float]:
            with log.open("ab") as f:
                f.write(b"---- start\n")
                t0 = time.monotonic()
                return subprocess.Popen([str(BIN)], env=env, stdout=f, stderr=f), t0

        proc, t0 = start()
        t_live = wait_live(proc, log, 60)
        t_done = wait_position(proc, port, end, 600)
        time.sleep(0.5)  # past the metric update: the last transaction committed
        live_s = t_done - t_live
        print(
            f"service, cold journal: {end / live_s:,.0f} events/s, {n_dec / live_s:,.0f} "
            f"decisions/s committed ({live_s:.1f} s for the journal; start-up {t_live - t0:.2f} s)"
        )
        proc.kill()  # SIGKILL: the snapshot is the last periodic one
        proc.wait(30)

        for label, drop in (("with snapshot", False), ("without snapshot", True)):
            if drop:
                await redis.delete(snap_key)
            # One more event, so that the restarted service has a batch to commit.
            producer = AIOKafkaProducer(**settings.client_kwargs())
            await producer.start()
            tick = Tick(id=f"tick@bench-{label}", at=events[-1].at)
            await producer.send_and_wait(topics.journal, tick.model_dump_json().encode())
            await producer.stop()
            end += 1
            proc, t0 = start()
            t_live = wait_live(proc, log, 600)
            t_first = wait_position(proc, port, end, 600)
            rec = metric(port, "kuota_recovery_seconds") or 0.0
            rep = metric(port, "kuota_replayed_events") or 0.0
            print(
                f"restart {label}: {rep:.0f} events replayed in {rec:.2f} s; recovered "
                f"{t_live - t0:.2f} s and first live batch committed {t_first - t0:.2f} s "
                f"after exec"
            )
            proc.kill()
            proc.wait(30)
    finally:
        await redis.delete(snap_key)
        await redis.aclose()
        admin = AIOKafkaAdminClient(**settings.client_kwargs())
        await admin.start()
        await admin.delete_topics([topics.journal, topics.decisions, topics.deadletter])
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10000))
