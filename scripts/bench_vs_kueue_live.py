"""The live parts of ``scripts/bench_vs_kueue.py`` that both systems share.

- :func:`drive`: create Jobs on a schedule (seconds after the start) while one
  watch (``kuota.kube.watch.Watcher``, on the run's label) records every Job's
  timeline (:class:`bench_vs_kueue_figures.JobTimeline`), and the CPU of every
  process of the stack is read from /proc around the window.
- Kueue's paced phase (``--rate``): Jobs with ``parallelism: 0`` created at a
  fixed rate on open ClusterQueues; creation -> unsuspended from the watch.
- Kueue's own baseline shape (``--shape``), from its
  ``test/performance/scheduler`` configs, on either system: one cohort of
  ClusterQueues (nominal 20 CPU, borrowingLimit 100, ``reclaimWithinCohort:
  Any``, ``withinClusterQueue: LowerPriority``), small/medium/large Jobs with
  their priorities, intervals and run times as real kwok pod durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_e2e_report import cpu_seconds
from bench_kueue import SHAPES, WorkloadClass
from bench_vs_kueue_figures import JobTimeline, cpu_used, percentile

KUEUE_API = "kueue.x-k8s.io/v1beta2"
RUN_LABEL = "bench.kuota.dev/run"
POOL_LABEL = "bench.kuota.dev/pool"


def say(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


@dataclass
class Drive:
    timelines: dict[str, JobTimeline]
    used: dict[str, float]  # CPU seconds per process in the window
    wall_s: float
    failures: int


def _is_done(job: Mapping[str, Any]) -> bool:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return True
    return False


async def drive(
    api: Any,
    run: str,
    schedule: Sequence[tuple[float, str, dict[str, Any], str, int]],
    pids: Mapping[str, int],
    *,
    until: Callable[[dict[str, JobTimeline]], bool],
    timeout: float,
    concurrency: int = 64,
) -> Drive:
    """Create ``(at_s, namespace, manifest, class, cpu_milli)`` Jobs at their times and
    watch them until ``until(timelines)`` (or ``timeout`` after the last creation)."""
    from kubernetes_asyncio import client

    from kuota.kube.watch import Resource, Watcher

    timelines: dict[str, JobTimeline] = {}
    meta = {f"{ns}/{m['metadata']['name']}": (cls, cpu) for _, ns, m, cls, cpu in schedule}
    changed = asyncio.Event()

    async def watch() -> None:
        w = Watcher(api, Resource("Job", "/apis/batch/v1/jobs", f"{RUN_LABEL}={run}"))
        async for change in w.changes():
            now = time.time()
            if change.type != "UPSERT":
                continue
            md = change.object["metadata"]
            key = f"{md['namespace']}/{md['name']}"
            if key not in meta:
                continue
            tl = timelines.get(key)
            if tl is None:
                tl = timelines[key] = JobTimeline(now, *meta[key])
            spec = change.object.get("spec") or {}
            tl.observe(now, suspended=bool(spec.get("suspend")), done=_is_done(change.object))
            changed.set()

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(1.0)  # the watch's first LIST
    before = {n: c for n, p in pids.items() if (c := cpu_seconds(p)) is not None}
    batch = client.BatchV1Api(api)
    sem = asyncio.Semaphore(concurrency)
    failures: list[str] = []

    async def create(ns: str, manifest: dict[str, Any]) -> None:
        async with sem:
            try:
                resp = await batch.create_namespaced_job(ns, manifest, _preload_content=False)
                resp.release()
            except Exception as err:  # counted and reported; the run goes on
                failures.append(f"{ns}/{manifest['metadata']['name']}: {err}")

    t0 = time.time()
    tasks = []
    for at, ns, manifest, _, _ in sorted(schedule, key=lambda s: s[0]):
        delay = t0 + at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(create(ns, manifest)))
    await asyncio.gather(*tasks)
    if failures:
        say(f"bench_vs_kueue: {len(failures)} creations failed, e.g. {failures[0]}")
    deadline = time.monotonic() + timeout
    next_note = time.monotonic() + 15
    while not until(timelines) and time.monotonic() < deadline:
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), 1.0)
        if time.monotonic() >= next_note:
            next_note += 15
            fin = sum(t.finished is not None for t in timelines.values())
            run_ = sum(bool(t.runs) for t in timelines.values())
            say(f"bench_vs_kueue:   {len(timelines)} seen, {run_} admitted, {fin} finished")
    wall = time.time() - t0
    used = cpu_used(before, {n: cpu_seconds(p) for n, p in pids.items()})
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher
    return Drive(timelines, used, wall, len(failures))


def all_admitted(want: int) -> Callable[[dict[str, JobTimeline]], bool]:
    return lambda tl: sum(bool(t.runs) for t in tl.values()) >= want


def all_finished(want: int) -> Callable[[dict[str, JobTimeline]], bool]:
    return lambda tl: sum(t.finished is not None for t in tl.values()) >= want


def latency(d: Drive) -> dict[str, float]:
    """Creation -> first unsuspension (watch timestamps), and the sustained rate."""
    first = [t.runs[0][0] for t in d.timelines.values() if t.runs]
    lat = sorted((t.runs[0][0] - t.created) * 1000 for t in d.timelines.values() if t.runs)
    if not lat:
        raise SystemExit("bench_vs_kueue: no Job was unsuspended")
    start = min(t.created for t in d.timelines.values())
    return {
        "jobs": float(len(lat)),
        "admitted_per_s": len(lat) / max(1e-9, max(first) - start),
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
    }


# ---------------------------------------------------------------- objects


def nodes(run: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """Two kwok nodes of the run, room for every pod of the shape."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"{run}-{n}",
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {
                    **labels,
                    POOL_LABEL: run,
                    "kubernetes.io/hostname": f"{run}-{n}",
                    "kubernetes.io/os": "linux",
                },
            },
            "status": {
                "capacity": {"cpu": "1000", "memory": "4Ti", "pods": "3000"},
                "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "3000"},
            },
        }
        for n in range(2)
    ]


def scaled(c: WorkloadClass, scale: float) -> int:
    return max(1, round(c.count * scale))


def shape_objects(
    run: str, shape_name: str, queues: int, labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Nodes, flavor, priority classes, ``queues`` ClusterQueues in one cohort, their
    namespaces and LocalQueues (``bench``), all labelled ``labels`` and the run."""
    shape = SHAPES[shape_name]
    lab = {**labels, RUN_LABEL: run}
    objs = nodes(run, lab)
    objs.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": run, "labels": lab},
            "spec": {"nodeLabels": {POOL_LABEL: run}},
        }
    )
    for c in shape.classes:
        objs.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": f"{run}-{c.name}", "labels": lab},
                "value": c.priority,
            }
        )
    for q in range(queues):
        name = f"{run}-{q}"
        objs += [
            {
                "apiVersion": KUEUE_API,
                "kind": "ClusterQueue",
                "metadata": {"name": name, "labels": lab},
                "spec": {
                    "cohortName": run,
                    "namespaceSelector": {},
                    "preemption": {
                        "reclaimWithinCohort": "Any",
                        "withinClusterQueue": "LowerPriority",
                    },
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": run,
                                    "resources": [
                                        {
                                            "name": "cpu",
                                            "nominalQuota": str(shape.nominal),
                                            "borrowingLimit": str(shape.borrowing_limit),
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": lab}},
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": {"name": "bench", "namespace": name, "labels": lab},
                "spec": {"clusterQueue": name},
            },
        ]
    return objs


def shape_jobs(
    run: str, shape_name: str, queues: int, scale: float, labels: Mapping[str, str]
) -> list[tuple[float, str, dict[str, Any], str, int]]:
    """Every Job of the shape, as Kueue's runner creates them: the i-th of a class in
    each ClusterQueue ``i + 1`` intervals after the start, its pod running the class's
    time on kwok (ready at once, complete after the run time)."""
    shape = SHAPES[shape_name]
    out = []
    for q in range(queues):
        ns = f"{run}-{q}"
        for c in shape.classes:
            for i in range(scaled(c, scale)):
                manifest = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": f"{c.name}-{i}",
                        "labels": {
                            **labels,
                            RUN_LABEL: run,
                            "kueue.x-k8s.io/queue-name": "bench",
                            "kueue.x-k8s.io/priority-class": f"{run}-{c.name}",
                        },
                    },
                    "spec": {
                        "parallelism": 1,
                        "completions": 1,
                        "backoffLimit": 0,
                        "template": {
                            "metadata": {
                                "annotations": {
                                    "pod-ready.stage.kwok.x-k8s.io/delay": "0ms",
                                    "pod-complete.stage.kwok.x-k8s.io/delay": f"{c.runtime_ms}ms",
                                }
                            },
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "registry.k8s.io/pause:3.10",
                                        "resources": {"requests": {"cpu": str(c.cpu)}},
                                    }
                                ],
                            },
                        },
                    },
                }
                at = (i + 1) * c.interval_ms / 1000
                out.append((at, ns, manifest, c.name, c.cpu * 1000))
    return out


def paced_jobs(
    run: str, jobs: int, rate: float, namespaces: Sequence[str], labels: Mapping[str, str]
) -> list[tuple[float, str, dict[str, Any], str, int]]:
    """``jobs`` Jobs with ``parallelism: 0`` (no pod), the i-th at ``i / rate`` s, spread
    round-robin over ``namespaces`` (their LocalQueue ``bench``)."""
    out = []
    for i in range(jobs):
        manifest = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"j-{i}",
                "labels": {**labels, RUN_LABEL: run, "kueue.x-k8s.io/queue-name": "bench"},
            },
            "spec": {
                "parallelism": 0,
                "completions": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "10m"}},
                            }
                        ],
                    }
                },
            },
        }
        out.append((i / rate, namespaces[i % len(namespaces)], manifest, "job", 0))
    return out


async def remove(api: Any, run: str, namespaces: Sequence[str]) -> None:
    """The run's namespaces (waited for), then its cluster objects and nodes."""
    from bench_e2e_preempt import delete_namespace
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    t = time.monotonic()
    await asyncio.gather(*(delete_namespace(api, ns, timeout=300) for ns in namespaces))
    co = client.CustomObjectsApi(api)
    selector = f"{RUN_LABEL}={run}"
    for plural in ("clusterqueues", "resourceflavors", "workloadpriorityclasses"):
        with contextlib.suppress(ApiException):
            await co.delete_collection_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", plural, label_selector=selector
            )
    with contextlib.suppress(ApiException):
        await client.CoreV1Api(api).delete_collection_node(label_selector=selector)
    say(f"bench_vs_kueue: cleanup of {run} took {time.monotonic() - t:.0f}s")


def stack_dir_pids(stack: Path) -> dict[str, int]:
    from bench_e2e_report import stack_pids

    return stack_pids(stack)
