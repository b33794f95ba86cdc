"""place_gang: unit tables per rule, and properties against a brute-force search."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from builders.manifests import GPU_DRIVER, device, device_class, resource_slice
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement import (
    CounterKey,
    DeviceId,
    GangPod,
    NoPlacement,
    Placement,
    PlacementInvalid,
    SearchBudgetExhausted,
    counter_key,
    place_gang,
)
from kuota.quantity import parse_quantity

D = GPU_DRIVER
KIND = f'device.attributes["{D}"].kind'
GPU_SEL = f'{KIND} == "gpu"'
MIG_SEL = f'{KIND} == "mig"'
BIG_SEL = f'device.attributes["{D}"].big'


def inventory(*objects: dict[str, Any]) -> DraInventory:
    inv = DraInventory()
    for obj in (
        device_class("gpu", cel=[GPU_SEL]),
        device_class("mig", cel=[MIG_SEL]),
        device_class("any"),
        *objects,
    ):
        assert inv.upsert(obj) is None, obj
    return inv


def gpus(node: str, n: int, **attrs: object) -> dict[str, Any]:
    """A node with ``n`` whole GPUs gpu-0.. and no counters."""
    return resource_slice(
        node, devices=[device(f"gpu-{i}", attributes={"kind": "gpu", **attrs}) for i in range(n)]
    )


def req(cls: str = "gpu", count: int = 1, *selectors: str) -> ExactDeviceRequest:
    return ExactDeviceRequest(cls, count, selectors=selectors)


def pod(*requests: ExactDeviceRequest, nodes: frozenset[str] | None = None) -> GangPod:
    return GangPod(tuple(requests), nodes)


def dev(node: str, name: str) -> DeviceId:
    return (D, node, name)


def placed(result: object) -> list[tuple[str, list[list[str]]]]:
    assert isinstance(result, Placement), result
    return [(p.node, [[d[2] for d in ds] for ds in p.devices]) for p in result.pods]


# --------------------------------------------------------------------------- tables


def test_fits_on_one_node() -> None:
    inv = inventory(gpus("node-a", 1), gpus("node-b", 2))
    assert placed(place_gang(inventory=inv, pods=[pod(req(count=2))])) == [
        ("node-b", [["gpu-0", "gpu-1"]])
    ]


def test_fragmentation_names_every_node() -> None:
    inv = inventory(gpus("node-a", 1), gpus("node-b", 1))
    result = place_gang(inventory=inv, pods=[pod(req(count=2))])
    assert isinstance(result, NoPlacement)
    assert result.message == (
        "no node can take pod 1 of 1: needs 2 devices of class gpu; "
        "node-a has 1 free, node-b has 1 free"
    )


def test_fragmentation_in_a_gang_names_the_pod() -> None:
    inv = inventory(gpus("node-a", 2), gpus("node-b", 1))
    result = place_gang(
        inventory=inv,
        pods=[pod(req(count=1)), pod(req(count=2))],
        taken=frozenset({dev("node-a", "gpu-1")}),
    )
    assert isinstance(result, NoPlacement)
    assert result.message == (
        "no node can take pod 2 of 2: needs 2 devices of class gpu; "
        "node-a has 1 free, node-b has 1 free"
    )


def test_pods_that_fit_alone_but_not_together() -> None:
    inv = inventory(gpus("node-a", 2))
    result = place_gang(inventory=inv, pods=[pod(req(count=2)), pod(req(count=1))])
    assert isinstance(result, NoPlacement)
    assert result.message.startswith("each pod fits alone but the 2 pods cannot be placed")


def mig_node(node: str = "node-a", slices: int = 8) -> dict[str, Any]:
    """One 80Gi GPU: the whole device, or up to 7 1g.10gb slices (8 published)."""
    whole = device("gpu-0", attributes={"kind": "gpu"}, consumes={"memory": "80Gi", "slices": "7"})
    migs = [
        device(
            f"mig-1g-{i}", attributes={"kind": "mig"}, consumes={"memory": "10Gi", "slices": "1"}
        )
        for i in range(slices)
    ]
    return resource_slice(
        node, devices=[whole, *migs], counters={"gpu-0-cs": {"memory": "80Gi", "slices": "7"}}
    )


def test_seven_mig_slices_fit_an_eighth_does_not() -> None:
    inv = inventory(mig_node())
    seven = place_gang(inventory=inv, pods=[pod(req("mig")) for _ in range(7)])
    assert [p[1][0][0] for p in placed(seven)] == [f"mig-1g-{i}" for i in range(7)]
    assert isinstance(place_gang(inventory=inv, pods=[pod(req("mig", 7))]), Placement)
    eight = place_gang(inventory=inv, pods=[pod(req("mig")) for _ in range(8)])
    assert isinstance(eight, NoPlacement)
    assert isinstance(place_gang(inventory=inv, pods=[pod(req("mig", 8))]), NoPlacement)


def test_whole_gpu_blocked_by_one_of_its_mig_slices() -> None:
    inv = inventory(mig_node())
    assert placed(place_gang(inventory=inv, pods=[pod(req("gpu"))])) == [("node-a", [["gpu-0"]])]
    cs: CounterKey = counter_key(D, "node-a", "gpu-0-cs", "memory")
    result = place_gang(
        inventory=inv,
        pods=[pod(req("gpu"))],
        taken=frozenset({dev("node-a", "mig-1g-3")}),
        consumed={cs: parse_quantity("10Gi"), counter_key(D, "node-a", "gpu-0-cs", "slices"): 1000},
    )
    assert isinstance(result, NoPlacement)
    assert result.message.endswith("node-a has 0 free")
    # Within one gang: a MIG slice and the whole GPU exclude each other.
    both = place_gang(inventory=inv, pods=[pod(req("mig"), req("gpu"))])
    assert isinstance(both, NoPlacement)


def test_backtracks_within_a_node() -> None:
    """Greedy would give gpu-0 to the whole-GPU request, then no slice of gpu-0
    would be left for a request that needs one."""
    devices = [
        device("gpu-0", attributes={"kind": "gpu"}, consumes={"mem": "2"}, counter_set="cs-0"),
        device("gpu-1", attributes={"kind": "gpu"}, consumes={"mem": "2"}, counter_set="cs-1"),
        device(
            "mig-0",
            attributes={"kind": "mig", "parent": "gpu-0"},
            consumes={"mem": "1"},
            counter_set="cs-0",
        ),
    ]
    inv = inventory(
        resource_slice(
            "node-a", devices=devices, counters={"cs-0": {"mem": "2"}, "cs-1": {"mem": "2"}}
        )
    )
    result = place_gang(
        inventory=inv,
        pods=[pod(req("gpu"), req("mig", 1, f'device.attributes["{D}"].parent == "gpu-0"'))],
    )
    assert placed(result) == [("node-a", [["gpu-1"], ["mig-0"]])]


def test_gang_spread_over_two_nodes() -> None:
    inv = inventory(gpus("node-a", 2), gpus("node-b", 2))
    result = place_gang(inventory=inv, pods=[pod(req(count=2)), pod(req(count=2))])
    assert placed(result) == [("node-a", [["gpu-0", "gpu-1"]]), ("node-b", [["gpu-0", "gpu-1"]])]


def test_gang_backtracks_over_nodes() -> None:
    """Pod 1 fits on both nodes, pod 2 only on node-a: pod 1 must move to node-b."""
    inv = inventory(gpus("node-a", 2), gpus("node-b", 1))
    result = place_gang(inventory=inv, pods=[pod(req(count=1)), pod(req(count=2))])
    assert placed(result) == [("node-b", [["gpu-0"]]), ("node-a", [["gpu-0", "gpu-1"]])]


def test_node_filter_respected() -> None:
    inv = inventory(gpus("node-a", 2), gpus("node-b", 2))
    only_b = pod(req(), nodes=frozenset({"node-b"}))
    assert placed(place_gang(inventory=inv, pods=[only_b])) == [("node-b", [["gpu-0"]])]
    nowhere = place_gang(inventory=inv, pods=[pod(req(), nodes=frozenset())])
    assert isinstance(nowhere, NoPlacement)
    assert nowhere.message.endswith("no node is eligible")
    bare = place_gang(inventory=inv, pods=[pod(req(), nodes=frozenset({"node-c"}))])
    assert isinstance(bare, NoPlacement)
    assert bare.message.endswith("node-c has 0 free")


def test_cel_selector_respected() -> None:
    inv = inventory(gpus("node-a", 2, productName="A100"), gpus("node-b", 1, productName="H100"))
    h100 = req("gpu", 1, f'device.attributes["{D}"].productName == "H100"')
    assert placed(place_gang(inventory=inv, pods=[pod(h100)])) == [("node-b", [["gpu-0"]])]
    two = place_gang(inventory=inv, pods=[pod(h100), pod(h100)])
    assert isinstance(two, NoPlacement)
    assert "matching 1 selector" in two.message


def test_taken_devices_excluded() -> None:
    inv = inventory(gpus("node-a", 2))
    result = place_gang(inventory=inv, pods=[pod(req())], taken=frozenset({dev("node-a", "gpu-0")}))
    assert placed(result) == [("node-a", [["gpu-1"]])]


def test_budget_exhausted_is_not_impossible() -> None:
    inv = inventory(*(gpus(f"node-{i}", 3) for i in range(4)))
    pods = [pod(req(count=2)) for _ in range(5)]  # 4 nodes x 3 GPUs: 4 pods of 2 at most
    result = place_gang(inventory=inv, pods=pods, budget=50)
    assert isinstance(result, SearchBudgetExhausted)
    assert "not proven impossible" in result.message
    assert isinstance(place_gang(inventory=inv, pods=pods), NoPlacement)


def test_empty_gang_and_empty_pod() -> None:
    inv = inventory(gpus("node-a", 1))
    assert place_gang(inventory=inv, pods=[]) == Placement((), 0)
    assert placed(place_gang(inventory=inv, pods=[pod()])) == [("node-a", [])]


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        (req("nope"), "DeviceClass nope not found"),
        (req("gpu", 1, "device.attributes["), "CEL"),
        (ExactDeviceRequest("gpu", allocation_mode="Some"), "allocationMode Some"),
    ],
)
def test_invalid_requests(request_: ExactDeviceRequest, says: str) -> None:
    result = place_gang(inventory=inventory(gpus("node-a", 1)), pods=[pod(request_)])
    assert isinstance(result, PlacementInvalid)
    assert says in result.message


# --------------------------------------------------------------------------- properties


@dataclass(frozen=True)
class Dev:
    name: str
    kind: str  # gpu | mig
    big: bool
    counter_set: str | None
    amount: int  # units of the set's one counter, "units"


@dataclass(frozen=True)
class Node:
    name: str
    sets: tuple[tuple[str, int], ...]  # counter set -> units
    devices: tuple[Dev, ...]


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    pods: tuple[GangPod, ...]
    taken: frozenset[DeviceId]
    consumed: tuple[tuple[CounterKey, int], ...]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = []
    for n in range(draw(st.integers(1, 3))):
        sets = tuple((f"cs-{s}", draw(st.integers(1, 3))) for s in range(draw(st.integers(0, 2))))
        devices = []
        for d in range(draw(st.integers(0, 4))):
            use = draw(st.sampled_from([None, *sets]))
            devices.append(
                Dev(
                    f"dev-{d}",
                    draw(st.sampled_from(["gpu", "mig"])),
                    draw(st.booleans()),
                    None if use is None else use[0],
                    0 if use is None else draw(st.integers(1, use[1])),
                )
            )
        nodes.append(Node(f"node-{n}", sets, tuple(devices)))
    names = [n.name for n in nodes]
    all_devices = [dev(n.name, d.name) for n in nodes for d in n.devices]
    taken = (
        frozenset(draw(st.lists(st.sampled_from(all_devices), max_size=3)))
        if all_devices
        else frozenset()
    )
    consumed = []
    for n in nodes:
        for s, cap in n.sets:
            used = draw(st.integers(0, cap))
            if used:
                consumed.append((counter_key(D, n.name, s, "units"), used * 1000))
    pods = []
    for _ in range(draw(st.integers(1, 2))):
        requests = tuple(
            ExactDeviceRequest(
                draw(st.sampled_from(["gpu", "mig", "any"])),
                draw(st.integers(1, 2)),
                selectors=draw(st.sampled_from([(), (BIG_SEL,)])),
            )
            for _ in range(draw(st.integers(1, 2)))
        )
        allowed = draw(st.none() | st.frozensets(st.sampled_from(names)))
        pods.append(GangPod(requests, allowed))
    return Case(tuple(nodes), tuple(pods), taken, tuple(consumed))


def build(case: Case) -> DraInventory:
    slices = []
    for n in case.nodes:
        devices = [
            device(
                d.name,
                attributes={"kind": d.kind, "big": d.big},
                consumes={"units": str(d.amount)} if d.counter_set else None,
                counter_set=d.counter_set or "",
            )
            for d in n.devices
        ]
        counters = {s: {"units": str(cap)} for s, cap in n.sets}
        slices.append(resource_slice(n.name, devices=devices, counters=counters))
    return inventory(*slices)


def matches(d: Dev, request: ExactDeviceRequest) -> bool:
    if request.device_class_name != "any" and d.kind != request.device_class_name:
        return False
    return d.big or BIG_SEL not in request.selectors


def valid(case: Case, assignment: Sequence[tuple[str, Sequence[Sequence[DeviceId]]]]) -> bool:
    """Whether an assignment (per pod: node, per request the devices) is a placement."""
    by_id = {dev(n.name, d.name): (n.name, d) for n in case.nodes for d in n.devices}
    caps = {counter_key(D, n.name, s, "units"): cap * 1000 for n in case.nodes for s, cap in n.sets}
    used = dict(case.consumed)
    seen: set[DeviceId] = set()
    if len(assignment) != len(case.pods):
        return False
    for p, (node, chosen) in zip(case.pods, assignment, strict=True):
        if p.nodes is not None and node not in p.nodes:
            return False
        if len(chosen) != len(p.requests):
            return False
        for request, ids in zip(p.requests, chosen, strict=True):
            if len(ids) != request.count or len(set(ids)) != len(ids):
                return False
            for ident in ids:
                if ident in seen or ident in case.taken or ident not in by_id:
                    return False
                seen.add(ident)
                where, d = by_id[ident]
                if where != node or not matches(d, request):
                    return False
                if d.counter_set is not None:
                    key = counter_key(D, node, d.counter_set, "units")
                    used[key] = used.get(key, 0) + d.amount * 1000
    return all(amount <= caps.get(key, 0) for key, amount in used.items())


def brute_force(case: Case) -> bool:
    """Whether any assignment of nodes and device combinations is valid."""
    node_names = sorted(
        {n.name for n in case.nodes} | {x for p in case.pods for x in p.nodes or ()}
    )
    per_node = {n.name: [dev(n.name, d.name) for d in n.devices] for n in case.nodes}

    def options(p: GangPod) -> Iterator[tuple[str, tuple[tuple[DeviceId, ...], ...]]]:
        for node in node_names:
            combos = [itertools.combinations(per_node.get(node, []), r.count) for r in p.requests]
            for chosen in itertools.product(*combos):
                yield node, chosen

    for assignment in itertools.product(*(list(options(p)) for p in case.pods)):
        if valid(case, assignment):
            return True
    return False


def run(case: Case, inv: DraInventory | None = None) -> object:
    return place_gang(
        inventory=inv or build(case),
        pods=case.pods,
        taken=case.taken,
        consumed=dict(case.consumed),
    )


PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(cases())
def test_a_placement_is_valid_and_no_placement_is_proven(case: Case) -> None:
    result = run(case)
    assert not isinstance(result, SearchBudgetExhausted | PlacementInvalid), result
    if isinstance(result, Placement):
        assert valid(case, [(p.node, p.devices) for p in result.pods]), result
    else:
        assert isinstance(result, NoPlacement)
        assert not brute_force(case), result.message


@PROPERTY
@given(cases())
def test_same_input_same_output(case: Case) -> None:
    inv = build(case)
    assert run(case, inv) == run(case, inv) == run(case)


def test_brute_force_agrees_on_the_tables() -> None:
    """The property's oracle, checked on a case with a known answer."""
    node = Node(
        "node-0",
        (("cs-0", 2),),
        (Dev("dev-0", "gpu", True, "cs-0", 2), Dev("dev-1", "mig", True, "cs-0", 1)),
    )
    both = GangPod((ExactDeviceRequest("gpu"), ExactDeviceRequest("mig")))
    case = Case((node,), (both,), frozenset(), ())
    assert not brute_force(case)
    assert isinstance(run(case), NoPlacement)
    one = Case((node,), (GangPod((ExactDeviceRequest("any", 1),)),), frozenset(), ())
    assert brute_force(one)
    assert isinstance(run(one), Placement)


def test_counters_published_in_another_slice_of_the_pool() -> None:
    """Kubernetes 1.35 puts sharedCounters and devices in separate slices of a pool."""
    counters = resource_slice(
        "node-a-counters",
        devices=[],
        pool="node-a",
        node="node-a",
        slices=2,
        counters={"gpu-0-cs": {"memory": "80Gi"}},
    )
    devices = resource_slice(
        "node-a-devices",
        pool="node-a",
        node="node-a",
        slices=2,
        devices=[
            device(f"mig-{i}", attributes={"kind": "mig"}, consumes={"memory": "40Gi"})
            for i in range(3)
        ],
    )
    inv = inventory(counters, devices)
    assert placed(place_gang(inventory=inv, pods=[pod(req("mig", 2))])) == [
        ("node-a", [["mig-0", "mig-1"]])
    ]
    assert isinstance(place_gang(inventory=inv, pods=[pod(req("mig", 3))]), NoPlacement)
