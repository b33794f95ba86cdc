#!/usr/bin/env python3
"""Kueue's own scheduler performance shapes, folded on simulated time.

``--shape baseline`` is Kueue's ``test/performance/scheduler`` baseline: 5
cohorts x 6 ClusterQueues, each with nominal 20 CPU, borrowingLimit 100,
``reclaimWithinCohort: Any`` and ``withinClusterQueue: LowerPriority``; per
ClusterQueue 350 small (1 CPU, 200 ms, priority 50, one every 100 ms), 100
medium (5 CPU, 500 ms, priority 100, one every 500 ms) and 50 large (20 CPU,
1000 ms, priority 200, one every 1200 ms) workloads: 15,000 in all.

``--shape large``: 10 cohorts x 100 ClusterQueues, the same quotas and
policies; per ClusterQueue 35 small, 11 medium and 4 large, one every 60, 300
and 700 ms, running 150, 350 and 700 ms: 50,000 workloads.

As in Kueue's runner, the i-th workload of a class is created i+1 intervals
after the start, and a workload finishes its runtime after its latest
admission (a preempted workload starts over when admitted again). The
workloads are Jobs with ``kuota.dev/submit-at``/``run-for`` annotations,
folded by the real ``kuota.core.fold.fold.Fold`` through ``kuota.sim.engine``.

Figures:

- ``usage_pct``: CPU-seconds used by admitted workloads over the total nominal
  quota x the simulated time until the last workload finished;
- ``tta_<class>_s``: mean time from creation to the admission under which the
  workload ran to completion;
- ``wall_s``: wall time of the engine+fold loop (generation not included);
- ``decisions_per_s``: decisions emitted per wall second.

Progress goes to stderr; the LAST stdout line is ``key=value`` pairs, in this
order: ``wall_s sim_s usage_pct tta_small_s tta_medium_s tta_large_s
decisions_per_s``.

Kueue's figures for comparison (``--shape baseline``): usage >= 50% (mean
55.9%), mean time to admission large <= 23 s (16.5), medium <= 90 s (76.8),
small <= 260 s (215.5); ``--shape large``: usage >= 31.6% (mean 38.64%).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from dataclasses import dataclass
from typing import Any

from kuota.core.fold.fold import Fold
from kuota.quantity import parse_quantity
from kuota.sim.engine import Simulator

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = "rf"


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    count: int  # per ClusterQueue
    interval_ms: int
    runtime_ms: int
    priority: int
    cpu: int


@dataclass(frozen=True)
class Shape:
    cohorts: int
    queues_per_cohort: int
    nominal: int
    borrowing_limit: int
    classes: tuple[WorkloadClass, ...]


SHAPES = {
    "baseline": Shape(
        5,
        6,
        20,
        100,
        (
            WorkloadClass("small", 350, 100, 200, 50, 1),
            WorkloadClass("medium", 100, 500, 500, 100, 5),
            WorkloadClass("large", 50, 1200, 1000, 200, 20),
        ),
    ),
    "large": Shape(
        10,
        100,
        20,
        100,
        (
            WorkloadClass("small", 35, 60, 150, 50, 1),
            WorkloadClass("medium", 11, 300, 350, 100, 5),
            WorkloadClass("large", 4, 700, 700, 200, 20),
        ),
    ),
}


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def manifests(shape: Shape) -> list[dict[str, Any]]:
    """The cluster, then every Job (the engine orders them by submit time)."""
    out: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": _meta(FLAVOR)}
    ]
    for c in shape.classes:
        out.append(
            {
                "apiVersion": KUEUE,
                "kind": "WorkloadPriorityClass",
                "metadata": _meta(c.name),
                "value": c.priority,
            }
        )
    queues: list[str] = []
    for k in range(shape.cohorts):
        cohort = f"cohort-{k}"
        for q in range(shape.queues_per_cohort):
            name = f"cq-{q}-{cohort}"
            queues.append(name)
            out.append(
                {
                    "apiVersion": KUEUE,
                    "kind": "ClusterQueue",
                    "metadata": _meta(name),
                    "spec": {
                        "cohort": cohort,
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
                                        "name": FLAVOR,
                                        "resources": [
                                            {
                                                "name": "cpu",
                                                "nominalQuota": shape.nominal,
                                                "borrowingLimit": shape.borrowing_limit,
                                            }
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                }
            )
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)})
            out.append(
                {
                    "apiVersion": KUEUE,
                    "kind": "LocalQueue",
                    "metadata": _meta(name, name),
                    "spec": {"clusterQueue": name},
                }
            )
    specs = {c.name: _job_spec(c.cpu) for c in shape.classes}
    for ns in queues:
        labels = {"kueue.x-k8s.io/queue-name": ns}
        for c in shape.classes:
            job_labels = {**labels, "kueue.x-k8s.io/priority-class": c.name}
            run_for = f"{c.runtime_ms}ms"
            for i in range(c.count):
                out.append(
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": f"{c.name}-{i}",
                            "namespace": ns,
                            "labels": job_labels,
                            "annotations": {
                                "kuota.dev/submit-at": f"{(i + 1) * c.interval_ms}ms",
                                "kuota.dev/run-for": run_for,
                            },
                        },
                        "spec": specs[c.name],
                    }
                )
    return out


def _job_spec(cpu: int) -> dict[str, Any]:
    return {
        "suspend": True,
        "parallelism": 1,
        "completions": 1,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "pause", "resources": {"requests": {"cpu": str(cpu)}}}
                ],
            }
        },
    }


class Meter:
    """Usage and time to admission from the decisions."""

    def __init__(self, shape: Shape) -> None:
        self.created: dict[str, float] = {}
        self.cls: dict[str, str] = {}
        for k in range(shape.cohorts):
            for q in range(shape.queues_per_cohort):
                ns = f"cq-{q}-cohort-{k}"
                for c in shape.classes:
                    for i in range(c.count):
                        key = f"{ns}/{c.name}-{i}"
                        self.created[key] = (i + 1) * c.interval_ms / 1000
                        self.cls[key] = c.name
        self.running: dict[str, tuple[float, int]] = {}  # key -> (admitted at, milli-CPU)
        self.last_admission: dict[str, float] = {}
        self.tta: dict[str, list[float]] = {c.name: [] for c in shape.classes}
        self.cpu_seconds = 0.0  # milli-CPU x seconds
        self.preempted = 0
        self.decisions = 0
        self.end = 0.0

    def observe(self, at: float, decisions: list[Any]) -> None:
        self.decisions += len(decisions)
        for d in decisions:
            key = d.workload
            if key is None:
                continue
            if d.type == "Admitted":
                cpu = sum(parse_quantity(v) for r in (d.usage or {}).values() for v in r.values())
                self.running[key] = (at, cpu)
                self.last_admission[key] = at
            elif d.type in ("Finished", "Preempted", "Evicted", "Deactivated"):
                run = self.running.pop(key, None)
                if run is not None:
                    self.cpu_seconds += run[1] * (at - run[0])
                if d.type == "Preempted":
                    self.preempted += 1
                if d.type == "Finished" and key in self.last_admission:
                    self.tta[self.cls[key]].append(self.last_admission[key] - self.created[key])
                    self.end = max(self.end, at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="baseline")
    parser.add_argument("--profile", action="store_true", help="cProfile the loop")
    parser.add_argument("--progress-every", type=int, default=20_000, help="events")
    args = parser.parse_args(argv)
    shape = SHAPES[args.shape]
    log = sys.stderr

    t0 = time.perf_counter()
    objects = manifests(shape)
    meter = Meter(shape)
    simulator = Simulator(objects, fold=Fold())
    total = len(meter.created)
    print(
        f"generated {len(objects)} objects ({total} jobs) in {time.perf_counter() - t0:.1f}s",
        file=log,
    )

    profiler = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    for step in simulator.steps():
        if step.decisions:
            meter.observe(step.event.at, step.decisions)
        if simulator.applied % args.progress_every == 0:
            elapsed = time.perf_counter() - start
            print(
                f"  events={simulator.applied} decisions={meter.decisions} "
                f"sim_t={simulator.now:.1f}s wall={elapsed:.1f}s "
                f"finished={sum(len(v) for v in meter.tta.values())}/{total} "
                f"preempted={meter.preempted}",
                file=log,
                flush=True,
            )
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - start
    if profiler is not None:
        pstats.Stats(profiler, stream=log).sort_stats("cumulative").print_stats(30)

    finished = sum(len(v) for v in meter.tta.values())
    nominal = shape.cohorts * shape.queues_per_cohort * shape.nominal * 1000
    sim_s = meter.end
    usage = 100.0 * meter.cpu_seconds / (nominal * sim_s) if sim_s else 0.0
    tta = {c: (sum(v) / len(v) if v else float("nan")) for c, v in meter.tta.items()}
    print(
        f"shape={args.shape} workloads={total} finished={finished} "
        f"preempted={meter.preempted} decisions={meter.decisions}",
        file=log,
    )
    print(
        f"wall_s={wall:.2f} sim_s={sim_s:.2f} usage_pct={usage:.1f} "
        f"tta_small_s={tta.get('small', float('nan')):.2f} "
        f"tta_medium_s={tta.get('medium', float('nan')):.2f} "
        f"tta_large_s={tta.get('large', float('nan')):.2f} "
        f"decisions_per_s={meter.decisions / wall if wall else 0:.0f}"
    )
    return 0 if finished == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
