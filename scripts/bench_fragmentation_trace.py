"""The fragmentation bench's trace and objects, as pure functions (no clock, no I/O).

``generate(seed, ...)`` draws a mixed trace of Jobs, the same for both systems:
whole GPUs (1, 2 and 4 per pod), 1g.10gb and 3g.40gb MIG slices, and 2-pod
gangs of 2 GPUs per pod, each with a submission time and a run time. The
first ``len(SHAPES)`` Jobs take every shape once (in a drawn order), so any
trace of at least that many Jobs is mixed; the others are drawn by weight.

``hardware(...)`` is the cluster both systems get: ``nodes`` kwok nodes of
``GPUS_PER_NODE`` GPUs of 80Gi, each GPU also offered as seven 1g.10gb and two
3g.40gb slices, all drawing on the GPU's ``memory`` counter (a slice and its
whole GPU exclude each other; 2 x 3g.40gb, or 1 x 3g.40gb + 4 x 1g.10gb, fill a
GPU). Only memory is modelled: a real A100/H100 also limits the compute
slices, which this does not. ``queue_objects`` gives one ClusterQueue whose
``gpu-memory`` quota is exactly the cluster's (so quota alone never says no
when the cluster has the memory somewhere), its flavor selecting the run's
nodes, and the ResourceClaimTemplates of each shape; ``job_manifest`` a Job
of the trace, without ``spec.suspend`` (the system's webhook suspends it).

Class names follow the harnesses' hardware: ``gpu-<hw>`` (whole GPUs) and
``mig-<hw>`` (slices), both charged by the ``memory`` counter as
``gpu-memory`` (the Kueue stack's Configuration, ``kueue_diff.kueue_configuration``).
Checked by ``tests/unit/bench/test_bench_fragmentation.py``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KUEUE_API = "kueue.x-k8s.io/v1beta2"
POOL_LABEL = "bench.kuota.dev/pool"
RUN_LABEL = "bench.kuota.dev/run"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KWOK_READY = "pod-ready.stage.kwok.x-k8s.io/delay"
KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"
GPUS_PER_NODE = 4
GPU_MEMORY_GI = 80
MIG_PROFILES = {"1g.10gb": (7, 10), "3g.40gb": (2, 40)}  # profile -> (per GPU, Gi)
QUEUE = "gpus"


@dataclass(frozen=True)
class Shape:
    """What one Job asks: ``pods`` pods (a gang when more than one), each with one
    claim of ``count`` devices of ``device``: ``gpu`` (whole) or a MIG profile."""

    name: str
    pods: int
    device: str  # "gpu" | "1g.10gb" | "3g.40gb"
    count: int

    @property
    def template(self) -> str:
        """The ResourceClaimTemplate its pods use."""
        if self.device == "gpu":
            return f"gpu-{self.count}"
        return f"mig-{self.device.split('.')[0]}"

    @property
    def gpus(self) -> float:
        """GPUs the whole Job takes, a slice counting as its share of a GPU's memory."""
        per = 1.0 if self.device == "gpu" else MIG_PROFILES[self.device][1] / GPU_MEMORY_GI
        return self.pods * self.count * per


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("gpu-1", 1, "gpu", 1),
        Shape("gpu-2", 1, "gpu", 2),
        Shape("gpu-4", 1, "gpu", 4),
        Shape("mig-1g", 1, "1g.10gb", 1),
        Shape("mig-3g", 1, "3g.40gb", 1),
        Shape("gang-2x2", 2, "gpu", 2),
    )
}
WEIGHTS: dict[str, float] = {
    "gpu-1": 0.20,
    "gpu-2": 0.15,
    "gpu-4": 0.15,
    "mig-1g": 0.20,
    "mig-3g": 0.15,
    "gang-2x2": 0.15,
}


@dataclass(frozen=True)
class TraceJob:
    name: str
    shape: Shape
    submit_at: float  # seconds after the start
    run_for: int  # seconds each pod runs once ready


def generate(
    seed: int,
    jobs: int = 48,
    span_s: float = 45.0,
    run_s: tuple[int, int] = (10, 40),
    weights: Mapping[str, float] = WEIGHTS,
) -> list[TraceJob]:
    """``jobs`` Jobs submitted over ``[0, span_s]`` (uniform, to the 0.1 s, sorted),
    each running a whole number of seconds in ``run_s`` (inclusive); the same seed
    gives the same trace. Names ``j-00``, ``j-01``, ... in submission order."""
    if jobs < 0 or span_s < 0 or run_s[0] < 1 or run_s[1] < run_s[0]:
        raise ValueError(f"bad trace parameters: jobs={jobs} span_s={span_s} run_s={run_s}")
    unknown = sorted(set(weights) - set(SHAPES))
    if unknown or not any(w > 0 for w in weights.values()):
        raise ValueError(f"weights must name shapes of {sorted(SHAPES)} (unknown {unknown})")
    rng = random.Random(seed)
    names = sorted(weights)
    first = [n for n in sorted(SHAPES) if weights.get(n, 0) > 0]
    rng.shuffle(first)
    shapes = first[:jobs] + rng.choices(
        names, weights=[weights[n] for n in names], k=max(0, jobs - len(first))
    )
    times = sorted(round(rng.uniform(0, span_s), 1) for _ in range(jobs))
    width = max(2, len(str(max(0, jobs - 1))))
    return [
        TraceJob(f"j-{i:0{width}d}", SHAPES[shape], at, rng.randint(*run_s))
        for i, (shape, at) in enumerate(zip(shapes, times, strict=True))
    ]


def offered_gpu_seconds(trace: Sequence[TraceJob]) -> float:
    """GPU-seconds the trace asks for (a slice as its share of a GPU's memory)."""
    return sum(j.shape.gpus * j.run_for for j in trace)


# ---------------------------------------------------------------- objects


def node_names(prefix: str, nodes: int) -> list[str]:
    return [f"{prefix}-n{i}" for i in range(nodes)]


def hardware(
    prefix: str, pool: str, driver: str, labels: Mapping[str, str], nodes: int = 8
) -> list[dict[str, Any]]:
    """``nodes`` kwok Nodes named ``<prefix>-n<i>`` (label ``POOL_LABEL: pool``) and
    per node two ResourceSlices of ``driver``: the GPUs' counter sets, and the
    devices (whole GPUs and their MIG slices)."""
    objs: list[dict[str, Any]] = []
    for node in node_names(prefix, nodes):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {
                        **labels,
                        POOL_LABEL: pool,
                        "kubernetes.io/hostname": node,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                },
                "status": {
                    "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                    "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                },
            }
        )
        pool_ref = {"name": node, "generation": 1, "resourceSliceCount": 2}
        devices: list[dict[str, Any]] = []
        for g in range(GPUS_PER_NODE):
            counter = f"gpu-{g}-memory"

            def draws(gi: int, counter: str = counter) -> list[dict[str, Any]]:
                return [{"counterSet": counter, "counters": {"memory": {"value": f"{gi}Gi"}}}]

            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": {"type": {"string": "gpu"}, "index": {"int": g}},
                    "capacity": {"memory": {"value": f"{GPU_MEMORY_GI}Gi"}},
                    "consumesCounters": draws(GPU_MEMORY_GI),
                }
            )
            for profile, (per_gpu, gi) in MIG_PROFILES.items():
                for m in range(per_gpu):
                    devices.append(
                        {
                            "name": f"gpu-{g}-mig-{profile.replace('.', '')}-{m}",
                            "attributes": {
                                "type": {"string": "mig"},
                                "profile": {"string": profile},
                                "parentIndex": {"int": g},
                            },
                            "capacity": {"memory": {"value": f"{gi}Gi"}},
                            "consumesCounters": draws(gi),
                        }
                    )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-counters", "labels": dict(labels)},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": pool_ref,
                    "sharedCounters": [
                        {
                            "name": f"gpu-{g}-memory",
                            "counters": {"memory": {"value": f"{GPU_MEMORY_GI}Gi"}},
                        }
                        for g in range(GPUS_PER_NODE)
                    ],
                },
            }
        )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-devices", "labels": dict(labels)},
                "spec": {"driver": driver, "nodeName": node, "pool": pool_ref, "devices": devices},
            }
        )
    return objs


def queue_objects(
    name: str, hw: str, driver: str, pool: str, labels: Mapping[str, str], nodes: int = 8
) -> list[dict[str, Any]]:
    """The flavor (the run's nodes), the ClusterQueue (``gpu-memory`` = the cluster's
    memory), namespace ``name`` with LocalQueue ``gpus``, and one
    ResourceClaimTemplate per shape's template."""
    lab = dict(labels)
    quota = f"{nodes * GPUS_PER_NODE * GPU_MEMORY_GI}Gi"
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": lab},
            "spec": {"nodeLabels": {POOL_LABEL: pool}},
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": name, "labels": lab},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["gpu-memory"],
                        "flavors": [
                            {
                                "name": name,
                                "resources": [{"name": "gpu-memory", "nominalQuota": quota}],
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
            "metadata": {"name": QUEUE, "namespace": name, "labels": lab},
            "spec": {"clusterQueue": name},
        },
    ]
    templates: dict[str, dict[str, Any]] = {}
    for shape in SHAPES.values():
        request: dict[str, Any] = {"count": shape.count}
        if shape.device == "gpu":
            request["deviceClassName"] = f"gpu-{hw}"
        else:
            request["deviceClassName"] = f"mig-{hw}"
            cel = f"device.attributes['{driver}'].profile == '{shape.device}'"
            request["selectors"] = [{"cel": {"expression": cel}}]
        templates[shape.template] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": shape.template, "namespace": name, "labels": lab},
            "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": request}]}}},
        }
    return objs + [templates[t] for t in sorted(templates)]


def job_manifest(job: TraceJob, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The Job of a trace entry in the LocalQueue ``gpus``: ``pods`` pods at once
    (``parallelism`` = ``completions``), each with its claim, ready at once on kwok
    and complete ``run_for`` seconds later; labelled ``labels``, its pods only with
    the run's ``RUN_LABEL`` (a system's pipeline label stays on the Job)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": namespace,
            "labels": {**labels, QUEUE_LABEL: QUEUE},
            "annotations": {"bench.kuota.dev/shape": job.shape.name},
        },
        "spec": {
            "parallelism": job.shape.pods,
            "completions": job.shape.pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": {k: v for k, v in labels.items() if k == RUN_LABEL},
                    "annotations": {KWOK_READY: "200ms", KWOK_COMPLETE: f"{job.run_for}s"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "dev"}]},
                        }
                    ],
                    "resourceClaims": [
                        {"name": "dev", "resourceClaimTemplateName": job.shape.template}
                    ],
                },
            },
        },
    }
