"""The actuator's one step for a training kind (kuota.actuation.plan_workloads, #18):
an admission unsuspends a PyTorchJob with every podset's flavors, a stop suspends it
and restores its templates in the same write, each recorded once; stale, replaced,
changed and finished objects are skipped or refused."""

from __future__ import annotations

from typing import Any

from actuator_builders import decision, flavor, tol
from builders.workloads import pytorch_job, ray_cluster, ray_job

from kuota.actuation.patch import (
    ANN_DECISION_ID,
    ANN_DECISION_OFFSET,
    ANN_ORIGINAL,
    JOB_CHANGED,
    DecisionOrder,
    Fail,
    Skip,
    UpdateJob,
)
from kuota.actuation.plan_workloads import decision_flavors, finished, plan_workload

GPU = "nvidia.com/gpu"
H100 = flavor("h100", {"gpu": "h100"}, [tol(GPU)])
FLAVORS = {"h100": H100}
KEY = "ns/pytorchjob/p"
ORDER = DecisionOrder(10, 0)


def job(**meta: Any) -> dict[str, Any]:
    m = pytorch_job("p", suspend=True)
    m["metadata"].update({"uid": "u1", "generation": 1, **meta})
    return m


def admitted(**fields: Any) -> Any:
    flavors = {"master": {GPU: "h100"}, "worker": {GPU: "h100"}}
    return decision("Admitted", workload=KEY, uid="u1", flavors=flavors, generation=1, **fields)


def specs(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    replicas = obj["spec"]["pytorchReplicaSpecs"]
    return {t: replicas[t]["template"]["spec"] for t in replicas}


def test_an_admission_is_one_write_unsuspending_with_every_podsets_flavor() -> None:
    d = admitted()
    step = plan_workload(job(), d, order=ORDER, flavors=FLAVORS)
    assert isinstance(step, UpdateJob) and step.final
    new = step.job
    assert new["spec"]["runPolicy"]["suspend"] is False
    for spec in specs(new).values():
        assert spec["nodeSelector"] == {"gpu": "h100"}
        assert spec["tolerations"] == [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    annotations = new["metadata"]["annotations"]
    assert annotations[ANN_DECISION_ID] == d.id and annotations[ANN_DECISION_OFFSET] == "10/0"
    assert ANN_ORIGINAL in annotations
    assert [e.reason for e in step.events] == ["Admitted", "Started"]
    # applied: the same decision again, or an older one, is skipped
    assert isinstance(plan_workload(new, d, order=ORDER, flavors=FLAVORS), Skip)
    older = admitted()
    assert isinstance(plan_workload(new, older, order=DecisionOrder(9, 0), flavors=FLAVORS), Skip)


def test_a_stop_suspends_and_restores_every_template_in_one_write() -> None:
    running = plan_workload(job(), admitted(), order=ORDER, flavors=FLAVORS)
    assert isinstance(running, UpdateJob)
    pre = decision("Preempted", workload=KEY, uid="u1", reason="InClusterQueue")
    step = plan_workload(running.job, pre, order=DecisionOrder(11, 0), flavors={})
    assert isinstance(step, UpdateJob) and step.final
    assert step.job["spec"]["runPolicy"]["suspend"] is True
    assert specs(step.job) == specs(job()), "the user's templates back"
    assert ANN_ORIGINAL not in step.job["metadata"]["annotations"]
    assert [e.reason for e in step.events] == ["Preempted"]
    # a suspended PyTorchJob with nothing of an admission on it: nothing to write
    again = decision("Evicted", workload=KEY, uid="u1", reason="PodsReadyTimeout")
    skipped = plan_workload(job(), again, order=DecisionOrder(12, 0), flavors={})
    assert isinstance(skipped, Skip) and skipped.events


def test_the_backstop_suspends_a_pytorchjob_started_without_admission() -> None:
    started = job()
    started["spec"]["runPolicy"]["suspend"] = False
    d = decision("Suspended", workload=KEY, uid="u1")
    step = plan_workload(started, d, order=ORDER, flavors={})
    assert isinstance(step, UpdateJob) and step.job["spec"]["runPolicy"]["suspend"] is True
    assert isinstance(plan_workload(job(), d, order=ORDER, flavors={}), Skip)


def test_replaced_changed_finished_and_missing_flavors() -> None:
    replaced = plan_workload(job(uid="u2"), admitted(), order=ORDER, flavors=FLAVORS)
    assert isinstance(replaced, Fail) and replaced.reason == "JobNotFound"
    changed = plan_workload(job(generation=2), admitted(), order=ORDER, flavors=FLAVORS)
    assert isinstance(changed, Fail) and changed.reason == JOB_CHANGED
    assert changed.generation == 2
    own = plan_workload(job(generation=3), admitted(), order=ORDER, flavors=FLAVORS, generation=3)
    assert isinstance(own, UpdateJob), "moved on by the actuator's own writes only"
    done = job()
    done["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    assert finished(done)
    assert isinstance(plan_workload(done, admitted(), order=ORDER, flavors=FLAVORS), Skip)
    missing = plan_workload(job(), admitted(), order=ORDER, flavors={})
    assert isinstance(missing, Fail) and missing.reason == "FlavorNotFound"


def test_the_flavors_of_every_podset() -> None:
    d = decision("Admitted", flavors={"master": {GPU: "a"}, "worker": {GPU: "b", "cpu": "a"}})
    assert decision_flavors(d) == ["a", "b"]


def test_a_ray_cluster_is_admitted_and_stopped_the_same_way() -> None:
    rc = ray_cluster("r", workers={"gpu": 2}, suspend=True)
    rc["metadata"].update({"uid": "r1", "generation": 1})
    key = "ns/raycluster/r"
    flavors = {"head": {GPU: "h100"}, "gpu": {GPU: "h100"}}
    d = decision("Admitted", workload=key, uid="r1", flavors=flavors, generation=1)
    step = plan_workload(rc, d, order=ORDER, flavors=FLAVORS)
    assert isinstance(step, UpdateJob) and step.job["spec"]["suspend"] is False
    head = step.job["spec"]["headGroupSpec"]["template"]["spec"]
    group = step.job["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert head["nodeSelector"] == group["nodeSelector"] == {"gpu": "h100"}
    assert not finished(step.job), "a RayCluster runs until it is deleted"
    d2 = decision("Evicted", workload=key, uid="r1", reason="InactiveWorkload")
    stop = plan_workload(step.job, d2, order=DecisionOrder(11, 0), flavors={})
    assert isinstance(stop, UpdateJob) and stop.job["spec"]["suspend"] is True
    assert stop.job["spec"]["headGroupSpec"] == rc["spec"]["headGroupSpec"]
    assert stop.job["spec"]["workerGroupSpecs"] == rc["spec"]["workerGroupSpecs"]


def test_a_ray_job_is_admitted_in_every_podset_and_stopped_in_one_write_each() -> None:
    """Head, worker group and submitter (an explicit template of the user's) each get
    their own flavor; the stop suspends it and gives every template back."""
    rj = ray_job("rj", workers={"gpu": 2}, suspend=True)
    rj["spec"]["shutdownAfterJobFinishes"] = True
    rj["spec"]["submitterPodTemplate"] = {
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"pool": "cpu"},
            "containers": [{"name": "ray-job-submitter", "image": "rayproject/ray"}],
        }
    }
    rj["metadata"].update({"uid": "rj1", "generation": 1})
    key = "ns/rayjob/rj"
    cpu = flavor("cpu", {"pool": "cpu"}, [])
    flavors = {"head": {GPU: "h100"}, "gpu": {GPU: "h100"}, "submitter": {"cpu": "cpu"}}
    d = decision("Admitted", workload=key, uid="rj1", flavors=flavors, generation=1)
    step = plan_workload(rj, d, order=ORDER, flavors={**FLAVORS, "cpu": cpu})
    assert isinstance(step, UpdateJob) and step.final
    new = step.job
    assert new["spec"]["suspend"] is False
    cluster = new["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]
    group = cluster["workerGroupSpecs"][0]["template"]["spec"]
    submitter = new["spec"]["submitterPodTemplate"]["spec"]
    assert head["nodeSelector"] == group["nodeSelector"] == {"gpu": "h100"}
    assert head["tolerations"] == [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    assert submitter["nodeSelector"] == {"pool": "cpu"} and "tolerations" not in submitter
    assert new["metadata"]["annotations"][ANN_DECISION_ID] == d.id
    assert step.what == "unsuspend the RayJob with h100, cpu"
    again = plan_workload(new, d, order=ORDER, flavors={**FLAVORS, "cpu": cpu})
    assert isinstance(again, Skip), "a redelivered admission writes nothing"

    d2 = decision("Evicted", workload=key, uid="rj1", reason="InactiveWorkload")
    stop = plan_workload(new, d2, order=DecisionOrder(11, 0), flavors={})
    assert isinstance(stop, UpdateJob) and stop.job["spec"]["suspend"] is True
    assert stop.job["spec"]["rayClusterSpec"] == rj["spec"]["rayClusterSpec"]
    assert stop.job["spec"]["submitterPodTemplate"] == rj["spec"]["submitterPodTemplate"]
    assert ANN_ORIGINAL not in stop.job["metadata"]["annotations"]


def test_a_ray_job_is_finished_by_its_deployment_status() -> None:
    rj = ray_job("rj", suspend=False)
    rj["metadata"].update({"uid": "rj1", "generation": 1})
    for status, done in (
        ("Running", False),
        ("Suspended", False),
        ("Retrying", False),
        ("Complete", True),
        ("Failed", True),
    ):
        assert finished({**rj, "status": {"jobDeploymentStatus": status}}) is done, status
    assert not finished({**rj, "status": {"conditions": [{"type": "Failed", "status": "True"}]}})
    d = decision("Evicted", workload="ns/rayjob/rj", uid="rj1", reason="InactiveWorkload")
    ended = {**rj, "status": {"jobDeploymentStatus": "Complete"}}
    step = plan_workload(ended, d, order=ORDER, flavors={})
    assert isinstance(step, Skip) and "finished" in step.why
