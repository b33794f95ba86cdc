"""Workloads of several podsets (PyTorchJob, RayCluster, RayJob, JobSet) in the
fold: admitted whole or not at all, with a reason that says what the gang needs;
preempted, finished and deleted as one; keyed apart from a Job of the same name."""

from __future__ import annotations

from typing import Any

from builders.driver import Driver, kinds
from builders.manifests import (
    cluster_queue,
    configuration,
    flavor,
    job,
    local_queue,
    priority_class,
)
from builders.workloads import job_set, leader_worker_set, pytorch_job, ray_cluster, ray_job

GPU = "nvidia.com/gpu"


def queue(gpus: int = 4, **kw: Any) -> Driver:
    d = Driver()
    d.apply(
        flavor("h100"),
        cluster_queue("cq", gpus=gpus, **kw),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
    )
    return d


def test_a_1_plus_3_pytorch_job_is_admitted_as_one_gang() -> None:
    d = queue(4)
    out = d.apply(pytorch_job("ddp", workers=3))
    assert kinds(out) == [("Admitted", "ns/pytorchjob/ddp")]
    (admitted,) = out
    assert (admitted.kind, admitted.api_version) == ("PyTorchJob", "kubeflow.org/v1")
    assert admitted.flavors == {"master": {GPU: "h100"}, "worker": {GPU: "h100"}}
    assert admitted.usage == {"h100": {GPU: "4"}}
    assert d.usage("cq") == {("h100", GPU): 4000}


def test_a_1_plus_4_pytorch_job_is_never_partly_admitted_and_says_why() -> None:
    d = queue(4)
    out = d.apply(pytorch_job("big", workers=4))
    assert kinds(out) == [("Inadmissible", "ns/pytorchjob/big")]
    (why,) = out
    assert why.reason == "InsufficientQuota"
    assert why.message is not None
    assert why.message.startswith(
        f"PyTorchJob of 5 pods (master 1 + worker 4) needs {GPU} 5 in all, "
        "admitted whole or not at all: "
    )
    assert "maximum capacity 4" in why.message
    assert d.usage("cq") == {}  # nothing of it is charged
    # a Job that fits is admitted past it; the gang still waits whole
    assert kinds(d.apply(job("small", namespace="ns", gpus=1))) == [("Admitted", "ns/small")]
    assert d.state("ns/pytorchjob/big") != "Admitted"


def test_a_job_message_has_no_gang_prefix() -> None:
    d = queue(1)
    (why,) = d.apply(job("big", namespace="ns", gpus=2))
    assert why.message is not None and why.message.startswith("couldn't assign flavors")


def test_a_pytorch_job_and_a_job_of_the_same_name_are_two_workloads() -> None:
    d = queue(8)
    out = d.apply(pytorch_job("same", workers=3), job("same", namespace="ns", gpus=2))
    assert kinds(out) == [("Admitted", "ns/pytorchjob/same"), ("Admitted", "ns/same")]
    assert [x.kind for x in out] == ["PyTorchJob", "Job"]
    out = d.finish("ns/pytorchjob/same")
    assert kinds(out) == [("Finished", "ns/pytorchjob/same")]
    assert out[0].message == "the PyTorchJob succeeded"
    assert d.state("ns/same") == "Admitted"
    assert d.usage("cq") == {("h100", GPU): 2000}
    out = d.delete("Job", "same", "ns")
    assert kinds(out)[0] == ("Finished", "ns/same")


def test_deleting_a_waiting_gang_frees_the_queue_for_the_next() -> None:
    d = queue(4)
    d.apply(pytorch_job("a", workers=3))
    d.apply(ray_cluster("b", workers={"w": 2}))  # head + 2 = 3 GPUs: waits
    out = d.delete("PyTorchJob", "a", "ns")
    assert ("Finished", "ns/pytorchjob/a") in kinds(out)
    assert ("Admitted", "ns/raycluster/b") in kinds(out)
    assert d.usage("cq") == {("h100", GPU): 3000}


def test_ray_cluster_ray_job_and_job_set_gangs() -> None:
    d = queue(16, quotas={"cpu": 4, "memory": "4Gi"})  # the RayJob's submitter asks for both
    out = d.apply(
        ray_cluster("rc", workers={"w": 2}),
        ray_job("rj", workers={"w": 1}),
        job_set("js", jobs={"driver": (1, 1), "workers": (2, 2)}),
    )
    assert kinds(out) == [
        ("Admitted", "ns/raycluster/rc"),
        ("Admitted", "ns/rayjob/rj"),
        ("Admitted", "ns/jobset/js"),
    ]
    assert out[0].flavors == {"head": {GPU: "h100"}, "w": {GPU: "h100"}}
    assert set(out[1].flavors or {}) == {"head", "w", "submitter"}
    assert out[2].usage == {"h100": {GPU: "5"}}
    assert d.usage("cq")[("h100", GPU)] == (3 + 2 + 5) * 1000
    assert d.usage("cq")[("h100", "cpu")] == 500  # KubeRay's default submitter


def test_a_ray_job_whose_submitter_asks_for_what_the_queue_lacks_waits_whole() -> None:
    d = queue(16)
    (why,) = d.apply(ray_job("rj", workers={"w": 1}))
    assert why.type == "Inadmissible" and "podset submitter" in (why.message or "")
    assert d.usage("cq") == {}


def test_bad_input_is_rejected_with_a_reason_and_the_others_go_on() -> None:
    d = queue(8)
    out = d.apply(
        pytorch_job("nomaster", master=None),
        ray_cluster("negative", workers={"w": -2}),
        pytorch_job("good", workers=1),
    )
    assert kinds(out) == [
        ("Rejected", "PyTorchJob ns/nomaster"),
        ("Rejected", "RayCluster ns/negative"),
        ("Admitted", "ns/pytorchjob/good"),
    ]
    assert "needs a Master replica spec" in (out[0].message or "")
    assert "asks for -2 replicas" in (out[1].message or "")
    assert (out[0].kind, out[0].api_version) == ("PyTorchJob", "kubeflow.org/v1")


def test_a_preempted_gang_is_stopped_whole_and_its_quota_returns() -> None:
    d = queue(4, within="LowerPriority")
    d.apply(priority_class("low", value=0), priority_class("high", value=100))
    low = pytorch_job("low", workers=3)
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    d.apply(low)
    urgent = job("urgent", namespace="ns", gpus=2, priority="high")
    out = d.apply(urgent)
    assert ("Preempted", "ns/pytorchjob/low") in kinds(out)
    assert ("Admitted", "ns/urgent") in kinds(out)
    assert d.usage("cq") == {("h100", GPU): 2000}  # the gang's 4 GPUs went back whole


def test_pods_ready_of_a_gang_by_its_key_and_the_timeout_evicts_it() -> None:
    d = queue(4)
    d.apply(configuration(waitForPodsReady={"timeout": "5m"}))
    d.apply(pytorch_job("ready", workers=1), at=0)
    d.apply(pytorch_job("stuck", workers=1), at=0)
    d.ready("ns/pytorchjob/ready", at=10)
    out = d.tick(300)
    assert ("Evicted", "ns/pytorchjob/stuck") in kinds(out)
    assert all(w != "ns/pytorchjob/ready" for _, w in kinds(out))
    evicted = next(x for x in out if x.type == "Evicted")
    assert evicted.reason == "PodsReadyTimeout" and evicted.kind == "PyTorchJob"


def test_each_leader_worker_set_group_is_admitted_on_its_own() -> None:
    d = queue(6)
    out = d.apply(leader_worker_set("lws", replicas=3, size=3))
    assert kinds(out) == [
        ("Admitted", "ns/leaderworkerset/lws/0"),
        ("Admitted", "ns/leaderworkerset/lws/1"),
        ("Inadmissible", "ns/leaderworkerset/lws/2"),
    ]
    assert out[0].flavors == {"leader": {GPU: "h100"}, "worker": {GPU: "h100"}}
    assert out[0].kind == "LeaderWorkerSet"
    assert (out[2].message or "").startswith("LeaderWorkerSet of 3 pods (leader 1 + worker 2)")
    # scaled down to one group: groups 1 and 2 end, group 0 keeps its admission
    out = d.apply(leader_worker_set("lws", replicas=1, size=3))
    assert ("Finished", "ns/leaderworkerset/lws/1") in kinds(out)
    assert ("Finished", "ns/leaderworkerset/lws/2") in kinds(out)
    assert d.state("ns/leaderworkerset/lws/0") == "Admitted"
    out = d.delete("LeaderWorkerSet", "lws", "ns")
    assert kinds(out)[0] == ("Finished", "ns/leaderworkerset/lws/0")
    assert d.usage("cq") == {}
