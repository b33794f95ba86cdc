"""kuota.api.nodes: a Node's labels, taints, cordon and allocatable (#17); every bad
field a ValidationError that names it, never an exception; ``parse_object``
dispatches ``kind: Node`` to the same reader."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuota.api.nodes import Node, parse_node
from kuota.api.not_journaled import NOT_JOURNALED_ANNOTATION
from kuota.api.parse import parse_object
from kuota.api.types import ObjectRef, Taint, ValidationError


def node(name: str = "gpu-0", **status: Any) -> dict[str, Any]:
    """A Node as the apiserver returns it: more than kuota reads."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": "u-1",
            "resourceVersion": "41",
            "labels": {"zone": "b", "kubernetes.io/hostname": name, "gpu": "h100"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": "10.244.0.0/24",
            "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "maintenance", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
            ],
        },
        "status": {
            "allocatable": {"memory": "512Gi", "cpu": "63500m", "nvidia.com/gpu": 8},
            "capacity": {"memory": "514Gi", "cpu": "64", "nvidia.com/gpu": 8},
            "conditions": [{"type": "Ready", "status": "True"}],
            **status,
        },
    }


def bad(manifest: dict[str, Any]) -> ValidationError:
    got = parse_node(manifest)
    assert isinstance(got, ValidationError), got
    return got


def test_a_node_is_its_labels_taints_cordon_and_allocatable() -> None:
    got = parse_node(node())
    assert got == Node(
        name="gpu-0",
        labels=(("gpu", "h100"), ("kubernetes.io/hostname", "gpu-0"), ("zone", "b")),
        taints=(
            Taint("nvidia.com/gpu", "present", "NoSchedule"),
            Taint("maintenance", "", "NoExecute"),
        ),
        unschedulable=False,
        allocatable=(("cpu", 63_500), ("memory", 512 * 2**30 * 1000), ("nvidia.com/gpu", 8000)),
    )


def test_parse_object_returns_the_same_node() -> None:
    assert parse_object(node()) == parse_node(node())
    assert isinstance(parse_object(node()), Node)
    bare = {"kind": "Node", "metadata": {"name": "n"}}  # no apiVersion: v1 is assumed
    assert parse_object(bare) == parse_node(bare) == Node("n")


def test_labels_are_sorted_by_key_and_taints_keep_their_order() -> None:
    m = node()
    m["metadata"]["labels"] = {"z": "1", "a": "2", "m": "3"}
    m["spec"]["taints"].reverse()
    got = parse_node(m)
    assert isinstance(got, Node)
    assert [k for k, _ in got.labels] == ["a", "m", "z"]
    assert [t.key for t in got.taints] == ["maintenance", "nvidia.com/gpu"]


def test_a_cordoned_node_is_unschedulable() -> None:
    m = node()
    m["spec"]["unschedulable"] = True
    got = parse_node(m)
    assert isinstance(got, Node) and got.unschedulable
    m["spec"]["unschedulable"] = "yes"
    assert bad(m).field == "spec.unschedulable"


def test_a_node_with_nothing_but_a_name() -> None:
    assert parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}) == Node("n")


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        (lambda m: m["metadata"].pop("name"), "metadata.name", "required"),
        (lambda m: m["metadata"].update(name="Not_A_Name"), "metadata.name", ""),
        (lambda m: m.pop("metadata"), "metadata", "required"),
        (lambda m: m["metadata"]["labels"].update(zone=["b"]), "metadata.labels[zone]", ""),
        (lambda m: m["spec"]["taints"][1].update(effect=5), "spec.taints[1].effect", "string"),
        (lambda m: m["spec"]["taints"][0].update(effect="Never"), "spec.taints[0].effect", ""),
        (lambda m: m["spec"]["taints"][0].pop("key"), "spec.taints[0].key", "required"),
        (lambda m: m["spec"].update(taints={"a": 1}), "spec.taints", "list"),
        (lambda m: m.update(spec=[]), "spec", "mapping"),
        (lambda m: m.update(status="Ready"), "status", "mapping"),
        (
            lambda m: m["status"]["allocatable"].update(cpu="1e40"),
            "status.allocatable[cpu]",
            "absurd",
        ),
        (
            lambda m: m["status"]["allocatable"].update({"nvidia.com/gpu": "8Ei"}),
            "status.allocatable[nvidia.com/gpu]",
            "absurd",
        ),
        (
            lambda m: m["status"]["allocatable"].update(memory="-1Gi"),
            "status.allocatable[memory]",
            "negative",
        ),
        (
            lambda m: m["status"]["allocatable"].update(pods=True),
            "status.allocatable[pods]",
            "",
        ),
        (
            lambda m: m["status"]["allocatable"].update({"bad name!": "1"}),
            "status.allocatable[bad name!]",
            "qualified name",
        ),
        (lambda m: m["status"].update(allocatable=["cpu"]), "status.allocatable", "mapping"),
    ],
)
def test_a_bad_field_is_named(change: Any, field: str, fragment: str) -> None:
    m = copy.deepcopy(node())
    change(m)
    got = bad(m)
    assert got.field == field, got
    assert fragment in got.message, got
    assert not got.message.startswith("cannot parse"), "a reader crashed"
    assert got.ref.kind == "Node"
    assert parse_object(m) == got, "the same reader behind parse_object"


def test_what_is_not_a_node_manifest() -> None:
    assert parse_node(5) == ValidationError(
        ObjectRef("Node", ""), "", "a manifest must be a mapping, not int"
    )
    assert bad({**node(), "kind": "Pod"}).field == "kind"
    wrong = bad({**node(), "apiVersion": "v2"})
    assert wrong.field == "apiVersion" and "want v1" in wrong.message
    assert parse_object({**node(), "apiVersion": "v2"}) == ValidationError(
        ObjectRef("Node", "gpu-0"), "apiVersion", "unsupported apiVersion 'v2' for Node: want v1"
    )


def test_ingests_stand_in_is_invalid_with_its_reason() -> None:
    m = node()
    m["metadata"]["annotations"] = {NOT_JOURNALED_ANNOTATION: "too large"}
    for got in (parse_node(m), parse_object(m)):
        assert isinstance(got, ValidationError)
        assert (got.field, got.message) == ("metadata", "not journaled: too large")
