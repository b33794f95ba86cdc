"""What ingest journals of a Node (#17): what the fold reads of it (identity and
labels, taints, unschedulable, allocatable), and only when that changes: kubelet's
and kwok's heartbeats, conditions and resourceVersion bumps journal nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders.manifests import set_path
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
    whole = set_path({"apiVersion": "v1", "kind": "Node", **cluster_node()}, field, value)
    read = parse_object(journal_object("Node", whole))
    assert isinstance(read, ValidationError) and read == parse_object(whole)


# --------------------------------------------------------------------------- the digest rule


def unjournaled_writes(kind: str, first: dict[str, Any], writes: list[dict[str, Any]]) -> str:
    """``first`` is journaled, then each of ``writes`` left out by the digest rule,
    its resourceVersion remembered; the id of the one upsert."""
    t = translate_upsert(kind, first, None, at=1.0)
    (up,) = t.events
    assert isinstance(up, ObjectUpserted)
    for i, write in enumerate(writes, 1):
        assert fold_digest(kind, write) == fold_digest(kind, first)
        t = translate_upsert(kind, write, t.seen, at=1.0 + i)
        assert t.skipped and t.events == ()
        assert t.seen is not None and t.seen.rv == write["metadata"]["resourceVersion"]
    return up.id


def journaled_change(kind: str, first: dict[str, Any], changed: dict[str, Any]) -> str:
    """``changed`` after ``first`` is journaled, as projected; the upsert's id."""
    before = translate_upsert(kind, first, None, at=1.0)
    assert fold_digest(kind, changed) != fold_digest(kind, first)
    (up,) = translate_upsert(kind, changed, before.seen, at=2.0).events
    assert isinstance(up, ObjectUpserted) and up.object == journal_object(kind, changed)
    return up.id


def test_heartbeats_and_conditions_journal_nothing() -> None:
    node = cluster_node()
    beats = [heartbeat(node, rv=str(100 + i), at=f"2026-01-01T00:0{i}:10Z") for i in range(1, 4)]
    assert unjournaled_writes("Node", node, beats) == "Node//kwok-gpu-0@100"
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
    changed = heartbeat(node, rv="101", at="2026-01-01T00:01:10Z")
    change(changed)
    assert journaled_change("Node", node, changed) == "Node//kwok-gpu-0@101"


def deleted_and_stood_in(kind: str, obj: dict[str, Any]) -> tuple[ObjectDeleted, ObjectUpserted]:
    """``obj``'s journaled delete, and the stand-in of its first upsert were that
    too large for the journal (a projected kind's: it says so)."""
    first = translate_upsert(kind, obj, None, at=1.0)
    (gone,) = translate_delete(kind, obj, first.seen, at=2.0).events
    assert isinstance(gone, ObjectDeleted)
    (up,) = first.events
    assert isinstance(up, ObjectUpserted)
    small = stand_in(up, 2_000_000, 1_000_000)
    assert "its projection (what the fold reads)" in str(small.object)
    return gone, small


def test_a_nodes_delete_and_its_stand_in() -> None:
    gone, small = deleted_and_stood_in("Node", cluster_node())
    assert (gone.kind, gone.name, gone.namespace) == ("Node", "kwok-gpu-0", "")
    read = parse_object(small.object)
    assert isinstance(read, ValidationError) and read.field == "metadata"


# --------------------------------------------------------------------------- the source


async def journaled_versions(
    kind: str, key: str, first: dict[str, Any], changes: list[dict[str, Any]]
) -> list[str]:
    """The resourceVersions the sources journal of ``first`` (ADDED) and then
    ``changes`` (MODIFIED each), all upserts; they remember the last one's."""
    src, writer = sources()
    await src.observe(kind, "ADDED", first)
    for change in changes:
        await src.observe(kind, "MODIFIED", change)
    events = writer.events()
    assert all(isinstance(e, ObjectUpserted) for e in events)
    assert src.memory[key].rv == changes[-1]["metadata"]["resourceVersion"]
    return [e.object["metadata"]["resourceVersion"] for e in events]


async def test_the_sources_journal_a_node_once_through_its_heartbeats() -> None:
    node = cluster_node()
    beats = [heartbeat(node, rv=str(100 + i), at=f"2026-01-01T00:0{i}:10Z") for i in range(1, 6)]
    cordoned = heartbeat(node, rv="200", at="2026-01-01T00:09:10Z")
    cordoned["spec"]["unschedulable"] = True
    journaled = await journaled_versions("Node", "Node//kwok-gpu-0", node, [*beats, cordoned])
    assert journaled == ["100", "200"]
