"""place_gang with consumable capacity (KEP-5075): shares of a device several
claims may use at once, each spending what the scheduler would consume of the
device's capacities."""

from __future__ import annotations

from typing import Any

from builders.manifests import GPU_DRIVER, device, device_class, resource_slice

from kuota.api.dra import DeviceRequest, ExactDeviceRequest
from kuota.core.dra.alternatives import choose, first_available
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement import (
    GangPod,
    NoPlacement,
    Placement,
    capacity_key,
    place_gang,
    share_id,
)
from kuota.quantity import parse_quantity

D = GPU_DRIVER
GI = parse_quantity("1Gi")


def shared_gpu(name: str = "gpu-0", memory: str = "80Gi", step: str | None = None) -> Any:
    out = device(name, attributes={"kind": "mps"}, capacity={"memory": memory})
    out["allowMultipleAllocations"] = True
    if step is not None:
        out["capacity"]["memory"]["requestPolicy"] = {
            "default": step,
            "validRange": {"min": step, "step": step},
        }
    return out


def inventory(*objects: dict[str, Any]) -> DraInventory:
    inv = DraInventory()
    for obj in (device_class("mps", cel=[f'device.attributes["{D}"].kind == "mps"']), *objects):
        assert inv.upsert(obj) is None, obj
    return inv


def share(memory: str | None = None, count: int = 1) -> ExactDeviceRequest:
    asked = (("memory", parse_quantity(memory)),) if memory else ()
    return ExactDeviceRequest("mps", count, capacity_requests=asked)


def pods(*requests: ExactDeviceRequest, n: int = 1) -> list[GangPod]:
    one = GangPod(tuple(requests))
    return [one] * n


def nodes_of(result: object) -> list[str]:
    assert isinstance(result, Placement), result
    return [p.node for p in result.pods]


def test_pods_share_one_device_until_its_capacity_is_spent() -> None:
    inv = inventory(resource_slice("node-a", devices=[shared_gpu()]))
    two = place_gang(inventory=inv, pods=pods(share("40Gi"), n=2))
    assert nodes_of(two) == ["node-a", "node-a"]
    assert isinstance(two, Placement)
    shared = share_id((D, "node-a", "gpu-0"))
    assert [p.devices for p in two.pods] == [((shared,),), ((shared,),)]
    three = place_gang(inventory=inv, pods=pods(share("40Gi"), n=3))
    assert isinstance(three, NoPlacement), three
    assert "node-a has" in three.message


def test_what_is_spent_before_the_search_counts() -> None:
    inv = inventory(resource_slice("node-a", devices=[shared_gpu()]))
    memory = capacity_key(inv, D, "node-a", "gpu-0", "memory")
    spent = {memory: 50 * GI}
    assert nodes_of(place_gang(inventory=inv, pods=pods(share("30Gi")), consumed=spent))
    late = place_gang(inventory=inv, pods=pods(share("40Gi")), consumed=spent)
    assert isinstance(late, NoPlacement), late


def test_a_request_without_an_amount_takes_the_whole_capacity() -> None:
    inv = inventory(resource_slice("node-a", devices=[shared_gpu()]))
    assert nodes_of(place_gang(inventory=inv, pods=pods(share()))) == ["node-a"]
    assert isinstance(place_gang(inventory=inv, pods=pods(share(), n=2)), NoPlacement)
    # beside a 10Gi share there is no whole device left
    assert isinstance(
        place_gang(inventory=inv, pods=[*pods(share()), *pods(share("10Gi"))]), NoPlacement
    )


def test_amounts_are_rounded_up_per_the_policy() -> None:
    inv = inventory(resource_slice("node-a", devices=[shared_gpu(step="10Gi")]))
    # 15Gi takes 20Gi: four fit in 80Gi, not five (five at 15Gi would be 75Gi)
    assert nodes_of(place_gang(inventory=inv, pods=pods(share("15Gi"), n=4))) == ["node-a"] * 4
    assert isinstance(place_gang(inventory=inv, pods=pods(share("15Gi"), n=5)), NoPlacement)


def test_a_device_that_cannot_give_the_amount_is_no_candidate() -> None:
    inv = inventory(
        resource_slice("node-a", devices=[shared_gpu(memory="40Gi")]),
        resource_slice("node-b", devices=[shared_gpu(memory="80Gi")]),
    )
    assert nodes_of(place_gang(inventory=inv, pods=pods(share("60Gi")))) == ["node-b"]
    cores = ExactDeviceRequest("mps", 1, capacity_requests=(("cores", 10),))
    assert isinstance(place_gang(inventory=inv, pods=pods(cores)), NoPlacement)


def test_a_pod_gets_a_shared_device_once() -> None:
    # the stricter rule: two requests of one pod never share one device
    inv = inventory(resource_slice("node-a", devices=[shared_gpu()]))
    assert isinstance(
        place_gang(inventory=inv, pods=pods(share("10Gi"), share("10Gi"))), NoPlacement
    )
    assert isinstance(place_gang(inventory=inv, pods=pods(share("10Gi", count=2))), NoPlacement)
    two = inventory(resource_slice("node-a", devices=[shared_gpu(), shared_gpu("gpu-1")]))
    result = place_gang(inventory=two, pods=pods(share("10Gi"), share("10Gi")))
    assert isinstance(result, Placement), result
    (placed,) = result.pods
    assert placed.devices[0] != placed.devices[1]


def test_gangs_spread_over_nodes_by_capacity() -> None:
    inv = inventory(
        resource_slice("node-a", devices=[shared_gpu()]),
        resource_slice("node-b", devices=[shared_gpu()]),
    )
    assert nodes_of(place_gang(inventory=inv, pods=pods(share("30Gi"), n=4))) == [
        "node-a",
        "node-a",
        "node-b",
        "node-b",
    ]
    assert isinstance(place_gang(inventory=inv, pods=pods(share("30Gi"), n=5)), NoPlacement)


def test_first_available_skips_a_share_no_device_can_give() -> None:
    # the scheduler can never give 100Gi of an 80Gi device: its next alternative
    inv = inventory(resource_slice("node-a", devices=[shared_gpu()]))
    assert first_available(inv, (share("100Gi"), share("40Gi"))) == 1
    assert first_available(inv, (share("80Gi"), share("40Gi"))) == 0
    both = DeviceRequest("gpu", None, ("big", "small"), (share("60Gi"), share("20Gi")))
    # one pod: two firstAvailable requests that cannot both have 60Gi of one device
    # (and a pod gets a shared device once): the first fitting combination
    two = inventory(resource_slice("node-a", devices=[shared_gpu(), shared_gpu("gpu-1")]))
    assert choose(two, (both, both)) == (0, 0)
    mixed = inventory(
        resource_slice("node-a", devices=[shared_gpu(), shared_gpu("gpu-1", memory="30Gi")])
    )
    assert choose(mixed, (both, both)) == (0, 1)  # 60Gi on gpu-0, 20Gi on gpu-1
