"""pod_devices (#17): what one pod asks of DRA devices for placement, in the
pod's claim order: each request with the index of its claim (adminAccess ones
included), the claims' matchAttribute constraints as request indices, and the
extended resources backed by a DeviceClass as one more claim."""

from __future__ import annotations

from builders.manifests import device_class, device_request, resource_claim_template

from kuota.api.dra import ExactDeviceRequest
from kuota.api.types import ClaimRef, PodSet
from kuota.core.dra.charging import device_requests, pod_devices
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement_rules import PodConstraint

GPU = "gpu.nvidia.com"
PARENT = f"{GPU}/parent"


def test_requests_claims_and_constraints_in_the_pods_claim_order() -> None:
    inv = DraInventory()
    pair = resource_claim_template(
        "pair",
        namespace="team-a",
        requests=[
            device_request("a", device_class=GPU),
            device_request("b", device_class=GPU, admin=True),
            device_request("c", device_class=GPU),
        ],
    )
    pair["spec"]["spec"]["devices"]["constraints"] = [
        {"requests": ["a", "c"], "matchAttribute": PARENT},
        {"matchAttribute": f"{GPU}/clique"},
    ]
    one = resource_claim_template("one", namespace="team-a", device_class=GPU)
    for obj in (device_class(GPU, extended="example.com/gpu"), pair, one):
        assert inv.upsert(obj) is None
    podset = PodSet(
        "main",
        2,
        (("example.com/gpu", 2000),),
        (ClaimRef("x", "one"), ClaimRef("direct", None, "claim-0"), ClaimRef("y", "pair")),
    )
    got = pod_devices(inventory=inv, namespace="team-a", podset=podset)
    assert got.requests == (
        ExactDeviceRequest(GPU),
        ExactDeviceRequest(GPU),
        ExactDeviceRequest(GPU, admin_access=True),
        ExactDeviceRequest(GPU),
        ExactDeviceRequest(GPU, 2),
    )
    assert got.claims == (0, 1, 1, 1, 2)
    assert got.constraints == (
        PodConstraint(PARENT, (1, 3)),
        PodConstraint(f"{GPU}/clique", (1, 2, 3)),
    )
    assert device_requests(inventory=inv, namespace="team-a", podset=podset) == got.requests
