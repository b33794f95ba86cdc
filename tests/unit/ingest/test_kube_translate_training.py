"""What ingest journals of a PyTorchJob and a RayCluster (#18): the fold reads the
user's templates (the actuator's injected flavors never look like a podset change),
and the training-operator's status becomes PodsReady (replicaStatuses) and
WorkloadFinished (Succeeded/Failed) under the workload key ``ns/pytorchjob/name``;
a RayCluster is ready on KubeRay's ``state: ready`` and never finishes; a RayJob is
ready on KubeRay's copy of its cluster's state and finishes on its
``jobDeploymentStatus`` (Complete/Failed), and the RayCluster and submitter Job
KubeRay makes for it are never journaled; a JobSet is ready when every
replicatedJob's Jobs are ready or succeeded and finishes on Completed/Failed."""

from __future__ import annotations

import copy
from typing import Any

from builders.workloads import job_set, pytorch_job, ray_cluster, ray_job

from kuota.actuation.patch import DecisionOrder, UpdateJob
from kuota.actuation.plan_workloads import plan_workload
from kuota.actuation.scheduling import read_flavor
from kuota.api.parse import parse_object
from kuota.api.types import ResourceFlavor, WorkloadSpec
from kuota.events.schema import (
    Decision,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    WorkloadFinished,
)
from kuota.kube.readiness import (
    job_set_ready,
    pytorch_job_ready,
    ray_cluster_ready,
    ray_job_finished,
    ray_job_ready,
)
from kuota.kube.translate import journal_object, translate_upsert
from kuota_ingest.journal import Item
from kuota_ingest.sources import Clock, Sources

GPU = "nvidia.com/gpu"
KEY = "ns/pytorchjob/p"


def job(rv: str = "1") -> dict[str, Any]:
    m = pytorch_job("p", suspend=True)
    m["metadata"].update(uid="u1", generation=1, resourceVersion=rv)
    return m


def admitted_job() -> dict[str, Any]:
    flavors = {"master": {GPU: "h100"}, "worker": {GPU: "h100"}}
    d = Decision(
        id="d1",
        cause="e1",
        at=1.0,
        type="Admitted",
        workload=KEY,
        uid="u1",
        flavors=flavors,
        generation=1,
    )
    spec = {"nodeLabels": {"gpu": "h100"}, "tolerations": [{"key": GPU, "operator": "Exists"}]}
    h100 = read_flavor({"metadata": {"name": "h100"}, "spec": spec})
    assert isinstance(h100, ResourceFlavor)
    step = plan_workload(job(), d, order=DecisionOrder(1, 0), flavors={"h100": h100})
    assert isinstance(step, UpdateJob)
    step.job["metadata"]["resourceVersion"] = "2"
    return step.job


def test_the_fold_reads_the_users_templates_not_the_injected_flavors() -> None:
    before = parse_object(journal_object("PyTorchJob", job()), at=0.0)
    running = admitted_job()
    assert running["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["nodeSelector"]
    after = parse_object(journal_object("PyTorchJob", running), at=0.0)
    assert isinstance(before, WorkloadSpec) and isinstance(after, WorkloadSpec)
    assert after.podsets == before.podsets, "no PodSetsChanged eviction of its own admission"
    assert after.suspended is False and before.suspended is True
    assert after.decision_id == running["metadata"]["annotations"]["kuota.dev/decision-id"]
    assert "status" not in journal_object("PyTorchJob", {**running, "status": {"x": 1}})


def status(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**obj, "status": fields}


def test_pods_ready_and_finished_come_from_the_pytorchjobs_status() -> None:
    running = admitted_job()
    first = translate_upsert("PyTorchJob", running, None, at=1.0)
    assert any(isinstance(e, ObjectUpserted) for e in first.events)
    assert not any(isinstance(e, PodsReady) for e in first.events), "not ready: no pods yet"
    partly = status(running, replicaStatuses={"Master": {"active": 1}, "Worker": {"active": 2}})
    assert not pytorch_job_ready(partly), "3 of 4 replicas"
    ready = status(running, replicaStatuses={"Master": {"active": 1}, "Worker": {"active": 3}})
    ready["metadata"] = {**ready["metadata"], "resourceVersion": "3"}
    t = translate_upsert("PyTorchJob", ready, first.seen, at=2.0)
    (event,) = [e for e in t.events if isinstance(e, PodsReady)]
    assert (event.workload, event.ready, event.namespace, event.name) == (KEY, True, "ns", "p")
    assert not any(isinstance(e, ObjectUpserted) for e in t.events), "a status change only"
    assert t.seen is not None and t.seen.ready
    done = status(
        running,
        replicaStatuses={"Master": {"succeeded": 1}, "Worker": {"succeeded": 3}},
        conditions=[
            {"type": "Running", "status": "False"},
            {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"},
        ],
    )
    done["metadata"] = {**done["metadata"], "resourceVersion": "4"}
    t2 = translate_upsert("PyTorchJob", done, t.seen, at=3.0)
    (fin,) = [e for e in t2.events if isinstance(e, WorkloadFinished)]
    assert (fin.workload, fin.succeeded, fin.message) == (KEY, True, "PyTorchJobSucceeded")
    assert t2.seen is not None and t2.seen.finished
    failed = status(job(), conditions=[{"type": "Failed", "status": "True", "message": "oom"}])
    (f,) = [
        e
        for e in translate_upsert("PyTorchJob", failed, None, at=1.0).events
        if isinstance(e, WorkloadFinished)
    ]
    assert (f.succeeded, f.message) == (False, "oom")


def test_a_suspended_pytorchjob_is_never_ready() -> None:
    held = status(job(), replicaStatuses={"Master": {"active": 1}, "Worker": {"active": 3}})
    assert not pytorch_job_ready(held)
    assert not pytorch_job_ready({"kind": "PyTorchJob", "spec": "bad"})


def test_a_ray_cluster_is_ready_when_kuberay_says_so_and_never_finishes() -> None:
    rc = ray_cluster("r", workers={"gpu": 2}, suspend=False)
    rc["metadata"].update(uid="r1", resourceVersion="1")
    t = translate_upsert("RayCluster", {**rc, "status": {"state": "ready"}}, None, at=1.0)
    (ready,) = [e for e in t.events if isinstance(e, PodsReady)]
    assert (ready.workload, ready.ready) == ("ns/raycluster/r", True)
    assert not ray_cluster_ready({**rc, "status": {"state": "unhealthy"}})
    held = {**rc, "spec": {**rc["spec"], "suspend": True}, "status": {"state": "ready"}}
    assert not ray_cluster_ready(held)
    failed = {**rc, "status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert not any(
        isinstance(e, WorkloadFinished)
        for e in translate_upsert("RayCluster", failed, None, at=1.0).events
    )


def test_a_job_set_is_ready_on_its_replicated_jobs_and_finishes_on_completed() -> None:
    js = job_set("s", jobs={"driver": (1, 1), "workers": (2, 1)}, suspend=False)
    js["metadata"].update(uid="s1", resourceVersion="1")
    key = "ns/jobset/s"
    partly = status(
        js, replicatedJobsStatus=[{"name": "driver", "ready": 1}, {"name": "workers", "ready": 1}]
    )
    assert not job_set_ready(partly), "1 of the 2 workers Jobs"
    assert not job_set_ready(status(js, replicatedJobsStatus=[{"name": "driver", "ready": 1}]))
    counted = [{"name": "driver", "ready": 1}, {"name": "workers", "ready": 1, "succeeded": 1}]
    t = translate_upsert("JobSet", status(js, replicatedJobsStatus=counted), None, at=1.0)
    (ready,) = [e for e in t.events if isinstance(e, PodsReady)]
    assert (ready.workload, ready.ready) == (key, True)
    held = {
        **js,
        "spec": {**js["spec"], "suspend": True},
        "status": {"replicatedJobsStatus": counted},
    }
    assert not job_set_ready(held), "a suspended JobSet is never ready"
    assert not job_set_ready({"kind": "JobSet", "spec": {"replicatedJobs": "bad"}})
    done = status(
        js, conditions=[{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]
    )
    (fin,) = [
        e
        for e in translate_upsert("JobSet", done, None, at=1.0).events
        if isinstance(e, WorkloadFinished)
    ]
    assert (fin.workload, fin.succeeded, fin.message) == (key, True, "AllJobsCompleted")
    failed = status(js, conditions=[{"type": "Failed", "status": "True", "message": "boom"}])
    (f,) = [
        e
        for e in translate_upsert("JobSet", failed, None, at=1.0).events
        if isinstance(e, WorkloadFinished)
    ]
    assert (f.succeeded, f.message) == (False, "boom")


def test_the_fold_reads_a_job_sets_user_templates_not_the_injected_flavors() -> None:
    js = job_set("s", jobs={"driver": (1, 1), "workers": (2, 1)}, suspend=True)
    js["metadata"].update(uid="s1", generation=1, resourceVersion="1")
    d = Decision(
        id="d1",
        cause="e1",
        at=1.0,
        type="Admitted",
        workload="ns/jobset/s",
        uid="s1",
        flavors={"driver": {GPU: "h100"}, "workers": {GPU: "h100"}},
        generation=1,
    )
    h100 = read_flavor({"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}})
    assert isinstance(h100, ResourceFlavor)
    step = plan_workload(js, d, order=DecisionOrder(1, 0), flavors={"h100": h100})
    assert isinstance(step, UpdateJob)
    running = step.job
    pods = [j["template"]["spec"]["template"]["spec"] for j in running["spec"]["replicatedJobs"]]
    assert all(p["nodeSelector"] == {"gpu": "h100"} for p in pods), "both templates"
    before = parse_object(journal_object("JobSet", js), at=0.0)
    after = parse_object(journal_object("JobSet", running), at=0.0)
    assert isinstance(before, WorkloadSpec) and isinstance(after, WorkloadSpec)
    assert after.podsets == before.podsets and (before.suspended, after.suspended) == (True, False)


# --------------------------------------------------------------------------- RayJob


def ray_job_status(**status: Any) -> dict[str, Any]:
    rj = ray_job("rj", workers={"gpu": 2}, suspend=False)
    rj["metadata"].update(uid="rj1", resourceVersion="1")
    return {**rj, "status": status}


def test_a_ray_job_is_ready_on_its_clusters_state_as_kuberay_copies_it() -> None:
    ready = ray_job_status(jobDeploymentStatus="Running", rayClusterStatus={"state": "ready"})
    t = translate_upsert("RayJob", ready, None, at=1.0)
    (event,) = [e for e in t.events if isinstance(e, PodsReady)]
    assert (event.workload, event.ready) == ("ns/rayjob/rj", True)
    assert not any(isinstance(e, WorkloadFinished) for e in t.events), "running: not finished"
    assert not ray_job_ready(ray_job_status(jobDeploymentStatus="Initializing"))
    assert not ray_job_ready(ray_job_status(rayClusterStatus={"state": "unhealthy"}))
    held = {**ready, "spec": {**ready["spec"], "suspend": True}}
    assert not ray_job_ready(held), "a suspended RayJob is never ready"
    # a RayCluster's own status.state on the RayJob is not KubeRay's copy
    assert not ray_job_ready(ray_job_status(state="ready"))


def test_a_ray_job_finishes_on_its_deployment_status_succeeded_by_its_job_status() -> None:
    done = ray_job_status(
        jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", message="done in 3s"
    )
    (fin,) = [
        e
        for e in translate_upsert("RayJob", done, None, at=1.0).events
        if isinstance(e, WorkloadFinished)
    ]
    assert (fin.workload, fin.succeeded, fin.message) == ("ns/rayjob/rj", True, "done in 3s")
    failed = ray_job_status(jobDeploymentStatus="Failed", jobStatus="FAILED")
    (fin,) = [
        e
        for e in translate_upsert("RayJob", failed, None, at=1.0).events
        if isinstance(e, WorkloadFinished)
    ]
    assert (fin.succeeded, fin.message) == (False, "jobDeploymentStatus Failed")
    # Complete with a Ray job STOPPED is no success (Kueue: jobStatus SUCCEEDED only)
    stopped = ray_job_status(jobDeploymentStatus="Complete", jobStatus="STOPPED")
    assert ray_job_finished(stopped) == {
        "type": "Failed",
        "message": "jobDeploymentStatus Complete",
    }
    for going in ("Running", "Suspended", "Retrying", "ValidationFailed", None):
        assert ray_job_finished(ray_job_status(jobDeploymentStatus=going)) is None, going
    # conditions are not what ends a RayJob
    by_condition = ray_job_status(conditions=[{"type": "Failed", "status": "True"}])
    assert not any(
        isinstance(e, WorkloadFinished)
        for e in translate_upsert("RayJob", by_condition, None, at=1.0).events
    )


def test_a_ray_job_is_journaled_with_the_users_templates_after_an_admission() -> None:
    rj = ray_job("rj", workers={"gpu": 2}, suspend=True)
    rj["spec"]["shutdownAfterJobFinishes"] = True
    rj["metadata"].update(uid="rj1", generation=1, resourceVersion="1")
    flavors = {"head": {GPU: "h100"}, "gpu": {GPU: "h100"}, "submitter": {}}
    d = Decision(
        id="d1",
        cause="e1",
        at=1.0,
        type="Admitted",
        workload="ns/rayjob/rj",
        uid="rj1",
        flavors=flavors,
        generation=1,
    )
    spec = {"nodeLabels": {"gpu": "h100"}, "tolerations": [{"key": GPU, "operator": "Exists"}]}
    h100 = read_flavor({"metadata": {"name": "h100"}, "spec": spec})
    assert isinstance(h100, ResourceFlavor)
    step = plan_workload(rj, d, order=DecisionOrder(1, 0), flavors={"h100": h100})
    assert isinstance(step, UpdateJob)
    running = step.job
    head = running["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["nodeSelector"] == {"gpu": "h100"}, "the actuator injected the flavor"
    journaled = journal_object("RayJob", running)
    jhead = journaled["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "nodeSelector" not in jhead and "tolerations" not in jhead, "the user's own"
    before = parse_object(journal_object("RayJob", rj), at=0.0)
    after = parse_object(journaled, at=0.0)
    assert isinstance(before, WorkloadSpec) and isinstance(after, WorkloadSpec)
    assert [p.name for p in after.podsets] == ["head", "gpu", "submitter"]
    assert before.podsets == after.podsets, "the admission's own write is no podset change"
    assert (before.suspended, after.suspended) == (True, False)


class Writer:
    """The journal writer's queue, as the sources see it."""

    def __init__(self) -> None:
        self.items: list[Item] = []

    async def put(self, item: Item) -> None:
        self.items.append(item)


async def test_kuberays_ray_cluster_of_a_ray_job_is_never_journaled() -> None:
    """The RayCluster KubeRay makes for a RayJob carries the RayJob's labels (the queue
    label too) and its controller reference: the RayJob's, so ingest never journals it
    (the RayJob itself is). The submitter Job is journaled as any Job (its owner is not
    trusted for a Job)."""
    writer = Writer()
    src = Sources(None, writer, memory={}, clock=Clock())  # type: ignore[arg-type]
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "rj1"}
    cluster = ray_cluster("rj-x7k2p", workers={"gpu": 2}, suspend=False)
    cluster["metadata"].update(uid="c1", resourceVersion="5")
    cluster["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    submitter = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "rj",
            "namespace": "ns",
            "uid": "j1",
            "resourceVersion": "6",
            "labels": {"ray.io/originated-from-crd": "RayJob"},
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "ray-job-submitter"}]}}},
    }
    await src.observe("RayCluster", "UPSERT", cluster)
    await src.observe("RayCluster", "UPSERT", {**cluster, "status": {"state": "ready"}})
    await src.observe("Job", "UPSERT", submitter)
    await src.observe("RayCluster", "DELETE", cluster)
    # the submitter Job is journaled as every Job is (a Job's owner is not trusted);
    # unlabelled, the fold leaves it alone outside a managed namespace
    assert [item.key for item in writer.items] == ["Job/ns/rj"]
    assert list(src.memory) == ["Job/ns/rj"]
    writer.items.clear()
    src.memory.clear()
    rj = ray_job("rj", workers={"gpu": 2}, suspend=True)
    rj["metadata"].update(uid="rj1", resourceVersion="1")
    await src.observe("RayJob", "UPSERT", rj)
    (item,) = writer.items
    assert [type(e) for e in item.events] == [ObjectUpserted], "the RayJob is journaled"
    # a RayCluster journaled before it gained such an owner leaves the journal
    own = ray_cluster("mine", suspend=True)
    own["metadata"].update(uid="m1", resourceVersion="1")
    await src.observe("RayCluster", "UPSERT", own)
    adopted = copy.deepcopy(own)
    adopted["metadata"].update(resourceVersion="2", ownerReferences=[{**owner, "controller": True}])
    await src.observe("RayCluster", "UPSERT", adopted)
    gone = writer.items[-1].events
    assert [type(e) for e in gone] == [ObjectDeleted] and "RayCluster/ns/mine" not in src.memory
