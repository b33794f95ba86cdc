"""What is really allocated (#17): the devices of every allocated ResourceClaim,
whoever owns it, are taken on their nodes; a claim's devices freed wake the heads
no node could take; and kuota's hold on an admitted workload's devices (a
prediction) ends when its pods are all ready, its claims standing for it then."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from builders import manifests
from core_builders import Driver, admitted, last
from test_fold_node_placement import GPU, cluster, gpu_job, gpus, waits_for_a_node

ONE_GPU = f"1 device of class {GPU}"  # what a Job of the template "one" needs


def claim(
    name: str, *devices: str, node: str = "node-a", namespace: str = "other", **kw: Any
) -> dict[str, Any]:
    """A claim of ``namespace`` (no workload kuota knows) allocated ``devices`` of
    ``node``'s pool (none: not allocated)."""
    return manifests.resource_claim(
        name,
        namespace=namespace,
        device_class=GPU,
        count=max(len(devices), 1),
        allocated=[(node, d) for d in devices],
        node=node if devices else None,
        **kw,
    )


def gpu_slice(node: str, whole: bool, *migs: str) -> dict[str, Any]:
    """``node``'s GPU of 20Gi: the whole GPU (``whole``) and MIG slices of 10Gi
    (``migs``), each spending the GPU's memory counter."""
    devices = [
        manifests.device("gpu-0", attributes={"type": "gpu"}, consumes={"memory": "20Gi"})
    ] * whole + [
        manifests.device(m, attributes={"type": "mig"}, consumes={"memory": "10Gi"}) for m in migs
    ]
    return manifests.resource_slice(
        node, devices=devices, counters={"gpu-0-cs": {"memory": "20Gi"}}
    )


def by_type(name: str, kind: str) -> dict[str, Any]:
    return manifests.resource_claim_template(
        name,
        namespace="team-a",
        device_class=GPU,
        cel=[f"device.attributes['gpu.nvidia.com'].type == '{kind}'"],
    )


# --------------------------------------------------------------------------- claims not kuota's


def test_a_claim_nobody_kuota_knows_takes_its_devices() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 2))
    assert d.apply(claim("theirs", "gpu-0")) == [], "a claim decides nothing by itself"
    out = d.apply(gpu_job("big", template="two"))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}


def test_without_room_it_waits_naming_the_node_with_fewer_free() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 1), claim("theirs", "gpu-0"))
    out = d.apply(gpu_job("big", template="two"))
    assert waits_for_a_node(out) == "node-a has 1 free, node-b has 1 free"
    assert d.usage("cq") == {}


def test_deleting_the_claim_wakes_the_waiting_job_and_admits_it() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 1), claim("theirs", "gpu-0"))
    d.apply(gpu_job("big", template="two"))
    assert d.state("team-a/big") == "Inadmissible"
    out = d.delete("ResourceClaim", "theirs", "other")
    assert admitted(out) == ["team-a/big"]
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}


def test_a_deallocated_claim_frees_its_devices_too() -> None:
    d = cluster(gpus("node-a", 2), claim("theirs", "gpu-0", "gpu-1"))
    d.apply(gpu_job("one", template="one"))
    assert d.state("team-a/one") == "Inadmissible"
    out = d.apply(claim("theirs", "gpu-1"))  # one device given back
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}
    out = d.apply(gpu_job("two", template="one"))
    assert waits_for_a_node(out, ONE_GPU) == "node-a has 0 free, 1 other node has none"
    out = d.apply(claim("theirs"))  # no allocation any more
    assert admitted(out) == ["team-a/two"]


def test_a_device_shared_by_two_claims_counts_once_and_stays_taken_while_one_holds_it() -> None:
    d = cluster(gpus("node-a", 2), claim("one", "gpu-0"), claim("two", "gpu-0"))
    out = d.apply(gpu_job("a", template="one"))
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}  # gpu-1
    out = d.apply(gpu_job("b", template="one"))
    assert waits_for_a_node(out, ONE_GPU) == "node-a has 0 free, 1 other node has none"
    assert admitted(d.delete("ResourceClaim", "one", "other")) == []
    assert admitted(d.delete("ResourceClaim", "two", "other")) == ["team-a/b"]


def test_a_claimed_slice_spends_its_gpus_counters() -> None:
    d = cluster(gpu_slice("node-a", True, "mig-0", "mig-1"), by_type("whole", "gpu"))
    d.apply(claim("theirs", "mig-0"))
    out = d.apply(gpu_job("full", template="whole"))
    assert (
        waits_for_a_node(out, f"{ONE_GPU} matching 1 selector")
        == "node-a has 0 free, 1 other node has none"
    )
    assert admitted(d.delete("ResourceClaim", "theirs", "other")) == ["team-a/full"]


def test_claims_charge_nothing_again_and_leave_the_inventory_alone() -> None:
    d = cluster(gpus("node-a", 2))
    generation = d.fold._inventory.generation
    for i in range(3):
        assert d.apply(claim(f"c{i}", f"gpu-{i % 2}")) == []
    assert d.delete("ResourceClaim", "c0", "other") == []
    assert d.fold._inventory.generation == generation
    assert d.fold._claims == {
        ("other", "c1"): ((GPU, "node-a", "gpu-1"),),
        ("other", "c2"): ((GPU, "node-a", "gpu-0"),),
    }
    assert d.fold._claimed == {(GPU, "node-a", "gpu-0"): 1, (GPU, "node-a", "gpu-1"): 1}
    d.apply(claim("c1"), claim("c2"))
    assert d.fold._claims == {} and d.fold._claimed == {}


def test_an_invalid_claim_is_rejected_and_its_previous_version_stays_in_force() -> None:
    d = cluster(gpus("node-a", 1), claim("theirs", "gpu-0"))
    bad = claim("theirs", "gpu-0")
    bad["status"]["allocation"]["devices"]["results"][0]["pool"] = 7
    out = d.apply(bad)
    assert [(x.type, x.object, x.reason) for x in out] == [
        ("Rejected", "ResourceClaim other/theirs", "InvalidObject")
    ]
    assert "status.allocation.devices.results[0].pool" in (out[0].message or "")
    out = d.apply(gpu_job("a", template="one"))
    assert waits_for_a_node(out, ONE_GPU) == "node-a has 0 free, 1 other node has none", (
        "gpu-0 still taken"
    )
    assert admitted(d.apply(claim("theirs"))) == ["team-a/a"]
    assert d.fold.rejections() == []


# --------------------------------------------------------------------------- kuota's own claims


def scheduled_elsewhere() -> Driver:
    """Job a admitted on node-a (4 GPUs) holding gpu-0 and gpu-1; the scheduler
    gave its pod's claim gpu-2 and gpu-3 instead."""
    d = cluster(gpus("node-a", 4))
    out = d.apply(gpu_job("a", template="two"))
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}
    assert d.fold._device_holds == {
        "team-a/a": ((GPU, "node-a", "gpu-0"), (GPU, "node-a", "gpu-1"))
    }
    d.apply(claim("a-0-gpu", "gpu-2", "gpu-3", namespace="team-a", reserved_for="a-0"))
    return d


def test_before_its_pods_are_ready_the_hold_and_the_claim_both_count() -> None:
    """Conservative: between the pods' scheduling and PodsReady kuota's own workload
    is counted twice, so nothing is admitted on devices that may be taken."""
    d = scheduled_elsewhere()
    out = d.apply(gpu_job("b", template="two"))
    assert waits_for_a_node(out) == "node-a has 0 free, 1 other node has none"
    assert d.ready("team-a/a", ready=False) == [], "not ready: the hold stays"
    assert "team-a/a" in d.fold._device_holds


def test_pods_ready_ends_the_hold_and_only_the_claims_devices_count() -> None:
    d = scheduled_elsewhere()
    d.apply(gpu_job("b", template="two"))
    out = d.ready("team-a/a")
    assert admitted(out) == ["team-a/b"], "gpu-0 and gpu-1, which a's hold kept, are free"
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}
    assert d.fold._device_holds == {
        "team-a/b": ((GPU, "node-a", "gpu-0"), (GPU, "node-a", "gpu-1"))
    }
    assert list(d.fold._devices_held) == [(GPU, "node-a", "gpu-0"), (GPU, "node-a", "gpu-1")]


def test_the_hold_never_comes_back_for_that_admission() -> None:
    d = scheduled_elsewhere()
    d.ready("team-a/a")
    d.ready("team-a/a", ready=False)
    d.ready("team-a/a")
    assert "team-a/a" not in d.fold._device_holds
    out = d.apply(gpu_job("b", template="two"))
    assert admitted(out) == ["team-a/b"]
    out = d.apply(gpu_job("c", template="one"))  # a's claim and b's hold: all 4 taken
    assert waits_for_a_node(out, ONE_GPU) == "node-a has 0 free, 1 other node has none"
    out = d.finish("team-a/a")  # a's pods are done, its claim not deleted yet
    assert admitted(out) == []
    out = d.delete("ResourceClaim", "a-0-gpu", "team-a")
    assert admitted(out) == ["team-a/c"]


def test_a_device_both_held_and_claimed_counts_once() -> None:
    """The scheduler agreed with the placement: the MIG slice kuota holds is the one
    its claim took, and its counters are spent once, not twice."""
    d = cluster(gpu_slice("node-a", False, "mig-0", "mig-1"), by_type("mig", "mig"))
    out = d.apply(gpu_job("a", template="mig"))
    assert d.fold._device_holds == {"team-a/a": ((GPU, "node-a", "mig-0"),)}
    d.apply(claim("a-0-gpu", "mig-0", namespace="team-a"))
    out = d.apply(gpu_job("b", template="mig"))
    assert admitted(out) == ["team-a/b"]
    assert d.fold._device_holds["team-a/b"] == ((GPU, "node-a", "mig-1"),)


def test_without_a_claim_allocated_since_the_hold_it_lasts_until_the_pods_are_gone() -> None:
    """Nothing in the journal stands for the workload's devices: a journal from
    before ingest watched claims, a simulator file (its pods get no claims), or
    claims of other namespaces, or allocated before the hold began."""
    d = cluster(gpus("node-a", 2), claim("before", "gpu-0", node="node-b", namespace="team-a"))
    d.apply(gpu_job("a", template="two"))
    d.apply(claim("elsewhere", "gpu-1", node="node-b"))  # another namespace's
    d.apply(gpu_job("b", template="two"))
    assert d.ready("team-a/a") == []
    assert "team-a/a" in d.fold._device_holds
    assert admitted(d.finish("team-a/a")) == ["team-a/b"]
    d.apply(claim("b-0-gpu", "gpu-0", "gpu-1", namespace="team-a"))  # b's own, after its hold
    assert admitted(d.ready("team-a/b")) == []
    assert d.fold._device_holds == {}


def test_pods_ready_of_a_workload_without_a_hold_changes_nothing() -> None:
    d = cluster(gpus("node-a", 1), nodes=False)  # admitted on quota alone: no hold
    d.apply(gpu_job("a", template="one"))
    assert d.fold._device_holds == {}
    assert d.ready("team-a/a") == []
    assert d.ready("team-a/nobody") == []


# --------------------------------------------------------------------------- replay


def test_claims_survive_pickling_and_continue_identically() -> None:
    d = scheduled_elsewhere()
    d.apply(claim("theirs", "gpu-0", node="node-b"), gpus("node-b", 2))
    d.apply(gpu_job("b", template="two"))
    for fold in (copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))):
        twin = Driver(fold)
        twin.n, twin.t, twin.events = d.n, d.t, list(d.events)
        assert twin.fold._claims == d.fold._claims and twin.fold._claimed == d.fold._claimed
        steps = [
            lambda x: x.ready("team-a/a"),
            lambda x: x.apply(gpu_job("c", template="two")),
            lambda x: x.delete("ResourceClaim", "theirs", "other"),
        ]
        original = copy.deepcopy(d)
        for step in steps:
            assert step(twin) == step(original)
