"""Synthetic throughput run of the Fold (a script, not a test): prints figures.

    .venv/bin/python tests/unit/core/profile_fold.py [--jobs 100000] [--profile]

100 ClusterQueues in 10 cohorts (BestEffortFIFO, two GPU flavors with
borrowing limits, one CPU/memory flavor), one LocalQueue per ClusterQueue,
three priority classes, and ``--jobs`` Jobs submitted over time with a few
request shapes. Every admitted Job finishes ``run`` seconds after admission
(a WorkloadFinished event is scheduled when the Admitted decision comes
out), so the run exercises admission, parking, and requeue on release. Jobs
are parsed from manifests like the real pipeline does.
"""

from __future__ import annotations

import argparse
import cProfile
import heapq
import pstats
import random
import sys
import time
from typing import Any

import kuota.core.fold.fold as fold_module
from kuota.api.parse import parse_object
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent, ObjectUpserted, WorkloadFinished

COHORTS = 10
QUEUES_PER_COHORT = 10


def _setup(scale: int = 1) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for f, labels in (("cpu", {}), ("a100", {"gpu": "a100"}), ("h100", {"gpu": "h100"})):
        objs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": f},
                "spec": {"nodeLabels": labels},
            }
        )
    for name, value in (("low", 0), ("mid", 100), ("high", 1000)):
        objs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    for c in range(COHORTS):
        for q in range(QUEUES_PER_COHORT):
            name = f"cq-{c}-{q}"
            objs.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ClusterQueue",
                    "metadata": {"name": name},
                    "spec": {
                        "cohort": f"pool-{c}",
                        "namespaceSelector": {},
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu", "memory"],
                                "flavors": [
                                    {
                                        "name": "cpu",
                                        "resources": [
                                            {"name": "cpu", "nominalQuota": 32 * scale},
                                            {"name": "memory", "nominalQuota": f"{128 * scale}Gi"},
                                        ],
                                    }
                                ],
                            },
                            {
                                "coveredResources": ["nvidia.com/gpu"],
                                "flavors": [
                                    {
                                        "name": "a100",
                                        "resources": [
                                            {
                                                "name": "nvidia.com/gpu",
                                                "nominalQuota": 4 * scale,
                                                "borrowingLimit": 4,
                                            }
                                        ],
                                    },
                                    {
                                        "name": "h100",
                                        "resources": [
                                            {
                                                "name": "nvidia.com/gpu",
                                                "nominalQuota": 4 * scale,
                                                "borrowingLimit": 2,
                                            }
                                        ],
                                    },
                                ],
                            },
                        ],
                    },
                }
            )
            objs.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "lq", "namespace": f"ns-{c}-{q}"},
                    "spec": {"clusterQueue": name},
                }
            )
    return objs


SHAPES = (
    {"cpu": "1", "memory": "2Gi"},
    {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
    {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"},
    {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"},
)


def _job(i: int, rng: random.Random, at: float) -> dict[str, Any]:
    c, q = rng.randrange(COHORTS), rng.randrange(QUEUES_PER_COHORT)
    shape = SHAPES[rng.randrange(len(SHAPES))]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"job-{i}",
            "namespace": f"ns-{c}-{q}",
            "uid": f"uid-{i}",
            "labels": {
                "kueue.x-k8s.io/queue-name": "lq",
                "kueue.x-k8s.io/priority-class": rng.choice(("low", "low", "mid", "high")),
            },
            "annotations": {"kuota.dev/created-at": str(at)},
        },
        "spec": {
            "parallelism": rng.choice((1, 1, 2)),
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "x", "resources": {"requests": dict(shape)}}
                    ],
                }
            },
        },
    }


def run(
    jobs: int, seed: int, scale: int = 1, preparsed: bool = False
) -> tuple[int, int, float, float]:
    rng = random.Random(seed)
    fold = Fold()
    n = 0
    decisions = 0
    for obj in _setup(scale):
        n += 1
        fold.apply(ObjectUpserted(id=f"s{n}", at=0.0, object=obj))
    # Build the job manifests first: this measures the fold, not the generator.
    arrivals = [(i * 0.01, _job(i, rng, i * 0.01)) for i in range(jobs)]
    runs = [rng.uniform(5.0, 60.0) for _ in range(jobs)]
    events: list[JournalEvent] = [
        ObjectUpserted(id=f"j{i}", at=at, object=m) for i, (at, m) in enumerate(arrivals)
    ]
    if preparsed:  # measure the fold without the api parser: parse before the clock starts
        parsed = {id(e.object): parse_object(e.object, at=e.at) for e in events}  # type: ignore[union-attr]
        fold_module.parse_object = lambda m, at=0.0: parsed[id(m)]  # type: ignore[assignment]
    finishes: list[tuple[float, int, str]] = []
    seq = 0
    parse_time = 0.0
    t0 = time.perf_counter()
    idx = 0

    def handle(out: list[Decision]) -> None:
        nonlocal seq
        for d in out:
            if d.type == "Admitted" and d.workload:
                num = int(d.workload.rsplit("-", 1)[1])
                seq += 1
                heapq.heappush(finishes, (d.at + runs[num], seq, d.workload))

    while idx < len(events) or finishes:
        if finishes and (idx >= len(events) or finishes[0][0] <= events[idx].at):
            at, s, key = heapq.heappop(finishes)
            ns, name = key.split("/")
            n += 1
            out = fold.apply(WorkloadFinished(id=f"f{s}", at=at, namespace=ns, name=name))
        else:
            out = fold.apply(events[idx])
            idx += 1
            n += 1
        decisions += len(out)
        handle(out)
    elapsed = time.perf_counter() - t0
    return n, decisions, elapsed, parse_time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--preparsed", action="store_true", help="leave Job parsing out")
    parser.add_argument(
        "--scale", type=int, default=1, help="multiply nominal quotas (100: nothing waits)"
    )
    args = parser.parse_args()
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
    events, decisions, elapsed, _ = run(args.jobs, args.seed, args.scale, args.preparsed)
    if args.profile:
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    print(
        f"events={events} decisions={decisions} seconds={elapsed:.2f} "
        f"events/s={events / elapsed:,.0f} decisions/s={decisions / elapsed:,.0f}"
    )


if __name__ == "__main__":
    main()
