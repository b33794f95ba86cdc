"""The e2e run's own hardware: kwok nodes, partitionable GPUs, DeviceClasses, Configuration.

Every object is labelled ``kuota.dev/pipeline=<run>`` and its GPUs belong to a
driver named after the run, so nothing else on the shared apiserver sees them.
Each node has ``GPUS_PER_NODE`` GPUs of 80Gi, each also offered as
``MIG_PER_GPU`` 1g.10gb slices and one 3g.40gb slice (``MIG_3G``, publishing
40Gi of ``memory`` capacity, of type ``mig-3g`` so that only its own class
``mig-3g.40gb-<run>`` selects it: article 004's direct claim), all drawing on
the GPU's ``memory`` counter. The
first node also has one GPU shared MPS-style (consumable capacity, KEP-5075):
``allowMultipleAllocations``, 80Gi of ``memory`` taken in 10Gi steps.
Part of the harness ``e2e_harness.py`` (which re-exports every name).
"""

from __future__ import annotations

from typing import Any

from kuota.kinds import PIPELINE_LABEL

NODE_POOL_LABEL = "e2e.kuota.dev/node-pool"
KWOK_READY = "pod-ready.stage.kwok.x-k8s.io/delay"
KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"
NODES = 2
GPUS_PER_NODE = 4
MIG_PER_GPU = 7
MIG_3G = "mig-3g40gb"  # in each GPU's 3g.40gb slice's name: gpu-<g>-mig-3g40gb-0
SHARED_GPU = "gpu-mps"  # the shared device, on the run's first node only
SHARED_POLICY = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"}}


def hardware(run: str, driver: str) -> list[dict[str, Any]]:
    """Nodes, ResourceSlices and DeviceClasses of one run (labelled with the run)."""
    labels = {PIPELINE_LABEL: run}
    objs: list[dict[str, Any]] = []
    for n in range(NODES):
        node = f"{run}-{n}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {
                        **labels,
                        NODE_POOL_LABEL: run,
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
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
        devices: list[dict[str, Any]] = []
        for g in range(GPUS_PER_NODE):
            counter = f"gpu-{g}-memory"
            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": {"type": {"string": "gpu"}, "index": {"int": g}},
                    "capacity": {"memory": {"value": "80Gi"}},
                    "consumesCounters": [
                        {"counterSet": counter, "counters": {"memory": {"value": "80Gi"}}}
                    ],
                }
            )
            for m in range(MIG_PER_GPU):
                devices.append(
                    {
                        "name": f"gpu-{g}-mig-1g10gb-{m}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": "1g.10gb"},
                            "parentIndex": {"int": g},
                        },
                        "capacity": {"memory": {"value": "10Gi"}},
                        "consumesCounters": [
                            {"counterSet": counter, "counters": {"memory": {"value": "10Gi"}}}
                        ],
                    }
                )
            devices.append(
                {
                    "name": f"gpu-{g}-{MIG_3G}-0",
                    "attributes": {
                        # not "mig": the classes of the other scenarios (and Kueue's
                        # charge for them) must not see it
                        "type": {"string": "mig-3g"},
                        "profile": {"string": "3g.40gb"},
                        "parentIndex": {"int": g},
                    },
                    "capacity": {"memory": {"value": "40Gi"}},
                    "consumesCounters": [
                        {"counterSet": counter, "counters": {"memory": {"value": "40Gi"}}}
                    ],
                }
            )
        if n == 0:
            devices.append(
                {
                    "name": SHARED_GPU,
                    "allowMultipleAllocations": True,
                    "attributes": {"type": {"string": "mps"}},
                    "capacity": {"memory": {"value": "80Gi", "requestPolicy": SHARED_POLICY}},
                }
            )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-counters", "labels": labels},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": pool,
                    "sharedCounters": [
                        {"name": f"gpu-{g}-memory", "counters": {"memory": {"value": "80Gi"}}}
                        for g in range(GPUS_PER_NODE)
                    ],
                },
            }
        )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-devices", "labels": labels},
                "spec": {"driver": driver, "nodeName": node, "pool": pool, "devices": devices},
            }
        )

    def device_class(
        name: str, kind: str, extended: str | None = None, profile: str = ""
    ) -> dict[str, Any]:
        expression = (
            f"device.driver == '{driver}' && device.attributes['{driver}'].type == '{kind}'"
        )
        if profile:
            expression += f" && device.attributes['{driver}'].profile == '{profile}'"
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if extended:
            spec["extendedResourceName"] = extended
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }

    objs += [
        device_class(f"gpu-{run}", "gpu"),
        device_class(f"mig-{run}", "mig"),
        device_class(f"wgpu-{run}", "gpu", extended="nvidia.com/gpu"),
        device_class(f"mps-{run}", "mps"),
        device_class(f"mig-3g.40gb-{run}", "mig-3g", profile="3g.40gb"),
    ]
    return objs


# Kueue's admissionFairSharing section, as scripts/stack.d/kueue.sh gives Kueue
ADMISSION_FAIR_SHARING = {"usageHalfLifeTime": "10m", "usageSamplingInterval": "5s"}


def configuration(run: str, driver: str) -> dict[str, Any]:
    """Kueue's Configuration for the run: memory counters, whole-GPU counts and
    the shared GPU's memory capacity; admission fair sharing for the
    ClusterQueues that opt in (scenarios/admission-fair-sharing.yaml), as the
    Kueue stack has it (scripts/stack.d/kueue.sh)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "admissionFairSharing": ADMISSION_FAIR_SHARING,
        "resources": {
            "deviceClassMappings": [
                {
                    "name": "gpu-memory",
                    "deviceClassNames": [f"gpu-{run}", f"mig-{run}", f"mig-3g.40gb-{run}"],
                    "sources": [{"counter": {"name": "memory", "driver": driver}}],
                },
                {"name": "whole-gpus", "deviceClassNames": [f"wgpu-{run}"]},
                {
                    "name": "gpu-share-memory",
                    "deviceClassNames": [f"mps-{run}"],
                    "sources": [{"capacity": {"name": "memory", "driver": driver}}],
                },
            ]
        },
    }
