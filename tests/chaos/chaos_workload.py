"""The fault runs' workload: queues, DRA templates and a seeded stream of Jobs.

Theory of operation. One run (``RUN``, its own kwok nodes and partitionable
GPUs from ``e2e_harness.hardware``) gets three ClusterQueues:

- ``chaos-a`` and ``chaos-b`` share the cohort ``chaos-pool``: 160Gi of
  ``gpu-memory`` each (whole GPUs at 80Gi, 1g.10gb MIG slices at 10Gi, charged
  by the devices' ``memory`` counter), each may borrow 80Gi of the other's;
  preemption ``withinClusterQueue: LowerPriority``, ``reclaimWithinCohort: Any``;
- ``chaos-c`` alone: 3 ``whole-gpus`` (a DeviceClass with an
  ``extendedResourceName``, charged by device count), ``LowerPriority``.

The team namespaces are managed (``manageJobsWithoutQueueName``); chaos-a has
a second LocalQueue ``q2`` into chaos-b (for the rogue user, ``chaos_rogue``).

Jobs are drawn from ``random.Random(seed)``: a kind (a whole GPU, 1-2 MIG
slices in as many pods, or a counted whole GPU in ``chaos-c``), a priority
(one in five high) and a run time (kwok completes the pods). Each Job's
charge is computed HERE, from the kind, not by kuota's core: the checker
holds kuota to this table. Jobs are created in bursts (``plan_bursts``), so
some service kills land right after a burst, while a transaction is open.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from e2e_harness import (
    KWOK_COMPLETE,
    KWOK_READY,
    NODE_POOL_LABEL,
    PIPELINE_LABEL,
    QUEUE_LABEL,
    configuration,
    hardware,
)

from kuota.kinds import PRIORITY_CLASS_LABEL

RUN = "chaos"
DRIVER = f"{RUN}.gpu.kuota.dev"
COHORT = f"{RUN}-pool"
GI = 1024**3 * 1000  # milli-units of one Gi
LOW, HIGH = f"{RUN}-low", f"{RUN}-high"
MANAGED_LABEL = "chaos.kuota.dev/managed"  # the team namespaces the Configuration manages


@dataclass(frozen=True)
class JobSpec:
    key: str  # namespace/name
    kind: str  # whole | mig | wgpu
    pods: int
    priority: str
    run_for: float  # seconds each pod runs
    cluster_queue: str
    charge: dict[str, int]  # resource -> milli-units: the generator's own table


def labels() -> dict[str, str]:
    return {PIPELINE_LABEL: RUN}


def _cq(name: str, resource: str, nominal: str, borrow: str | None) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": [resource],
                "flavors": [{"name": f"{RUN}-gpu", "resources": [quota]}],
            }
        ],
    }
    if borrow is not None:
        quota["borrowingLimit"] = borrow
        spec["cohortName"] = COHORT
        spec["preemption"]["reclaimWithinCohort"] = "Any"
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": labels()},
        "spec": spec,
    }


def infrastructure() -> list[dict[str, Any]]:
    """Nodes, ResourceSlices, DeviceClasses (the run's hardware)."""
    return hardware(RUN, DRIVER)


def kueue_configuration() -> dict[str, Any]:
    """The run's hardware, and its team namespaces managed (``manageJobsWithoutQueueName``):
    a Job there without a queue label waits too (the rogue user tries one)."""
    return {
        **configuration(RUN, DRIVER),
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_LABEL: "true"}},
    }


def queue_objects() -> list[dict[str, Any]]:
    """Flavor, priority classes, ClusterQueues, namespaces, LocalQueues, templates."""
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": f"{RUN}-gpu", "labels": labels()},
            "spec": {"nodeLabels": {NODE_POOL_LABEL: RUN}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": LOW, "labels": labels()},
            "value": 100,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": HIGH, "labels": labels()},
            "value": 1000,
        },
        _cq(f"{RUN}-a", "gpu-memory", "160Gi", "80Gi"),
        _cq(f"{RUN}-b", "gpu-memory", "160Gi", "80Gi"),
        _cq(f"{RUN}-c", "whole-gpus", "3", None),
    ]
    for team in ("a", "b", "c"):
        ns = f"{RUN}-{team}"
        objs += [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {**labels(), MANAGED_LABEL: "true"}},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": ns, "labels": labels()},
                "spec": {"clusterQueue": ns},
            },
        ]
        if team == "a":  # a second queue, for the rogue user's moves (into chaos-b)
            objs.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "q2", "namespace": ns, "labels": labels()},
                    "spec": {"clusterQueue": f"{RUN}-b"},
                }
            )
        if team == "c":
            objs.append(_template(ns, "wgpu", f"wgpu-{RUN}", None))
        else:
            objs.append(_template(ns, "whole", f"gpu-{RUN}", None))
            profile = f"device.attributes['{DRIVER}'].profile == '1g.10gb'"
            objs.append(_template(ns, "slice", f"mig-{RUN}", profile))
    return objs


def _template(ns: str, name: str, device_class: str, cel: str | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": 1}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns, "labels": labels()},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def quota_docs() -> list[dict[str, Any]]:
    """What ``e2e_harness.QuotaModel.of`` reads: the ClusterQueues and LocalQueues."""
    return [o for o in queue_objects() if o["kind"] in ("ClusterQueue", "LocalQueue")]


def draw_jobs(rng: random.Random, count: int) -> list[JobSpec]:
    jobs: list[JobSpec] = []
    for i in range(count):
        roll = rng.random()
        priority = HIGH if rng.random() < 0.2 else LOW
        run_for = round(rng.uniform(0.5, 2.5), 1)
        if roll < 0.2:
            team, kind, pods = "c", "wgpu", 1
            charge = {"whole-gpus": 1000}
        elif roll < 0.55:
            team, kind, pods = rng.choice("ab"), "whole", 1
            charge = {"gpu-memory": 80 * GI}
        else:
            team, kind, pods = rng.choice("ab"), "mig", rng.randint(1, 2)
            charge = {"gpu-memory": 10 * GI * pods}
        ns = f"{RUN}-{team}"
        jobs.append(
            JobSpec(
                key=f"{ns}/j{i:04d}-{kind}",
                kind=kind,
                pods=pods,
                priority=priority,
                run_for=run_for,
                cluster_queue=ns,
                charge=charge,
            )
        )
    return jobs


def plan_bursts(
    rng: random.Random, jobs: list[JobSpec], rate: float
) -> list[tuple[float, list[JobSpec]]]:
    """(seconds from start, Jobs) bursts of 3-15 Jobs at ``rate`` Jobs/s on average."""
    out: list[tuple[float, list[JobSpec]]] = []
    at, i = 0.0, 0
    while i < len(jobs):
        size = rng.randint(3, 15)
        out.append((round(at, 2), jobs[i : i + size]))
        i += size
        at += rng.expovariate(rate / size)
    return out


def manifest(job: JobSpec) -> dict[str, Any]:
    """The Job as a user writes it: no ``spec.suspend`` (the webhook must suspend it)."""
    ns, name = job.key.split("/", 1)
    template = {"whole": "whole", "mig": "slice", "wgpu": "wgpu"}[job.kind]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                **labels(),
                QUEUE_LABEL: "q",
                PRIORITY_CLASS_LABEL: job.priority,
            },
        },
        "spec": {
            "parallelism": job.pods,
            "completions": job.pods,
            "backoffLimit": 6,
            "template": {
                "metadata": {
                    "labels": labels(),
                    "annotations": {
                        KWOK_READY: "200ms",
                        KWOK_COMPLETE: f"{job.run_for:g}s",
                    },
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                },
            },
        },
    }
