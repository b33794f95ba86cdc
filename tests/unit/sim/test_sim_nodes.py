"""A ``kind: Node`` document of a scenario file is journaled as an ObjectUpserted
(and, with ``kuota.dev/delete-at``, an ObjectDeleted), as DRA objects are, and the
real fold keeps it (#17); the demo's cluster simulates without a Rejected."""

from __future__ import annotations

from pathlib import Path

from builders.manifests import cluster_queue, flavor, job, local_queue

from kuota.api.nodes import Node
from kuota.api.types import Taint
from kuota.core.fold.fold import Fold
from kuota.events.schema import ObjectDeleted, ObjectUpserted
from kuota.sim.engine import Simulator
from kuota.sim.scenario import load_scenario

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo"

NODES = """
apiVersion: v1
kind: Node
metadata:
  name: gpu-0
  labels: {pool: a}
spec:
  taints: [{key: gpu, effect: NoSchedule}]
status:
  allocatable: {cpu: "64", nvidia.com/gpu: "8"}
---
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  annotations: {kuota.dev/submit-at: 5s, kuota.dev/delete-at: 10s}
status:
  allocatable: {nvidia.com/gpu: "4"}
"""


def test_a_scenarios_nodes_are_journaled_and_kept_by_the_fold() -> None:
    fold = Fold()
    queues = [
        flavor("default"),
        cluster_queue("cq", gpus=8, flavor="default"),
        local_queue("lq", namespace="team", cluster_queue="cq"),
        job("train", namespace="team", gpus=2, annotations={"kuota.dev/run-for": "20s"}),
    ]
    manifests = load_scenario(NODES, source="nodes") + queues
    steps = list(Simulator(manifests, fold=fold).steps())
    nodes = [
        (s.event.at, s.event.type, s.event.object["metadata"]["name"])
        for s in steps
        if isinstance(s.event, ObjectUpserted) and s.event.object["kind"] == "Node"
    ]
    assert nodes == [(0, "ObjectUpserted", "gpu-0"), (5, "ObjectUpserted", "gpu-1")]
    deletes = [
        (s.event.at, s.event.kind, s.event.name)
        for s in steps
        if isinstance(s.event, ObjectDeleted)
    ]
    assert (10, "Node", "gpu-1") in deletes
    decisions = [d for s in steps for d in s.decisions]
    assert [d for d in decisions if d.type == "Rejected"] == []
    assert [d.workload for d in decisions if d.type == "Admitted"] == ["team/train"]
    assert fold._nodes == {
        "gpu-0": Node(
            "gpu-0",
            labels=(("pool", "a"),),
            taints=(Taint("gpu", "", "NoSchedule"),),
            allocatable=(("cpu", 64_000), ("nvidia.com/gpu", 8000)),
        )
    }


def test_the_demos_nodes_are_no_longer_rejected() -> None:
    manifests = [
        m for f in sorted(DEMO.glob("*.yaml")) for m in load_scenario(f.read_text(), source=f.name)
    ]
    fold = Fold()
    decisions = Simulator(manifests, fold=fold).run(max_steps=100_000)
    assert [d.object for d in decisions if d.type == "Rejected"] == []
    assert sorted(fold._nodes) == sorted(
        m["metadata"]["name"] for m in manifests if m["kind"] == "Node"
    )
    assert len(fold._nodes) == 4
