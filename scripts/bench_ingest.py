"""Ingest throughput: synthetic Job changes -> translation -> journal (real Kafka,
real Redis), printing figures. Not a test: a script (see STYLE.md).

    set -a; . .stack/stack.env; set +a
    .venv/bin/python scripts/bench_ingest.py [N]

It measures (1) the pure translation per Job and (2) ``Sources.observe`` +
``JournalWriter`` end to end into a fresh journal topic, acks=all and
idempotent, with the Redis memory written after each acknowledged batch. The
apiserver is not involved: this is ingest's own ceiling, not the watch's.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from dataclasses import replace
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from redis.asyncio import Redis

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.kube.translate import translate_upsert
from kuota_ingest.journal import JournalWriter
from kuota_ingest.sources import Clock, Sources


def job(i: int, rv: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"job-{i}",
            "namespace": f"team-{i % 10}",
            "uid": f"uid-{i}",
            "resourceVersion": str(rv),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}] * 3,
        },
        "spec": {
            "suspend": True,
            "parallelism": 4,
            "completions": 4,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "registry.example.com/train:1",
                            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            },
        },
        "status": {"active": 0},
    }


async def main(n: int) -> None:
    objs = [job(i, 1000 + i) for i in range(n)]
    t0 = time.perf_counter()
    for o in objs:
        translate_upsert("Job", o, None, at=1.0)
    t_translate = (time.perf_counter() - t0) / n

    settings = replace(KafkaSettings.from_env(), topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.")
    topics = await ensure_topics(settings)
    redis = Redis.from_url(os.environ["KUOTA_REDIS_URL"])
    seen_key = f"kuota:ingest:seen:{topics.journal}"
    producer = AIOKafkaProducer(
        enable_idempotence=True, acks="all", linger_ms=5, **settings.client_kwargs()
    )
    await producer.start()
    writer = JournalWriter(producer, topic=topics.journal, redis=redis, seen_key=seen_key)
    sources = Sources(None, writer, memory={}, clock=Clock())  # type: ignore[arg-type]
    task = asyncio.create_task(writer.run())
    t0 = time.perf_counter()
    for o in objs:
        await sources.observe("Job", "UPSERT", o)
    await writer.idle()
    t_new = time.perf_counter() - t0
    # Status-only changes of the same Jobs: translated, skipped, remembered.
    t0 = time.perf_counter()
    for i, o in enumerate(objs):
        o = {**o, "metadata": {**o["metadata"], "resourceVersion": str(5000 + i)}}
        o["status"] = {"active": 4}
        await sources.observe("Job", "UPSERT", o)
    await writer.idle()
    t_skip = time.perf_counter() - t0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await producer.stop()
    await redis.delete(seen_key)
    await redis.aclose()
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        await admin.delete_topics([topics.journal, topics.decisions, topics.deadletter])
    finally:
        await admin.close()
    print(f"jobs                         {n}")
    print(f"translate_upsert             {t_translate * 1e6:8.1f} µs/job")
    print(f"new Jobs -> journal + Redis  {n / t_new:8.0f} events/s  ({t_new:.2f}s)")
    print(f"status-only (skipped)        {n / t_skip:8.0f} changes/s ({t_skip:.2f}s)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10000))
