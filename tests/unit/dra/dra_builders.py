"""Fluent builders for DRA manifests over tests/builders, configurations and pod sets.

``slice_`` and ``template`` grow a ResourceSlice and a ResourceClaimTemplate a
device or a request at a time and build them with
:mod:`builders.manifests`; the api types (mappings, configurations, pod sets)
and the article's objects are this folder's own.

slice_("node-0").counters("gpu-0-cs", memory="80Gi")
    .device("gpu-0", type="gpu", productName="A100", consumes={"memory": "80Gi"})
"""

from __future__ import annotations

from typing import Any

from builders import manifests
from builders.manifests import GPU_DRIVER, device_class

from kuota.api.types import (
    CapacitySource,
    ClaimRef,
    Configuration,
    CounterSource,
    DeviceClassMapping,
    PodSet,
)
from kuota.core.dra.charging import DraInventory
from kuota.quantity import parse_quantity


class SliceBuilder:
    def __init__(
        self,
        name: str,
        *,
        driver: str = GPU_DRIVER,
        pool: str | None = None,
        generation: int = 0,
        slices: int = 1,
        node: str | None = None,
    ) -> None:
        self.name = name
        self.driver = driver
        self.pool = pool or name
        self.generation = generation
        self.slices = slices
        self.node = node if node is not None else name
        self._counters: list[tuple[str, dict[str, str]]] = []
        self._devices: list[dict[str, Any]] = []

    def counters(self, set_name: str, **counters: str) -> SliceBuilder:
        self._counters.append((set_name, counters))
        return self

    def device(
        self,
        name: str,
        *,
        consumes: dict[str, str] | None = None,
        counter_set: str | None = None,
        capacity: dict[str, str] | None = None,
        attrs: dict[str, object] | None = None,
        **short_attrs: object,
    ) -> SliceBuilder:
        """``short_attrs`` are in the driver's domain; ``attrs`` take qualified names."""
        cs = counter_set or (self._counters[-1][0] if consumes else "")
        self._devices.append(
            manifests.device(
                name,
                attributes={**short_attrs, **(attrs or {})},
                capacity=capacity,
                consumes=consumes,
                counter_set=cs,
            )
        )
        return self

    def shared_device(
        self,
        name: str,
        *,
        capacity: dict[str, str],
        policies: dict[str, dict[str, Any]] | None = None,
        multi: bool = True,
        **short_attrs: object,
    ) -> SliceBuilder:
        """A device with ``allowMultipleAllocations`` (MPS, time-slicing) whose
        capacities carry the given ``requestPolicy`` bodies."""
        device = manifests.device(name, attributes=short_attrs, capacity=capacity)
        for key, policy in (policies or {}).items():
            device["capacity"][key]["requestPolicy"] = policy
        if multi:
            device["allowMultipleAllocations"] = True
        self._devices.append(device)
        return self

    def build(self) -> dict[str, Any]:
        return manifests.resource_slice(
            self.name,
            devices=self._devices,
            driver=self.driver,
            pool=self.pool,
            node=self.node,
            generation=self.generation,
            slices=self.slices,
            counters=dict(self._counters),
        )


def slice_(name: str, **kwargs: Any) -> SliceBuilder:
    return SliceBuilder(name, **kwargs)


class TemplateBuilder:
    def __init__(self, name: str, namespace: str) -> None:
        self.name = name
        self.namespace = namespace
        self._requests: list[dict[str, Any]] = []

    def request(
        self,
        name: str,
        device_class_name: str,
        *selectors: str,
        count: int | None = 1,
        mode: str | None = None,
        admin: bool = False,
        capacity: dict[str, str] | None = None,
    ) -> TemplateBuilder:
        request = manifests.device_request(
            name,
            device_class=device_class_name,
            cel=selectors,
            count=count,
            mode=mode,
            admin=admin,
        )
        if capacity is not None:
            request["exactly"]["capacity"] = {"requests": capacity}
        self._requests.append(request)
        return self

    def first_available(self, name: str, *alternatives: str | dict[str, Any]) -> TemplateBuilder:
        """A firstAvailable request: each alternative a class name (1 device) or a
        subrequest body (:func:`alternative`), named ``sub-<i>`` unless it says."""
        subs = [
            {"name": f"sub-{i}", **({"deviceClassName": a} if isinstance(a, str) else a)}
            for i, a in enumerate(alternatives)
        ]
        self._requests.append({"name": name, "firstAvailable": subs})
        return self

    def build(self) -> dict[str, Any]:
        return manifests.resource_claim_template(
            self.name, namespace=self.namespace, requests=self._requests
        )


def alternative(
    device_class_name: str, *selectors: str, count: int | None = 1, mode: str | None = None
) -> dict[str, Any]:
    """The body of one firstAvailable subrequest (its name is added by the builder)."""
    return manifests.device_request(
        "x", device_class=device_class_name, cel=selectors, count=count, mode=mode
    )["exactly"]


def template(name: str, namespace: str = "team-a") -> TemplateBuilder:
    return TemplateBuilder(name, namespace)


def mapping(
    name: str,
    *classes: str,
    counter: str | None = None,
    capacity: str | None = None,
    driver: str | None = GPU_DRIVER,
    device_selector: str = "",
) -> DeviceClassMapping:
    source = CounterSource(counter, driver) if counter else None
    shared = CapacitySource(capacity, driver, device_selector) if capacity else None
    return DeviceClassMapping(name, tuple(classes), source, shared)


def config(*mappings: DeviceClassMapping, exclude: tuple[str, ...] = ()) -> Configuration:
    return Configuration(device_class_mappings=mappings, exclude_resource_prefixes=exclude)


def podset(
    requests: dict[str, str] | None = None,
    *templates: str,
    claim_names: tuple[str, ...] = (),
    count: int = 1,
) -> PodSet:
    """``templates`` become pod claims ``claim-<i>``; ``claim_names`` direct ResourceClaims."""
    reqs = tuple(sorted((k, parse_quantity(v)) for k, v in (requests or {}).items()))
    claims = tuple(
        ClaimRef(f"claim-{i}", resource_claim_template_name=t) for i, t in enumerate(templates)
    )
    claims += tuple(
        ClaimRef(f"direct-{i}", resource_claim_name=n) for i, n in enumerate(claim_names)
    )
    return PodSet("main", count, reqs, claims)


def inventory(*manifests: dict[str, Any]) -> DraInventory:
    inv = DraInventory()
    for m in manifests:
        err = inv.upsert(m)
        assert err is None, err
    return inv


def milli(q: str) -> int:
    return parse_quantity(q)


# --------------------------------------------------------------------------- article 000

GPU_CLASS = device_class(
    "gpu.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"],
)
MIG_CLASS = device_class(
    "mig.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"],
)
SINGLE_GPU = (
    template("single-gpu")
    .request("gpu", "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].productName == 'A100'")
    .build()
)
GPU_PARTITION = (
    template("gpu-partition")
    .request("gpu", "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")
    .build()
)
# The article's two configurations.
WHOLE_DEVICES = config(mapping("nvidia-gpu", "gpu.nvidia.com"))
GPU_MEMORY = config(
    mapping("gpu-memory", "gpu.nvidia.com", "mig.nvidia.com", counter="memory", driver=GPU_DRIVER)
)


def a100_node(name: str = "node-a100") -> SliceBuilder:
    """One A100 80GB, whole, publishing its 80Gi memory counter."""
    return (
        slice_(name)
        .counters("gpu-0-cs", memory="80Gi")
        .device("gpu-0", type="gpu", productName="A100", consumes={"memory": "80Gi"})
    )


def h100_mig_node(name: str = "node-h100", partitions: int = 7) -> SliceBuilder:
    """An H100 80GB as a whole device plus seven 1g.10gb MIG partitions, all
    drawing on one 80Gi memory counter set."""
    b = (
        slice_(name)
        .counters("gpu-0-cs", memory="80Gi")
        .device("gpu-0", type="gpu", productName="H100", consumes={"memory": "80Gi"})
    )
    for i in range(partitions):
        b.device(
            f"gpu-0-mig-1g10gb-{i}",
            type="mig",
            productName="H100",
            profile="1g.10gb",
            consumes={"memory": "10Gi"},
        )
    return b


A100_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'A100'"
ARTICLE_MANIFESTS = (GPU_CLASS, MIG_CLASS, SINGLE_GPU, GPU_PARTITION)


# --------------------------------------------------------------------------- consumable capacity

MPS_CLASS = device_class(
    "mps.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.allowMultipleAllocations"],
)
GI10_STEPS = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"}}
GPU_SHARES = config(mapping("gpu-memory", "mps.nvidia.com", capacity="memory"))


def h100_mps_node(name: str = "node-h100-mps", **policy: dict[str, Any]) -> SliceBuilder:
    """One H100 shared MPS-style: 80Gi of memory, taken in 10Gi steps (default 10Gi)."""
    return slice_(name).shared_device(
        "gpu-0",
        capacity={"memory": "80Gi"},
        policies={"memory": policy or GI10_STEPS},
        type="gpu",
        productName="H100",
    )


def share(name: str, memory: str | None, count: int = 1, **more: str) -> dict[str, Any]:
    """A template asking ``count`` shared devices for ``memory`` (None: no amount)."""
    amounts = {"memory": memory, **more} if memory else dict(more)
    return template(name).request("gpu", "mps.nvidia.com", count=count, capacity=amounts).build()
