"""What ingest journals of a Node (#17): what the fold reads of it (identity and
labels, taints, unschedulable, allocatable), and only when that changes: kubelet's
and kwok's heartbeats, conditions and resourceVersion bumps journal nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_kube_translate_pods import sources

from kuota.api.nodes import Node
from kuota.api.parse import parse_object
from kuota.api.types import ValidationError
from kuota.events.schema import ObjectDeleted, ObjectUpserted
from kuota.kube.translate import (
    fold_digest,
    journal_object,
    stand_in,
    translate_delete,
    translate_upsert,
)


def cluster_node(name: str = "kwok-gpu-0", *, rv: str = "100") -> dict[str, Any]:
    """A Node as the apiserver returns it (a LIST item: no apiVersion nor kind)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"type": "kwok", "kubernetes.io/hostname": name},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [{"manager": "kwok", "operation": "Update"}],
        },
        "spec": {
            "podCIDR": "10.244.0.0/24",
            "podCIDRs": ["10.244.0.0/24"],
            "taints": [
                {"key": "gpu", "value": "h100", "effect": "NoSchedule"},
                {"key": "drain", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
            ],
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.255.0.10"}],
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2026-01-01T00:00:10Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "nodeInfo": {"kubeletVersion": "fake"},
            "images": [{"names": ["busybox"], "sizeBytes": 1}],
        },
    }


def heartbeat(m: dict[str, Any], *, rv: str, at: str) -> dict[str, Any]:
    """kubelet's (kwok's) status update: new heartbeat time, new resourceVersion."""
    out = copy.deepcopy(m)
    out["metadata"]["resourceVersion"] = rv
    out["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = rv
    out["metadata"]["managedFields"].append({"manager": "kubelet", "time": at})
    out["status"]["conditions"][0]["lastHeartbeatTime"] = at
    out["status"]["conditions"].append({"type": "MemoryPressure", "status": "False"})
    out["status"]["images"].append({"names": [f"img-{rv}"], "sizeBytes": 2})
    return out


# --------------------------------------------------------------------------- the projection


def test_only_what_the_fold_reads_of_a_node_is_journaled() -> None:
    out = journal_object("Node", cluster_node())
    assert out == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "kwok-gpu-0",
            "uid": "uid-kwok-gpu-0",
            "resourceVersion": "100",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"type": "kwok", "kubernetes.io/hostname": "kwok-gpu-0"},
        },
        "spec": {
            "taints": [
                {"key": "gpu", "value": "h100", "effect": "NoSchedule"},
                {"key": "drain", "effect": "NoExecute"},
            ]
        },
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}},
    }
    cordoned = cluster_node()
    cordoned["spec"]["unschedulable"] = True
    assert journal_object("Node", cordoned)["spec"]["unschedulable"] is True


def test_the_fold_reads_the_projection_as_the_whole_node() -> None:
    whole = {"apiVersion": "v1", "kind": "Node", **cluster_node()}
    read = parse_object(journal_object("Node", whole))
    assert isinstance(read, Node) and read == parse_object(whole)
    assert [t.key for t in read.taints] == ["gpu", "drain"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("metadata", "a string"),
        ("spec", ["a list"]),
        ("status", 7),
        ("spec.taints", {"key": "gpu"}),
        ("spec.taints", [5]),
        ("spec.unschedulable", "yes"),
        ("status.allocatable", ["cpu"]),
        ("metadata.labels", {"zone": 3}),
    ],
)
def test_a_bad_shape_is_kept_so_the_fold_rejects_it_the_same(field: str, value: object) -> None:
    whole = {"apiVersion": "v1", "kind": "Node", **cluster_node()}
    *parents, leaf = field.split(".")
    target: Any = whole
    for p in parents:
        target = target[p]
    target[leaf] = value
    read = parse_object(journal_object("Node", whole))
    assert isinstance(read, ValidationError) and read == parse_object(whole)


# --------------------------------------------------------------------------- the digest rule


def test_heartbeats_and_conditions_journal_nothing() -> None:
    node = cluster_node()
    first = translate_upsert("Node", node, None, at=1.0)
    (up,) = first.events
    assert isinstance(up, ObjectUpserted) and up.id == "Node//kwok-gpu-0@100"
    assert first.seen is not None and first.seen.rv == "100"
    seen = first.seen
    for i in range(1, 4):
        beat = heartbeat(node, rv=str(100 + i), at=f"2026-01-01T00:0{i}:10Z")
        assert fold_digest("Node", beat) == fold_digest("Node", node)
        t = translate_upsert("Node", beat, seen, at=1.0 + i)
        assert t.skipped and t.events == ()
        assert t.seen is not None and t.seen.rv == str(100 + i), "the resourceVersion is kept"
        seen = t.seen
    retimed = copy.deepcopy(node)  # a NoExecute taint's timeAdded: not read either
    retimed["spec"]["taints"][1]["timeAdded"] = "2026-01-02T00:00:00Z"
    assert fold_digest("Node", retimed) == fold_digest("Node", node)


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["status"]["allocatable"].update({"nvidia.com/gpu": "8"}),
        lambda m: m["status"]["allocatable"].update(cpu="63"),
        lambda m: m["spec"].update(unschedulable=True),
        lambda m: m["spec"]["taints"].pop(),
        lambda m: m["spec"]["taints"][0].update(effect="PreferNoSchedule"),
        lambda m: m["metadata"]["labels"].update(zone="b"),
        lambda m: m["metadata"].update(uid="uid-new"),
    ],
    ids=["gpus", "cpu", "cordon", "untaint", "taint-effect", "label", "uid"],
)
def test_a_change_the_fold_reads_is_journaled(change: Any) -> None:
    node = cluster_node()
    first = translate_upsert("Node", node, None, at=1.0)
    changed = heartbeat(node, rv="101", at="2026-01-01T00:01:10Z")
    change(changed)
    assert fold_digest("Node", changed) != fold_digest("Node", node)
    t = translate_upsert("Node", changed, first.seen, at=2.0)
    (up,) = t.events
    assert isinstance(up, ObjectUpserted) and up.id == "Node//kwok-gpu-0@101"
    assert up.object == journal_object("Node", changed)


def test_a_nodes_delete_and_its_stand_in() -> None:
    node = cluster_node()
    first = translate_upsert("Node", node, None, at=1.0)
    (gone,) = translate_delete("Node", node, first.seen, at=2.0).events
    assert isinstance(gone, ObjectDeleted)
    assert (gone.kind, gone.name, gone.namespace) == ("Node", "kwok-gpu-0", "")
    (up,) = first.events
    assert isinstance(up, ObjectUpserted)
    small = stand_in(up, 2_000_000, 1_000_000)
    assert "its projection (what the fold reads)" in str(small.object)
    read = parse_object(small.object)
    assert isinstance(read, ValidationError) and read.field == "metadata"


# --------------------------------------------------------------------------- the source


async def test_the_sources_journal_a_node_once_through_its_heartbeats() -> None:
    src, writer = sources()
    node = cluster_node()
    await src.observe("Node", "ADDED", node)
    for i in range(1, 6):
        beat = heartbeat(node, rv=str(100 + i), at=f"2026-01-01T00:0{i}:10Z")
        await src.observe("Node", "MODIFIED", beat)
    cordoned = heartbeat(node, rv="200", at="2026-01-01T00:09:10Z")
    cordoned["spec"]["unschedulable"] = True
    await src.observe("Node", "MODIFIED", cordoned)
    events = writer.events()
    assert [type(e) for e in events] == [ObjectUpserted, ObjectUpserted]
    assert [e.object["metadata"]["resourceVersion"] for e in events] == ["100", "200"]
    assert src.memory["Node//kwok-gpu-0"].rv == "200"
