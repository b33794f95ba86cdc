#!/usr/bin/env python3
"""Actuation latency under a burst, on the local stack: prints figures.

Creates a namespace, a ResourceFlavor, a ClusterQueue and N suspended Jobs,
starts ``kuota-actuator`` with its own topic prefix, produces N Admitted
decisions at once, then N Preempted decisions, and prints the actuator's own
``kuota_actuation_latency_seconds`` (decision ``at`` -> last Job write) and
the wall time of each burst. Everything it creates is deleted at the end.

First it measures what the apiserver alone can do, as the ceiling for the
actuator: N other Jobs (``parallelism: 0``) unsuspended by N merge PATCHes
with a resourceVersion precondition — the actuator's own write — sent with
plain aiohttp, ``--raw-concurrency`` at a time (64, the actuator's default).

    set -a; . .stack/stack.env; set +a
    .venv/bin/python scripts/bench_actuator.py --jobs 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from kubernetes_asyncio import client, config

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.events.schema import Decision

REPO = Path(__file__).resolve().parents[1]
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def histogram(port: int, name: str, type_: str) -> tuple[int, float, list[tuple[float, float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    count, total, buckets = 0, 0.0, []
    for line in text.splitlines():
        if f'type="{type_}"' not in line:
            continue
        m = re.match(name + r'_bucket\{le="([^"]+)",.*\} (\S+)', line)
        if m:
            buckets.append((float(m.group(1)), float(m.group(2))))
        elif line.startswith(f"{name}_count"):
            count = int(float(line.split()[-1]))
        elif line.startswith(f"{name}_sum"):
            total = float(line.split()[-1])
    return count, total, buckets


def quantile(buckets: list[tuple[float, float]], count: int, q: float) -> float:
    for le, n in buckets:
        if n >= q * count:
            return le
    return float("inf")


def job(name: str, pods: bool = False) -> dict[str, Any]:
    """A suspended Job; without ``pods``, ``parallelism: 0`` (the Job controller makes none)."""
    manifest: dict[str, Any] = {
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "bench"}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }
    if not pods:
        manifest["spec"]["parallelism"] = 0
    return manifest


async def wait_jobs(batch: client.BatchV1Api, ns: str, n: int, phase: str) -> None:
    """Until every Job carries a decision id of ``phase`` (written by its final step)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        jobs = await batch.list_namespaced_job(ns)
        done = [
            j
            for j in jobs.items
            if (j.metadata.annotations or {}).get("kuota.dev/decision-id", "").startswith(phase)
        ]
        if len(done) >= n:
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"timeout waiting for {n} Jobs to be done with {phase}")


async def raw_patch_rate(api: Any, ns: str, n: int, concurrency: int) -> None:
    """The apiserver alone: n Jobs created, then unsuspended by n merge PATCHes."""
    session = api.rest_client.pool_manager  # the ApiClient's aiohttp session (its TLS)
    host = api.configuration.host
    gate = asyncio.Semaphore(concurrency)

    async def call(method: str, path: str, body: dict[str, Any], ctype: str) -> dict[str, Any]:
        headers = {"Content-Type": ctype, "Accept": "application/json"}
        await api.update_params_for_auth(headers, None, ["BearerToken"])
        async with (
            gate,
            session.request(method, host + path, data=json.dumps(body), headers=headers) as resp,
        ):
            data: dict[str, Any] = json.loads(await resp.read())
            data["_status"] = resp.status
            return data

    spec = job("x")["spec"]
    t = time.monotonic()
    made = await asyncio.gather(
        *(
            call(
                "POST",
                f"/apis/batch/v1/namespaces/{ns}/jobs",
                {"metadata": {"name": f"raw{i}"}, "spec": spec},
                "application/json",
            )
            for i in range(n)
        )
    )
    created = time.monotonic() - t
    latencies: list[float] = []

    async def unsuspend(i: int, rv: str) -> int:
        body = {
            "metadata": {"resourceVersion": rv, "annotations": {"kuota.dev/decision-id": "x"}},
            "spec": {"suspend": False, "template": {"spec": {"nodeSelector": {"type": "kwok"}}}},
        }
        started = time.monotonic()
        out = await call(
            "PATCH",
            f"/apis/batch/v1/namespaces/{ns}/jobs/raw{i}",
            body,
            "application/merge-patch+json",
        )
        latencies.append(time.monotonic() - started)
        return int(out["_status"])

    t = time.monotonic()
    codes = await asyncio.gather(
        *(unsuspend(i, m["metadata"]["resourceVersion"]) for i, m in enumerate(made))
    )
    patched = time.monotonic() - t
    latencies.sort()
    conflicts = sum(1 for c in codes if c == 409)
    print(
        f"apiserver alone (aiohttp, {concurrency} in flight): {n} Job creates at "
        f"{n / created:.0f}/s; {n} unsuspend PATCHes at {n / patched:.0f}/s, "
        f"p50 {latencies[len(latencies) // 2] * 1000:.0f} ms, "
        f"p99 {latencies[int(0.99 * len(latencies))] * 1000:.0f} ms, {conflicts} conflicts "
        "(the Job controller's status write)"
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--raw-concurrency", type=int, default=64)
    ap.add_argument(
        "--pods",
        action="store_true",
        help="the actuator's Jobs get a pod each (kwok), so a stop waits for the Job "
        "controller; default parallelism 0, like the raw PATCH figure",
    )
    # The figures below come from the actuator's own histograms; its log is
    # .stack/logs/bench-actuator-<run>.log (KUOTA_LOG_LEVEL=INFO for every step).
    args = ap.parse_args()
    n = args.jobs
    run = uuid.uuid4().hex[:8]
    prefix = f"bench-{run}."
    settings = KafkaSettings.from_env()
    topics = await ensure_topics(KafkaSettings(bootstrap=settings.bootstrap, topic_prefix=prefix))
    api = await config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    objects = client.CustomObjectsApi(api)
    ns, flavor, cq = f"kuota-bench-{run}", f"bench-{run}", f"bench-{run}"
    await core.create_namespace({"metadata": {"name": ns}})
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    await raw_patch_rate(api, ns, n, args.raw_concurrency)
    await objects.create_cluster_custom_object(
        GROUP,
        VERSION,
        "resourceflavors",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"type": "kwok"}},
        },
    )
    uids = {}
    for i in range(n):
        created = await batch.create_namespaced_job(ns, job(f"j{i}", args.pods))
        uids[f"j{i}"] = created.metadata.uid
    port = free_port()
    log_path = REPO / ".stack" / "logs" / f"bench-actuator-{run}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KUOTA_TOPIC_PREFIX": prefix,
        "KUOTA_METRICS_PORT": str(port),
        "KUOTA_CLUSTERQUEUE_SELECTOR": f"kuota.dev/bench={run}",
        "KUOTA_JOB_LABEL_SELECTOR": "kueue.x-k8s.io/queue-name=bench",
        "KUOTA_LOG_LEVEL": os.environ.get("KUOTA_LOG_LEVEL", "INFO"),
    }
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "kuota-actuator")],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    producer = AIOKafkaProducer(enable_idempotence=True, **settings.client_kwargs())
    await producer.start()
    try:
        deadline = time.monotonic() + 90
        while "live: consuming" not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"kuota-actuator not live: {log_path.read_text()[-2000:]}")
            await asyncio.sleep(0.2)
        for phase, type_ in (("admit", "Admitted"), ("preempt", "Preempted")):
            t0 = time.monotonic()
            for i in range(n):
                d = Decision(
                    id=f"{phase}-{run}-{i}",
                    cause=f"bench/{phase}/{i}",
                    cause_offset=1 if phase == "admit" else 2,
                    at=time.time(),
                    type=type_,
                    workload=f"{ns}/j{i}",
                    uid=uids[f"j{i}"],
                    cluster_queue=cq,
                    flavors={"main": {"cpu": flavor}} if phase == "admit" else None,
                    usage={flavor: {"cpu": "1"}} if phase == "admit" else None,
                    reason="InClusterQueue" if phase == "preempt" else None,
                )
                key = (d.workload or "").encode()
                await producer.send(topics.decisions, d.model_dump_json().encode(), key=key)
            await producer.flush()
            await wait_jobs(batch, ns, n, phase)
            wall = time.monotonic() - t0
            await asyncio.sleep(0.5)
            print(f"{type_} x{n}: burst fully applied in {wall:.2f} s")
            for metric, what in (
                ("kuota_actuation_latency_seconds", "first effective write"),
                ("kuota_actuation_completion_seconds", "final write"),
            ):
                count, total, buckets = histogram(port, metric, type_)
                mean = total / max(count, 1) * 1000
                p50 = quantile(buckets, count, 0.5) * 1000
                p95 = quantile(buckets, count, 0.95) * 1000
                print(
                    f"  at -> {what:21s} mean {mean:6.0f} ms, p50 <= {p50:.0f} ms, "
                    f"p95 <= {p95:.0f} ms ({count} decisions)"
                )
    finally:
        await producer.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        await core.delete_namespace(ns, propagation_policy="Background")
        await objects.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor)
        await api.close()


if __name__ == "__main__":
    asyncio.run(main())
