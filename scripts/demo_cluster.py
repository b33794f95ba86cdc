"""``scripts/demo``'s side of the cluster and the pipeline: Kubernetes, Redis, Kafka.

Deletes an earlier demo's Jobs, waits until kuota-ingest journaled what was
applied (its ``kuota:ingest:seen`` hash in Redis), reads the ClusterQueues'
quotas, records DRA allocations, submits the Jobs at their times and follows
the decision topic from a given offset. Errors the user can act on are
``DemoError``s. Imports of kuota and its libraries are local, as in the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

from demo_stream import (
    GPU_COUNT,
    NAMESPACES,
    PYTORCHJOB,
    QUOTA_RESOURCES,
    REPO,
    STYLES,
    DemoError,
    DemoJob,
    QueueQuota,
    describe,
    elapsed,
    stream_line,
)

KUEUE = ("kueue.x-k8s.io", "v1beta2")


async def kube_api(kubeconfig: str) -> Any:
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def kubectl(env: Mapping[str, str], *args: str, what: str) -> str:
    argv = [env["KUOTA_KUBECTL"], f"--kubeconfig={env['KUBECONFIG']}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=dict(env), timeout=120)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise DemoError(f"{what}: {lines[-1] if lines else f'kubectl exit {done.returncode}'}")
    return done.stdout


async def delete_previous_jobs(api: Any) -> int:
    """Delete the Jobs an earlier demo left, and wait until they are gone."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    batch = client.BatchV1Api(api)
    objects = client.CustomObjectsApi(api)
    group, version, plural = PYTORCHJOB

    async def pytorchjobs(ns: str) -> list[Any]:
        try:
            listed = await objects.list_namespaced_custom_object(group, version, ns, plural)
        except ApiException as err:
            if err.status == 404:  # no namespace yet, or no training-operator CRD
                return []
            raise
        return list(listed.get("items") or [])

    deleted = 0
    for ns in NAMESPACES:
        for item in await pytorchjobs(ns):
            with contextlib.suppress(ApiException):
                await objects.delete_namespaced_custom_object(
                    group, version, ns, plural, item["metadata"]["name"]
                )
            deleted += 1
        try:
            jobs = await batch.list_namespaced_job(ns)
        except ApiException as err:
            if err.status == 404:
                continue
            raise
        if jobs.items:
            deleted += len(jobs.items)
            await batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    deadline = time.monotonic() + 60
    while deleted:
        left = 0
        for ns in NAMESPACES:
            with contextlib.suppress(ApiException):
                left += len((await batch.list_namespaced_job(ns)).items)
            left += len(await pytorchjobs(ns))
        if not left:
            break
        if time.monotonic() > deadline:
            raise DemoError(f"{left} Jobs of an earlier demo are still being deleted after 60s")
        await asyncio.sleep(0.3)
    return deleted


async def wait_ingested(env: Mapping[str, str], applied: list[dict[str, Any]]) -> None:
    """Wait until kuota-ingest has seen every applied object at (at least) its version.

    Ingest remembers, per object, the last resourceVersion it journaled or skipped
    in the Redis hash ``kuota:ingest:seen`` (docs/design/ingest.md), written only
    after Kafka acknowledged the journal records; each entry is signed,
    ``s1.<hmac>.<JSON>`` (services/ingest/kuota_ingest/seen_store.py): the demo
    reads the JSON's resourceVersion and does not check the signature.
    """
    import redis.asyncio as aioredis

    watched = {
        "Namespace",
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "ConfigMap",
    }
    prefix = env.get("KUOTA_TOPIC_PREFIX", "kuota.")
    journal = f"{prefix}journal"
    seen_key = "kuota:ingest:seen" + ("" if journal == "kuota.journal" else f":{journal}")
    want = {
        f"{o['kind']}/{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}": int(
            o["metadata"]["resourceVersion"]
        )
        for o in applied
        if o.get("kind") in watched
    }
    redis = aioredis.from_url(env["KUOTA_REDIS_URL"])
    try:
        deadline = time.monotonic() + 60
        while True:
            missing = []
            values = await redis.hmget(seen_key, list(want))
            for (k, rv), raw in zip(want.items(), values, strict=True):
                try:
                    body = raw.decode().split(".", 2)[2] if raw is not None else "null"
                    ok = raw is not None and int(json.loads(body)[0]) >= rv
                except (ValueError, TypeError, IndexError):
                    ok = False
                if not ok:
                    missing.append(k)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise DemoError(
                    f"kuota-ingest has not journaled {', '.join(missing[:3])} after 60s "
                    f"(see {REPO / '.stack' / 'logs' / 'kuota-ingest.log'})"
                )
            await asyncio.sleep(0.2)
    finally:
        await redis.aclose()


async def read_quotas(api: Any) -> tuple[dict[str, QueueQuota], dict[str, int]]:
    from kubernetes_asyncio import client

    from kuota.quantity import parse_quantity

    objects = client.CustomObjectsApi(api)
    quotas: dict[str, QueueQuota] = {}
    for cq_name in ("training", "inference", "inference-shared", "training-ddp"):
        cq = await objects.get_cluster_custom_object(*KUEUE, "clusterqueues", cq_name)
        spec = cq.get("spec") or {}
        nominal, limit, what = 0, None, "of GPU memory"
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for r in flavor.get("resources") or []:
                    if r.get("name") == GPU_COUNT:
                        what = f"GPUs ({GPU_COUNT}, flavor {flavor.get('name')})"
                    if r.get("name") in QUOTA_RESOURCES:
                        nominal += parse_quantity(str(r.get("nominalQuota", "0")))
                        if r.get("borrowingLimit") is not None:
                            limit = (limit or 0) + parse_quantity(str(r["borrowingLimit"]))
        quotas[cq_name] = QueueQuota(
            cq_name, spec.get("cohortName") or spec.get("cohort"), nominal, limit, what
        )
    classes = await objects.list_cluster_custom_object(*KUEUE, "workloadpriorityclasses")
    priorities = {c["metadata"]["name"]: int(c.get("value", 0)) for c in classes.get("items") or []}
    return quotas, priorities


async def watch_claims(api: Any, allocations: dict[str, list[tuple[str, str]]]) -> None:
    """Record every DRA allocation of the demo's ResourceClaims: claim -> [(pool, device)]."""
    from kuota.kube.watch import Resource, Watcher

    async def one(ns: str) -> None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        async for change in Watcher(api, Resource("ResourceClaim", path)).changes():
            obj = change.object
            allocation = (obj.get("status") or {}).get("allocation") or {}
            results = (allocation.get("devices") or {}).get("results") or []
            if results:
                name = f"{ns}/{obj['metadata']['name']}"
                allocations[name] = [(r.get("pool", "?"), r.get("device", "?")) for r in results]

    await asyncio.gather(*(one(ns) for ns in NAMESPACES))


async def submit_jobs(api: Any, jobs: list[DemoJob], t0: float) -> None:
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    batch = client.BatchV1Api(api)
    for job in jobs:
        delay = t0 + job.submit_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        ns = job.manifest["metadata"]["namespace"]
        try:
            if job.kind == "PyTorchJob":
                group, version, plural = PYTORCHJOB
                await client.CustomObjectsApi(api).create_namespaced_custom_object(
                    group, version, ns, plural, job.manifest
                )
            else:
                await batch.create_namespaced_job(ns, job.manifest)
        except ApiException as err:
            detail = err.reason
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                detail = json.loads(err.body).get("message", detail)
            if job.kind == "PyTorchJob" and err.status == 404:
                detail += " (the training-operator's CRD is missing: `scripts/stack up training`)"
            raise DemoError(f"creating {job.kind} {job.key}: {detail}") from None
        job.submitted = time.time()
        stream_line(
            elapsed(job.submitted - t0),
            job.key,
            "Submitted",
            "",
            "",
            "",
            describe(job),
            style=STYLES["Submitted"],
        )


async def follow_decisions(
    env: Mapping[str, str], start: int, on_decision: Callable[[Any], None], stop: asyncio.Event
) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from kuota.bus.settings import KafkaSettings
    from kuota.bus.topics import Topics
    from kuota.events.schema import parse_decision

    settings = KafkaSettings.from_env(env)
    topic = Topics.from_settings(settings).decisions
    consumer = AIOKafkaConsumer(
        isolation_level="read_committed", enable_auto_commit=False, **settings.client_kwargs()
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, start)
        while not stop.is_set():
            batch = await consumer.getmany(tp, timeout_ms=200)
            for record in batch.get(tp, []):
                with contextlib.suppress(ValueError):
                    on_decision(parse_decision(record.value or b""))
    finally:
        await consumer.stop()


async def decisions_end(env: Mapping[str, str]) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from kuota.bus.settings import KafkaSettings
    from kuota.bus.topics import ensure_topics

    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    consumer = AIOKafkaConsumer(isolation_level="read_committed", **settings.client_kwargs())
    await consumer.start()
    try:
        tp = TopicPartition(topics.decisions, 0)
        ends = await consumer.end_offsets([tp])
        return int(ends[tp])
    finally:
        await consumer.stop()


async def pods_per_node(api: Any) -> dict[str, int]:
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api)
    out: dict[str, int] = {}
    for ns in NAMESPACES:
        for pod in (await core.list_namespaced_pod(ns)).items:
            if pod.status.phase == "Succeeded" and pod.spec.node_name:
                out[pod.spec.node_name] = out.get(pod.spec.node_name, 0) + 1
    return out
