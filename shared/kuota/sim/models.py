"""Accounting models: one trace, one cluster size -> a scenario the fold can run.

Theory of operation: ``kuota plan`` asks how many GPUs a trace needs when
quota counts them one way or another. An :class:`AccountingModel` writes the
manifests of one way: the Configuration's ``deviceClassMappings``, the
DeviceClasses, the ResourceSlices of one node as a DRA driver publishes it,
one ResourceClaimTemplate per request shape, and what each job of the trace
asks for. :func:`scenario` adds what all models share — a ResourceFlavor, one
ClusterQueue ``gpus`` whose nominal quota is ``nodes x gpus_per_node`` GPUs'
worth of the model's resource (preemption ``withinClusterQueue:
LowerPriority``), a LocalQueue per team namespace, a WorkloadPriorityClass per
priority, and a Job per trace job with ``kuota.dev/submit-at`` and
``run-for``.

The models, in :data:`MODELS` order:

- ``whole``: whole GPUs counted as devices (mapping ``nvidia-gpu``, no
  source). A job needing a fraction of a GPU still takes one.
- ``mig``: MIG partitions under a memory-counter quota (mapping
  ``gpu-memory``, ``counter: memory``), as the Red Hat article does: each
  H100 publishes a shared counter set of 80Gi and every MIG placement
  consuming its profile's memory; a fractional job asks for the smallest
  profile holding its memory (1g.10gb, 1g.20gb, 3g.40gb, 7g.80gb), a whole
  GPU is charged 80Gi.
- ``mps``: MPS shares under a capacity quota (consumable capacity, KEP 5075):
  GPUs published with ``allowMultipleAllocations: true`` and a ``memory``
  capacity whose ``requestPolicy`` rounds requests up to whole GiB; a job's
  claim asks ``capacity.requests.memory``; the mapping's source is
  ``capacity: {name: memory, driver: gpu.nvidia.com}`` (Kueue v0.19's
  shape). Whether the fold on this branch charges it is for
  ``kuota.sim.plan.probe`` to find out.

Kueue admits on aggregate quota, and so does kuota: whether a job fits on one
node is the kube-scheduler's question (docs/kueue-differences.md). So only
the quota grows with the node count; the inventory (one node's devices) only
decides what a request costs, and is the same at every size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.sim.trace import GPU_MEMORY_GIB, TraceJob

DRIVER = "gpu.nvidia.com"
FLAVOR = "h100"
CLUSTER_QUEUE = "gpus"
LOCAL_QUEUE = "gpus"
PRODUCT = "NVIDIA H100 80GB HBM3"
#: H100 80GB MIG profiles: (profile, memory GiB, placements per GPU).
MIG_PROFILES: tuple[tuple[str, int, int], ...] = (
    ("1g.10gb", 10, 7),
    ("1g.20gb", 20, 4),
    ("2g.20gb", 20, 3),
    ("3g.40gb", 40, 2),
    ("4g.40gb", 40, 1),
    ("7g.80gb", 80, 1),
)

Manifest = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """What one pod of a job claims: a ResourceClaimTemplate (name and body)."""

    template: str
    exactly: Manifest


@dataclass(frozen=True, slots=True)
class AccountingModel:
    """One way of counting GPUs against quota (module docstring)."""

    name: str
    title: str
    resource: str  # the quota's resource name (a deviceClassMappings name)
    per_gpu_units: int  # nominal quota per GPU, in the resource's units (devices or GiB)
    mappings: tuple[Manifest, ...]
    device_classes: tuple[Manifest, ...]
    slices: Callable[[int], list[Manifest]]  # gpus_per_node -> the node's ResourceSlices
    fractional: Callable[[int], Request]  # GiB -> the request of a fractional job's pod
    whole: Callable[[int], Request]  # GPUs per pod -> the request of a whole-GPU pod


def _device_class(name: str, expression: str) -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _slice(name: str, *, count: int = 1, **spec: Any) -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-0",
            "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": count},
            **spec,
        },
    }


def _gpu_attributes(index: int) -> Manifest:
    return {
        "type": {"string": "gpu"},
        "productName": {"string": PRODUCT},
        "index": {"int": index},
    }


def _exactly(device_class: str, count: int, **extra: Any) -> Manifest:
    return {"deviceClassName": device_class, "count": count, **extra}


# --- whole GPUs counted as devices -------------------------------------------------

#: Whole GPUs, as the NVIDIA DRA driver's DeviceClass selects them.
_GPU_CLASS = _device_class(
    "gpu.nvidia.com",
    f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'",
)


def _whole_slices(gpus: int) -> list[Manifest]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": _gpu_attributes(i),
            "capacity": {"memory": {"value": f"{GPU_MEMORY_GIB}Gi"}},
        }
        for i in range(gpus)
    ]
    return [_slice("node-0-gpus", devices=devices)]


WHOLE = AccountingModel(
    name="whole",
    title="whole GPUs counted as devices",
    resource="nvidia-gpu",
    per_gpu_units=1,
    mappings=({"name": "nvidia-gpu", "deviceClassNames": ["gpu.nvidia.com"]},),
    device_classes=(_GPU_CLASS,),
    slices=_whole_slices,
    fractional=lambda _gib: Request("gpu-1", _exactly("gpu.nvidia.com", 1)),
    whole=lambda n: Request(f"gpu-{n}", _exactly("gpu.nvidia.com", n)),
)


# --- MIG partitions under a memory-counter quota ----------------------------------


def mig_profile(gib: int) -> tuple[str, int]:
    """The smallest profile holding ``gib`` of memory (fewest slices on a tie)."""
    for profile, memory, _ in MIG_PROFILES:
        if memory >= gib:
            return profile, memory
    raise ValueError(f"{gib} GiB is more than one GPU's memory")


def _mig_slices(gpus: int) -> list[Manifest]:
    counters = [
        {"name": f"gpu-{i}-counter-set", "counters": {"memory": {"value": f"{GPU_MEMORY_GIB}Gi"}}}
        for i in range(gpus)
    ]
    devices: list[Manifest] = []
    for i in range(gpus):
        consumes = [{"counterSet": f"gpu-{i}-counter-set", "counters": {}}]
        devices.append(
            {
                "name": f"gpu-{i}",
                "attributes": _gpu_attributes(i),
                "capacity": {"memory": {"value": f"{GPU_MEMORY_GIB}Gi"}},
                "consumesCounters": [
                    {**consumes[0], "counters": {"memory": {"value": f"{GPU_MEMORY_GIB}Gi"}}}
                ],
            }
        )
        for profile, memory, placements in MIG_PROFILES:
            for j in range(placements):
                devices.append(
                    {
                        "name": f"gpu-{i}-mig-{profile.replace('.', '')}-{j}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": profile},
                            "productName": {"string": PRODUCT},
                            "parentIndex": {"int": i},
                        },
                        "capacity": {"memory": {"value": f"{memory}Gi"}},
                        "consumesCounters": [
                            {**consumes[0], "counters": {"memory": {"value": f"{memory}Gi"}}}
                        ],
                    }
                )
    return [
        _slice("node-0-counters", count=2, sharedCounters=counters),
        _slice("node-0-devices", count=2, devices=devices),
    ]


def _mig_request(gib: int) -> Request:
    profile, _ = mig_profile(gib)
    selector = {"cel": {"expression": f"device.attributes['{DRIVER}'].profile == '{profile}'"}}
    return Request(
        f"mig-{profile.replace('.', '-')}",
        _exactly("mig.nvidia.com", 1, selectors=[selector]),
    )


MIG = AccountingModel(
    name="mig",
    title="MIG partitions under a memory-counter quota",
    resource="gpu-memory",
    per_gpu_units=GPU_MEMORY_GIB,
    mappings=(
        {
            "name": "gpu-memory",
            "deviceClassNames": ["gpu.nvidia.com", "mig.nvidia.com"],
            "sources": [{"counter": {"name": "memory", "driver": DRIVER}}],
        },
    ),
    device_classes=(
        _GPU_CLASS,
        _device_class(
            "mig.nvidia.com",
            f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'",
        ),
    ),
    slices=_mig_slices,
    fractional=_mig_request,
    whole=lambda n: Request(f"gpu-{n}", _exactly("gpu.nvidia.com", n)),
)


# --- MPS shares under a capacity quota (consumable capacity) ----------------------


def _mps_slices(gpus: int) -> list[Manifest]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": _gpu_attributes(i),
            "allowMultipleAllocations": True,
            "capacity": {
                "memory": {
                    "value": f"{GPU_MEMORY_GIB}Gi",
                    "requestPolicy": {
                        "default": "1Gi",
                        "validRange": {"min": "1Gi", "step": "1Gi"},
                    },
                }
            },
        }
        for i in range(gpus)
    ]
    return [_slice("node-0-gpus", devices=devices)]


def _mps_request(gib: int) -> Request:
    return Request(
        f"mps-{gib}gi",
        _exactly("mps.nvidia.com", 1, capacity={"requests": {"memory": f"{gib}Gi"}}),
    )


MPS = AccountingModel(
    name="mps",
    title="MPS shares under a capacity quota",
    resource="gpu-memory",
    per_gpu_units=GPU_MEMORY_GIB,
    mappings=(
        {
            "name": "gpu-memory",
            "deviceClassNames": ["mps.nvidia.com"],
            "sources": [{"capacity": {"name": "memory", "driver": DRIVER}}],
        },
    ),
    device_classes=(
        _device_class(
            "mps.nvidia.com",
            f"device.driver == '{DRIVER}' && device.allowMultipleAllocations == true",
        ),
    ),
    slices=_mps_slices,
    fractional=_mps_request,
    whole=lambda n: Request(
        f"mps-whole-{n}",
        _exactly("mps.nvidia.com", n, capacity={"requests": {"memory": f"{GPU_MEMORY_GIB}Gi"}}),
    ),
)

#: Every model ``kuota plan`` runs, in the order it reports them.
MODELS: tuple[AccountingModel, ...] = (WHOLE, MIG, MPS)


def model_named(name: str) -> AccountingModel:
    for model in MODELS:
        if model.name == name:
            return model
    raise KeyError(name)


def pods_of(job: TraceJob, *, gpus_per_node: int) -> tuple[int, int]:
    """(pods, GPUs per pod) of a whole-GPU job: as few pods as fit on nodes of
    ``gpus_per_node`` GPUs, each asking the same count (rounded up)."""
    pods = max(1, math.ceil(job.gpus / gpus_per_node))
    return pods, math.ceil(job.gpus / pods)


def priority_class_name(value: int) -> str:
    return f"priority-{value}" if value >= 0 else f"priority-minus-{-value}"


class ScenarioBuilder:
    """The manifests of one model for one trace; only the ClusterQueue's quota
    changes with the node count (:meth:`manifests`)."""

    def __init__(
        self, trace: Sequence[TraceJob], *, model: AccountingModel, gpus_per_node: int
    ) -> None:
        if gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")
        self.model = model
        self.gpus_per_node = gpus_per_node
        teams = sorted({job.team for job in trace})
        templates: dict[str, Manifest] = {}
        jobs: list[Manifest] = []
        for job in trace:
            if job.fractional:
                pods, request = 1, model.fractional(job.gpu_memory_gib)
            else:
                pods, per_pod = pods_of(job, gpus_per_node=gpus_per_node)
                request = model.whole(per_pod)
            templates[request.template] = request.exactly
            jobs.append(_job(job, pods=pods, template=request.template))
        head: list[Manifest] = [
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "resources": {"deviceClassMappings": [dict(m) for m in model.mappings]},
            },
            *model.device_classes,
            *model.slices(gpus_per_node),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": FLAVOR},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": PRODUCT.replace(" ", "-")}},
            },
        ]
        for value in sorted({job.priority for job in trace}):
            head.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": priority_class_name(value)},
                    "value": value,
                }
            )
        for team in teams:
            head.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team}})
            head.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": LOCAL_QUEUE, "namespace": team},
                    "spec": {"clusterQueue": CLUSTER_QUEUE},
                }
            )
            for name in sorted(templates):
                head.append(
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaimTemplate",
                        "metadata": {"name": name, "namespace": team},
                        "spec": {
                            "spec": {
                                "devices": {
                                    "requests": [{"name": "gpu", "exactly": templates[name]}]
                                }
                            }
                        },
                    }
                )
        self._head = head
        self._jobs = jobs

    def quota(self, nodes: int) -> str:
        """The nominal quota of ``nodes`` nodes, as a quantity."""
        units = nodes * self.gpus_per_node * self.model.per_gpu_units
        return str(units) if self.model.per_gpu_units == 1 else f"{units}Gi"

    def manifests(self, nodes: int) -> list[Manifest]:
        cluster_queue = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [self.model.resource],
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {"name": self.model.resource, "nominalQuota": self.quota(nodes)}
                                ],
                            }
                        ],
                    }
                ],
            },
        }
        return [*self._head, cluster_queue, *self._jobs]


def _job(job: TraceJob, *, pods: int, template: str) -> Manifest:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.team,
            "labels": {
                "kueue.x-k8s.io/queue-name": LOCAL_QUEUE,
                "kueue.x-k8s.io/priority-class": priority_class_name(job.priority),
            },
            "annotations": {
                "kuota.dev/submit-at": _seconds(job.submit_s),
                "kuota.dev/run-for": _seconds(job.duration_s),
            },
        },
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/trace-job:1",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                }
            },
        },
    }


def _seconds(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


__all__ = [
    "MIG",
    "MODELS",
    "MPS",
    "WHOLE",
    "AccountingModel",
    "ScenarioBuilder",
    "mig_profile",
    "model_named",
]
