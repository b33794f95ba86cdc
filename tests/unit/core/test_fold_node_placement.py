"""Quota AND a placement (#17): a workload whose quota fits waits until each of
its DRA pods can get a node with free devices; the Admitted decision names the
nodes; what kuota placed is held until the pods are gone."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from builders import manifests
from core_builders import (
    Driver,
    admitted,
    claim_template,
    class_mapping,
    configuration,
    cq,
    device_class,
    flavor,
    job,
    last,
    lq,
)

from kuota.events.schema import Decision

GPU = "gpu.nvidia.com"


def gpus(node: str, n: int) -> dict[str, Any]:
    return manifests.resource_slice(
        node, devices=[manifests.device(f"gpu-{i}") for i in range(n)], node=node
    )


def gpu_job(name: str, pods: int = 1, template: str = "one") -> Any:
    return job("team-a", name).queue("lq").claim("gpu", template).parallelism(pods)


def cluster(*extra: Any, quota: int = 8, nodes: bool = True, fl: Any = None) -> Driver:
    d = Driver()
    d.apply(
        configuration(class_mapping("nvidia-gpu", GPU)),
        device_class(GPU),
        fl if fl is not None else flavor("default"),
        cq("cq").flavor("default", {"nvidia-gpu": quota}),
        lq("team-a", "lq", "cq"),
        claim_template("team-a", "one", GPU),
        claim_template("team-a", "two", GPU, count=2),
        *([manifests.node("node-a"), manifests.node("node-b")] if nodes else []),
        *extra,
    )
    return d


def waits_for_a_node(out: list[Decision], needs: str = f"2 devices of class {GPU}") -> str:
    """What a one-pod Job that ``needs`` devices no node can take is told (nothing
    in ``out`` is admitted): the free devices per node."""
    assert admitted(out) == []
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    want = f"no node in flavor default can take pod 1 of 1: needs {needs}; "
    assert verdict.message.startswith(want), verdict.message
    return verdict.message.removeprefix(want)


def test_fragmentation_waits_with_a_reason_naming_the_nodes() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-b", 1))
    out = d.apply(gpu_job("big", template="two"))
    assert waits_for_a_node(out) == "node-a has 1 free, node-b has 1 free"
    assert d.usage("cq") == {}  # quota fits, but none is taken


def test_the_admitted_decision_names_the_nodes_and_a_gang_spreads() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-b", 1))
    out = d.apply(gpu_job("pair", pods=2))
    assert admitted(out) == ["team-a/pair"]
    assert last(out, "Admitted").nodes == {"main": ["node-a", "node-b"]}


def test_placed_devices_are_held_until_the_workload_finishes() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 2))
    out = d.apply(gpu_job("a", template="two"), gpu_job("b", template="two"))
    assert [last(out, "Admitted", k).nodes for k in ("team-a/a", "team-a/b")] == [
        {"main": ["node-a"]},
        {"main": ["node-b"]},
    ]
    out = d.apply(gpu_job("c", template="two"))
    assert last(out, "Inadmissible").reason == "NoNodePlacement"
    assert "node-a has 0 free, node-b has 0 free" in last(out, "Inadmissible").message
    out = d.finish("team-a/a")
    assert admitted(out) == ["team-a/c"]
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}


def test_a_stopped_workload_holds_its_devices_until_its_pods_are_gone() -> None:
    d = cluster(gpus("node-a", 2))
    d.auto_stop = False
    d.apply(gpu_job("a", template="two"))
    d.apply(gpu_job("b", template="two"))
    assert d.state("team-a/b") == "Inadmissible"
    out = d.delete("Job", "a", "team-a")
    stop = next(x for x in out if x.workload == "team-a/a")
    assert admitted(out) == []  # the pods of a may still run on node-a
    out = d.stopped(stop)
    assert admitted(out) == ["team-a/b"]


def test_the_flavor_node_labels_taints_and_cordons_narrow_the_nodes() -> None:
    d = cluster(
        manifests.node("node-c", labels={"pool": "a100"}, taints=[("gpu", "NoSchedule")]),
        manifests.node("node-d", labels={"pool": "a100"}, unschedulable=True),
        manifests.node("node-e", labels={"pool": "a100"}),
        gpus("node-a", 2),
        gpus("node-c", 2),
        gpus("node-d", 2),
        gpus("node-e", 1),
        fl=flavor("default").labels(pool="a100"),
    )
    out = d.apply(gpu_job("a", template="two"))
    assert last(out, "Inadmissible").message.endswith("; node-e has 1 free")
    out = d.apply(gpu_job("b", template="two").toleration("gpu"))
    assert last(out, "Admitted", "team-a/b").nodes == {"main": ["node-c"]}


def test_a_new_node_wakes_a_workload_no_node_could_take() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-c", 2))  # node-c's Node is not known yet
    out = d.apply(gpu_job("big", template="two"))
    assert last(out, "Inadmissible").reason == "NoNodePlacement"
    out = d.apply(manifests.node("node-c"))
    assert last(out, "Admitted").nodes == {"main": ["node-c"]}


def test_a_new_slice_wakes_a_workload_no_node_could_take() -> None:
    d = cluster(gpus("node-a", 1))
    d.apply(gpu_job("big", template="two"))
    out = d.apply(gpus("node-b", 2))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}


def test_mig_slices_and_their_whole_gpu_exclude_each_other() -> None:
    counters = {"gpu-0-cs": {"memory": "80Gi"}}
    whole = manifests.device("gpu-0", attributes={"type": "gpu"}, consumes={"memory": "80Gi"})
    mig = [
        manifests.device(f"gpu-0-mig-{i}", attributes={"type": "mig"}, consumes={"memory": "10Gi"})
        for i in range(7)
    ]
    slice_ = manifests.resource_slice("node-a", devices=[whole, *mig], counters=counters)
    mig_template = manifests.resource_claim_template(
        "mig",
        namespace="team-a",
        device_class=GPU,
        cel=["device.attributes['gpu.nvidia.com'].type == 'mig'"],
    )
    d = cluster(slice_, mig_template, quota=100)
    out = d.apply(gpu_job("slices", pods=3, template="mig"))
    assert admitted(out) == ["team-a/slices"]
    out = d.apply(gpu_job("whole", template="one"))
    # "one" matches the whole GPU and the 4 slices left; a slice is taken
    assert admitted(out) == ["team-a/whole"]
    assert d.state("team-a/whole") == "Admitted"
    full = manifests.resource_claim_template(
        "full",
        namespace="team-a",
        device_class=GPU,
        cel=["device.attributes['gpu.nvidia.com'].type == 'gpu'"],
    )
    d.apply(full)
    out = d.apply(gpu_job("gpu", template="full"))
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message.endswith("node-a has 0 free, 1 other node has none")


def test_without_nodes_admission_is_on_quota_alone() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-b", 1), nodes=False)
    out = d.apply(gpu_job("big", template="two"))
    assert admitted(out) == ["team-a/big"]
    assert last(out, "Admitted").nodes is None


def test_devices_not_local_to_a_node_are_admitted_on_quota_alone() -> None:
    shared = gpus("fabric", 2)
    del shared["spec"]["nodeName"]
    shared["spec"]["allNodes"] = True
    d = cluster(shared)
    out = d.apply(gpu_job("a", template="two"))
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").nodes is None


def test_jobs_without_devices_are_not_placed() -> None:
    d = cluster(gpus("node-a", 1))
    d.apply(cq("cq").flavor("default", {"nvidia-gpu": 8, "cpu": 8}))
    out = d.apply(job("team-a", "cpu").queue("lq").requests(cpu=1))
    assert admitted(out) == ["team-a/cpu"]
    assert last(out, "Admitted").nodes is None


def test_placement_survives_pickling_and_replays_identically() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 1))
    d.apply(gpu_job("a", template="two"))
    for fold in (copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))):
        twin = Driver(fold)
        twin.n, twin.t, twin.events = d.n, d.t, list(d.events)
        assert twin.apply(gpu_job("b", template="two")) == copy.deepcopy(d).apply(
            gpu_job("b", template="two")
        )
    out = d.apply(gpu_job("b", template="two"))
    assert last(out, "Inadmissible").message.endswith("node-a has 0 free, node-b has 1 free")
