"""What ingest journals of a PyTorchJob and a RayCluster (#18): the fold reads the
user's templates (the actuator's injected flavors never look like a podset change),
and the training-operator's status becomes PodsReady (replicaStatuses) and
WorkloadFinished (Succeeded/Failed) under the workload key ``ns/pytorchjob/name``;
a RayCluster is ready on KubeRay's ``state: ready`` and never finishes; a JobSet is
ready when every replicatedJob's Jobs are ready or succeeded and finishes on
Completed/Failed."""

from __future__ import annotations

from typing import Any

from builders.workloads import job_set, pytorch_job, ray_cluster

from kuota.actuation.patch import DecisionOrder, UpdateJob, read_flavor
from kuota.actuation.plan_workloads import plan_workload
from kuota.api.parse import parse_object
from kuota.api.types import ResourceFlavor, WorkloadSpec
from kuota.events.schema import Decision, ObjectUpserted, PodsReady, WorkloadFinished
from kuota.kube.translate import (
    job_set_ready,
    journal_object,
    pytorch_job_ready,
    ray_cluster_ready,
    translate_upsert,
)

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
