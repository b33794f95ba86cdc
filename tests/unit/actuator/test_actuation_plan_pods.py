"""The actuator's writes for a pod group (kuota.actuation.plan_pods, #18): an admission
ungates every gated Pod of the group with its podset's flavors, one conditional write
each, the decision recorded; a redelivered or older decision and a replaced group are
skipped or refused; a stop deletes the Pods that run and leaves those gated, ended,
terminating or started by a later admission; a Job's pod is never touched."""

from __future__ import annotations

import copy
from typing import Any

from actuator_builders import decision, flavor, tol
from builders.workloads import pod

from kuota.actuation.patch import ANN_DECISION_ID, ANN_DECISION_OFFSET, DecisionOrder, Fail, Skip
from kuota.actuation.plan_pods import DeletePod, PodSteps, UpdatePod, members, plan_pods
from kuota.api.parse import parse_object
from kuota.api.parse_workloads import role_of
from kuota.api.types import PodMember

GPU = "nvidia.com/gpu"
H100 = flavor("h100", {"gpu": "h100"}, [tol(GPU)])
FLAVORS = {"h100": H100}
KEY = "ns/podgroup/g"
ORDER = DecisionOrder(10, 0)
GATE = {"name": "kueue.x-k8s.io/admission"}


def group(n: int = 3, **kw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        m = pod(f"g-{i}", group="g", total=n, **kw)
        m["metadata"].update(uid=f"uid-g-{i}", resourceVersion=str(10 + i))
        out.append(m)
    return out


def role(m: dict[str, Any]) -> str:
    member = parse_object(m, at=0.0)
    assert isinstance(member, PodMember)
    return role_of(member.podset)


def admitted(pods: list[dict[str, Any]], **fields: Any) -> Any:
    flavors = {role(pods[0]): {GPU: "h100"}}
    fields.setdefault("uid", "uid-g-0")
    return decision("Admitted", workload=KEY, cluster_queue="cq", flavors=flavors, **fields)


def updates(step: Any) -> dict[str, dict[str, Any]]:
    assert isinstance(step, PodSteps), step
    return {w.name: w.pod for w in step.writes if isinstance(w, UpdatePod)}


def test_an_admission_ungates_every_gated_pod_with_its_flavor_one_write_each() -> None:
    pods = group()
    pods[1]["spec"]["schedulingGates"].append({"name": "example.com/other"})
    d = admitted(pods)
    step = plan_pods(pods, d, order=ORDER, flavors=FLAVORS)
    new = updates(step)
    assert sorted(new) == ["g-0", "g-1", "g-2"]
    for name, m in new.items():
        assert m["spec"]["nodeSelector"] == {"gpu": "h100"}, name
        assert m["spec"]["tolerations"] == [tol(GPU)]
        annotations = m["metadata"]["annotations"]
        assert annotations[ANN_DECISION_ID] == d.id and annotations[ANN_DECISION_OFFSET] == "10/0"
    assert "schedulingGates" not in new["g-0"]["spec"]
    assert new["g-1"]["spec"]["schedulingGates"] == [{"name": "example.com/other"}], "theirs kept"
    assert isinstance(step, PodSteps)
    assert [e.reason for e in step.writes[0].events] == ["Admitted", "Started"]
    assert pods[0]["spec"]["schedulingGates"] == [GATE], "the input is not changed"


def test_a_redelivered_admission_writes_only_what_is_left() -> None:
    pods = group()
    d = admitted(pods)
    first = updates(plan_pods(pods, d, order=ORDER, flavors=FLAVORS))
    halfway = [first["g-0"], pods[1], pods[2]]  # the shell died after the first write
    assert sorted(updates(plan_pods(halfway, d, order=ORDER, flavors=FLAVORS))) == ["g-1", "g-2"]
    done = [first[n] for n in ("g-0", "g-1", "g-2")]
    skipped = plan_pods(done, d, order=ORDER, flavors=FLAVORS)
    assert isinstance(skipped, Skip) and "applied already" in skipped.why


def test_an_old_admission_never_starts_a_new_group_of_the_name() -> None:
    old = group()
    d = admitted(old)
    new = group()
    for m in new:
        m["metadata"]["uid"] = "new-" + m["metadata"]["uid"]
    step = plan_pods(new, d, order=ORDER, flavors=FLAVORS)
    assert isinstance(step, Fail) and step.reason == "JobNotFound"
    assert "uid-g-0" in step.message
    gone = plan_pods([], d, order=ORDER, flavors=FLAVORS)
    assert isinstance(gone, Fail) and gone.reason == "JobNotFound"


def test_missing_flavors_conflicts_and_unknown_roles_fail_with_a_reason() -> None:
    pods = group()
    d = admitted(pods)
    missing = plan_pods(pods, d, order=ORDER, flavors={})
    assert isinstance(missing, Fail) and missing.reason == "FlavorNotFound"
    clash = copy.deepcopy(pods)
    for m in clash:
        m["spec"]["nodeSelector"] = {"gpu": "a100"}
    conflict = plan_pods(clash, admitted(clash), order=ORDER, flavors=FLAVORS)
    assert isinstance(conflict, Fail) and conflict.reason == "FailedToStart"
    assert conflict.message.startswith("Pod g-0: ")
    other_role = decision("Admitted", workload=KEY, uid="uid-g-0", flavors={"main": {GPU: "h100"}})
    changed = plan_pods(pods, other_role, order=ORDER, flavors=FLAVORS)
    assert isinstance(changed, Fail) and changed.reason == "PodSetsChanged"


def test_a_single_pod_is_its_own_group() -> None:
    solo = pod("solo")
    solo["metadata"].update(uid="s1", resourceVersion="3")
    d = decision("Admitted", workload="ns/pod/solo", uid="s1", flavors={"main": {GPU: "h100"}})
    (new,) = updates(plan_pods([solo], d, order=ORDER, flavors=FLAVORS)).values()
    assert "schedulingGates" not in new["spec"] and new["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert members([solo, *group()], "ns/pod/solo") == [solo]


def test_a_jobs_pod_in_the_list_is_never_touched() -> None:
    pods = group(2)
    job_pod = pod("j-abc", group="g", total=2)
    job_pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1", "controller": True}
    ]
    assert [m["metadata"]["name"] for m in members([job_pod, *pods], KEY)] == ["g-0", "g-1"]
    step = plan_pods([job_pod, *pods], admitted(pods), order=ORDER, flavors=FLAVORS)
    assert sorted(updates(step)) == ["g-0", "g-1"]


def running(m: dict[str, Any], **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(m)
    out["spec"].pop("schedulingGates", None)
    out["status"] = {"phase": "Running", **status}
    return out


def test_a_stop_deletes_the_pods_that_run_and_only_them() -> None:
    pods = group(6)
    d = admitted(pods[:1])
    started = updates(plan_pods(pods[:1], d, order=ORDER, flavors=FLAVORS))["g-0"]
    live = [
        running(started),  # started by the admission
        running(pods[1]),
        pods[2],  # still gated: never started, kept (Kueue keeps a suspended pod)
        running(pods[3], phase="Succeeded"),  # ended
        running(pods[4], phase="Failed"),
        {**running(pods[5]), "metadata": {**pods[5]["metadata"], "deletionTimestamp": "t"}},
    ]
    stop = decision("Preempted", workload=KEY, uid="uid-g-0", reason="InClusterQueue")
    step = plan_pods(live, stop, order=DecisionOrder(11, 0), flavors={})
    assert isinstance(step, PodSteps)
    assert [(w.name, w.uid) for w in step.writes] == [("g-0", "uid-g-0"), ("g-1", "uid-g-1")]
    assert all(isinstance(w, DeletePod) for w in step.writes)
    assert [e.reason for e in step.writes[0].events] == ["Preempted"]
    # redelivered: the Pods are going or gone
    going = [{**m, "metadata": {**m["metadata"], "deletionTimestamp": "t"}} for m in live[:2]]
    again = plan_pods(going + live[2:], stop, order=DecisionOrder(11, 0), flavors={})
    assert isinstance(again, Skip) and "nothing to stop" in again.why


def test_an_older_stop_spares_a_pod_a_later_admission_started() -> None:
    pods = group(1)
    later = admitted(pods)
    started = running(updates(plan_pods(pods, later, order=ORDER, flavors=FLAVORS))["g-0"])
    old_stop = decision("Evicted", workload=KEY, uid="uid-g-0", reason="PodsReadyTimeout")
    step = plan_pods([started], old_stop, order=DecisionOrder(9, 0), flavors={})
    assert isinstance(step, Skip)
    new_stop = decision("Deactivated", workload=KEY, uid="uid-g-0")
    step = plan_pods([started], new_stop, order=DecisionOrder(12, 0), flavors={})
    assert isinstance(step, PodSteps) and [w.name for w in step.writes] == ["g-0"]
    assert [e.reason for e in step.writes[0].events] == ["Deactivated"]


def test_the_backstops_suspend_does_not_touch_a_pod() -> None:
    step = plan_pods(group(), decision("Suspended", workload=KEY), order=ORDER, flavors={})
    assert isinstance(step, Skip) and "gate holds it" in step.why
