"""What the bad-input tests share beyond tests/builders: one team, one flavor.

Every case runs in namespace ``team-a`` against flavor ``default``;
``setup_gpu_queue`` gives the one ClusterQueue/LocalQueue the cases share,
with a quota for whole devices (``nvidia-gpu``) and GPU memory
(``gpu-memory``), a DeviceClass per kind of device and one A100 node. The
journal is a :class:`builders.driver.Driver` with event times one second
apart (:func:`journal`).
"""

from __future__ import annotations

from typing import Any

from builders import manifests
from builders.driver import Driver
from builders.manifests import (
    cluster_queue,
    configuration,
    device,
    device_class,
    flavor,
    local_queue,
    resource_slice,
)

from kuota.events.schema import Decision

NS = "team-a"
FLAVOR = "default"
DRIVER = "gpu.nvidia.com"
GPU = "nvidia.com/gpu"


def journal() -> Driver:
    """A fold fed events one second apart, every decision kept."""
    return Driver(step=1.0)


def rejected(decisions: list[Decision]) -> list[tuple[str | None, str | None, str | None]]:
    return [(d.object, d.reason, d.message) for d in decisions if d.type == "Rejected"]


def job(name: str, **options: Any) -> dict[str, Any]:
    """A suspended Job of team-a (uid ``uid-<name>``); options as
    :func:`builders.manifests.job`'s."""
    return manifests.job(name, namespace=NS, uid=f"uid-{name}", suspend=True, **options)


def a100(name: str, *, kind: str = "gpu", memory: str | None = None) -> dict[str, Any]:
    """An A100 device (``kind`` gpu or mig) drawing ``memory`` from ``gpu-0-cs``."""
    return device(
        name,
        attributes={"type": kind, "productName": "A100"},
        consumes=None if memory is None else {"memory": memory},
    )


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
    return configuration(
        metadata={"name": "kueue-config"}, resources={"deviceClassMappings": mappings}
    )


GPU_CLASS = device_class(
    "gpu.nvidia.com",
    cel=[f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"],
)
MIG_CLASS = device_class(
    "mig.nvidia.com",
    cel=[f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'"],
)


def setup_gpu_queue(
    j: Driver, *, gpus: int = 4, memory: str = "160Gi", extra_classes: tuple[str, ...] = ()
) -> None:
    """A ClusterQueue ``cq`` (LocalQueue ``lq``) with whole-GPU, GPU-memory and cpu
    quota, the two DeviceClasses and one A100 node with 80Gi of memory."""
    out = j.apply(
        kueue_config(extra_classes=extra_classes),
        flavor(FLAVOR, spec={}),
        cluster_queue(
            "cq", quotas={"cpu": 64, "nvidia-gpu": gpus, "gpu-memory": memory}, flavor=FLAVOR
        ),
        local_queue("lq", namespace=NS, cluster_queue="cq"),
        GPU_CLASS,
        MIG_CLASS,
        resource_slice(
            "node-0",
            counters={"gpu-0-cs": {"memory": "80Gi"}},
            devices=[a100("gpu-0", memory="80Gi"), a100("mig-0", kind="mig", memory="10Gi")],
        ),
    )
    assert rejected(out) == [], rejected(out)
