"""place_gang and the rules beyond class and selectors (#17): adminAccess requests,
device taints and tolerations, matchAttribute constraints. Unit tables per rule;
the properties are in test_dra_placement_rules_properties.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from builders.manifests import GPU_DRIVER, device, device_class, resource_slice
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.api.dra import Device, DeviceAttribute, ExactDeviceRequest
from kuota.api.dra_rules import DeviceConstraint, DeviceTaint, DeviceToleration
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement import (
    DeviceId,
    GangPod,
    NoPlacement,
    Placement,
    PlacementInvalid,
    counter_key,
    place_gang,
)
from kuota.core.dra.placement_rules import (
    PodConstraint,
    attribute_value,
    pod_constraints,
    taints_allow,
    tolerates,
)

D = GPU_DRIVER
PARENT = f"{D}/parent"
GPU_SEL = f'device.attributes["{D}"].kind == "gpu"'
MIG_SEL = f'device.attributes["{D}"].kind == "mig"'


def inventory(*objects: dict[str, Any]) -> DraInventory:
    inv = DraInventory()
    for obj in (device_class("gpu", cel=[GPU_SEL]), device_class("mig", cel=[MIG_SEL]), *objects):
        assert inv.upsert(obj) is None, obj
    return inv


def gpu(name: str, *taints: dict[str, str], **attrs: object) -> dict[str, Any]:
    out = device(name, attributes={"kind": "gpu", **attrs})
    if taints:
        out["taints"] = list(taints)
    return out


def node(name: str, *devices: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return resource_slice(name, devices=list(devices), **kw)


def req(
    cls: str = "gpu",
    count: int = 1,
    *,
    admin: bool = False,
    tolerations: tuple[DeviceToleration, ...] = (),
) -> ExactDeviceRequest:
    return ExactDeviceRequest(cls, count, admin_access=admin, tolerations=tolerations)


def dev(node_name: str, name: str) -> DeviceId:
    return (D, node_name, name)


def placed(result: object) -> list[tuple[str, list[list[str]]]]:
    assert isinstance(result, Placement), result
    return [(p.node, [[d[2] for d in ds] for ds in p.devices]) for p in result.pods]


def place(inv: DraInventory, *pods: GangPod, **kw: Any) -> object:
    return place_gang(inventory=inv, pods=list(pods), **kw)


# --------------------------------------------------------------------------- adminAccess


def test_admin_access_needs_a_matching_device_on_the_node() -> None:
    inv = inventory(node("node-a", device("nic-0", attributes={"kind": "nic"})), node("node-b"))
    none = place(inv, GangPod((req(admin=True),)))
    assert isinstance(none, NoPlacement)
    assert none.message == (
        "no node can take pod 1 of 1: needs 1 device of class gpu (admin access); node-a has 0 free"
    )
    inv2 = inventory(node("node-a", gpu("gpu-0")))
    assert placed(place(inv2, GangPod((req(admin=True),)))) == [("node-a", [["gpu-0"]])]


def test_admin_access_may_use_a_taken_device_and_takes_nothing() -> None:
    inv = inventory(node("node-a", gpu("gpu-0")))
    taken = frozenset({dev("node-a", "gpu-0")})
    assert placed(place(inv, GangPod((req(admin=True),)), taken=taken)) == [("node-a", [["gpu-0"]])]
    # Two pods: a regular one and an admin one share the only GPU.
    result = place(inv, GangPod((req(),)), GangPod((req(admin=True),)))
    assert placed(result) == [("node-a", [["gpu-0"]]), ("node-a", [["gpu-0"]])]
    # Two admin pods alike share it too (identical pods: no first-device order lost).
    admin = GangPod((req(admin=True),))
    assert placed(place(inv, admin, admin)) == [("node-a", [["gpu-0"]])] * 2
    # but the same claim may not get one device twice
    twice = place(inv, GangPod((req(admin=True), req(admin=True)), claims=(0, 0)))
    assert isinstance(twice, NoPlacement)
    assert isinstance(
        place(inv, GangPod((req(admin=True), req(admin=True)), claims=(0, 1))), Placement
    )


def test_admin_access_within_a_pod_follows_the_allocators_order() -> None:
    """In one scheduling cycle a device an admin request took is in use for the
    requests allocated after it; an admin request may take a device an earlier
    request of another claim took, not one of its own claim."""
    inv = inventory(node("node-a", gpu("gpu-0")))
    regular_then_admin = GangPod((req(), req(admin=True)), claims=(0, 1))
    assert placed(place(inv, regular_then_admin)) == [("node-a", [["gpu-0"], ["gpu-0"]])]
    same_claim = GangPod((req(), req(admin=True)), claims=(0, 0))
    assert isinstance(place(inv, same_claim), NoPlacement)
    admin_then_regular = GangPod((req(admin=True), req()), claims=(0, 1))
    assert isinstance(place(inv, admin_then_regular), NoPlacement)


def test_admin_access_devices_spend_counters_only_in_their_own_pod() -> None:
    """Kubernetes' allocator checks an admin device's counters within the pod's
    scheduling cycle; an allocated admin result spends nothing."""
    whole = device("gpu-0", attributes={"kind": "gpu"}, consumes={"memory": "80Gi"})
    mig = device("mig-0", attributes={"kind": "mig"}, consumes={"memory": "10Gi"})
    inv = inventory(node("node-a", whole, mig, counters={"gpu-0-cs": {"memory": "80Gi"}}))
    admin_gpu = req("gpu", admin=True)
    # In one pod: the admin GPU's counters and the slice's exceed the set.
    one_pod = place(inv, GangPod((admin_gpu, req("mig")), claims=(0, 1)))
    assert isinstance(one_pod, NoPlacement)
    # Twice in one pod (two claims): twice the counters; in two pods: once each.
    assert isinstance(place(inv, GangPod((admin_gpu, admin_gpu), claims=(0, 1))), NoPlacement)
    two = place(inv, GangPod((admin_gpu,)), GangPod((admin_gpu,), frozenset({"node-a"})))
    assert placed(two) == [("node-a", [["gpu-0"]]), ("node-a", [["gpu-0"]])]
    # In two pods with a regular slice: the scheduler may allocate the slice
    # first, and then the admin GPU's counters no longer fit; so no placement.
    assert isinstance(place(inv, GangPod((admin_gpu,)), GangPod((req("mig"),))), NoPlacement)
    assert isinstance(place(inv, GangPod((req("mig"),)), GangPod((admin_gpu,))), NoPlacement)
    # A device whose counters allocated devices spent cannot be had, even for admin.
    spent = place(
        inv,
        GangPod((admin_gpu,)),
        taken=frozenset({dev("node-a", "mig-0")}),
        consumed={counter_key(D, "node-a", "gpu-0-cs", "memory"): 10 * 2**30 * 1000},
    )
    assert isinstance(spent, NoPlacement)


# --------------------------------------------------------------------------- taints

UNHEALTHY = "example.com/unhealthy"
NO_SCHEDULE = {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "effect", "ok"),
    [
        (DeviceToleration("example.com/unhealthy", "Equal", "ecc"), "NoSchedule", True),
        (DeviceToleration("example.com/unhealthy", "Equal", "other"), "NoSchedule", False),
        (DeviceToleration("example.com/unhealthy", "Exists"), "NoSchedule", True),
        (DeviceToleration("", "Exists"), "NoExecute", True),
        (DeviceToleration("other", "Exists"), "NoSchedule", False),
        (
            DeviceToleration("example.com/unhealthy", "Exists", effect="NoExecute"),
            "NoSchedule",
            False,
        ),
        (
            DeviceToleration("example.com/unhealthy", "Exists", effect="NoExecute"),
            "NoExecute",
            True,
        ),
    ],
)
def test_toleration_semantics(toleration: DeviceToleration, effect: str, ok: bool) -> None:
    taint = DeviceTaint("example.com/unhealthy", "ecc", effect)
    assert tolerates(toleration, taint) is ok
    tainted = Device("gpu-0", taints=(taint,))
    assert taints_allow(tainted, ExactDeviceRequest("gpu", tolerations=(toleration,))) is ok
    assert not taints_allow(tainted, ExactDeviceRequest("gpu"))


def test_only_blocking_effects_keep_a_device_out() -> None:
    for effect, allowed in (("None", True), ("Future", True), ("NoSchedule", False)):
        d = Device("gpu-0", taints=(DeviceTaint("k", "", effect),))
        assert taints_allow(d, ExactDeviceRequest("gpu")) is allowed, effect


def test_a_tainted_device_is_skipped_unless_tolerated() -> None:
    inv = inventory(node("node-a", gpu("gpu-0", NO_SCHEDULE), gpu("gpu-1")))
    assert placed(place(inv, GangPod((req(),)))) == [("node-a", [["gpu-1"]])]
    two = place(inv, GangPod((req(count=2),)))
    assert isinstance(two, NoPlacement)
    assert two.message.endswith("node-a has 1 free")
    tolerant = req(count=2, tolerations=(DeviceToleration("example.com/unhealthy", "Exists"),))
    assert placed(place(inv, GangPod((tolerant,)))) == [("node-a", [["gpu-0", "gpu-1"]])]


def test_no_execute_and_admin_access_are_kept_out_too() -> None:
    drain = {"key": "drain", "effect": "NoExecute"}
    note = {"key": "note", "effect": "None"}
    inv = inventory(node("node-a", gpu("gpu-0", drain)), node("node-b", gpu("gpu-0", note)))
    assert placed(place(inv, GangPod((req(),)))) == [("node-b", [["gpu-0"]])]
    only_a = GangPod((req(admin=True),), frozenset({"node-a"}))
    assert isinstance(place(inv, only_a), NoPlacement)


# --------------------------------------------------------------------------- matchAttribute


def migs(name: str, parents: list[str]) -> dict[str, Any]:
    return node(
        name,
        *(
            device(f"mig-{i}", attributes={"kind": "mig", "parent": p})
            for i, p in enumerate(parents)
        ),
    )


def test_match_attribute_keeps_devices_on_one_parent() -> None:
    inv = inventory(migs("node-a", ["gpu-0", "gpu-1", "gpu-1"]))
    two = GangPod((req("mig", 2),), constraints=(PodConstraint(PARENT, (0,)),))
    assert placed(place(inv, two)) == [("node-a", [["mig-1", "mig-2"]])]
    # Without the constraint, the first two in order.
    assert placed(place(inv, GangPod((req("mig", 2),)))) == [("node-a", [["mig-0", "mig-1"]])]


def test_match_attribute_across_requests_of_a_claim() -> None:
    inv = inventory(migs("node-a", ["gpu-0", "gpu-1", "gpu-1"]))
    both = GangPod(
        (req("mig"), req("mig")), constraints=(PodConstraint(PARENT, (0, 1)),), claims=(0, 0)
    )
    assert placed(place(inv, both)) == [("node-a", [["mig-1"], ["mig-2"]])]


def test_match_attribute_changes_the_verdict_and_says_why() -> None:
    inv = inventory(migs("node-a", ["gpu-0", "gpu-1"]), migs("node-b", ["gpu-0"]))
    two = GangPod((req("mig", 2),), constraints=(PodConstraint(PARENT, (0,)),))
    result = place(inv, two)
    assert isinstance(result, NoPlacement)
    assert result.message == (
        "no node can take pod 1 of 1: needs 2 devices of class mig, all with the same "
        f"{PARENT}; node-a has 2 free (at most 1 with the same {PARENT}), "
        f"node-b has 1 free (at most 1 with the same {PARENT})"
    )
    assert isinstance(place(inv, GangPod((req("mig", 2),))), Placement)


def test_devices_without_the_attribute_cannot_be_used() -> None:
    inv = inventory(
        node(
            "node-a",
            device("mig-0", attributes={"kind": "mig"}),
            device("mig-1", attributes={"kind": "mig"}),
        )
    )
    result = place(inv, GangPod((req("mig"),), constraints=(PodConstraint(PARENT, (0,)),)))
    assert isinstance(result, NoPlacement)
    assert "node-a has 0 free" in result.message or "1 other node has none" in result.message


def test_match_attribute_compares_kind_and_value() -> None:
    inv = inventory(
        node(
            "node-a",
            device("mig-0", attributes={"kind": "mig", "parent": 1}),
            device("mig-1", attributes={"kind": "mig", "parent": "1"}),
            device("mig-2", attributes={"kind": "mig", "parent": True}),
        )
    )
    two = GangPod((req("mig", 2),), constraints=(PodConstraint(PARENT, (0,)),))
    assert isinstance(place(inv, two), NoPlacement)


def test_match_attribute_binds_only_its_requests() -> None:
    inv = inventory(migs("node-a", ["gpu-0", "gpu-1", "gpu-2"]))
    pod = GangPod(
        (req("mig"), req("mig"), req("mig")),
        constraints=(PodConstraint(PARENT, (0, 1)),),
        claims=(0, 0, 0),
    )
    assert isinstance(place(inv, pod), NoPlacement)
    free = GangPod((req("mig"), req("mig")), constraints=(PodConstraint(PARENT, (0,)),))
    assert placed(place(inv, free)) == [("node-a", [["mig-0"], ["mig-1"]])]


def test_match_attribute_is_per_pod() -> None:
    """Two pods with the constraint each keep one parent, not the same one."""
    inv = inventory(migs("node-a", ["gpu-0", "gpu-0", "gpu-1", "gpu-1"]))
    one = GangPod((req("mig", 2),), constraints=(PodConstraint(PARENT, (0,)),))
    assert placed(place(inv, one, one)) == [
        ("node-a", [["mig-0", "mig-1"]]),
        ("node-a", [["mig-2", "mig-3"]]),
    ]


def test_match_attribute_backtracks_within_a_request() -> None:
    """Greedy would take mig-0 (gpu-0) then find no second device on gpu-0."""
    inv = inventory(migs("node-a", ["gpu-0", "gpu-1", "gpu-2", "gpu-1"]))
    two = GangPod((req("mig", 2),), constraints=(PodConstraint(PARENT, (0,)),))
    assert placed(place(inv, two)) == [("node-a", [["mig-1", "mig-3"]])]


def test_distinct_attribute_gives_each_device_its_own_value() -> None:
    """Greedy would take mig-0 and mig-1, both on gpu-0."""
    inv = inventory(migs("node-a", ["gpu-0", "gpu-0", "gpu-1"]))
    two = GangPod((req("mig", 2),), constraints=(PodConstraint(PARENT, (0,), distinct=True),))
    assert placed(place(inv, two)) == [("node-a", [["mig-0", "mig-2"]])]
    split = GangPod(
        (req("mig"), req("mig")), constraints=(PodConstraint(PARENT, (0, 1), distinct=True),)
    )
    assert placed(place(inv, split)) == [("node-a", [["mig-0"], ["mig-2"]])]
    same = inventory(migs("node-a", ["gpu-0", "gpu-0"]))
    result = place(same, two)
    assert isinstance(result, NoPlacement), result
    assert f"all with distinct {PARENT}; node-a has 2 free (1 distinct {PARENT})" in (
        result.message
    ), result.message


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(
        st.lists(st.sampled_from(["gpu-0", "gpu-1", "gpu-2"]), min_size=0, max_size=5),
        min_size=1,
        max_size=2,
    ),
    counts=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=2),
    distinct=st.booleans(),
)
def test_a_constraint_is_placed_exactly_when_a_brute_force_finds_it(
    nodes: list[list[str]], counts: list[int], distinct: bool
) -> None:
    """One pod, one or two requests of MIG slices under one matchAttribute or
    distinctAttribute constraint: placed exactly when some node has devices for
    every request with one value (distinct: pairwise different values), and
    the placement found is such a choice."""
    inv = inventory(*(migs(f"node-{n}", parents) for n, parents in enumerate(nodes)))
    requests = tuple(req("mig", c) for c in counts)
    pod = GangPod(
        requests,
        constraints=(PodConstraint(PARENT, tuple(range(len(counts))), distinct=distinct),),
    )

    def good(values: list[str]) -> bool:
        return len(set(values)) == len(values) if distinct else len(set(values)) <= 1

    need = sum(counts)
    exists = any(
        good([parents[i] for i in chosen])
        for parents in nodes
        for chosen in itertools.combinations(range(len(parents)), need)
    )
    result = place(inv, pod)
    assert isinstance(result, Placement if exists else NoPlacement), (result, nodes, counts)
    if isinstance(result, Placement):
        (one,) = result.pods
        parents = nodes[int(one.node.removeprefix("node-"))]
        ids = [d[2] for ds in one.devices for d in ds]
        assert len(set(ids)) == need, one
        assert good([parents[int(i.removeprefix("mig-"))] for i in ids]), one


def test_bad_indices_are_not_placed() -> None:
    inv = inventory(migs("node-a", ["gpu-0"]))
    stray = GangPod((req("mig"),), constraints=(PodConstraint(PARENT, (3,)),))
    assert isinstance(place(inv, stray), PlacementInvalid)
    claims = GangPod((req("mig"),), claims=(0, 1))
    assert isinstance(place(inv, claims), PlacementInvalid)


def test_attribute_lookup_as_the_allocator() -> None:
    d = Device(
        "x",
        attributes=(
            DeviceAttribute("example.com/numa", "int", 1),
            DeviceAttribute("parent", "string", "gpu-0"),
        ),
    )
    assert attribute_value(d, D, PARENT) == ("string", "gpu-0")
    assert attribute_value(d, "other.example.com", "other.example.com/parent") == (
        "string",
        "gpu-0",
    )
    assert attribute_value(d, D, "other.example.com/parent") is None
    assert attribute_value(d, D, "example.com/numa") == ("int", 1)


def test_pod_constraints_resolve_names_per_claim() -> None:
    claims = [
        (["a", "b"], (DeviceConstraint((), PARENT),)),
        (["a", "c"], (DeviceConstraint(("c",), PARENT), DeviceConstraint(("zz",), PARENT))),
        (["x"], (DeviceConstraint(("x/sub",), None, PARENT),)),
    ]
    assert pod_constraints(claims) == (
        PodConstraint(PARENT, (0, 1)),
        PodConstraint(PARENT, (3,)),
        PodConstraint(PARENT, (4,), distinct=True),
    )
