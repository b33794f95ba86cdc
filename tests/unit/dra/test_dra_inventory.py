"""DraInventory: reading manifests, generations, pools."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from builders.manifests import DELETE, Version, device_class, resource_claim, set_path
from dra_builders import (
    GPU_CLASS,
    SINGLE_GPU,
    a100_node,
    h100_mig_node,
    inventory,
    milli,
    slice_,
    template,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.api.dra import (
    CounterConsumption,
    DeviceAttribute,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_dra_object,
)
from kuota.api.types import ObjectRef, ValidationError
from kuota.core.dra.charging import DraInventory


def test_handles_the_three_kinds() -> None:
    assert [
        k
        for k in ("DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim", "Job")
        if DraInventory.handles(k)
    ] == ["DeviceClass", "ResourceSlice", "ResourceClaimTemplate"]
    claim = resource_claim("c", namespace="team-a", device_class="gpu.nvidia.com")
    inv = DraInventory()
    error = inv.upsert(claim)  # the fold keeps claims apart (FoldState._claims)
    assert isinstance(error, ValidationError) and error.field == "kind"
    assert inv.generation == 0


# --------------------------------------------------------------------------- parsing


def test_article_template_reads_as_written() -> None:
    got = parse_dra_object(SINGLE_GPU)
    assert got == ResourceClaimTemplate(
        "team-a",
        "single-gpu",
        (
            DeviceRequest(
                "gpu",
                ExactDeviceRequest(
                    "gpu.nvidia.com",
                    1,
                    "ExactCount",
                    ("device.attributes['gpu.nvidia.com'].productName == 'A100'",),
                ),
            ),
        ),
    )


def test_v1beta1_request_without_exactly_wrapper() -> None:
    manifest = copy.deepcopy(SINGLE_GPU)
    manifest["apiVersion"] = "resource.k8s.io/v1beta1"
    req = manifest["spec"]["spec"]["devices"]["requests"][0]
    req.update(req.pop("exactly"))
    assert parse_dra_object(manifest) == parse_dra_object(SINGLE_GPU)


def test_v1beta1_device_with_basic_wrapper() -> None:
    v1 = a100_node().build()
    beta = copy.deepcopy(v1)
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    beta["spec"]["devices"] = [{"name": d.pop("name"), "basic": d} for d in beta["spec"]["devices"]]
    assert parse_dra_object(beta) == parse_dra_object(v1)


def test_slice_reads_attributes_capacity_and_counters() -> None:
    manifest = (
        slice_("n", generation=3, slices=2)
        .counters("cs", memory="80Gi")
        .device(
            "d",
            capacity={"memory": "10Gi"},
            consumes={"memory": "10Gi"},
            attrs={"dra.example.com/rev": 2},
            profile="1g.10gb",
            mig=True,
        )
        .build()
    )
    got = parse_dra_object(manifest)
    assert isinstance(got, ResourceSlice)
    assert (got.pool.name, got.pool.generation, got.pool.resource_slice_count) == ("n", 3, 2)
    assert got.shared_counters[0].counters == (("memory", milli("80Gi")),)
    device = got.devices[0]
    assert device.attributes == (
        DeviceAttribute("dra.example.com/rev", "int", 2),
        DeviceAttribute("mig", "bool", True),
        DeviceAttribute("profile", "string", "1g.10gb"),
    )
    assert device.capacity == (("memory", milli("10Gi")),)
    assert device.consumes_counters == (CounterConsumption("cs", (("memory", milli("10Gi")),)),)


def test_device_class_reads_selectors_and_extended_name() -> None:
    got = parse_dra_object(
        device_class("c", cel=["true"], extended="nvidia.com/gpu", created="2025")
    )
    assert got == DeviceClass("c", ("true",), "nvidia.com/gpu", "2025")


RCT = SINGLE_GPU
SLICE = a100_node().build()
REQ = "spec.spec.devices.requests.0"


@dataclass
class Bad:
    name: str
    manifest: dict[str, Any]
    field: str
    message: str


BAD = [
    Bad("unknown kind", set_path(RCT, "kind", "Job"), "kind", "'Job' is not one of"),
    Bad(
        "unknown apiVersion", set_path(RCT, "apiVersion", "resource.k8s.io/v9"), "apiVersion", "v9"
    ),
    Bad("no name", set_path(RCT, "metadata.name", DELETE), "metadata.name", "required"),
    Bad(
        "no namespace",
        set_path(RCT, "metadata.namespace", DELETE),
        "metadata.namespace",
        "required",
    ),
    Bad(
        "count zero",
        set_path(RCT, f"{REQ}.exactly.count", 0),
        f"{REQ}.exactly.count".replace(".0.", "[0]."),
        "at least 1",
    ),
    Bad(
        "count as a string",
        set_path(RCT, f"{REQ}.exactly.count", "2"),
        "spec.spec.devices.requests[0].exactly.count",
        "must be an integer",
    ),
    Bad(
        "unknown allocationMode",
        set_path(RCT, f"{REQ}.exactly.allocationMode", "Some"),
        "spec.spec.devices.requests[0].exactly.allocationMode",
        "not ExactCount or All",
    ),
    Bad(
        "count with All",
        set_path(RCT, f"{REQ}.exactly.allocationMode", "All"),
        "spec.spec.devices.requests[0].exactly.count",
        "must not be set",
    ),
    Bad(
        "no deviceClassName",
        set_path(RCT, f"{REQ}.exactly.deviceClassName", DELETE),
        "spec.spec.devices.requests[0].exactly.deviceClassName",
        "required",
    ),
    Bad(
        "selector without cel",
        set_path(RCT, f"{REQ}.exactly.selectors.0", {}),
        "spec.spec.devices.requests[0].exactly.selectors[0].cel",
        "required",
    ),
    Bad(
        "neither exactly nor firstAvailable",
        set_path(RCT, f"{REQ}.exactly", DELETE),
        "spec.spec.devices.requests[0]",
        "one of exactly or firstAvailable",
    ),
    Bad(
        "duplicate request names",
        set_path(RCT, "spec.spec.devices.requests", RCT["spec"]["spec"]["devices"]["requests"] * 2),
        "spec.spec.devices.requests[1].name",
        "duplicate request",
    ),
    Bad("no driver", set_path(SLICE, "spec.driver", DELETE), "spec.driver", "required"),
    Bad("no pool", set_path(SLICE, "spec.pool", DELETE), "spec.pool", "required"),
    Bad(
        "resourceSliceCount zero",
        set_path(SLICE, "spec.pool.resourceSliceCount", 0),
        "spec.pool.resourceSliceCount",
        "at least 1",
    ),
    Bad(
        "two attribute values",
        set_path(SLICE, "spec.devices.0.attributes.type", {"string": "gpu", "int": 1}),
        "spec.devices[0].attributes[type]",
        "exactly one of",
    ),
    Bad(
        "version not semver",
        set_path(SLICE, "spec.devices.0.attributes.type", {"version": "1.2"}),
        "spec.devices[0].attributes[type].version",
        "not a semantic version",
    ),
    Bad(
        "bad capacity",
        set_path(SLICE, "spec.devices.0.capacity", {"memory": {"value": "lots"}}),
        "spec.devices[0].capacity[memory].value",
        "not a valid Kubernetes quantity",
    ),
    Bad(
        "duplicate devices",
        set_path(SLICE, "spec.devices", SLICE["spec"]["devices"] * 2),
        "spec.devices[1].name",
        "duplicate device",
    ),
    Bad(
        "duplicate counter sets",
        set_path(SLICE, "spec.sharedCounters", SLICE["spec"]["sharedCounters"] * 2),
        "spec.sharedCounters[1].name",
        "duplicate counter set",
    ),
    Bad(
        "consumes more than the set shares",
        set_path(SLICE, "spec.devices.0.consumesCounters.0.counters.memory.value", "81Gi"),
        "spec.devices[0].consumesCounters[0].counters[memory]",
        "consumes more than counter set 'gpu-0-cs' shares",
    ),
    Bad(
        "consumes a counter the set lacks",
        set_path(SLICE, "spec.devices.0.consumesCounters.0.counters", {"sm": {"value": "1"}}),
        "spec.devices[0].consumesCounters[0].counters[sm]",
        "has no counter 'sm'",
    ),
]


@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.name)
def test_invalid_objects_name_the_field(bad: Bad) -> None:
    got = DraInventory().upsert(bad.manifest)
    assert isinstance(got, ValidationError), got
    assert got.field == bad.field, got
    assert bad.message in got.message, got


# --------------------------------------------------------------------------- generations


def test_generation_bumps_on_every_change_and_only_then() -> None:
    inv = DraInventory()
    steps = [
        ("new class", lambda: inv.upsert(GPU_CLASS), 1),
        ("identical class", lambda: inv.upsert(copy.deepcopy(GPU_CLASS)), 0),
        ("changed class", lambda: inv.upsert(device_class("gpu.nvidia.com", cel=["true"])), 1),
        ("delete", lambda: inv.delete(kind="DeviceClass", name="gpu.nvidia.com"), 1),
        ("delete again", lambda: inv.delete(kind="DeviceClass", name="gpu.nvidia.com"), 0),
        ("template", lambda: inv.upsert(SINGLE_GPU), 1),
        (
            "delete in another namespace",
            lambda: inv.delete(kind="ResourceClaimTemplate", name="single-gpu", namespace="b"),
            0,
        ),
        ("slice", lambda: inv.upsert(a100_node().build()), 1),
        ("delete of another kind", lambda: inv.delete(kind="Job", name="node-a100"), 0),
    ]
    for name, action, bump in steps:
        before = inv.generation
        assert action() is None, name
        assert inv.generation - before == bump, name
    assert inv.claim_template("team-a", "single-gpu") is not None


def test_an_invalid_update_replaces_the_stored_object() -> None:
    inv = inventory(SINGLE_GPU)
    g = inv.generation
    err = inv.upsert(set_path(SINGLE_GPU, f"{REQ}.exactly.count", -1))
    assert isinstance(err, ValidationError)
    assert err.ref == ObjectRef("ResourceClaimTemplate", "single-gpu", "team-a")
    assert inv.claim_template("team-a", "single-gpu") is None
    assert inv.generation == g + 1


# --------------------------------------------------------------------------- pools


def names(inv: DraInventory) -> list[str]:
    return [str(d) for d in inv.usable_devices()]


def test_only_the_newest_pool_generation_counts() -> None:
    inv = inventory(
        slice_("old", pool="p", generation=1).device("a").build(),
        slice_("new", pool="p", generation=2).device("b").build(),
    )
    assert names(inv) == ["gpu.nvidia.com/p/b"]


def test_an_incomplete_pool_is_ignored_until_complete() -> None:
    inv = inventory(slice_("s1", pool="p", slices=2).device("a").build())
    assert names(inv) == []
    assert inv.ignored_pools() == (("gpu.nvidia.com", "p", "generation 0: 1 of 2 slices present"),)
    assert inv.upsert(slice_("s2", pool="p", slices=2).device("b").build()) is None
    assert names(inv) == ["gpu.nvidia.com/p/a", "gpu.nvidia.com/p/b"]
    assert inv.ignored_pools() == ()


def test_a_newer_incomplete_generation_hides_the_older_one() -> None:
    inv = inventory(
        slice_("s1", pool="p", generation=1).device("a").build(),
        slice_("s2", pool="p", generation=2, slices=2).device("b").build(),
    )
    assert names(inv) == []


def test_slices_disagreeing_on_the_count() -> None:
    inv = inventory(slice_("s1", pool="p", slices=2).device("a").build())
    err = inv.upsert(slice_("s2", pool="p", slices=3).device("b").build())
    assert names(inv) == []
    assert "disagree on resourceSliceCount (2, 3)" in inv.ignored_pools()[0][2]
    # The slice that made the pool contradict itself is reported (a Rejected decision).
    assert err is not None and (err.ref.name, err.field) == ("s2", "spec.pool")
    assert "disagree on resourceSliceCount (2, 3)" in err.message


def test_pools_are_per_driver() -> None:
    inv = inventory(
        slice_("s1", pool="p").device("a").build(),
        slice_("s2", pool="p", driver="other.io").device("a").build(),
    )
    assert names(inv) == ["gpu.nvidia.com/p/a", "other.io/p/a"]


def test_counter_sets_may_live_in_another_slice_of_the_pool() -> None:
    inv = inventory(
        slice_("counters", pool="p", slices=2).counters("cs", memory="80Gi").build(),
        slice_("devices", pool="p", slices=2)
        .device("m", consumes={"memory": "10Gi"}, counter_set="cs")
        .build(),
    )
    assert names(inv) == ["gpu.nvidia.com/p/m"]


@pytest.mark.parametrize(
    ("consumes", "why"),
    [
        ({"memory": "90Gi"}, "consumes more 'memory' than counter set 'cs' shares"),
        ({"sm": "1"}, "consumes counter 'sm' of counter set 'cs', which the pool does not share"),
    ],
)
def test_a_pool_contradicting_its_counters_is_ignored(consumes: dict[str, str], why: str) -> None:
    inv = inventory(slice_("counters", pool="p", slices=2).counters("cs", memory="80Gi").build())
    err = inv.upsert(
        slice_("devices", pool="p", slices=2)
        .device("m", consumes=consumes, counter_set="cs")
        .build()
    )
    assert names(inv) == []
    assert why in inv.ignored_pools()[0][2]
    # The slice that completed the contradiction is reported (a Rejected decision).
    assert err is not None and (err.ref.name, err.field) == ("devices", "spec.pool")
    assert why in err.message and "ignored" in err.message


def test_a_device_in_two_slices_of_a_pool_rejects_the_second() -> None:
    inv = inventory(slice_("s1", pool="p", slices=2).device("a").build())
    err = inv.upsert(slice_("s2", pool="p", slices=2).device("a").build())
    assert err == ValidationError(
        ObjectRef("ResourceSlice", "s2"),
        "spec.devices[0].name",
        "device 'a' of pool 'p' generation 0 is also published by ResourceSlice 's1'",
    )
    assert names(inv) == []  # s2 is not used, so the pool stays incomplete
    # The same device in another generation is not a contradiction.
    assert inv.upsert(slice_("s2", pool="p", generation=1, slices=1).device("a").build()) is None
    assert names(inv) == ["gpu.nvidia.com/p/a"]


def test_a_counter_set_in_two_slices_of_a_pool_rejects_the_second() -> None:
    inv = inventory(slice_("s1", pool="p", slices=2).counters("cs", memory="1").build())
    err = inv.upsert(slice_("s2", pool="p", slices=2).counters("cs", memory="1").build())
    assert isinstance(err, ValidationError) and err.field == "spec.sharedCounters[0].name"


def test_updating_a_slice_in_place_is_not_a_conflict() -> None:
    inv = inventory(a100_node().build())
    assert inv.upsert(a100_node().device("gpu-1", type="gpu").build()) is None
    assert names(inv) == ["gpu.nvidia.com/node-a100/gpu-0", "gpu.nvidia.com/node-a100/gpu-1"]


def test_usable_devices_do_not_depend_on_arrival_order() -> None:
    manifests = [
        h100_mig_node().build(),
        a100_node().build(),
        slice_("z", driver="a.io").device("x").build(),
        template("t").request("r", "c").build(),
    ]
    forward = inventory(*manifests)
    backward = inventory(*reversed(manifests))
    assert forward.usable_devices() == backward.usable_devices()
    assert names(forward)[0] == "a.io/z/x"


# --------------------------------------------------------------------------- invariants

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


_VALID = [
    SINGLE_GPU,
    template("t").first_available("f", "a", "b").request("r", "c", "true", count=3).build(),
    device_class("c", cel=["true"], extended="x.io/y", created="2025"),
    h100_mig_node(partitions=2).device("v", attrs={"d.io/v": Version("1.2.3")}).build(),
]
_MUTATIONS = st.sampled_from(_VALID).flatmap(
    lambda m: st.tuples(st.just(m), st.sampled_from(_paths(m)[1:]), _JSON)
)


@settings(max_examples=150, deadline=None)
@given(mutation=_MUTATIONS)
def test_upsert_never_raises(mutation: tuple[dict[str, Any], tuple[object, ...], object]) -> None:
    manifest, path, value = mutation
    manifest = copy.deepcopy(manifest)
    node: Any = manifest
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    inv = inventory(GPU_CLASS)
    got = inv.upsert(manifest)
    assert got is None or isinstance(got, ValidationError)
    inv.usable_devices()
    inv.ignored_pools()
