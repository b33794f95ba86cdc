"""Plain pod groups in the fold: admitted once all their Pods exist, as one gang
of roles; a group whose count is never reached waits with a reason; single Pods
with the queue label are groups of one."""

from __future__ import annotations

from builders.driver import Driver, kinds
from builders.manifests import cluster_queue, flavor, local_queue, priority_class
from builders.workloads import pod

GPU = "nvidia.com/gpu"


def queue(gpus: int = 4) -> Driver:
    d = Driver()
    d.apply(
        flavor("h100"),
        cluster_queue("cq", gpus=gpus),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
    )
    return d


def test_a_group_of_three_is_admitted_only_when_all_three_exist() -> None:
    d = queue(4)
    out = d.apply(pod("g-0", group="g", total=3))
    assert kinds(out) == [("Inadmissible", "ns/podgroup/g")]
    assert out[0].reason == "PodGroupIncomplete"
    assert out[0].message == (
        "1 of 3 pods of pod group g exist; the group is admitted once all of them exist"
    )
    assert (out[0].kind, out[0].api_version) == ("Pod", "v1")
    out = d.apply(pod("g-1", group="g", total=3))
    assert [x.message for x in out] == [
        "2 of 3 pods of pod group g exist; the group is admitted once all of them exist"
    ]
    assert d.usage("cq") == {}
    out = d.apply(pod("g-2", group="g", total=3))
    assert kinds(out) == [("Admitted", "ns/podgroup/g")]
    (podset,) = out[0].flavors or {}
    assert len(podset) == 8  # one role (its hash): three pods alike
    assert out[0].usage == {"h100": {GPU: "3"}}


def test_a_group_whose_count_is_never_reached_waits_and_the_others_go_on() -> None:
    d = queue(4)
    d.apply(pod("short-0", group="short", total=3), pod("short-1", group="short", total=3))
    out = d.apply(pod("solo", gpus=1))  # a single Pod with the queue label
    assert kinds(out) == [("Admitted", "ns/pod/solo")]
    assert out[0].flavors == {"main": {GPU: "h100"}}
    assert d.state("ns/podgroup/short") is None  # no workload: it waits for its pods
    assert d.fold.workload_state("ns/pod/solo") == "Admitted"


def test_roles_become_podsets_and_the_gang_reason_names_them() -> None:
    d = queue(4)
    d.apply(pod("g-leader", group="g", total=3, gpus=2))
    d.apply(pod("g-w0", group="g", total=3, gpus=2))
    out = d.apply(pod("g-w1", group="g", total=3, gpus=1))
    (why,) = out
    assert why.type == "Inadmissible" and why.reason == "InsufficientQuota"
    assert (why.message or "").startswith("Pod of 3 pods (")
    assert f"needs {GPU} 5 in all" in (why.message or "")


def test_a_pod_lost_before_admission_takes_the_group_back_to_waiting() -> None:
    d = queue(1)
    d.apply(pod("big", gpus=1))  # takes the queue
    d.apply(pod("g-0", group="g", total=2), pod("g-1", group="g", total=2))
    assert d.state("ns/podgroup/g") is not None  # complete: queued
    out = d.delete("Pod", "g-1", "ns")
    assert kinds(out) == [("Inadmissible", "ns/podgroup/g")]
    assert out[0].reason == "PodGroupIncomplete" and (out[0].message or "").startswith("1 of 2")
    assert d.state("ns/podgroup/g") is None
    out = d.apply(pod("g-1", group="g", total=2))  # back: queued again
    assert d.state("ns/podgroup/g") is not None


def test_an_admitted_group_keeps_its_admission_until_its_last_pod_is_deleted() -> None:
    d = queue(4)
    d.apply(pod("g-0", group="g", total=2), pod("g-1", group="g", total=2))
    assert d.state("ns/podgroup/g") == "Admitted"
    d.apply(pod("g-0", group="g", total=2, gated=False, phase="Failed"))
    assert d.delete("Pod", "g-0", "ns") == []
    assert d.state("ns/podgroup/g") == "Admitted"
    out = d.delete("Pod", "g-1", "ns")
    assert kinds(out)[0] == ("Finished", "ns/podgroup/g")
    assert out[0].message == "the Pod was deleted; its quota is released once its pods are gone"


def test_a_group_and_a_single_pod_of_one_name_are_two_workloads() -> None:
    d = queue(4)
    out = d.apply(pod("x"), pod("x-0", group="x", total=1))
    assert kinds(out) == [("Admitted", "ns/pod/x"), ("Admitted", "ns/podgroup/x")]


def test_bad_pod_group_input_is_rejected_with_a_reason() -> None:
    d = queue(4)
    bad = pod("b-0", group="b", total=None)
    out = d.apply(bad, pod("c-0", group="c", total=0), pod("ok"))
    assert kinds(out) == [
        ("Rejected", "Pod ns/b-0"),
        ("Rejected", "Pod ns/c-0"),
        ("Admitted", "ns/pod/ok"),
    ]
    assert "says how many pods it has" in (out[0].message or "")
    assert "must be from 1 to" in (out[1].message or "")


def test_a_finished_group_stays_finished_while_its_pods_go_and_its_name_is_free_after() -> None:
    """WorkloadFinished (ingest's, from the Pods' phases) ends the group and frees its
    quota; its Pods, done, are deleted one by one without announcing the group as
    incomplete; once the last is gone a new group of that name is a new workload."""
    d = queue(4)
    d.apply(*(pod(f"g-{i}", group="g", total=2, gated=False) for i in range(2)))
    assert d.state("ns/podgroup/g") == "Admitted"
    out = d.finish("ns/podgroup/g", succeeded=True)
    assert kinds(out)[0] == ("Finished", "ns/podgroup/g") and out[0].reason == "Succeeded"
    assert d.usage("cq") == {}
    done = [pod(f"g-{i}", group="g", total=2, gated=False, phase="Succeeded") for i in range(2)]
    assert d.apply(*done) == [], "seen done: still finished"
    assert d.delete("Pod", "g-0", "ns") == [], "no 1 of 2 announcement for a finished group"
    assert d.delete("Pod", "g-1", "ns") == []
    assert d.state("ns/podgroup/g") is None
    again = [pod(f"g-{i}", group="g", total=2) for i in range(2)]
    again[0]["metadata"]["uid"] = "new-0"
    out = d.apply(*again)
    assert kinds(out) == [("Inadmissible", "ns/podgroup/g"), ("Admitted", "ns/podgroup/g")]


def test_a_preempted_group_gives_its_quota_back_once_its_pods_are_gone() -> None:
    """The actuator deletes a stopped group's Pods; the fold takes the group out of its
    queue as they go, and releases its quota on the actuator's WorkloadStopped."""
    d = Driver(auto_stop=False)
    d.apply(
        flavor("h100"),
        cluster_queue("cq", gpus=2, within="LowerPriority"),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
        priority_class("low", value=0),
        priority_class("high", value=100),
    )
    low = [pod(f"g-{i}", group="g", total=2) for i in range(2)]
    for p in low:
        p["metadata"]["uid"] = f"uid-{p['metadata']['name']}"
        p["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    (admitted,) = [x for x in d.apply(*low) if x.type == "Admitted"]
    assert admitted.uid == "uid-g-0", "the group's uid: its first Pod's"
    urgent = pod("urgent", gpus=2)
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    out = d.apply(urgent)
    (stop,) = [x for x in out if x.type == "Preempted"]
    assert stop.workload == "ns/podgroup/g" and stop.uid == "uid-g-0"
    assert ("Admitted", "ns/pod/urgent") not in kinds(out), "its pods still hold the quota"
    for name in ("g-0", "g-1"):
        d.delete("Pod", name, "ns")
    assert ("Admitted", "ns/pod/urgent") not in kinds(d.decisions)
    out = d.stopped(stop)
    assert kinds(out) == [("QuotaReleased", "ns/podgroup/g"), ("Admitted", "ns/pod/urgent")]
    assert out[0].stop_id == stop.id


def test_a_role_hash_a_user_writes_never_merges_two_shapes() -> None:
    # Two pods of one group under one written role hash, asking 0 and 3 GPUs: the
    # roles come from their shapes, so the group is charged 3, not 0 (the first's).
    d = queue(4)
    small, big = pod("g-0", group="g", total=2, gpus=0), pod("g-1", group="g", total=2, gpus=3)
    for p in (small, big):
        p["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = "same"
    d.apply(small)
    out = d.apply(big)
    assert kinds(out) == [("Admitted", "ns/podgroup/g")]
    assert out[0].usage == {"h100": {GPU: "3"}}
    assert "same" not in (out[0].flavors or {}) and len(out[0].flavors or {}) == 2
