"""Rejected queue objects: what a waiting workload says, and ``Fold.rejections``."""

from __future__ import annotations

from builders.driver import Driver
from builders.manifests import cluster_queue, flavor, job, local_queue


def bad_cluster_queue(name: str) -> dict[str, object]:
    cq = cluster_queue(name, gpus=4)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    return cq


def last_message(d: Driver, workload: str) -> str | None:
    return [x.message for x in d.decisions if x.workload == workload][-1]


def test_a_workload_of_a_rejected_cluster_queue_says_it_was_rejected() -> None:
    d = Driver()
    d.apply(flavor("h100"), bad_cluster_queue("team-a-cq"))
    d.apply(local_queue("lq", namespace="ns", cluster_queue="team-a-cq"))
    d.apply(job("j", namespace="ns", gpus=1))
    message = last_message(d, "ns/j")
    assert message == (
        "ClusterQueue team-a-cq was rejected: spec.resourceGroups[0].flavors[0]."
        "resources[0].nominalQuota: quantity 'lots' is not a valid Kubernetes quantity"
    )
    assert [r[:2] for r in d.fold.rejections()] == [("ClusterQueue team-a-cq", "InvalidObject")]


def test_a_rejection_after_the_workload_updates_its_message() -> None:
    d = Driver()
    d.apply(flavor("h100"), local_queue("lq", namespace="ns", cluster_queue="team-a-cq"))
    d.apply(job("j", namespace="ns", gpus=1))
    assert last_message(d, "ns/j") == "ClusterQueue team-a-cq doesn't exist"
    d.apply(bad_cluster_queue("team-a-cq"))
    assert (last_message(d, "ns/j") or "").startswith("ClusterQueue team-a-cq was rejected: ")
    # a valid version takes it: admitted, and no longer listed
    out = d.apply(cluster_queue("team-a-cq", gpus=4))
    assert [x.type for x in out if x.workload == "ns/j"] == ["Admitted"]
    assert d.fold.rejections() == []


def test_a_rejected_local_queue_names_its_namespace() -> None:
    d = Driver()
    d.apply(flavor("h100"), cluster_queue("cq", gpus=4), job("j", namespace="ns", gpus=1))
    assert last_message(d, "ns/j") == "LocalQueue lq doesn't exist in namespace ns"
    bad = local_queue("lq", namespace="ns", cluster_queue="cq")
    bad["spec"]["clusterQueue"] = 5
    d.apply(bad)
    assert last_message(d, "ns/j") == (
        "LocalQueue lq in namespace ns was rejected: spec.clusterQueue: must be a string, "
        "not a number"
    )
    d.delete("LocalQueue", "lq", "ns")
    assert d.fold.rejections() == []


def test_a_rejected_update_keeps_the_version_in_force() -> None:
    d = Driver()
    d.apply(flavor("h100"), cluster_queue("cq", gpus=4))
    d.apply(local_queue("lq", namespace="ns", cluster_queue="cq"))
    d.apply(bad_cluster_queue("cq"))
    out = d.apply(job("j", namespace="ns", gpus=1))
    assert [x.type for x in out] == ["Admitted"]  # the previous version admits it
    assert [r[0] for r in d.fold.rejections()] == ["ClusterQueue cq"]


def test_a_cluster_queue_of_a_rejected_flavor_says_it_was_rejected() -> None:
    d = Driver()
    d.apply(cluster_queue("cq", gpus=4), local_queue("lq", namespace="ns", cluster_queue="cq"))
    d.apply(job("j", namespace="ns", gpus=1))
    assert last_message(d, "ns/j") == "ClusterQueue cq is inactive: ResourceFlavor h100 not found"
    d.apply(flavor("h100", spec={"nodeLabels": [1, 2]}))
    assert last_message(d, "ns/j") == (
        "ClusterQueue cq is inactive: ResourceFlavor h100 was rejected: "
        "spec.nodeLabels: must be a mapping, not a list"
    )
    out = d.apply(flavor("h100"))
    assert [x.type for x in out] == ["Admitted"] and d.fold.rejections() == []
