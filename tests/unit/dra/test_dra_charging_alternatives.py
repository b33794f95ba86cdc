"""charge_podset for firstAvailable and allocationMode All (#17): the alternative
charged is the first some node can give; All charges the most devices one node
can give whole. device_requests hands the placement the same answer."""

from __future__ import annotations

import pytest
from builders.manifests import device_class
from dra_builders import (
    A100_SELECTOR,
    GPU_CLASS,
    GPU_MEMORY,
    MIG_CLASS,
    WHOLE_DEVICES,
    a100_node,
    alternative,
    config,
    h100_mig_node,
    inventory,
    mapping,
    podset,
    slice_,
    template,
)
from dra_cases import Case, check

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.charging import Reason, device_requests

GPU = "gpu.nvidia.com"
H100 = "device.attributes['gpu.nvidia.com'].productName == 'H100'"
MISSING = "device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'"  # errors on a device
MIG = "mig.nvidia.com"
ANY_CLASS = device_class("any.nvidia.com", cel=["device.driver == 'gpu.nvidia.com'"])
NODES = (a100_node().build(), h100_mig_node().build())  # 1 A100, 1 H100 + 7 1g.10gb


def four_gpus(name: str = "node-4") -> dict[str, object]:
    b = slice_(name).counters("cs", memory="320Gi")
    for i in range(4):
        b.device(f"gpu-{i}", type="gpu", productName="A100", consumes={"memory": "80Gi"})
    return b.build()


def first(*alternatives: str | dict[str, object]) -> dict[str, object]:
    return template("t").first_available("gpu", *alternatives).build()


def all_of(cls: str, *selectors: str) -> dict[str, object]:
    return template("t").request("gpu", cls, *selectors, count=None, mode="All").build()


CASES = [
    Case(
        "firstAvailable: the first alternative when a node can give it",
        (GPU_CLASS, MIG_CLASS, *NODES, first(alternative(GPU, A100_SELECTOR), MIG)),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "1"},
    ),
    Case(
        "firstAvailable: 2 GPUs in the cluster, 1 per node: the next alternative",
        (GPU_CLASS, MIG_CLASS, *NODES, first(alternative(GPU, count=2), MIG)),
        GPU_MEMORY,
        podset({}, "t"),
        want={"gpu-memory": "10Gi"},
    ),
    Case(
        "firstAvailable: a node with 2 GPUs gives the first alternative",
        (GPU_CLASS, MIG_CLASS, *NODES, four_gpus(), first(alternative(GPU, count=2), MIG)),
        GPU_MEMORY,
        podset({}, "t"),
        want={"gpu-memory": "160Gi"},
    ),
    Case(
        "firstAvailable: 8 slices of a GPU of 7 cannot be had, 7 can",
        (
            GPU_CLASS,
            MIG_CLASS,
            *NODES,
            first(alternative(MIG, count=8), alternative(MIG, count=7), GPU),
        ),
        GPU_MEMORY,
        podset({}, "t"),
        want={"gpu-memory": "70Gi"},
    ),
    Case(
        "firstAvailable: an alternative of a class not mapped that no node can give is passed",
        (
            GPU_CLASS,
            MIG_CLASS,
            *NODES,
            first(alternative(MIG, count=8), alternative(GPU, A100_SELECTOR)),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "1"},
    ),
    Case(
        "firstAvailable: an alternative of an All request",
        (GPU_CLASS, MIG_CLASS, *NODES, first(alternative(MIG, count=None, mode="All"), GPU)),
        GPU_MEMORY,
        podset({}, "t", count=2),
        want={"gpu-memory": "70Gi"},
    ),
    Case(
        "firstAvailable: a CEL error on a device in an alternative never tried",
        (GPU_CLASS, *NODES, first(alternative(GPU, A100_SELECTOR), alternative(GPU, MISSING))),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "1"},
    ),
    Case(
        "firstAvailable: the alternative that fits beside the pod's other requests",
        (
            GPU_CLASS,
            *NODES,
            four_gpus(),
            template("t")
            .first_available("gpu", alternative(GPU, count=2), alternative(GPU, count=1))
            .request("side", GPU, count=3)
            .build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "4"},  # 1 + 3: 2 + 3 fits no node of 4
    ),
    Case(
        "All: the most devices one node has",
        (GPU_CLASS, *NODES, four_gpus(), all_of(GPU)),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "4"},
    ),
    Case(
        "All: under a counter mapping, the largest consumption times the count",
        (GPU_CLASS, *NODES, four_gpus(), all_of(GPU)),
        GPU_MEMORY,
        podset({}, "t"),
        want={"gpu-memory": "320Gi"},
    ),
    Case(
        "All: with the request's selectors",
        (GPU_CLASS, *NODES, four_gpus(), all_of(GPU, H100)),
        WHOLE_DEVICES,
        podset({"cpu": "1"}, "t"),
        want={"cpu": "1", "nvidia-gpu": "1"},
    ),
    Case(
        "All: the 7 partitions of one H100",
        (MIG_CLASS, *NODES, all_of(MIG)),
        GPU_MEMORY,
        podset({}, "t"),
        want={"gpu-memory": "70Gi"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_charged(case: Case) -> None:
    check(case)


REASONS = [
    Case(
        "firstAvailable: the alternative a node can give is of a class not mapped",
        (GPU_CLASS, MIG_CLASS, *NODES, first(alternative(GPU, count=2), MIG)),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.DEVICE_CLASS_NOT_MAPPED,
        retryable=False,
        message='team-a/t request "gpu" subrequest "sub-1": DeviceClass "mig.nvidia.com" '
        "is not mapped",
    ),
    Case(
        "firstAvailable: an unknown class in any alternative (the scheduler refuses the claim)",
        (GPU_CLASS, *NODES, first(GPU, "nope.example.com")),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.UNKNOWN_DEVICE_CLASS,
        retryable=True,
        message='request "gpu" subrequest "sub-1": DeviceClass "nope.example.com" not found',
    ),
    Case(
        "firstAvailable: bad CEL in a later alternative",
        (GPU_CLASS, *NODES, first(GPU, alternative(GPU, "device.attributes["))),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message='subrequest "sub-1": selector #0',
    ),
    Case(
        "firstAvailable: a CEL error on a device, in an alternative tried",
        (GPU_CLASS, MIG_CLASS, *NODES, first(alternative(GPU, MISSING), MIG)),
        GPU_MEMORY,
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message='subrequest "sub-0": selector #0',
    ),
    Case(
        "firstAvailable: too many devices in an alternative",
        (GPU_CLASS, *NODES, first(GPU, alternative(GPU, count=20_000))),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_REQUEST,
        retryable=False,
        message='subrequest "sub-1": 20000 devices requested',
    ),
    Case(
        "firstAvailable: no node can give any alternative",
        (GPU_CLASS, MIG_CLASS, *NODES, first(alternative(GPU, count=2), alternative(MIG, count=8))),
        GPU_MEMORY,
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='no node can give any firstAvailable alternative: "sub-0" (2 of DeviceClass '
        '"gpu.nvidia.com"), "sub-1" (8 of DeviceClass "mig.nvidia.com")',
    ),
    Case(
        "All: no node can give its devices together",
        (
            ANY_CLASS,
            h100_mig_node().build(),  # the whole H100 and its slices exclude each other
            all_of("any.nvidia.com"),
        ),
        config(mapping("gpu-memory", "any.nvidia.com", counter="memory")),
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='allocationMode "All" needs at least one device; no node can give the 8 '
        'device(s) matching DeviceClass "any.nvidia.com"',
    ),
]


@pytest.mark.parametrize("case", REASONS, ids=lambda c: c.name)
def test_not_charged(case: Case) -> None:
    check(case)


def test_device_requests_hand_the_placement_what_was_charged() -> None:
    inv = inventory(
        GPU_CLASS,
        MIG_CLASS,
        *NODES,
        four_gpus(),
        first(alternative(GPU, count=8), alternative(GPU, count=2), MIG),
        template("every").request("gpu", GPU, count=None, mode="All").build(),
    )
    got = device_requests(inventory=inv, namespace="team-a", podset=podset({}, "t", "every"))
    assert got == (
        ExactDeviceRequest(GPU, 2),
        ExactDeviceRequest(GPU, 4, allocation_mode="All"),
    )


def test_the_charge_follows_the_devices_published() -> None:
    """A node that can give the first alternative appears: it is charged from
    then on (the fold charges again when a ResourceSlice changes)."""
    from kuota.core.dra.charging import charge_podset

    inv = inventory(GPU_CLASS, MIG_CLASS, *NODES, first(alternative(GPU, count=2), MIG))
    ps = podset({}, "t")
    before = charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    assert inv.upsert(four_gpus()) is None
    after = charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    assert [c.per_pod for c in (before, after)] == [  # type: ignore[union-attr]
        (("gpu-memory", 10 * 2**30 * 1000),),
        (("gpu-memory", 160 * 2**30 * 1000),),
    ]
