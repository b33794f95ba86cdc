"""Direct ResourceClaims (issue #17): charge_podset leaves them out, charge_claim
charges a claim as a whole, once: what it asks, or what it holds once allocated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.manifests import device_class, device_request, resource_claim
from dra_builders import (
    GPU_CLASS,
    GPU_DRIVER,
    GPU_MEMORY,
    MIG_CLASS,
    SINGLE_GPU,
    WHOLE_DEVICES,
    a100_node,
    config,
    h100_mig_node,
    inventory,
    mapping,
    milli,
    podset,
    slice_,
)

from kuota.api.dra import DeviceRequest, ExactDeviceRequest, ResourceClaim, parse_dra_object
from kuota.api.types import Configuration
from kuota.core.dra.charging import (
    Charge,
    DraInventory,
    NotChargeable,
    Reason,
    charge_claim,
    charge_podset,
    direct_claims,
)

REFERENCE = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "references"
    / "004-resourceclaim-h100-mig-slice.yaml"
)
MIG_3G_CLASS = device_class(
    "mig-3g.40gb",
    cel=[
        "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'mig' && "
        "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"
    ],
)
ISSUE_SELECTOR = "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('39Gi'))"


def h100_3g_node(name: str = "node-h100") -> dict[str, Any]:
    """An H100 80GB: the whole GPU and two 3g.40gb slices of one 80Gi counter."""
    b = (
        slice_(name)
        .counters("gpu-0-cs", memory="80Gi")
        .device("gpu-0", type="gpu", productName="H100", consumes={"memory": "80Gi"})
    )
    for i in range(2):
        b.device(
            f"gpu-0-mig-3g40gb-{i}",
            type="mig",
            productName="H100",
            profile="3g.40gb",
            capacity={"memory": "40Gi"},
            consumes={"memory": "40Gi"},
        )
    return b.build()


def article_claim() -> dict[str, Any]:
    with REFERENCE.open() as f:
        (doc,) = [d for d in yaml.safe_load_all(f) if d is not None]
    assert isinstance(doc, dict)
    return doc


def issue_claim() -> dict[str, Any]:
    """Article 004's claim as the issue asks it: resource.k8s.io/v1 ``exactly:``, and
    a selector on the slice's published memory capacity."""
    return resource_claim(
        "h100-mig-slice",
        namespace="team-alpha",
        requests=[device_request("gpu", device_class="mig-3g.40gb", cel=[ISSUE_SELECTOR])],
    )


def with_claims(*manifests: dict[str, Any]) -> DraInventory:
    """The inventory of ``manifests``, ResourceClaims given as the fold gives them."""
    inv = inventory(*(m for m in manifests if m["kind"] != "ResourceClaim"))
    for m in manifests:
        if m["kind"] == "ResourceClaim":
            claim = parse_dra_object(m)
            assert isinstance(claim, ResourceClaim), claim
            inv.set_claim(claim.namespace, claim.name, claim)
    return inv


def charge(
    *manifests: dict[str, Any], conf: Configuration, name: str, namespace: str = "team-a"
) -> Charge | NotChargeable:
    return charge_claim(
        inventory=with_claims(*manifests),
        config=conf,
        namespace=namespace,
        name=name,
        pod_claim="gpu",
    )


def want(**amounts: str) -> Charge:
    return Charge(tuple(sorted((k.replace("_", "-"), milli(v)) for k, v in amounts.items())))


MIG_SLICES = config(mapping("mig-3g", "mig-3g.40gb"))
MIG_MEMORY = config(mapping("gpu-memory", "mig-3g.40gb", counter="memory"))


# --------------------------------------------------------------------------- the pod's part


def test_charge_podset_leaves_a_direct_claim_to_charge_claim() -> None:
    ps = podset({"cpu": "1"}, "single-gpu", claim_names=("shared-gpu",), count=3)
    got = charge_podset(
        inventory=inventory(GPU_CLASS, SINGLE_GPU, a100_node().build()),
        config=WHOLE_DEVICES,
        namespace="team-a",
        podset=ps,
    )
    assert got == Charge((("cpu", milli("1")), ("nvidia-gpu", milli("1")))), got
    assert direct_claims(ps) == ("shared-gpu",)


def test_direct_claims_each_once_in_order() -> None:
    ps = podset({}, claim_names=("b", "a", "b"))
    assert direct_claims(ps) == ("b", "a")


# --------------------------------------------------------------------------- article 004


@pytest.mark.parametrize("conf,expected", [(MIG_SLICES, "1"), (MIG_MEMORY, "40Gi")])
def test_article_004_claim_as_the_issue_writes_it(conf: Configuration, expected: str) -> None:
    claim = issue_claim()
    got = charge(
        MIG_3G_CLASS,
        h100_3g_node(),
        claim,
        conf=conf,
        name="h100-mig-slice",
        namespace="team-alpha",
    )
    resource = "mig-3g" if conf is MIG_SLICES else "gpu-memory"
    assert got == Charge(((resource, milli(expected)),)), got


def test_article_004_claim_as_the_article_writes_it_gets_a_clear_reason() -> None:
    """The article's selector reads ``device.attributes["memory"]``: an attribute
    domain no driver publishes, so CEL fails on every device (no crash)."""
    got = charge(
        MIG_3G_CLASS,
        h100_3g_node(),
        article_claim(),
        conf=MIG_SLICES,
        name="h100-mig-slice",
        namespace="team-alpha",
    )
    assert isinstance(got, NotChargeable), got
    assert got.reason == Reason.INVALID_CEL and not got.retryable
    assert 'ResourceClaim team-alpha/h100-mig-slice request "gpu"' in got.message


def test_the_selector_is_applied_no_slice_above_39gi() -> None:
    small = (
        slice_("node-small")
        .counters("gpu-0-cs", memory="80Gi")
        .device(
            "gpu-0-mig-3g-0",
            type="mig",
            profile="3g.40gb",
            capacity={"memory": "20Gi"},
            consumes={"memory": "20Gi"},
        )
        .build()
    )
    got = charge(
        MIG_3G_CLASS,
        small,
        issue_claim(),
        conf=MIG_SLICES,
        name="h100-mig-slice",
        namespace="team-alpha",
    )
    assert isinstance(got, NotChargeable) and got.reason == Reason.INSUFFICIENT_DEVICES, got


# --------------------------------------------------------------------------- reasons


def test_unknown_claim_is_retryable_and_named() -> None:
    got = charge(GPU_CLASS, conf=WHOLE_DEVICES, name="shared-gpu")
    assert got == NotChargeable(
        Reason.UNKNOWN_RESOURCE_CLAIM,
        'ResourceClaim team-a/shared-gpu (pod claim "gpu") not found',
        True,
    )


def test_claims_are_namespaced() -> None:
    claim = resource_claim("c", namespace="team-b", device_class="gpu.nvidia.com")
    got = charge(GPU_CLASS, h100_mig_node().build(), claim, conf=WHOLE_DEVICES, name="c")
    assert isinstance(got, NotChargeable) and got.reason == Reason.UNKNOWN_RESOURCE_CLAIM


def test_unmapped_class_refused_and_unallocated_all_charged() -> None:
    claim = resource_claim("c", namespace="team-a", device_class="gpu.nvidia.com")
    got = charge(GPU_CLASS, claim, conf=config(), name="c")
    assert isinstance(got, NotChargeable) and got.reason == Reason.DEVICE_CLASS_NOT_MAPPED
    every = resource_claim(
        "all",
        namespace="team-a",
        requests=[device_request("gpu", device_class="mig.nvidia.com", count=None, mode="All")],
    )
    got = charge(MIG_CLASS, h100_mig_node().build(), every, conf=GPU_MEMORY, name="all")
    # as a template's All: the most matching devices one node can give whole
    assert got == want(gpu_memory="70Gi"), got


def test_a_request_form_charging_does_not_know_is_unsupported() -> None:
    # the readers refuse such a request; charging refuses it too if it gets one
    inv = with_claims(MIG_CLASS, h100_mig_node().build())
    odd = ExactDeviceRequest("mig.nvidia.com", 1, allocation_mode="Some")
    inv.set_claim(
        "team-a", "odd", ResourceClaim("team-a", "odd", requests=(DeviceRequest("gpu", odd),))
    )
    got = charge_claim(inventory=inv, config=GPU_MEMORY, namespace="team-a", name="odd")
    assert isinstance(got, NotChargeable) and got.reason == Reason.UNSUPPORTED_CLAIM, got
    assert 'allocationMode "Some" is not supported' in got.message


def test_unallocated_claim_charged_as_it_asks_count_times() -> None:
    claim = resource_claim("c", namespace="team-a", device_class="mig.nvidia.com", count=2)
    got = charge(MIG_CLASS, h100_mig_node().build(), claim, conf=GPU_MEMORY, name="c")
    assert got == want(gpu_memory="20Gi"), got


# --------------------------------------------------------------------------- allocated


ANY_MIG = device_class(
    "mig.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"],
)


def mixed_node() -> dict[str, Any]:
    """One 80Gi GPU split as a 1g.10gb and a 3g.40gb slice."""
    return (
        slice_("node-mixed")
        .counters("gpu-0-cs", memory="80Gi")
        .device("mig-1g-0", type="mig", profile="1g.10gb", consumes={"memory": "10Gi"})
        .device("mig-3g-0", type="mig", profile="3g.40gb", consumes={"memory": "40Gi"})
        .build()
    )


def test_allocated_claim_charged_at_what_it_holds_not_at_what_it_asks() -> None:
    conf = config(mapping("gpu-memory", "mig.nvidia.com", counter="memory"))
    asks = resource_claim("c", namespace="team-a", device_class="mig.nvidia.com")
    assert charge(ANY_MIG, mixed_node(), asks, conf=conf, name="c") == want(gpu_memory="40Gi")
    holds = resource_claim(
        "c",
        namespace="team-a",
        device_class="mig.nvidia.com",
        allocated=[("node-mixed", "mig-1g-0")],
        node="node-mixed",
    )
    assert charge(ANY_MIG, mixed_node(), holds, conf=conf, name="c") == want(gpu_memory="10Gi")


def test_allocated_all_charged_at_the_devices_it_holds() -> None:
    every = resource_claim(
        "all",
        namespace="team-a",
        requests=[device_request("gpu", device_class="mig.nvidia.com", count=None, mode="All")],
        allocated=[("node-mixed", "mig-1g-0"), ("node-mixed", "mig-3g-0")],
    )
    conf = config(mapping("mig", "mig.nvidia.com"))
    assert charge(ANY_MIG, mixed_node(), every, conf=conf, name="all") == want(mig="2")
    memory = config(mapping("gpu-memory", "mig.nvidia.com", counter="memory"))
    assert charge(ANY_MIG, mixed_node(), every, conf=memory, name="all") == want(gpu_memory="50Gi")


def test_allocated_device_no_longer_published_charged_as_asked() -> None:
    conf = config(mapping("gpu-memory", "mig.nvidia.com", counter="memory"))
    holds = resource_claim(
        "c",
        namespace="team-a",
        device_class="mig.nvidia.com",
        allocated=[("node-gone", "mig-1g-0")],
        driver=GPU_DRIVER,
    )
    assert charge(ANY_MIG, mixed_node(), holds, conf=conf, name="c") == want(gpu_memory="40Gi")


def test_allocated_admin_access_takes_nothing() -> None:
    claim = resource_claim(
        "watch",
        namespace="team-a",
        requests=[device_request("gpu", device_class="mig.nvidia.com", admin=True)],
        allocated=[("node-mixed", "mig-3g-0")],
    )
    claim["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    conf = config(mapping("gpu-memory", "mig.nvidia.com", counter="memory"))
    assert charge(ANY_MIG, mixed_node(), claim, conf=conf, name="watch") == Charge(())
