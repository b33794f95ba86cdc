"""charge_podset: extended resources and every reason a pod is not chargeable."""

from __future__ import annotations

import pytest
from builders.manifests import device_class
from dra_builders import (
    GPU_CLASS,
    GPU_MEMORY,
    MIG_CLASS,
    SINGLE_GPU,
    WHOLE_DEVICES,
    a100_node,
    config,
    mapping,
    podset,
    slice_,
    template,
)
from dra_cases import NODES, Case, check
from test_dra_capacity import CAPACITY_CASES
from test_dra_capacity import REASON_CASES as CAPACITY_REASON_CASES
from test_dra_charging import ARTICLE_CASES, COUNT_CASES, COUNTER_CASES

from kuota.core.dra.charging import Reason

# --------------------------------------------------------------------------- extended resources

GPU_EXT = device_class(
    "gpu.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"],
    extended="nvidia.com/gpu",
)
EXTENDED_CASES = [
    Case(
        "mapped class: the extended resource joins the mapping's quota",
        (GPU_EXT,),
        WHOLE_DEVICES,
        podset({"cpu": "1", "nvidia.com/gpu": "2"}),
        want={"cpu": "1", "nvidia-gpu": "2"},
    ),
    Case(
        "template and extended resource share one quota, nothing counted twice",
        (GPU_EXT, *NODES, SINGLE_GPU),
        WHOLE_DEVICES,
        podset({"nvidia.com/gpu": "1"}, "single-gpu"),
        want={"nvidia-gpu": "2"},
    ),
    Case(
        "unmapped class: the extended resource keeps its name",
        (GPU_EXT,),
        config(),
        podset({"nvidia.com/gpu": "1"}),
        want={"nvidia.com/gpu": "1"},
    ),
    Case(
        "no class declares it: a plain extended resource passes through",
        (GPU_CLASS,),
        WHOLE_DEVICES,
        podset({"nvidia.com/gpu": "1", "example.com/foo": "3"}),
        want={"nvidia.com/gpu": "1", "example.com/foo": "3"},
    ),
    Case(
        "implicit name deviceclass.resource.kubernetes.io/<class>",
        (GPU_CLASS,),
        WHOLE_DEVICES,
        podset({"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "2"}),
        want={"nvidia-gpu": "2"},
    ),
    Case(
        "counter mapping: the class's devices' counter times count",
        (GPU_EXT, MIG_CLASS, *NODES),
        GPU_MEMORY,
        podset({"nvidia.com/gpu": "2"}),
        want={"gpu-memory": "160Gi"},
    ),
    Case(
        "counter mapping: too few devices of the class",
        (GPU_EXT, MIG_CLASS, *NODES),
        GPU_MEMORY,
        podset({"nvidia.com/gpu": "3"}),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='extended resource "nvidia.com/gpu" (DeviceClass "gpu.nvidia.com"): 2 device(s)',
    ),
    Case(
        "a fractional device is invalid",
        (GPU_EXT,),
        WHOLE_DEVICES,
        podset({"nvidia.com/gpu": "500m"}),
        reason=Reason.INVALID_REQUEST,
        retryable=False,
        message="quantity 500m is not a whole number of devices",
    ),
    Case(
        "the newest class declaring the name wins",
        (
            device_class("old", cel=[], extended="nvidia.com/gpu", created="2025-01-01T00:00:00Z"),
            device_class("new", cel=[], extended="nvidia.com/gpu", created="2025-06-01T00:00:00Z"),
        ),
        config(mapping("old-gpu", "old"), mapping("new-gpu", "new")),
        podset({"nvidia.com/gpu": "1"}),
        want={"new-gpu": "1"},
    ),
    Case(
        "classes created together: the name sorting first wins",
        (
            device_class("b", cel=[], extended="nvidia.com/gpu", created="2025-01-01T00:00:00Z"),
            device_class("a", cel=[], extended="nvidia.com/gpu", created="2025-01-01T00:00:00Z"),
        ),
        config(mapping("a-gpu", "a"), mapping("b-gpu", "b")),
        podset({"nvidia.com/gpu": "1"}),
        want={"a-gpu": "1"},
    ),
    Case(
        "excluded prefixes drop the pod's own requests, not DRA charges (as Kueue)",
        (GPU_EXT,),
        config(mapping("nvidia-gpu", "gpu.nvidia.com"), exclude=("nvidia.com/", "example.com/")),
        podset({"cpu": "1", "nvidia.com/gpu": "1", "example.com/foo": "1"}),
        want={"cpu": "1", "nvidia-gpu": "1"},
    ),
]


@pytest.mark.parametrize("case", EXTENDED_CASES, ids=lambda c: c.name)
def test_extended_resources(case: Case) -> None:
    check(case)


# --------------------------------------------------------------------------- not chargeable

BAD_CEL = "device.attributes['gpu.nvidia.com'].productName == "
REASON_CASES = [
    Case(
        "firstAvailable: no node can give any alternative",
        (GPU_CLASS, template("t").first_available("gpu", "gpu.nvidia.com").build()),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='team-a/t request "gpu": no node can give any firstAvailable alternative: '
        '"sub-0" (1 of DeviceClass "gpu.nvidia.com")',
    ),
    Case(
        "allocationMode All: no device",
        (GPU_CLASS, template("t").request("gpu", "gpu.nvidia.com", count=None, mode="All").build()),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='allocationMode "All" needs at least one device',
    ),
    Case(
        "unknown ResourceClaimTemplate",
        (GPU_CLASS,),
        WHOLE_DEVICES,
        podset({}, "single-gpu"),
        reason=Reason.UNKNOWN_RESOURCE_CLAIM_TEMPLATE,
        retryable=True,
        message='ResourceClaimTemplate team-a/single-gpu (pod claim "claim-0") not found',
    ),
    Case(
        "templates are namespaced",
        (GPU_CLASS, SINGLE_GPU),
        WHOLE_DEVICES,
        podset({}, "single-gpu"),
        namespace="team-b",
        reason=Reason.UNKNOWN_RESOURCE_CLAIM_TEMPLATE,
        retryable=True,
        message="team-b/single-gpu",
    ),
    Case(
        "unknown DeviceClass",
        (SINGLE_GPU,),
        WHOLE_DEVICES,
        podset({}, "single-gpu"),
        reason=Reason.UNKNOWN_DEVICE_CLASS,
        retryable=True,
        message='request "gpu": DeviceClass "gpu.nvidia.com" not found',
    ),
    Case(
        "invalid CEL in the request",
        (GPU_CLASS, template("t").request("gpu", "gpu.nvidia.com", BAD_CEL).build()),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message="selector #0 \"device.attributes['gpu.nvidia.com'].productName == \": "
        "compilation failed: line 1, column 52: syntax error",
    ),
    Case(
        "invalid CEL in the DeviceClass",
        (device_class("gpu.nvidia.com", cel=["device.driver =="]), SINGLE_GPU),
        WHOLE_DEVICES,
        podset({}, "single-gpu"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message='DeviceClass "gpu.nvidia.com" selector #0 "device.driver =="',
    ),
    Case(
        "CEL runtime error on a device (missing attribute, as Kubernetes aborts)",
        (
            GPU_CLASS,
            a100_node().build(),
            template("t")
            .request("gpu", "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].memoryGiB > 40")
            .build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message="failed on device gpu.nvidia.com/node-a100/gpu-0: no such key: memoryGiB",
    ),
    Case(
        "CEL type error (string compared with int)",
        (
            GPU_CLASS,
            a100_node().build(),
            template("t")
            .request("gpu", "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].productName > 1")
            .build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message="No such overload",
    ),
    Case(
        "CEL that is not a bool",
        (
            GPU_CLASS,
            a100_node().build(),
            template("t")
            .request("gpu", "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].productName")
            .build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message="must evaluate to bool, not str",
    ),
    Case(
        "absurd count",
        (GPU_CLASS, template("t").request("gpu", "gpu.nvidia.com", count=10_001).build()),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INVALID_REQUEST,
        retryable=False,
        message="10001 devices requested, more than the limit of 10000 per request",
    ),
    Case(
        "absurd total",
        (
            GPU_CLASS,
            MIG_CLASS,
            slice_("n")
            .counters("cs", memory="8Pi")
            .device("m0", type="mig", consumes={"memory": "8Pi"})
            .device("m1", type="mig", consumes={"memory": "8Pi"})
            .build(),
            template("t").request("gpu", "mig.nvidia.com", count=2).build(),
        ),
        GPU_MEMORY,
        podset({}, "t"),
        reason=Reason.INVALID_REQUEST,
        retryable=False,
        message='the per-pod total of "gpu-memory" is absurdly large',
    ),
    Case(
        "the first problem wins, in claim order",
        (GPU_CLASS, template("t").request("gpu", "gpu.nvidia.com", BAD_CEL).build()),
        WHOLE_DEVICES,
        podset({}, "missing", "t"),
        reason=Reason.UNKNOWN_RESOURCE_CLAIM_TEMPLATE,
        retryable=True,
        message="team-a/missing",
    ),
]


@pytest.mark.parametrize("case", REASON_CASES, ids=lambda c: c.name)
def test_not_chargeable(case: Case) -> None:
    check(case)


def test_every_reason_is_exercised() -> None:
    # a direct claim's own reason is charge_claim's, and UnsupportedClaim (a request
    # form the readers refuse) is tested on an object: tests/unit/dra/test_dra_direct_claims.py
    reasons = {v for k, v in vars(Reason).items() if not k.startswith("_")} - {
        Reason.UNKNOWN_RESOURCE_CLAIM,
        Reason.UNSUPPORTED_CLAIM,
    }
    seen = {
        c.reason
        for c in ARTICLE_CASES
        + COUNTER_CASES
        + COUNT_CASES
        + EXTENDED_CASES
        + REASON_CASES
        + CAPACITY_CASES
        + CAPACITY_REASON_CASES
    }
    assert reasons <= seen, reasons - seen
