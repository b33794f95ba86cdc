"""Allocation mode All in place_gang, and what firstAvailable and All resolve to
(kuota.core.dra.alternatives): unit tables per rule (#17)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from builders.manifests import GPU_DRIVER, device, device_class, resource_slice
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dra_placement import Case, cases, dev, matches, run, valid

from kuota.api.dra import DeviceRequest, ExactDeviceRequest
from kuota.core.dra.alternatives import all_count, can_satisfy, choose, first_available
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement import (
    DeviceId,
    GangPod,
    NoPlacement,
    Placement,
    PlacementInvalid,
    SearchBudgetExhausted,
    counter_key,
    place_gang,
)

D = GPU_DRIVER
KIND = f'device.attributes["{D}"].kind'


def inventory(*objects: dict[str, Any]) -> DraInventory:
    inv = DraInventory()
    for obj in (
        device_class("gpu", cel=[f'{KIND} == "gpu"']),
        device_class("mig", cel=[f'{KIND} == "mig"']),
        device_class("any"),
        *objects,
    ):
        assert inv.upsert(obj) is None, obj
    return inv


def gpus(node: str, n: int) -> dict[str, Any]:
    return resource_slice(
        node, devices=[device(f"gpu-{i}", attributes={"kind": "gpu"}) for i in range(n)]
    )


def mig_node(node: str) -> dict[str, Any]:
    """One 80Gi GPU published whole and as two 40Gi halves: the whole one and
    a half exclude each other (one counter set)."""
    return resource_slice(
        node,
        devices=[
            device("gpu-0", attributes={"kind": "gpu"}, consumes={"memory": "80Gi"}),
            device("gpu-0-half-0", attributes={"kind": "mig"}, consumes={"memory": "40Gi"}),
            device("gpu-0-half-1", attributes={"kind": "mig"}, consumes={"memory": "40Gi"}),
        ],
        counters={"gpu-0-cs": {"memory": "80Gi"}},
    )


def every(cls: str, count: int) -> ExactDeviceRequest:
    return ExactDeviceRequest(cls, count, allocation_mode="All")


def exact(cls: str, count: int = 1) -> ExactDeviceRequest:
    return ExactDeviceRequest(cls, count)


def placed(result: object) -> list[tuple[str, list[list[str]]]]:
    assert isinstance(result, Placement), result
    return [(p.node, [[d[2] for d in ds] for ds in p.devices]) for p in result.pods]


# --------------------------------------------------------------------------- All in place_gang


def test_all_takes_every_matching_device_of_a_node_that_has_exactly_the_count() -> None:
    inv = inventory(gpus("node-a", 1), gpus("node-b", 2), gpus("node-c", 3))
    # node-a has too few; node-c has 3: All would take 3 there, not the 2 charged
    result = place_gang(inventory=inv, pods=[GangPod((every("gpu", 2),))])
    assert placed(result) == [("node-b", [["gpu-0", "gpu-1"]])]
    result = place_gang(inventory=inv, pods=[GangPod((every("gpu", 3),))])
    assert placed(result) == [("node-c", [["gpu-0", "gpu-1", "gpu-2"]])]
    # a node with more matching devices than charged is passed over, first or not
    more_first = inventory(gpus("node-a", 3), gpus("node-b", 2))
    result = place_gang(inventory=more_first, pods=[GangPod((every("gpu", 2),))])
    assert placed(result) == [("node-b", [["gpu-0", "gpu-1"]])]
    result = place_gang(inventory=more_first, pods=[GangPod((every("gpu", 1),))])
    assert isinstance(result, NoPlacement), result


def test_all_does_not_fit_where_one_device_is_taken_and_says_so() -> None:
    inv = inventory(gpus("node-a", 1), gpus("node-b", 2), gpus("node-c", 3))
    result = place_gang(
        inventory=inv,
        pods=[GangPod((every("gpu", 2),))],
        taken=frozenset({(D, "node-b", "gpu-1")}),
    )
    assert isinstance(result, NoPlacement), result
    assert result.message == (
        "no node can take pod 1 of 1: needs all 2 devices of class gpu on one node "
        "(allocationMode All); node-a has 1 free, node-b has 1 free, node-c has 3 free"
    )


def test_all_does_not_fit_where_the_devices_exclude_each_other() -> None:
    inv = inventory(mig_node("node-a"))
    # class any: the whole GPU and both halves, 160Gi of an 80Gi counter
    result = place_gang(inventory=inv, pods=[GangPod((every("any", 3),))])
    assert isinstance(result, NoPlacement), result
    # the two halves fit together
    result = place_gang(inventory=inv, pods=[GangPod((every("mig", 2),))])
    assert placed(result) == [("node-a", [["gpu-0-half-0", "gpu-0-half-1"]])]
    # ...not once something spends the counter
    result = place_gang(
        inventory=inv,
        pods=[GangPod((every("mig", 2),))],
        consumed={counter_key(D, "node-a", "gpu-0-cs", "memory"): 1},
    )
    assert isinstance(result, NoPlacement), result


def test_a_gang_of_all_and_exact_pods_and_two_all_pods_on_one_node() -> None:
    inv = inventory(gpus("node-a", 2), gpus("node-b", 2))
    result = place_gang(inventory=inv, pods=[GangPod((exact("gpu"),)), GangPod((every("gpu", 2),))])
    # the exact pod moves off node-a so that the All pod has all of a node
    assert placed(result) == [("node-a", [["gpu-0"]]), ("node-b", [["gpu-0", "gpu-1"]])]
    twins = [GangPod((every("gpu", 2),))] * 2
    assert [p.node for p in place_gang(inventory=inv, pods=twins).pods] == [  # type: ignore[union-attr]
        "node-a",
        "node-b",
    ]
    assert isinstance(place_gang(inventory=inv, pods=twins * 2), NoPlacement)


# --------------------------------------------------------------------------- what is charged


def test_all_count_is_the_most_one_node_can_give_whole() -> None:
    inv = inventory(gpus("node-a", 1), gpus("node-b", 3), mig_node("node-c"))
    assert all_count(inv, every("gpu", 1)) == 3  # node-b's three
    assert all_count(inv, every("mig", 1)) == 2
    # node-c's three devices of class any exclude each other; node-b's 3 can be had
    assert all_count(inv, every("any", 1)) == 3
    assert all_count(inventory(mig_node("node-c")), every("any", 1)) == 0
    assert all_count(inventory(), every("gpu", 1)) == 0  # no device: All cannot be given
    assert all_count(inv, every("nope", 1)) == 0  # unknown class: charging says why


def test_all_count_of_devices_not_local_to_a_node_is_every_one_of_them() -> None:
    fabric = gpus("fabric", 2)
    del fabric["spec"]["nodeName"]
    fabric["spec"]["allNodes"] = True
    inv = inventory(gpus("node-a", 3), fabric)
    assert all_count(inv, every("gpu", 1)) == 5


def test_first_available_is_the_first_alternative_some_node_can_give() -> None:
    inv = inventory(gpus("node-a", 1), gpus("node-b", 1), mig_node("node-c"))
    # 2 GPUs exist, but no node has 2 of class gpu: the second alternative
    assert first_available(inv, (exact("gpu", 2), exact("gpu", 1))) == 1
    assert first_available(inv, (exact("gpu", 1), exact("mig", 1))) == 0
    # node-c's whole GPU and a half exclude each other: 1 gpu + 1 mig is 2 of any
    assert can_satisfy(inv, exact("any", 2))
    assert not can_satisfy(inventory(mig_node("node-c")), exact("any", 3))
    assert first_available(inv, (exact("mig", 3), every("mig", 1), exact("gpu"))) == 1
    assert first_available(inv, (exact("mig", 3), exact("nope"))) == -1
    assert first_available(inv, ()) == -1


def test_the_answers_follow_the_inventory() -> None:
    inv = inventory(gpus("node-a", 1))
    assert first_available(inv, (exact("gpu", 2), exact("gpu", 1))) == 1
    assert all_count(inv, every("gpu", 1)) == 1
    assert inv.upsert(gpus("node-b", 2)) is None
    assert first_available(inv, (exact("gpu", 2), exact("gpu", 1))) == 0
    assert all_count(inv, every("gpu", 1)) == 2


# --------------------------------------------------------------------------- properties


@st.composite
def all_cases(draw: st.DrawFn) -> Case:
    """test_dra_placement's cases, with some requests in allocation mode All, most
    of them counting what some node has (so that they can fit)."""
    case = draw(cases())
    names = [n.name for n in case.nodes]
    pods = []
    for p in case.pods:
        requests = []
        for r in p.requests:
            if draw(st.booleans()):
                every = replace(r, allocation_mode="All")
                node = draw(st.sampled_from(names))
                count = len(_matching(case, node, every)) or draw(st.integers(1, 3))
                r = replace(every, count=count)
            requests.append(r)
        pods.append(GangPod(tuple(requests), p.nodes))
    return replace(case, pods=tuple(pods))


def _matching(case: Case, node: str, request: ExactDeviceRequest) -> list[DeviceId]:
    return [
        dev(n.name, d.name)
        for n in case.nodes
        if n.name == node
        for d in n.devices
        if matches(d, request)
    ]


def valid_all(case: Case, assignment: Sequence[tuple[str, Sequence[Sequence[DeviceId]]]]) -> bool:
    """test_dra_placement's checker, plus: an All request holds every matching
    device of its node, and they number its count."""
    for p, (node, chosen) in zip(case.pods, assignment, strict=True):
        for request, ids in zip(p.requests, chosen, strict=True):
            if request.allocation_mode == "All" and sorted(ids) != _matching(case, node, request):
                return False
    return valid(case, assignment)


def brute_force_all(case: Case) -> bool:
    node_names = sorted(
        {n.name for n in case.nodes} | {x for p in case.pods for x in p.nodes or ()}
    )
    per_node = {n.name: [dev(n.name, d.name) for d in n.devices] for n in case.nodes}

    def options(p: GangPod) -> Iterator[tuple[str, tuple[tuple[DeviceId, ...], ...]]]:
        for node in node_names:
            combos: list[Iterable[tuple[DeviceId, ...]]] = []
            for r in p.requests:
                if r.allocation_mode == "All":
                    every = tuple(_matching(case, node, r))
                    combos.append([every] if len(every) == r.count else [])
                else:
                    combos.append(itertools.combinations(per_node.get(node, []), r.count))
            for chosen in itertools.product(*combos):
                yield node, chosen

    return any(
        valid_all(case, assignment)
        for assignment in itertools.product(*(list(options(p)) for p in case.pods))
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(all_cases())
def test_an_all_placement_is_valid_and_no_placement_is_proven(case: Case) -> None:
    result = run(case)
    assert not isinstance(result, SearchBudgetExhausted | PlacementInvalid), result
    if isinstance(result, Placement):
        assert valid_all(case, [(p.node, p.devices) for p in result.pods]), result
    else:
        assert isinstance(result, NoPlacement)
        assert not brute_force_all(case), result.message
    assert run(case) == result


# --------------------------------------------------------------------------- alternatives together


def fa(*alternatives: ExactDeviceRequest) -> DeviceRequest:
    return DeviceRequest("r", None, tuple(f"s{i}" for i in range(len(alternatives))), alternatives)


def test_the_alternatives_of_a_pod_are_chosen_beside_its_other_requests() -> None:
    inv = inventory(gpus("node-a", 3))
    two_else_one = fa(exact("gpu", 2), exact("gpu", 1))
    # alone, 2 GPUs fit; beside the pod's exact 2 GPUs, only 1 does (3 per node)
    assert first_available(inv, two_else_one.alternatives) == 0
    assert choose(inv, [two_else_one, exact("gpu", 2)]) == (1,)
    assert choose(inv, [two_else_one, exact("gpu", 1)]) == (0,)
    # requests in the allocator's order: the first one's alternatives outermost
    assert choose(inv, [two_else_one, two_else_one]) == (0, 1)
    # All beside: node-a's 3 GPUs, all of them: nothing fits beside it
    assert choose(inv, [two_else_one, every("gpu", 1)]) == (0,)  # alone, as none fits
    # more combinations than tried together: each alone
    many = fa(*[exact("gpu", 3)] * 9)
    assert choose(inv, [many, many, exact("gpu", 1)]) == (0, 0)


def test_requests_not_placed_on_a_node_are_left_out_of_the_choice() -> None:
    fabric = gpus("fabric", 4)
    del fabric["spec"]["nodeName"]
    fabric["spec"]["allNodes"] = True
    inv = inventory(gpus("node-a", 2), fabric)
    two_else_one = fa(exact("gpu", 2), exact("gpu", 1))
    # class any matches the fabric's GPUs too: not placed, so not beside the rest
    assert choose(inv, [two_else_one, exact("any", 1)]) == (0,)
    assert choose(inventory(gpus("node-a", 2)), [two_else_one, exact("any", 1)]) == (1,)
