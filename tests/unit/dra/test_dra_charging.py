"""charge_podset: the article's fixtures, counters, device counts, caching, invariants."""

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
    config,
    h100_mig_node,
    inventory,
    mapping,
    milli,
    podset,
    slice_,
    template,
)
from dra_cases import ARTICLE, NODES, Case, check
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.api.types import PodSet
from kuota.core.dra.charging import Charge, DraInventory, NotChargeable, Reason, charge_podset

# --------------------------------------------------------------------------- article 000

ARTICLE_CASES = [
    Case(
        "whole-device quota: single-gpu charges one nvidia-gpu",
        (*ARTICLE, *NODES),
        WHOLE_DEVICES,
        podset({"cpu": "2", "memory": "8Gi"}, "single-gpu"),
        want={"cpu": "2", "memory": "8Gi", "nvidia-gpu": "1"},
    ),
    Case(
        "whole-device quota: pods of a podset are charged per pod",
        (*ARTICLE, *NODES),
        WHOLE_DEVICES,
        podset({"cpu": "1"}, "single-gpu", count=8),
        want={"cpu": "1", "nvidia-gpu": "1"},
    ),
    Case(
        "whole-device quota: the MIG class is not mapped",
        (*ARTICLE, *NODES),
        WHOLE_DEVICES,
        podset({"cpu": "1"}, "gpu-partition"),
        reason=Reason.DEVICE_CLASS_NOT_MAPPED,
        retryable=False,
        message='ResourceClaimTemplate team-a/gpu-partition request "gpu": DeviceClass '
        '"mig.nvidia.com" is not mapped to a quota resource in deviceClassMappings',
    ),
    Case(
        "gpu memory quota: a whole A100 charges 80Gi",
        (*ARTICLE, *NODES),
        GPU_MEMORY,
        podset({"cpu": "1"}, "single-gpu"),
        want={"cpu": "1", "gpu-memory": "80Gi"},
    ),
    Case(
        "gpu memory quota: a 1g.10gb partition charges 10Gi",
        (*ARTICLE, *NODES),
        GPU_MEMORY,
        podset({"cpu": "1"}, "gpu-partition"),
        want={"cpu": "1", "gpu-memory": "10Gi"},
    ),
    Case(
        "gpu memory quota: both templates in one pod add up",
        (*ARTICLE, *NODES),
        GPU_MEMORY,
        podset({}, "single-gpu", "gpu-partition"),
        want={"gpu-memory": "90Gi"},
    ),
    Case(
        "gpu memory quota: three partitions charge 30Gi",
        (
            *ARTICLE,
            *NODES,
            template("three-slices").request("gpu", "mig.nvidia.com", count=3).build(),
        ),
        GPU_MEMORY,
        podset({}, "three-slices"),
        want={"gpu-memory": "30Gi"},
    ),
    Case(
        "gpu memory quota: no A100 published yet",
        (*ARTICLE, h100_mig_node().build()),
        GPU_MEMORY,
        podset({}, "single-gpu"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='0 device(s) of driver "gpu.nvidia.com" match DeviceClass "gpu.nvidia.com"',
    ),
    Case(
        "gpu memory quota: all seven 1g.10gb partitions of the H100 charge 70Gi",
        (
            *ARTICLE,
            h100_mig_node().build(),
            template("seven")
            .request(
                "gpu",
                "mig.nvidia.com",
                "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
                count=7,
            )
            .build(),
        ),
        GPU_MEMORY,
        podset({}, "seven"),
        want={"gpu-memory": "70Gi"},
    ),
    Case(
        "gpu memory quota: eight partitions but the H100 has seven",
        (
            *ARTICLE,
            h100_mig_node().build(),
            template("eight").request("gpu", "mig.nvidia.com", count=8).build(),
        ),
        GPU_MEMORY,
        podset({}, "eight"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message="7 device(s)",
    ),
]


@pytest.mark.parametrize("case", ARTICLE_CASES, ids=lambda c: c.name)
def test_article_000(case: Case) -> None:
    check(case)


# --------------------------------------------------------------------------- counters

MIXED = (
    slice_("node-mixed")
    .counters("gpu-0-cs", memory="80Gi")
    .device("gpu-0-mig-2g20gb", type="mig", profile="2g.20gb", consumes={"memory": "20Gi"})
    .device("gpu-0-mig-1g10gb", type="mig", profile="1g.10gb", consumes={"memory": "10Gi"})
    .build()
)
ANY_MIG = template("any-mig").request("gpu", "mig.nvidia.com", count=2).build()

COUNTER_CASES = [
    Case(
        "matched devices consume different amounts: the largest is charged, times count",
        (GPU_CLASS, MIG_CLASS, MIXED, ANY_MIG),
        GPU_MEMORY,
        podset({}, "any-mig"),
        want={"gpu-memory": "40Gi"},
    ),
    Case(
        "the counter source's driver filters slices",
        (GPU_CLASS, MIG_CLASS, MIXED, ANY_MIG),
        config(mapping("gpu-memory", "mig.nvidia.com", counter="memory", driver="other.io")),
        podset({}, "any-mig"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='of driver "other.io"',
    ),
    Case(
        "a counter source without a driver reads every driver",
        (GPU_CLASS, MIG_CLASS, MIXED, ANY_MIG),
        config(mapping("gpu-memory", "mig.nvidia.com", counter="memory", driver=None)),
        podset({}, "any-mig"),
        want={"gpu-memory": "40Gi"},
    ),
    Case(
        "matched devices that consume no such counter",
        (GPU_CLASS, MIG_CLASS, MIXED, ANY_MIG),
        config(mapping("gpu-sm", "mig.nvidia.com", counter="multiprocessors")),
        podset({}, "any-mig"),
        reason=Reason.MISSING_COUNTER,
        retryable=True,
        message='consumes counter "multiprocessors" (quota resource "gpu-sm")',
    ),
    Case(
        "a class in two counter mappings charges both counters",
        (
            GPU_CLASS,
            MIG_CLASS,
            slice_("n")
            .counters("cs", memory="80Gi", multiprocessors="98")
            .device("m0", type="mig", consumes={"memory": "10Gi", "multiprocessors": "14"})
            .build(),
            template("one").request("gpu", "mig.nvidia.com").build(),
        ),
        config(
            mapping("gpu-memory", "mig.nvidia.com", counter="memory"),
            mapping("gpu-sm", "mig.nvidia.com", counter="multiprocessors"),
        ),
        podset({}, "one"),
        want={"gpu-memory": "10Gi", "gpu-sm": "14"},
    ),
]


@pytest.mark.parametrize("case", COUNTER_CASES, ids=lambda c: c.name)
def test_counters(case: Case) -> None:
    check(case)


# --------------------------------------------------------------------------- device counts

TWO_A100 = (
    slice_("n2")
    .device("gpu-0", type="gpu", productName="A100")
    .device("gpu-1", type="gpu", productName="A100")
    .device("gpu-2", type="gpu", productName="H100")
    .build()
)
COUNT_CASES = [
    Case(
        "count defaults to one and multiplies",
        (
            GPU_CLASS,
            TWO_A100,
            template("t")
            .request("a", "gpu.nvidia.com", count=None)
            .request("b", "gpu.nvidia.com", count=2)
            .build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "3"},
    ),
    Case(
        "a request without selectors is charged even with no devices published (as Kueue)",
        (GPU_CLASS, template("t").request("a", "gpu.nvidia.com", count=4).build()),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "4"},
    ),
    Case(
        "CEL selectors: enough devices match",
        (
            GPU_CLASS,
            TWO_A100,
            template("t").request("a", "gpu.nvidia.com", A100_SELECTOR, count=2).build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        want={"nvidia-gpu": "2"},
    ),
    Case(
        "CEL selectors: too few matching devices",
        (
            GPU_CLASS,
            TWO_A100,
            template("t").request("a", "gpu.nvidia.com", A100_SELECTOR, count=3).build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='2 device(s) in the cluster match DeviceClass "gpu.nvidia.com"',
    ),
    Case(
        "CEL selectors: a device taken by one claim of the pod is not counted for another",
        (
            GPU_CLASS,
            TWO_A100,
            template("t").request("a", "gpu.nvidia.com", A100_SELECTOR, count=2).build(),
            template("u").request("b", "gpu.nvidia.com", A100_SELECTOR).build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t", "u"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='ResourceClaimTemplate team-a/u request "b": 0 device(s)',
    ),
    Case(
        "CEL selectors: the class selector narrows too",
        (
            device_class("h100", cel=["device.attributes['gpu.nvidia.com'].productName == 'H100'"]),
            TWO_A100,
            template("t")
            .request("a", "h100", "device.driver == 'gpu.nvidia.com'", count=2)
            .build(),
        ),
        config(mapping("nvidia-gpu", "h100")),
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message="1 device(s)",
    ),
    Case(
        "admin access requests are not charged (as Kueue)",
        (GPU_CLASS, template("t").request("a", "gpu.nvidia.com", admin=True).build()),
        WHOLE_DEVICES,
        podset({"cpu": "1"}, "t"),
        want={"cpu": "1"},
    ),
]


@pytest.mark.parametrize("case", COUNT_CASES, ids=lambda c: c.name)
def test_device_counts(case: Case) -> None:
    check(case)


# --------------------------------------------------------------------------- caching


def test_charges_follow_inventory_changes() -> None:
    inv = inventory(*ARTICLE)
    ps = podset({}, "gpu-partition")
    first = charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    assert isinstance(first, NotChargeable) and first.reason == Reason.INSUFFICIENT_DEVICES
    generation = inv.generation
    assert inv.upsert(h100_mig_node().build()) is None
    assert inv.generation > generation
    second = charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    assert second == Charge((("gpu-memory", milli("10Gi")),))
    inv.delete(kind="ResourceSlice", name="node-h100")
    third = charge_podset(inventory=inv, config=GPU_MEMORY, namespace="team-a", podset=ps)
    assert third == first


def test_a_changed_slice_is_evaluated_again() -> None:
    inv = inventory(*ARTICLE, a100_node().build())
    ps = podset({}, "single-gpu")
    assert charge_podset(inventory=inv, config=WHOLE_DEVICES, namespace="team-a", podset=ps) == (
        Charge((("nvidia-gpu", 1000),))
    )
    renamed = a100_node().build()
    renamed["spec"]["devices"][0]["attributes"]["productName"] = {"string": "A800"}
    assert inv.upsert(renamed) is None
    got = charge_podset(inventory=inv, config=WHOLE_DEVICES, namespace="team-a", podset=ps)
    assert isinstance(got, NotChargeable) and got.reason == Reason.INSUFFICIENT_DEVICES


# --------------------------------------------------------------------------- invariants

_EXPRESSIONS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "true",
            "device.driver == 'gpu.nvidia.com'",
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
            "device.attributes['gpu.nvidia.com'].nope",
            "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Gi'))",
            "quantity('x') == quantity('1')",
            "1 / 0 == 1",
            "cel.bind(a, 1, a == 1)",
            "[1, 2].map(x, x * 9223372036854775807).size() > 0",
        ]
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    class_selectors=st.lists(_EXPRESSIONS, max_size=2),
    request_selectors=st.lists(_EXPRESSIONS, max_size=2),
    count=st.integers(min_value=1, max_value=2**62),
    ext=st.integers(min_value=0, max_value=2**62),
    counter=st.booleans(),
)
def test_charge_never_raises(
    class_selectors: list[str], request_selectors: list[str], count: int, ext: int, counter: bool
) -> None:
    inv = DraInventory()
    for m in (
        *NODES,
        device_class("c", cel=class_selectors, extended="example.com/dev"),
        template("t").request("r", "c", *request_selectors, count=count).build(),
    ):
        inv.upsert(m)
    cfg = config(mapping("q", "c", counter="memory" if counter else None, driver=None))
    ps = PodSet("main", 1, (("cpu", 1000), ("example.com/dev", ext)), ())
    ps = PodSet(ps.name, 1, ps.requests, podset({}, "t").claims)
    got = charge_podset(inventory=inv, config=cfg, namespace="team-a", podset=ps)
    assert isinstance(got, Charge | NotChargeable)
    if isinstance(got, Charge):
        assert all(amount >= 0 for _, amount in got.per_pod)
        assert [n for n, _ in got.per_pod] == sorted(n for n, _ in got.per_pod)
    again = charge_podset(inventory=inv, config=cfg, namespace="team-a", podset=ps)
    assert again == got  # deterministic, cache or not
