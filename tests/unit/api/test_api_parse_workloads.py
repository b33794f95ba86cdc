"""The distributed-training kinds -> one WorkloadSpec each, podsets as Kueue v0.19.2
names and counts them; bad input gets a reason naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from builders.manifests import job
from builders.workloads import (
    GPU,
    job_set,
    leader_worker_set,
    pod,
    pod_template,
    pytorch_job,
    ray_cluster,
    ray_job,
)

from kuota.api.parse import parse_object
from kuota.api.parse_workloads import pod_workload_key
from kuota.api.types import ObjectRef, PodMember, ValidationError, WorkloadGroup, WorkloadSpec

ONE_GPU = ((GPU, 1000),)


def workload(manifest: dict[str, Any]) -> WorkloadSpec:
    result = parse_object(manifest, at=5.0)
    assert isinstance(result, WorkloadSpec), result
    return result


def shape(w: WorkloadSpec) -> list[tuple[str, int]]:
    return [(p.name, p.count) for p in w.podsets]


def refused(manifest: dict[str, Any]) -> ValidationError:
    result = parse_object(manifest, at=5.0)
    assert isinstance(result, ValidationError), result
    return result


# --------------------------------------------------------------------------- PyTorchJob


def test_a_pytorch_job_is_a_master_and_its_workers() -> None:
    w = workload(pytorch_job("ddp", master=1, workers=3))
    assert shape(w) == [("master", 1), ("worker", 3)]
    assert all(p.requests == ONE_GPU for p in w.podsets)
    assert (w.owner_kind, w.key, w.queue_name) == ("PyTorchJob", "ns/pytorchjob/ddp", "lq")
    assert w.suspended is None and w.creation_seconds == 5.0


def test_pytorch_job_suspend_is_its_run_policys() -> None:
    assert workload(pytorch_job("ddp", suspend=True)).suspended is True
    assert workload(pytorch_job("ddp", suspend=False)).suspended is False


def test_a_master_only_pytorch_job_and_default_replicas() -> None:
    m = pytorch_job("solo", workers=None)
    del m["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    assert shape(workload(m)) == [("master", 1)]


def test_a_pytorch_job_without_a_master_is_refused_with_a_reason() -> None:
    error = refused(pytorch_job("nomaster", master=None))
    assert error.ref == ObjectRef("PyTorchJob", "nomaster", "ns")
    assert error.field == "spec.pytorchReplicaSpecs"
    assert "needs a Master" in error.message


def test_an_unknown_replica_type_is_refused() -> None:
    m = pytorch_job("x")
    m["spec"]["pytorchReplicaSpecs"]["Chief"] = {"template": pod_template()}
    error = refused(m)
    assert error.field == "spec.pytorchReplicaSpecs[Chief]"
    assert "unknown replica type" in error.message


def test_a_bad_pod_spec_is_named_by_its_path_in_the_kind() -> None:
    m = pytorch_job("x")
    m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = []
    error = refused(m)
    assert error.field == "spec.pytorchReplicaSpecs[Worker].template.spec.containers"


def test_without_the_queue_label_it_is_not_kuotas() -> None:
    assert parse_object(pytorch_job("x", queue=None), at=0.0) is None


# --------------------------------------------------------------------------- Ray


def test_a_ray_cluster_is_its_head_and_one_podset_per_worker_group() -> None:
    w = workload(ray_cluster("rc", workers={"small": 2, "big": 1}))
    assert shape(w) == [("head", 1), ("small", 2), ("big", 1)]
    assert w.key == "ns/raycluster/rc" and w.owner_kind == "RayCluster"


def test_ray_num_of_hosts_multiplies_the_replicas() -> None:
    m = ray_cluster("rc", workers={"tpu": 2})
    m["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 4
    assert shape(workload(m)) == [("head", 1), ("tpu", 8)]


def test_a_ray_worker_group_with_negative_replicas_is_refused() -> None:
    error = refused(ray_cluster("rc", workers={"w": -1}))
    assert error.field == "spec.workerGroupSpecs[0].replicas"
    assert "asks for -1 replicas" in error.message


def test_an_autoscaling_ray_cluster_is_refused_with_a_reason() -> None:
    m = ray_cluster("rc")
    m["spec"]["enableInTreeAutoscaling"] = True
    assert "autoscaling" in refused(m).message


def test_a_ray_job_adds_the_submitter_in_k8s_job_mode() -> None:
    w = workload(ray_job("rj", workers={"w": 2}))
    assert shape(w) == [("head", 1), ("w", 2), ("submitter", 1)]
    submitter = w.podsets[-1]
    assert dict(submitter.requests) == {"cpu": 500, "memory": 200 * 2**20 * 1000}
    assert w.key == "ns/rayjob/rj"


def test_a_ray_job_in_http_mode_has_no_submitter_and_sidecar_mode_grows_the_head() -> None:
    assert shape(workload(ray_job("rj", mode="HTTPMode"))) == [("head", 1), ("workers", 2)]
    sidecar = workload(ray_job("rj", mode="SidecarMode"))
    assert shape(sidecar) == [("head", 1), ("workers", 2)]
    assert dict(sidecar.podsets[0].requests) == {
        GPU: 1000,
        "cpu": 500,
        "memory": 200 * 2**20 * 1000,
    }


def test_a_ray_job_on_a_selected_cluster_is_not_a_workload_of_its_own() -> None:
    m = ray_job("rj")
    m["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert parse_object(m, at=0.0) is None


def test_ray_suspend() -> None:
    assert workload(ray_cluster("rc", suspend=True)).suspended is True
    assert workload(ray_job("rj", suspend=False)).suspended is False


# --------------------------------------------------------------------------- JobSet


def test_a_job_set_has_one_podset_per_replicated_job_sized_replicas_times_parallelism() -> None:
    w = workload(job_set("js", jobs={"driver": (1, 1), "workers": (2, 4)}))
    assert shape(w) == [("driver", 1), ("workers", 8)]
    assert w.key == "ns/jobset/js"


def test_job_set_completions_cap_parallelism() -> None:
    m = job_set("js", jobs={"w": (3, 4)})
    m["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = 2
    assert shape(workload(m)) == [("w", 6)]


def test_a_job_set_without_replicated_jobs_and_duplicate_names_are_refused() -> None:
    m = job_set("js")
    m["spec"]["replicatedJobs"] = []
    assert refused(m).field == "spec.replicatedJobs"
    dup = job_set("js", jobs={"w": (1, 1)})
    dup["spec"]["replicatedJobs"].append(dup["spec"]["replicatedJobs"][0])
    assert "two podsets are named 'w'" in refused(dup).message


# --------------------------------------------------------------------------- shared


@pytest.mark.parametrize(
    "manifest",
    [pytorch_job("same"), ray_cluster("same"), ray_job("same"), job_set("same")],
    ids=lambda m: m["kind"],
)
def test_kinds_of_the_same_name_are_distinct_workloads(manifest: dict[str, Any]) -> None:
    w = workload(manifest)
    assert w.key != "ns/same" and w.key.endswith("/same")
    assert w.key.split("/")[1] == manifest["kind"].lower()


@pytest.mark.parametrize(
    "manifest",
    [pytorch_job("p"), ray_cluster("r"), ray_job("j"), job_set("s")],
    ids=lambda m: m["kind"],
)
def test_priority_and_queue_come_from_the_job_labels(manifest: dict[str, Any]) -> None:
    manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    w = workload(manifest)
    assert (w.queue_name, w.priority_class) == ("lq", "high")


def test_a_wrong_api_version_is_refused_naming_the_right_one() -> None:
    m = pytorch_job("x")
    m["apiVersion"] = "kubeflow.org/v2"
    error = refused(m)
    assert error.field == "apiVersion" and "kubeflow.org/v1" in error.message


# --------------------------------------------------------------------------- LeaderWorkerSet


def test_each_leader_worker_set_group_is_a_workload_of_leader_and_workers() -> None:
    result = parse_object(leader_worker_set("lws", replicas=2, size=4), at=5.0)
    assert isinstance(result, WorkloadGroup)
    assert (result.kind, result.namespace, result.name) == ("LeaderWorkerSet", "ns", "lws")
    assert [w.key for w in result.specs] == ["ns/leaderworkerset/lws/0", "ns/leaderworkerset/lws/1"]
    assert all(shape(w) == [("leader", 1), ("worker", 3)] for w in result.specs)
    assert result.specs[0].suspended is None  # its pods are gated, not the object suspended
    assert len({w.uid for w in result.specs}) == 2


def test_a_leader_worker_set_without_a_leader_template_is_one_podset_main() -> None:
    result = parse_object(leader_worker_set("lws", replicas=None, size=None, leader=False), at=0)
    assert isinstance(result, WorkloadGroup)
    (only,) = result.specs
    assert shape(only) == [("main", 1)]


def test_a_leader_worker_set_without_a_worker_template_is_refused() -> None:
    m = leader_worker_set("lws")
    del m["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert refused(m).field == "spec.leaderWorkerTemplate.workerTemplate"


# --------------------------------------------------------------------------- Pods


def owned(
    manifest: dict[str, Any], api_version: str, kind: str, *, controller: bool = True
) -> dict[str, Any]:
    ref = {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "o1"}
    manifest["metadata"]["ownerReferences"] = [{**ref, "controller": controller}]
    return manifest


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("batch/v1", "Job"),  # a Job's pod, a JobSet's (owned by its Jobs), a RayJob submitter
        ("kubeflow.org/v1", "PyTorchJob"),
        ("ray.io/v1", "RayCluster"),
        ("kubeflow.org/v2beta1", "MPIJob"),  # a kind Kueue admits and kuota does not read
    ],
)
def test_the_pod_of_a_workload_admitted_itself_is_no_pod_group_member(
    api_version: str, kind: str
) -> None:
    """The queue label copied into a template does not make its pods workloads: their
    owner is admitted (Kueue's pod webhook and reconciler skip them too)."""
    for manifest in (pod("w-0"), pod("w-0", group="g", total=2)):
        assert parse_object(owned(manifest, api_version, kind), at=5.0) is None
        assert pod_workload_key(manifest) is None


def test_a_pod_of_a_replica_set_or_not_the_controller_is_still_a_member() -> None:
    """Kueue manages a Deployment's or a StatefulSet's labelled pods AS pods; an owner
    that is not the controller does not count."""
    by_rs = owned(pod("rs-0", group="g", total=2), "apps/v1", "ReplicaSet")
    assert isinstance(parse_object(by_rs, at=5.0), PodMember)
    assert pod_workload_key(by_rs) == "ns/podgroup/g"
    not_controller = owned(pod("solo"), "batch/v1", "Job", controller=False)
    member = parse_object(not_controller, at=5.0)
    assert isinstance(member, PodMember) and not member.pod_group
    assert pod_workload_key(not_controller) == "ns/pod/solo"


def test_a_pods_workload_key() -> None:
    assert pod_workload_key(pod("g-0", group="g", total=3)) == "ns/podgroup/g"
    assert pod_workload_key(pod("solo", namespace="team")) == "team/pod/solo"
    assert pod_workload_key(pod("x", queue=None)) is None, "no queue label: not kuota's"


@pytest.mark.parametrize(
    ("count", "why"),
    [
        ("²", "is not a whole number of pods"),  # str.isdigit() says yes, int() says no
        ("9" * 5000, "must be from 1 to 100000, got 999999999999... (5000 digits)"),
        ("100001", "must be from 1 to 100000, got 100001"),
    ],
)
def test_a_pod_groups_count_is_read_as_ascii_digits(count: str, why: str) -> None:
    manifest = pod("g-0", group="g", total=1)
    manifest["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = count
    result = parse_object(manifest, at=5.0)
    assert isinstance(result, ValidationError), result
    assert result.field == "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"
    assert why in result.message, result.message


# --------------------------------------------------------------------------- owned objects


def test_kuberays_ray_cluster_of_a_ray_job_is_no_workload_but_an_owned_job_is() -> None:
    """KubeRay v1.5.0 copies a RayJob's labels (the queue label too) onto the RayCluster
    it makes and owns: the RayJob's, never queued a second time (Kueue skips it too);
    without a controller owner it is read. A Job's owner is not trusted: a user may
    write one on a labelled Job (or any Job of a managed namespace) to take it out of
    the queue, so an owned labelled Job is still a workload (KubeRay's submitter Job
    carries no queue label: it is not kuota's outside a managed namespace)."""
    cluster = ray_cluster("rj-x7k2p", workers={"gpu": 2})
    assert isinstance(parse_object(cluster, at=5.0), WorkloadSpec), "a RayCluster of its own"
    assert parse_object(owned(cluster, "ray.io/v1", "RayJob"), at=5.0) is None
    labelled = job("rj", namespace="ns", gpus=0)
    assert isinstance(parse_object(labelled, at=5.0), WorkloadSpec), "a labelled Job"
    forged = owned(labelled, "ray.io/v1", "RayJob")
    assert isinstance(parse_object(forged, at=5.0), WorkloadSpec), "its owner not trusted"
    by_job_set = owned(job("js-w-0", namespace="ns", gpus=1), "jobset.x-k8s.io/v1alpha2", "JobSet")
    assert isinstance(parse_object(by_job_set, at=5.0), WorkloadSpec), "a labelled JobSet Job"
    loose = owned(ray_cluster("rc"), "ray.io/v1", "RayJob", controller=False)
    assert isinstance(parse_object(loose, at=5.0), WorkloadSpec), "not its controller"
    rj = owned(ray_job("rj"), "ray.io/v1", "RayService")
    assert parse_object(rj, at=5.0) is None, "any managed owner, for every kind"
