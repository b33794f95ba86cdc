"""The preemption phase of ``scripts/bench_e2e.py``: plan latency through the real pipeline.

After the main phase, in a namespace of its own (``<run>-p``), with a
ClusterQueue ``<run>-p`` (``withinClusterQueue: LowerPriority``) whose cpu
quota is exactly ``--preempt`` Jobs of 100m: ``--preempt`` low-priority Jobs
(WorkloadPriorityClass ``<run>-low``, 10) fill it, then as many high-priority
ones (``<run>-high``, 100) are created at ``--preempt-rate`` per second, each
through the webhook like any bench Job. Every high Job must preempt one low
Job: admission sets it aside (``WaitingForPreemptionPlan``), kuota-preemption
writes a plan to the journal, admission validates it and decides
``Preempted`` + ``Admitted(victims)``; the actuator suspends the victim and
unsuspends the preemptor. The Jobs have one pod each (kwok runs it for an
hour): a Job of ``parallelism: 0`` charges no quota, so nothing to preempt.

**Plan latency** of a high Job, from Kafka record timestamps: the journal
record that caused its first ``WaitingForPreemptionPlan`` decision (the
decision's ``cause_offset``; the timestamp is ingest's producer clock) to the
record of the first ``Preempted`` decision naming it as preemptor (admission's
producer clock; same machine). It covers admission folding the record,
kuota-preemption consuming and folding it, its search and transaction, and
admission consuming the plan, validating it and committing the decisions.
Admission's own histogram ``kuota_preemption_plan_latency_seconds`` (from
folding that record to the preemption) is printed next to it as a check.

Imported by ``bench_e2e.py`` (same directory); needs ``shared/`` on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kuota.kinds import PIPELINE_LABEL, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL

WAITING = "WaitingForPreemptionPlan"
CPU = "100m"


def phase_objects(run: str, pairs: int) -> list[dict[str, Any]]:
    """Priority classes, namespace, ClusterQueue (quota: ``pairs`` Jobs) and LocalQueue."""
    labels = {PIPELINE_LABEL: run}
    name = f"{run}-p"
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"{run}-{level}", "labels": labels},
            "value": value,
        }
        for level, value in (("low", 10), ("high", 100))
    ] + [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": run,
                                "resources": [{"name": "cpu", "nominalQuota": f"{pairs * 100}m"}],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "bench-p", "namespace": name, "labels": labels},
            "spec": {"clusterQueue": name},
        },
    ]


def phase_job(run: str, name: str, level: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {
                PIPELINE_LABEL: run,
                QUEUE_NAME_LABEL: "bench-p",
                PRIORITY_CLASS_LABEL: f"{run}-{level}",
            },
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "annotations": {
                        "pod-ready.stage.kwok.x-k8s.io/delay": "100ms",
                        "pod-complete.stage.kwok.x-k8s.io/delay": "1h",
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": CPU}},
                        }
                    ],
                },
            },
        },
    }


@dataclass
class Tap:
    """The decisions topic, read in the background: what the phase needs of it."""

    kafka: Any
    topic: str
    admitted: dict[str, float] = field(default_factory=dict)  # workload -> record time
    waiting: dict[str, int] = field(default_factory=dict)  # head -> cause offset (first)
    preempted: dict[str, float] = field(default_factory=dict)  # preemptor -> record time
    preemptions: int = 0

    async def run(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from kuota.events.schema import parse_decision

        consumer = AIOKafkaConsumer(isolation_level="read_committed", **self.kafka.client_kwargs())
        await consumer.start()
        try:
            tp = TopicPartition(self.topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while True:
                for r in (await consumer.getmany(tp, timeout_ms=200)).get(tp, []):
                    with contextlib.suppress(ValueError):
                        d = parse_decision(r.value or b"")
                        key, ts = d.workload, r.timestamp / 1000
                        if key is None:
                            continue
                        if d.type == "Admitted":
                            self.admitted.setdefault(key, ts)
                        elif d.type == "Inadmissible" and d.reason == WAITING:
                            if d.cause_offset is not None:
                                self.waiting.setdefault(key, d.cause_offset)
                        elif d.type == "Preempted" and d.preemptor:
                            self.preemptions += 1
                            self.preempted.setdefault(d.preemptor, ts)
        finally:
            await consumer.stop()

    async def until(self, keys: list[str], timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(k in self.admitted for k in keys):
                break
            await asyncio.sleep(0.2)
        return sum(1 for k in keys if k in self.admitted)


async def journal_times(kafka: Any, topic: str, offsets: set[int]) -> dict[int, float]:
    """The record timestamps (s) of these journal offsets."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    out: dict[int, float] = {}
    if not offsets:
        return out
    consumer = AIOKafkaConsumer(isolation_level="read_committed", **kafka.client_kwargs())
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, min(offsets))
        end = min((await consumer.end_offsets([tp]))[tp], max(offsets) + 1)
        while await consumer.position(tp) < end and len(out) < len(offsets):
            for r in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                if r.offset in offsets:
                    out[r.offset] = r.timestamp / 1000
    finally:
        await consumer.stop()
    return out


def histogram(port: int) -> tuple[float, float]:
    """Admission's plan-latency histogram: (count, sum in seconds)."""
    count = total = 0.0
    url = f"http://127.0.0.1:{port}/metrics"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
        m = re.search(r"^kuota_preemption_plan_latency_seconds_count (\S+)$", text, re.M)
        s = re.search(r"^kuota_preemption_plan_latency_seconds_sum (\S+)$", text, re.M)
        count = float(m.group(1)) if m else 0.0
        total = float(s.group(1)) if s else 0.0
    return count, total


def pct(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def preemption_phase(
    *,
    api: Any,
    kafka: Any,
    run: str,
    pairs: int,
    rate: float,
    timeout: float,
    admission_port: int,
    apply: Callable[[list[dict[str, Any]]], Awaitable[Any]],
    say: Callable[[str], None],
) -> list[float]:
    """Run the phase; the plan latencies in ms (sorted), one per preemption measured."""
    from kubernetes_asyncio import client

    ns = f"{run}-p"
    await apply(phase_objects(run, pairs))
    tap = Tap(kafka, f"{run}.decisions")
    reader = asyncio.create_task(tap.run())
    batch = client.BatchV1Api(api)
    try:
        from bench_e2e_report import wait_journaled

        await wait_journaled(kafka, f"{run}.journal", "LocalQueue", "bench-p", 60)
        low = [f"lo-{i:04d}" for i in range(pairs)]
        high = [f"hi-{i:04d}" for i in range(pairs)]
        for name in low:
            resp = await batch.create_namespaced_job(
                ns, phase_job(run, name, "low"), _preload_content=False
            )
            resp.release()
        got = await tap.until([f"{ns}/{n}" for n in low], timeout)
        if got < pairs:
            say(f"bench_e2e: preemption phase: only {got} of {pairs} low Jobs admitted")
            return []
        say(f"bench_e2e: preemption phase: {pairs} low-priority Jobs fill {ns}; preempting")
        count0, sum0 = histogram(admission_port)
        t0 = time.time()
        for i, name in enumerate(high):
            delay = t0 + i / rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            resp = await batch.create_namespaced_job(
                ns, phase_job(run, name, "high"), _preload_content=False
            )
            resp.release()
        keys = [f"{ns}/{n}" for n in high]
        got = await tap.until(keys, timeout)
        await asyncio.sleep(1.0)  # late (duplicate) Preempted decisions would show here
        count1, sum1 = histogram(admission_port)
        times = await journal_times(
            kafka, f"{run}.journal", {tap.waiting[k] for k in keys if k in tap.waiting}
        )
        lat = sorted(
            (tap.preempted[k] - times[tap.waiting[k]]) * 1000
            for k in keys
            if k in tap.preempted and k in tap.waiting and tap.waiting[k] in times
        )
        n = count1 - count0
        mean = f"{(sum1 - sum0) / n * 1000:.0f} ms" if n else "-"
        figures = (
            f"p50 {pct(lat, 0.5):.0f} ms, p99 {pct(lat, 0.99):.0f} ms, max {lat[-1]:.0f} ms"
            if lat
            else "none measured"
        )
        say(
            f"bench_e2e: preemption phase: {got} of {pairs} high-priority Jobs admitted, "
            f"{tap.preemptions} Preempted decisions; plan latency (journal record -> "
            f"Preempted, Kafka timestamps) {figures}; admission's histogram: "
            f"{n:.0f} observed, mean {mean}"
        )
        return lat
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        await remove_namespace(api, ns, say)


async def delete_namespace(api: Any, ns: str, *, timeout: float) -> None:
    """Delete a namespace (its Jobs and pods) and wait until it is gone, at most
    ``timeout`` seconds (shared with ``bench_e2e.cleanup``)."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    t = time.monotonic()
    with contextlib.suppress(ApiException):
        await core.delete_namespace(ns, propagation_policy="Background")
    while time.monotonic() - t < timeout:
        try:
            await core.read_namespace(ns)
        except ApiException as err:
            if err.status == 404:
                break
        await asyncio.sleep(2)


async def remove_namespace(api: Any, ns: str, say: Callable[[str], None]) -> None:
    """Delete the phase's namespace and wait until it is gone."""
    t = time.monotonic()
    await delete_namespace(api, ns, timeout=300)
    say(f"bench_e2e: preemption phase cleanup took {time.monotonic() - t:.0f}s")
