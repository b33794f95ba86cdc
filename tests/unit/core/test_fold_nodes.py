"""Nodes through the fold (#17): kept by name in ``Fold._nodes`` on ObjectUpserted,
dropped on ObjectDeleted; an invalid Node is Rejected and its previous version
stays, as for every invalid object; nothing else in the fold reads them yet."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from core_builders import Driver, admitted, cq, flavor, job, kinds, lq

from kuota.api.nodes import Node
from kuota.api.types import Taint


def node(name: str, gpus: int = 8, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"pool": "a"}},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64"}},
    }


def test_a_node_is_kept_by_name_and_dropped_when_deleted() -> None:
    d = Driver()
    assert d.apply(node("gpu-0"), node("gpu-1", 4)) == []
    assert sorted(d.fold._nodes) == ["gpu-0", "gpu-1"]
    assert d.fold._nodes["gpu-1"] == Node(
        "gpu-1", (("pool", "a"),), (), False, (("cpu", 64_000), ("nvidia.com/gpu", 4000))
    )
    taint = {"key": "maintenance", "effect": "NoSchedule"}
    assert d.apply(node("gpu-0", unschedulable=True, taints=[taint])) == []
    kept = d.fold._nodes["gpu-0"]
    assert kept.unschedulable and kept.taints == (Taint("maintenance", "", "NoSchedule"),)
    assert d.delete("Node", "gpu-0") == []
    assert list(d.fold._nodes) == ["gpu-1"]
    assert d.delete("Node", "gpu-0") == [], "a delete of a Node not known is nothing"


def test_an_invalid_node_is_rejected_and_its_previous_version_stays() -> None:
    d = Driver()
    d.apply(node("gpu-0"))
    broken = node("gpu-0")
    broken["status"]["allocatable"]["nvidia.com/gpu"] = "1e40"
    out = d.apply(broken)
    assert kinds(out) == [("Rejected", "Node gpu-0")]
    assert out[0].reason == "InvalidObject"
    assert "status.allocatable[nvidia.com/gpu]" in (out[0].message or "")
    assert d.fold._nodes["gpu-0"] == Node(
        "gpu-0", (("pool", "a"),), (), False, (("cpu", 64_000), ("nvidia.com/gpu", 8000))
    )
    assert d.fold.rejections() == [("Node gpu-0", "InvalidObject", out[0].message)]
    d.apply(node("gpu-0", 2))
    assert d.fold.rejections() == [], "a valid version ends the rejection"
    assert d.fold._nodes["gpu-0"].allocatable[1] == ("nvidia.com/gpu", 2000)
    nameless = node("x")
    del nameless["metadata"]["name"]
    assert kinds(d.apply(nameless)) == [("Rejected", "Node ")]


def test_nodes_change_no_admission_and_survive_copies() -> None:
    d = Driver()
    d.apply(flavor("default"), cq("cq").flavor("default", gpu=2), lq("ns", "lq", "cq"))
    d.apply(node("gpu-0"))
    assert admitted(d.apply(job("ns", "a").queue("lq").requests(gpu=2))) == ["ns/a"]
    assert d.delete("Node", "gpu-0") == [], "admission does not read the nodes yet"
    d.apply(node("gpu-1"))
    for c in (copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))):
        assert c._nodes == d.fold._nodes and list(c._nodes) == ["gpu-1"]
