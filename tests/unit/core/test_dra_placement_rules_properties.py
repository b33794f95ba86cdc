"""place_gang with adminAccess, device taints and matchAttribute and
distinctAttribute constraints,
against an independent checker and a brute-force search (#17).

The checker states the rules as Kubernetes' structured allocator applies them:
a regular device is given once and never one that is taken; an adminAccess
device may be one that is taken or given to another pod, but within its pod not
one an earlier request of its claim took, and a regular request of the pod may
not take one an earlier adminAccess request took; counters hold for the
regular devices of the gang plus, per pod, that pod's adminAccess devices; a
device with a NoSchedule/NoExecute taint goes only to a request tolerating it;
the devices of a matchAttribute constraint's requests all have the attribute,
with one value (distinctAttribute: each its own value)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from builders.manifests import GPU_DRIVER, device, device_class, resource_slice
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.api.dra import ExactDeviceRequest
from kuota.api.dra_rules import DeviceToleration
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
from kuota.core.dra.placement_rules import PodConstraint

D = GPU_DRIVER
PARENT = f"{D}/parent"
KIND = f'device.attributes["{D}"].kind'


@dataclass(frozen=True)
class Taint:
    value: str  # key "t"
    effect: str


@dataclass(frozen=True)
class Dev:
    name: str
    kind: str  # gpu | mig
    parent: str | None  # the attribute, or none
    amount: int  # units of the node's counter set "cs" (0: consumes none)
    taint: Taint | None


@dataclass(frozen=True)
class Node:
    name: str
    cap: int | None  # the units of counter set "cs", None: no set
    devices: tuple[Dev, ...]


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    pods: tuple[GangPod, ...]
    taken: frozenset[DeviceId]
    consumed: tuple[tuple[CounterKey, int], ...]


TOLERATIONS = [
    (),
    (DeviceToleration("t", "Exists"),),
    (DeviceToleration("t", "Equal", "a"),),
    (DeviceToleration("t", "Equal", "a", "NoExecute"),),
    (DeviceToleration("", "Exists", "", "NoSchedule"),),
]


def dev_id(node: str, name: str) -> DeviceId:
    return (D, node, name)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = []
    for n in range(draw(st.integers(1, 2))):
        cap = draw(st.none() | st.integers(1, 3))
        devices = []
        for d in range(draw(st.integers(0, 4))):
            taint = draw(
                st.none()
                | st.builds(
                    Taint,
                    st.sampled_from(["a", "b"]),
                    st.sampled_from(["NoSchedule", "NoExecute", "None"]),
                )
            )
            devices.append(
                Dev(
                    f"dev-{d}",
                    draw(st.sampled_from(["gpu", "mig"])),
                    draw(st.sampled_from([None, "p0", "p1"])),
                    0 if cap is None else draw(st.integers(0, cap)),
                    taint,
                )
            )
        nodes.append(Node(f"node-{n}", cap, tuple(devices)))
    names = [n.name for n in nodes]
    everything = [dev_id(n.name, d.name) for n in nodes for d in n.devices]
    taken = (
        frozenset(draw(st.lists(st.sampled_from(everything), max_size=2)))
        if everything
        else frozenset()
    )
    consumed = []
    for n in nodes:
        if n.cap is not None:
            used = draw(st.integers(0, n.cap))
            if used:
                consumed.append((counter_key(D, n.name, "cs", "units"), used * 1000))
    pods = []
    for _ in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, 2))
        requests = tuple(
            ExactDeviceRequest(
                draw(st.sampled_from(["gpu", "mig", "any"])),
                draw(st.integers(1, 2)),
                admin_access=draw(st.booleans()),
                tolerations=draw(st.sampled_from(TOLERATIONS)),
            )
            for _ in range(count)
        )
        claims = (0,) if count == 1 else draw(st.sampled_from([(0, 0), (0, 1)]))
        bound = draw(st.sampled_from([(), (0,), (count - 1,), tuple(range(count))]))
        distinct = draw(st.booleans())  # distinctAttribute, else matchAttribute
        constraints = (PodConstraint(PARENT, bound, distinct),) if bound else ()
        allowed = draw(st.none() | st.frozensets(st.sampled_from(names)))
        pods.append(GangPod(requests, allowed, constraints, claims))
    return Case(tuple(nodes), tuple(pods), taken, tuple(consumed))


def build(case: Case) -> DraInventory:
    inv = DraInventory()
    objects: list[dict[str, Any]] = [
        device_class("gpu", cel=[f'{KIND} == "gpu"']),
        device_class("mig", cel=[f'{KIND} == "mig"']),
        device_class("any"),
    ]
    for n in case.nodes:
        devices = []
        for d in n.devices:
            attributes: dict[str, object] = {"kind": d.kind}
            if d.parent is not None:
                attributes["parent"] = d.parent
            out = device(
                d.name,
                attributes=attributes,
                consumes={"units": str(d.amount)} if d.amount else None,
                counter_set="cs",
            )
            if d.taint is not None:
                out["taints"] = [{"key": "t", "value": d.taint.value, "effect": d.taint.effect}]
            devices.append(out)
        counters = {"cs": {"units": str(n.cap)}} if n.cap is not None else None
        objects.append(resource_slice(n.name, devices=devices, counters=counters))
    for obj in objects:
        assert inv.upsert(obj) is None, obj
    return inv


def tolerated(d: Dev, request: ExactDeviceRequest) -> bool:
    t = d.taint
    if t is None or t.effect not in ("NoSchedule", "NoExecute"):
        return True
    for tol in request.tolerations:
        if tol.effect not in ("", t.effect) or tol.key not in ("", "t"):
            continue
        if tol.operator == "Exists" or tol.value == t.value:
            return True
    return False


def valid(case: Case, assignment: Sequence[tuple[str, Sequence[Sequence[DeviceId]]]]) -> bool:
    """Whether an assignment (per pod: node, per request the devices) is a placement."""
    by_id = {dev_id(n.name, d.name): (n.name, d) for n in case.nodes for d in n.devices}
    caps = {
        counter_key(D, n.name, "cs", "units"): n.cap * 1000 for n in case.nodes if n.cap is not None
    }
    used = dict(case.consumed)
    admin_used: list[dict[CounterKey, int]] = []
    regular: set[DeviceId] = set()
    if len(assignment) != len(case.pods):
        return False
    for p, (node, chosen) in zip(case.pods, assignment, strict=True):
        if p.nodes is not None and node not in p.nodes:
            return False
        if len(chosen) != len(p.requests):
            return False
        mine: dict[CounterKey, int] = {}
        admin_used.append(mine)
        for r, (request, ids) in enumerate(zip(p.requests, chosen, strict=True)):
            if len(ids) != request.count or len(set(ids)) != len(ids):
                return False
            for ident in ids:
                if ident not in by_id:
                    return False
                where, d = by_id[ident]
                kind_ok = request.device_class_name in ("any", d.kind)
                if where != node or not kind_ok or not tolerated(d, request):
                    return False
                earlier = [q for q in range(r) if ident in chosen[q]]
                if request.admin_access:
                    if any(p.claims[q] == p.claims[r] for q in earlier):
                        return False
                else:
                    if ident in case.taken or ident in regular:
                        return False
                    if any(p.requests[q].admin_access for q in earlier):
                        return False
                    regular.add(ident)
                if d.amount:
                    key = counter_key(D, node, "cs", "units")
                    into = mine if request.admin_access else used
                    into[key] = into.get(key, 0) + d.amount * 1000
        for c in p.constraints:
            values = [by_id[i][1].parent for r in c.requests for i in chosen[r]]
            if None in values:
                return False
            if len(set(values)) != (len(values) if c.distinct else min(1, len(values))):
                return False
    for extra in [{}, *admin_used]:
        for key in set(used) | set(extra):
            if used.get(key, 0) + extra.get(key, 0) > caps.get(key, 0):
                return False
    return True


def brute_force(case: Case) -> bool:
    """Whether any assignment of nodes and device combinations is valid."""
    node_names = sorted(
        {n.name for n in case.nodes} | {x for p in case.pods for x in p.nodes or ()}
    )
    per_node = {n.name: [dev_id(n.name, d.name) for d in n.devices] for n in case.nodes}

    def options(p: GangPod) -> Iterator[tuple[str, tuple[tuple[DeviceId, ...], ...]]]:
        for node in node_names:
            combos = [itertools.combinations(per_node.get(node, []), r.count) for r in p.requests]
            for chosen in itertools.product(*combos):
                yield node, chosen

    return any(
        valid(case, assignment)
        for assignment in itertools.product(*(list(options(p)) for p in case.pods))
    )


def run(case: Case, inv: DraInventory | None = None) -> object:
    return place_gang(
        inventory=inv or build(case), pods=case.pods, taken=case.taken, consumed=dict(case.consumed)
    )


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


def _one(*devices: Dev, cap: int | None = None) -> tuple[Node, ...]:
    return (Node("node-0", cap, devices),)


def test_the_checker_knows_each_rule() -> None:
    """The oracle itself, on cases with a known answer, one per rule."""
    plain = ExactDeviceRequest("any")
    admin = ExactDeviceRequest("any", admin_access=True)
    a = dev_id("node-0", "dev-0")
    b = dev_id("node-0", "dev-1")
    # taints: NoSchedule keeps the device out unless tolerated; None does not
    tainted = _one(Dev("dev-0", "gpu", None, 0, Taint("a", "NoSchedule")))
    assert not valid(Case(tainted, (GangPod((plain,)),), frozenset(), ()), [("node-0", [[a]])])
    tolerant = ExactDeviceRequest("any", tolerations=TOLERATIONS[2])
    assert valid(Case(tainted, (GangPod((tolerant,)),), frozenset(), ()), [("node-0", [[a]])])
    # adminAccess: a taken device, shared by two pods, but not twice in one claim
    one = _one(Dev("dev-0", "gpu", None, 0, None))
    two_pods = Case(one, (GangPod((plain,)), GangPod((admin,))), frozenset(), ())
    assert valid(two_pods, [("node-0", [[a]]), ("node-0", [[a]])])
    same_claim = Case(one, (GangPod((admin, admin), None, (), (0, 0)),), frozenset(), ())
    assert not valid(same_claim, [("node-0", [[a], [a]])])
    assert not brute_force(same_claim)
    admin_first = Case(one, (GangPod((admin, plain), None, (), (0, 1)),), frozenset(), ())
    assert not brute_force(admin_first)
    # matchAttribute: one value, and the attribute present
    split = _one(Dev("dev-0", "mig", "p0", 0, None), Dev("dev-1", "mig", "p1", 0, None))
    two = ExactDeviceRequest("any", 2)
    bound = Case(split, (GangPod((two,), None, (PodConstraint(PARENT, (0,)),)),), frozenset(), ())
    assert not brute_force(bound)
    assert isinstance(run(bound), NoPlacement)
    free = Case(split, (GangPod((two,)),), frozenset(), ())
    assert valid(free, [("node-0", [[a, b]])])
    # counters: each pod's admin devices on top of every regular one
    counted = _one(Dev("dev-0", "gpu", None, 2, None), Dev("dev-1", "mig", None, 1, None), cap=2)
    admin_gpu = ExactDeviceRequest("gpu", admin_access=True)
    mig = ExactDeviceRequest("mig")
    both = Case(counted, (GangPod((admin_gpu,)), GangPod((mig,))), frozenset(), ())
    assert not brute_force(both)
    assert isinstance(run(both), NoPlacement)
    admins = Case(counted, (GangPod((admin_gpu,)), GangPod((admin_gpu,))), frozenset(), ())
    assert brute_force(admins)
    assert isinstance(run(admins), Placement)
