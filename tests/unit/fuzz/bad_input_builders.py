"""Manifests and a journal driver for the bad-input tests (plain dicts, no magic).

``Journal`` feeds manifests to a :class:`Fold` as ``ObjectUpserted`` events with
increasing ids and event times and keeps every decision; ``setup_gpu_queue``
gives the one ClusterQueue/LocalQueue the cases share, with a quota for whole
devices (``nvidia-gpu``) and GPU memory (``gpu-memory``), a DeviceClass per
kind of device and one A100 node.
"""

from __future__ import annotations

from typing import Any

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, ObjectDeleted, ObjectUpserted

NS = "team-a"
DRIVER = "gpu.nvidia.com"
GPU = "nvidia.com/gpu"


class Journal:
    def __init__(self) -> None:
        self.fold = Fold()
        self.decisions: list[Decision] = []
        self.n = 0

    def apply(self, *manifests: dict[str, Any]) -> list[Decision]:
        out: list[Decision] = []
        for m in manifests:
            self.n += 1
            ev = ObjectUpserted(id=f"e{self.n}", at=float(self.n), object=m)
            out += self.fold.apply(ev, offset=self.n)
        self.decisions += out
        return out

    def delete(self, kind: str, name: str, namespace: str = "") -> list[Decision]:
        self.n += 1
        ev = ObjectDeleted(
            id=f"e{self.n}", at=float(self.n), kind=kind, name=name, namespace=namespace
        )
        out = self.fold.apply(ev, offset=self.n)
        self.decisions += out
        return out

    def state(self, key: str) -> str | None:
        return self.fold.workload_state(key)

    def last(self, workload: str) -> Decision:
        return [d for d in self.decisions if d.workload == workload][-1]


def rejected(decisions: list[Decision]) -> list[tuple[str | None, str | None, str | None]]:
    return [(d.object, d.reason, d.message) for d in decisions if d.type == "Rejected"]


def flavor(name: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {},
    }


def cluster_queue(
    name: str, quotas: dict[str, Any], *, cohort: str | None = None, flavor_name: str = "default"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(quotas),
                "flavors": [
                    {
                        "name": flavor_name,
                        "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()],
                    }
                ],
            }
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def cohort(
    name: str, parent: str | None = None, quotas: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = [
            {
                "coveredResources": list(quotas),
                "flavors": [
                    {
                        "name": "default",
                        "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()],
                    }
                ],
            }
        ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(name: str, cq: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def job(
    name: str,
    *,
    queue: str = "lq",
    requests: dict[str, Any] | None = None,
    claims: dict[str, str] | None = None,
    parallelism: int | None = None,
    created: int = 0,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if claims:
        pod["resourceClaims"] = [
            {"name": c, "resourceClaimTemplateName": t} for c, t in claims.items()
        ]
        container.setdefault("resources", {})["claims"] = [{"name": c} for c in claims]
    spec: dict[str, Any] = {"suspend": True, "template": {"spec": pod}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": queue},
            "annotations": {"kuota.dev/created-at": str(created)},
        },
        "spec": spec,
    }


def kueue_config(*, counter: bool = True, extra_classes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Whole devices of ``gpu.nvidia.com`` (and ``extra_classes``) charge ``nvidia-gpu``;
    ``mig.nvidia.com`` devices charge the ``memory`` counter they consume as ``gpu-memory``."""
    classes = ["gpu.nvidia.com", *extra_classes]
    mappings: list[dict[str, Any]] = [{"name": "nvidia-gpu", "deviceClassNames": classes}]
    if counter:
        mappings.append(
            {
                "name": "gpu-memory",
                "deviceClassNames": ["mig.nvidia.com"],
                "sources": [{"type": "Counter", "counter": {"name": "memory", "driver": DRIVER}}],
            }
        )
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "metadata": {"name": "kueue-config"},
        "resources": {"deviceClassMappings": mappings},
    }


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def claim_template(
    name: str, device_class_name: str, *selectors: str, count: Any = 1
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def resource_slice(
    name: str,
    *,
    pool: str,
    devices: list[dict[str, Any]],
    counters: dict[str, str] | None = None,
    counter_set: str = "gpu-0-cs",
    slices: int = 1,
    generation: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": pool,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slices},
        "devices": devices,
    }
    if counters:
        spec["sharedCounters"] = [
            {"name": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def device(
    name: str, kind: str = "gpu", *, memory: str | None = None, counter_set: str = "gpu-0-cs"
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": name,
        "attributes": {"type": {"string": kind}, "productName": {"string": "A100"}},
    }
    if memory is not None:
        d["consumesCounters"] = [
            {"counterSet": counter_set, "counters": {"memory": {"value": memory}}}
        ]
    return d


GPU_CLASS = device_class(
    "gpu.nvidia.com", f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
)
MIG_CLASS = device_class(
    "mig.nvidia.com", f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'"
)


def setup_gpu_queue(
    j: Journal, *, gpus: int = 4, memory: str = "160Gi", extra_classes: tuple[str, ...] = ()
) -> None:
    """A ClusterQueue ``cq`` (LocalQueue ``lq``) with whole-GPU, GPU-memory and cpu
    quota, the two DeviceClasses and one A100 node with 80Gi of memory."""
    out = j.apply(
        kueue_config(extra_classes=extra_classes),
        flavor(),
        cluster_queue("cq", {"cpu": 64, "nvidia-gpu": gpus, "gpu-memory": memory}),
        local_queue("lq", "cq"),
        GPU_CLASS,
        MIG_CLASS,
        resource_slice(
            "node-0",
            pool="node-0",
            counters={"memory": "80Gi"},
            devices=[device("gpu-0", memory="80Gi"), device("mig-0", "mig", memory="10Gi")],
        ),
    )
    assert rejected(out) == [], rejected(out)
