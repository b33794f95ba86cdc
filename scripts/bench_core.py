#!/usr/bin/env python3
"""Benchmark the admission core through the simulation engine (``make bench-core``).

Generates, in memory, a loaded GPU cluster and folds it through
``kuota.sim.engine.Simulator`` with the real ``kuota.core.fold.fold.Fold`` on one
core:

- 100 ClusterQueues (``--queues``) in 10 cohorts (``--cohorts``); each has a
  resource group for whole H100s charged by device count (``nvidia-gpu``,
  flavor ``h100``, with CPU) and one for MIG slices charged by the GPU memory
  counter they consume (``gpu-memory``, flavor ``h100-mig``), with a borrowing
  limit inside the cohort;
- the Configuration with both deviceClassMappings, the two DeviceClasses, one
  ResourceFlavor per kind of charge, ResourceSlices for 8-GPU H100 nodes
  (counter sets in their own slice; 8 whole GPUs + 56 1g.10gb MIG devices)
  (``--nodes-known`` adds the Nodes themselves, so that every Job's pods are
  placed on a node with free devices before it is admitted, #17; without it
  admission is on quota alone, the trace of the digests before #17), a
  namespace per queue with its LocalQueue and the two ResourceClaimTemplates;
- 100,000 Jobs (``--workloads``) arriving as a Poisson process whose rate keeps
  the offered load at ``--load`` times the cluster's quota, each with a
  ``kuota.dev/run-for`` duration, so the system stays loaded.

``--capacity`` puts consumable capacity in the mix: each node also has one
H100 shared MPS-style (``allowMultipleAllocations``, 80Gi of memory in 10Gi
steps), each queue a ``gpu-share-memory`` quota (``--share-quota-gi``, flavor
``h100-mps``) and a quarter of the Jobs claim a 20Gi share or two 15Gi shares
(charged 20Gi each). Without it the cluster and the Jobs are exactly those
above, so the digest is unchanged.

``--afs`` turns admission fair sharing on: the Configuration gets
``admissionFairSharing`` (half-life 1h, samples every 5m, cpu weighted 0),
every ClusterQueue ``admissionScope.admissionMode:
UsageBasedAdmissionFairSharing``, every namespace ``--afs-local-queues``
LocalQueues (``queue``, ``queue-1``, ...) and each Job one of them, drawn by a
second seeded generator (so the rest of the trace is unchanged).

Generation uses a seeded ``random.Random`` (a script, not the core) and is not
timed. The timed part is the engine+fold loop. Progress goes to stderr; the
LAST stdout line is::

    decisions_per_s=<N> workloads=<N> wall_s=<N> peak_rss_mb=<N>

A stderr line also gives the fold's own share: the decisions over the time
spent inside ``Fold.apply`` alone (the rest of the loop is
the simulation engine turning decisions into the next events).

The fold and the engine run compiled when ``make native`` has built the
current sources (``make bench-core`` does; docs/design/native-core.md), else as
pure Python (``KUOTA_NATIVE=0`` asks for that); a stderr line says which.

``--profile`` runs the loop under cProfile and prints the top functions to
stderr (the figures are then inflated by the profiler). ``--digest`` prints,
on stderr, a sha256 over every decision's JSON in order (plus the count): two
versions of the core that decide the same give the same digest (the timing of
such a run includes the hashing).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import pstats
import random
import resource
import sys
import time
from typing import Any

from native_finder import compiled_modules

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent
from kuota.sim.engine import Simulator

KUEUE = "kueue.x-k8s.io/v1beta2"
DRA = "resource.k8s.io/v1"
GPUS_PER_NODE = 8
MIGS_PER_GPU = 7
GPU_MEMORY_GI = 80
MIG_MEMORY_GI = 10
SHARE_STEP_GI = 10  # the shared H100's requestPolicy: memory in 10Gi steps
# --capacity: claims of a share of the shared H100 (15Gi is charged 20Gi)
SHARE_TEMPLATES = (("gpu-share-20gi", "20Gi"), ("gpu-share-15gi", "15Gi"))
SHARE_CHARGE_GI = 20


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def cluster(
    *,
    queues: int,
    cohorts: int,
    nodes: int,
    gpu_quota: int,
    mig_quota_gi: int,
    share_quota_gi: int = 0,
    afs_local_queues: int = 0,
    with_nodes: bool = False,
) -> list[dict[str, Any]]:
    """Everything but the Jobs, in apply order. ``afs_local_queues`` > 0 turns
    admission fair sharing on with that many LocalQueues per namespace
    (``--afs``). ``share_quota_gi`` > 0 adds
    consumable capacity: one shared H100 per node, a capacity mapping and a
    ``gpu-share-memory`` quota per queue (``--capacity``)."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {
                "deviceClassMappings": [
                    {"name": "nvidia-gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                    {
                        "name": "gpu-memory",
                        "deviceClassNames": ["mig.nvidia.com"],
                        "sources": [
                            {
                                "type": "Counter",
                                "counter": {"name": "memory", "driver": "gpu.nvidia.com"},
                            }
                        ],
                    },
                ]
            },
        }
    ]
    classes = [("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")]
    if afs_local_queues:
        objects[0]["admissionFairSharing"] = {
            "usageHalfLifeTime": "1h",
            "usageSamplingInterval": "5m",
            "resourceWeights": {"cpu": 0},
        }
    if share_quota_gi:
        objects[0]["resources"]["deviceClassMappings"].append(
            {
                "name": "gpu-share-memory",
                "deviceClassNames": ["mps.nvidia.com"],
                "sources": [{"capacity": {"name": "memory", "driver": "gpu.nvidia.com"}}],
            }
        )
        classes.append(("mps.nvidia.com", "mps"))
    for cls, kind in classes:
        objects.append(
            {
                "apiVersion": DRA,
                "kind": "DeviceClass",
                "metadata": _meta(cls),
                "spec": {
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.driver == 'gpu.nvidia.com' && "
                                f"device.attributes['gpu.nvidia.com'].type == '{kind}'"
                            }
                        }
                    ]
                },
            }
        )
    for n in range(nodes):
        node = f"h100-{n:03d}"
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
        counter_sets = [
            {"name": f"gpu-{g}", "counters": {"memory": {"value": f"{GPU_MEMORY_GI}Gi"}}}
            for g in range(GPUS_PER_NODE)
        ]
        devices: list[dict[str, Any]] = []
        for g in range(GPUS_PER_NODE):
            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": {"type": {"string": "gpu"}, "index": {"int": g}},
                    "consumesCounters": [
                        {
                            "counterSet": f"gpu-{g}",
                            "counters": {"memory": {"value": f"{GPU_MEMORY_GI}Gi"}},
                        }
                    ],
                }
            )
            for m in range(MIGS_PER_GPU):
                devices.append(
                    {
                        "name": f"gpu-{g}-mig-1g10gb-{m}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": "1g.10gb"},
                            "parentIndex": {"int": g},
                        },
                        "consumesCounters": [
                            {
                                "counterSet": f"gpu-{g}",
                                "counters": {"memory": {"value": f"{MIG_MEMORY_GI}Gi"}},
                            }
                        ],
                    }
                )
        if share_quota_gi:
            devices.append(
                {
                    "name": "gpu-mps",
                    "allowMultipleAllocations": True,
                    "attributes": {"type": {"string": "mps"}},
                    "capacity": {
                        "memory": {
                            "value": f"{GPU_MEMORY_GI}Gi",
                            "requestPolicy": {
                                "default": f"{SHARE_STEP_GI}Gi",
                                "validRange": {
                                    "min": f"{SHARE_STEP_GI}Gi",
                                    "max": f"{GPU_MEMORY_GI}Gi",
                                    "step": f"{SHARE_STEP_GI}Gi",
                                },
                            },
                        }
                    },
                }
            )
        if with_nodes:  # the fold then places every DRA pod on a node (#17)
            objects.append({"apiVersion": "v1", "kind": "Node", "metadata": _meta(node)})
        common = {"driver": "gpu.nvidia.com", "nodeName": node, "pool": pool}
        objects.append(
            {
                "apiVersion": DRA,
                "kind": "ResourceSlice",
                "metadata": _meta(f"{node}-counters"),
                "spec": {**common, "sharedCounters": counter_sets},
            }
        )
        objects.append(
            {
                "apiVersion": DRA,
                "kind": "ResourceSlice",
                "metadata": _meta(f"{node}-devices"),
                "spec": {**common, "devices": devices},
            }
        )
    flavors = ("h100", "h100-mig", "h100-mps") if share_quota_gi else ("h100", "h100-mig")
    for flavor in flavors:
        objects.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": _meta(flavor)})
    for q in range(queues):
        cohort = f"pool-{q % cohorts}"
        cq, ns = f"cq-{q:03d}", f"team-{q:03d}"
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": _meta(cq),
                "spec": {
                    "cohortName": cohort,
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "nvidia-gpu"],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": 8 * gpu_quota},
                                        {
                                            "name": "nvidia-gpu",
                                            "nominalQuota": gpu_quota,
                                            "borrowingLimit": gpu_quota // 2,
                                        },
                                    ],
                                }
                            ],
                        },
                        {
                            "coveredResources": ["gpu-memory"],
                            "flavors": [
                                {
                                    "name": "h100-mig",
                                    "resources": [
                                        {
                                            "name": "gpu-memory",
                                            "nominalQuota": f"{mig_quota_gi}Gi",
                                            "borrowingLimit": f"{mig_quota_gi // 2}Gi",
                                        }
                                    ],
                                }
                            ],
                        },
                    ],
                },
            }
        )
        if afs_local_queues:
            objects[-1]["spec"]["admissionScope"] = {
                "admissionMode": "UsageBasedAdmissionFairSharing"
            }
        if share_quota_gi:
            objects[-1]["spec"]["resourceGroups"].append(
                {
                    "coveredResources": ["gpu-share-memory"],
                    "flavors": [
                        {
                            "name": "h100-mps",
                            "resources": [
                                {
                                    "name": "gpu-share-memory",
                                    "nominalQuota": f"{share_quota_gi}Gi",
                                    "borrowingLimit": f"{share_quota_gi // 2}Gi",
                                }
                            ],
                        }
                    ],
                }
            )
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns)})
        for i in range(max(1, afs_local_queues)):
            objects.append(
                {
                    "apiVersion": KUEUE,
                    "kind": "LocalQueue",
                    "metadata": _meta(f"queue-{i}" if i else "queue", ns),
                    "spec": {"clusterQueue": cq},
                }
            )
        templates: list[tuple[str, str, str | None, str | None]] = [
            ("single-gpu", "gpu.nvidia.com", None, None),
            (
                "gpu-partition",
                "mig.nvidia.com",
                "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
                None,
            ),
        ]
        if share_quota_gi:
            templates += [(t, "mps.nvidia.com", None, amount) for t, amount in SHARE_TEMPLATES]
        for template, cls, selector, share in templates:
            exactly: dict[str, Any] = {"deviceClassName": cls, "count": 1}
            if selector:
                exactly["selectors"] = [{"cel": {"expression": selector}}]
            if share:
                exactly["capacity"] = {"requests": {"memory": share}}
            objects.append(
                {
                    "apiVersion": DRA,
                    "kind": "ResourceClaimTemplate",
                    "metadata": _meta(template, ns),
                    "spec": {
                        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}
                    },
                }
            )
    return objects


def _job_spec(template: str, parallelism: int, cpu: int) -> dict[str, Any]:
    return {
        "suspend": True,
        "parallelism": parallelism,
        "completions": parallelism,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/train:1",
                        "resources": {"requests": {"cpu": str(cpu)}, "claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            }
        },
    }


def jobs(
    *,
    count: int,
    queues: int,
    gpu_quota: int,
    mig_quota_gi: int,
    load: float,
    seed: int,
    share_quota_gi: int = 0,
    afs_local_queues: int = 0,
) -> list[dict[str, Any]]:
    """``count`` Jobs with submit-at / run-for annotations keeping ``load``."""
    rng = random.Random(seed)
    lq_rng = random.Random(seed + 1_000_003)  # --afs: which LocalQueue (trace unchanged)
    # Job shapes: (template, parallelism, cpu per pod, weight). Specs are shared
    # between Jobs (the engine copies only metadata; the core does not mutate).
    shapes = [
        ("single-gpu", 1, 4, 0.30),
        ("single-gpu", 2, 4, 0.20),
        ("single-gpu", 4, 4, 0.10),
        ("gpu-partition", 1, 1, 0.40),
    ]
    if share_quota_gi:  # a quarter of the Jobs take shares of a GPU instead
        shapes = [(t, p, c, w * 0.75) for t, p, c, w in shapes] + [
            ("gpu-share-20gi", 1, 1, 0.15),
            ("gpu-share-15gi", 2, 1, 0.10),
        ]
    specs = [_job_spec(t, p, c) for t, p, c, _ in shapes]
    weights = [w for *_, w in shapes]
    run_min, run_max = 300, 1800
    mean_run = (run_min + run_max) / 2
    # Offered load per queue: GPU-seconds per second against the GPU quota (the
    # MIG quota is sized for a comparable load).
    gpu_share = sum(w * p for (t, p, _, w) in shapes if t == "single-gpu")
    mig_share = sum(w * p for (t, p, _, w) in shapes if t == "gpu-partition")
    rate_gpu = load * gpu_quota * queues / (gpu_share * mean_run)
    rate_mig = load * (mig_quota_gi // MIG_MEMORY_GI) * queues / (mig_share * mean_run)
    rate = min(rate_gpu, rate_mig)  # jobs per second over the whole cluster
    if share_quota_gi:
        share = sum(w * p for (t, p, _, w) in shapes if t.startswith("gpu-share"))
        rate_share = load * (share_quota_gi // SHARE_CHARGE_GI) * queues / (share * mean_run)
        rate = min(rate, rate_share)
    labels = {f"team-{q:03d}": {"kueue.x-k8s.io/queue-name": "queue"} for q in range(queues)}
    out: list[dict[str, Any]] = []
    now = 0.0
    for n in range(count):
        now += rng.expovariate(rate)
        q = rng.randrange(queues)
        ns = f"team-{q:03d}"
        shape = rng.choices(range(len(shapes)), weights)[0]
        job_labels = labels[ns]
        if afs_local_queues > 1:
            i = lq_rng.randrange(afs_local_queues)
            job_labels = {"kueue.x-k8s.io/queue-name": f"queue-{i}" if i else "queue"}
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"job-{n:06d}",
                    "namespace": ns,
                    "labels": job_labels,
                    "annotations": {
                        "kuota.dev/submit-at": round(now, 3),
                        "kuota.dev/run-for": rng.randint(run_min, run_max),
                    },
                },
                "spec": specs[shape],
            }
        )
    return out


class _TimedFold:
    """The fold as the engine sees it, with the time spent in ``apply`` summed (a
    ``perf_counter`` pair per event: cheap next to a fold step), to tell the
    fold's share of the loop from the simulation engine's. ``next_wakeup`` is the
    fold's own bound method, untimed (a few hundred nanoseconds a step)."""

    def __init__(self, fold: Fold) -> None:
        self.fold = fold
        self.wall_s = 0.0
        self.next_wakeup = fold.next_wakeup

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]:
        start = time.perf_counter()
        decisions = self.fold.apply(event, offset=offset)
        self.wall_s += time.perf_counter() - start
        return decisions


def _core_kind() -> str:
    """Which fold runs: compiled by ``make native`` (docs/design/native-core.md)
    or pure Python (``KUOTA_NATIVE=0``, or a build older than the sources)."""
    compiled = compiled_modules()
    if not compiled:
        return "pure Python"
    return f"compiled with mypyc ({len(compiled)} modules: {', '.join(compiled)})"


def _interpreter() -> str:
    """Which CPython runs the bench: its version, the interpreter the venv was
    made from, and whether libpython is a shared library (a build whose calls
    into libpython go through the PLT, as pyenv's default build) or linked into
    the executable (Debian's, built with PGO and LTO): the same code made
    ×1.25 the decisions/s on the latter, median of 40 interleaved pairs
    (docs/design/interpreter.md)."""
    base = getattr(sys, "_base_executable", sys.executable)
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            shared = any("libpython3" in line for line in maps)
    except OSError:
        return f"CPython {sys.version.split()[0]} ({base})"
    linked = "libpython shared" if shared else "libpython linked in"
    return f"CPython {sys.version.split()[0]} ({base}, {linked})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=100, help="8-GPU H100 nodes")
    parser.add_argument("--gpu-quota", type=int, default=8, help="nvidia-gpu nominal per queue")
    parser.add_argument("--mig-quota-gi", type=int, default=40, help="gpu-memory Gi per queue")
    parser.add_argument("--load", type=float, default=1.0, help="offered load / quota")
    parser.add_argument(
        "--capacity",
        action="store_true",
        help="consumable capacity in the mix: a shared H100 per node, a quarter of the Jobs "
        "claiming 20Gi or 15Gi shares of it against a gpu-share-memory quota",
    )
    parser.add_argument(
        "--share-quota-gi", type=int, default=80, help="gpu-share-memory Gi per queue (--capacity)"
    )
    parser.add_argument(
        "--afs",
        action="store_true",
        help="admission fair sharing on: every ClusterQueue UsageBasedAdmissionFairSharing, "
        "--afs-local-queues LocalQueues per namespace",
    )
    parser.add_argument(
        "--afs-local-queues", type=int, default=4, help="LocalQueues per namespace (--afs)"
    )
    parser.add_argument(
        "--nodes-known",
        action="store_true",
        help="put the Node objects in the trace: every Job is placed on a node (#17)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile the loop")
    parser.add_argument("--progress-every", type=int, default=50_000, help="events")
    parser.add_argument(
        "--digest",
        action="store_true",
        help="print sha256 of every decision's JSON (one per line, in order) to compare runs",
    )
    args = parser.parse_args(argv)

    log = sys.stderr
    share_quota_gi = args.share_quota_gi if args.capacity else 0
    afs_local_queues = args.afs_local_queues if args.afs else 0
    t0 = time.perf_counter()
    manifests = cluster(
        queues=args.queues,
        cohorts=args.cohorts,
        nodes=args.nodes,
        gpu_quota=args.gpu_quota,
        mig_quota_gi=args.mig_quota_gi,
        share_quota_gi=share_quota_gi,
        afs_local_queues=afs_local_queues,
        with_nodes=args.nodes_known,
    )
    setup = len(manifests)
    manifests += jobs(
        count=args.workloads,
        queues=args.queues,
        gpu_quota=args.gpu_quota,
        mig_quota_gi=args.mig_quota_gi,
        load=args.load,
        seed=args.seed,
        share_quota_gi=share_quota_gi,
        afs_local_queues=afs_local_queues,
    )
    fold = Fold()
    timed = _TimedFold(fold)
    simulator = Simulator(manifests, fold=timed)
    print(
        f"generated {setup} cluster objects + {args.workloads} jobs "
        f"in {time.perf_counter() - t0:.1f}s",
        file=log,
    )
    print(f"core: {_core_kind()}", file=log)
    print(f"interpreter: {_interpreter()}", file=log)

    decisions = 0
    by_type: dict[str, int] = {}
    digest = hashlib.sha256() if args.digest else None
    profiler = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    cpu_start = time.process_time()
    if profiler is not None:
        profiler.enable()
    for step in simulator.steps():
        if step.decisions:
            decisions += len(step.decisions)
            for d in step.decisions:
                by_type[d.type] = by_type.get(d.type, 0) + 1
            if digest is not None:
                for d in step.decisions:
                    digest.update(d.model_dump_json().encode())
                    digest.update(b"\n")
        if simulator.applied % args.progress_every == 0:
            elapsed = time.perf_counter() - start
            queues = fold.summary()
            print(
                f"  events={simulator.applied} decisions={decisions} "
                f"sim_t={simulator.now:.0f}s wall={elapsed:.1f}s "
                f"rate={decisions / elapsed if elapsed else 0:.0f}/s "
                f"admitted={sum(q.admitted for q in queues)} "
                f"pending={sum(q.pending for q in queues)}",
                file=log,
                flush=True,
            )
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start

    print(
        f"fold only: wall_s={timed.wall_s:.2f} decisions_per_s={decisions / timed.wall_s:.0f} "
        f"(the rest of the loop, {wall - timed.wall_s:.2f}s, is the simulation engine and "
        "this script's counting)",
        file=log,
    )
    print(
        f"done: events={simulator.applied} sim_t={simulator.now:.0f}s settled={simulator.settled} "
        f"loop cpu_s={cpu:.2f} (wall_s={wall:.2f}; a gap means another process had the core) "
        f"decisions by type: {dict(sorted(by_type.items()))}",
        file=log,
    )
    if profiler is not None:
        buffer = io.StringIO()
        stats = pstats.Stats(profiler, stream=buffer)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(30)
        print(buffer.getvalue(), file=log)
    if digest is not None:
        print(f"digest sha256={digest.hexdigest()} decisions={decisions}", file=log)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"decisions_per_s={decisions / wall:.0f} workloads={args.workloads} "
        f"wall_s={wall:.2f} peak_rss_mb={peak_rss_mb:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
