"""The actuator's pods-gone reports (kuota_actuator.drains), on a pod cache fed by hand.

The cache is the real :class:`PodCache` with its watch replaced by the changes a
test gives it (``observe``); the clock is a counter. What is checked: a stop is
reported only once no pod of its Job is left outside Succeeded/Failed (a
terminating pod, deletionTimestamp set, still counts), never before the pod
list is in, once; a stop the read model still drains is watched again after a
restart; a QuotaReleased ends the wait; a long wait warns every ``warn_every``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from actuator_builders import decision

from kuota.actuation.patch import EventSpec
from kuota.events.schema import WorkloadStopped
from kuota.kube.watch import Change
from kuota_actuator.drains import (
    CONTROLLER_UID,
    JOBSET_UID,
    RAY_CLUSTER,
    RAY_JOB_CHILDREN,
    TRAINING_JOB_NAME,
    Drains,
    PodCache,
    PodCaches,
    PodGroupCache,
    Stop,
    job_settled,
    pod_stop,
    pods_settled,
    workload_settled,
)


def pod(name: str, uid: str, phase: str = "Running", *, terminating: bool = False) -> Change:
    md: dict[str, Any] = {"name": name, "namespace": "team", "labels": {CONTROLLER_UID: uid}}
    if terminating:
        md["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return Change("UPSERT", "Pod", {"metadata": md, "status": {"phase": phase}})


def gone(name: str, uid: str) -> Change:
    return Change("DELETE", "Pod", pod(name, uid).object)


class Rig:
    def __init__(self, warn_every: float = 60.0) -> None:
        self.now = 0.0
        self.pods = PodCache(None)
        self.reports: list[WorkloadStopped] = []
        self.warnings: list[tuple[str, EventSpec]] = []

        async def report(event: WorkloadStopped) -> None:
            self.reports.append(event)

        def warn(stop: Stop, spec: EventSpec, waited: int) -> None:
            self.warnings.append((stop.stop_id, spec))

        self.drains = Drains(
            self.pods, report, warn=warn, warn_every=warn_every, clock=lambda: self.now
        )

    def synced(self) -> None:
        self.pods._rebuild({})
        self.pods.synced.set()


async def test_a_stop_is_reported_once_its_terminating_pods_are_gone() -> None:
    rig = Rig()
    stop = decision("Preempted", uid="u1", workload="team/low")
    rig.pods.observe(pod("low-a", "u1"))  # seen before the list is in: not trusted yet
    rig.drains.add(stop)
    assert await rig.drains.check() == 0, "no report before the pod list is in"
    rig.synced()
    rig.pods.observe(pod("low-a", "u1", terminating=True))  # deleted, in its grace period
    rig.pods.observe(pod("low-b", "u1", "Succeeded"))  # done: does not count
    rig.pods.observe(pod("other", "u2"))  # another Job's pod
    assert rig.pods.live("u1") == 1
    assert await rig.drains.check() == 0, "a terminating pod still holds the GPUs"
    rig.pods.observe(gone("low-a", "u1"))
    assert await rig.drains.check() == 1
    (report,) = rig.reports
    assert (report.workload, report.uid, report.decision_id) == ("team/low", "u1", stop.id)
    assert report.id == f"workloadstopped/{stop.id}" and report.at == stop.at
    assert await rig.drains.check() == 0 and len(rig.reports) == 1, "reported once"


async def test_only_stops_are_watched_and_a_deleted_job_counts() -> None:
    rig = Rig()
    rig.synced()
    rig.drains.add(decision("Admitted", uid="u1"))
    rig.drains.add(decision("Finished", uid="u1", reason="Succeeded"))
    rig.drains.add(decision("Requeued", uid="u1"))
    assert rig.drains.pending == {}
    deleted = decision("Finished", uid="u9", workload="team/orphaned", reason="Deleted")
    rig.pods.observe(pod("orphan-0", "u9"))  # --cascade=orphan: the pods stay
    rig.drains.add(deleted)
    assert await rig.drains.check() == 0
    rig.pods.observe(Change("UPSERT", "Pod", pod("orphan-0", "u9", "Failed").object))
    assert await rig.drains.check() == 1 and rig.reports[0].decision_id == deleted.id


async def test_a_restart_watches_the_read_models_drains_and_a_release_ends_a_wait() -> None:
    rig = Rig()
    rig.synced()
    rig.pods.observe(pod("a-0", "ua"))
    rig.pods.observe(pod("b-0", "ub"))
    rig.drains.watch(Stop("stop-a", "stop", "team/a", "ua", 5.0))  # from the read model
    rig.drains.watch(Stop("stop-b", "stop", "team/b", "ub", 6.0))
    rig.drains.watch(Stop("stop-a", "stop", "team/a", "ua", 5.0))  # redelivered: one wait
    assert sorted(rig.drains.pending) == ["stop-a", "stop-b"]
    rig.drains.released("stop-b")  # the fold released it already (a report before the kill)
    rig.pods.observe(gone("a-0", "ua"))
    rig.pods.observe(gone("b-0", "ub"))
    assert await rig.drains.check() == 1
    assert [r.decision_id for r in rig.reports] == ["stop-a"]


async def test_a_long_wait_warns_every_period() -> None:
    rig = Rig(warn_every=60.0)
    rig.synced()
    rig.pods.observe(pod("slow-0", "u1", terminating=True))
    stop = decision("Evicted", uid="u1", workload="team/slow")
    rig.drains.add(stop)
    rig.now = 59.0
    await rig.drains.check()
    assert rig.warnings == []
    rig.now = 61.0
    await rig.drains.check()
    rig.now = 100.0
    await rig.drains.check()
    rig.now = 125.0
    await rig.drains.check()
    assert [w[0] for w in rig.warnings] == [stop.id, stop.id]
    spec = rig.warnings[0][1]
    assert spec.type == "Warning" and spec.reason == "StopPending"
    assert "1 pod(s) of the stopped Job are not gone after 61s" in spec.message
    assert rig.reports == []


async def test_no_report_before_the_job_controller_took_the_stop_in() -> None:
    """A pod the Job controller was still creating from an earlier sync would come
    late (found by the fault run): pods gone is not enough while the Job has no
    Suspended condition."""
    settled = {"now": False}
    rig = Rig()
    rig.drains._settled = lambda stop: settled["now"]
    rig.synced()
    rig.drains.add(decision("Preempted", uid="u1", workload="team/low"))
    assert await rig.drains.check() == 0
    settled["now"] = True
    assert await rig.drains.check() == 1


def test_job_settled() -> None:
    def job(uid: str, suspend: bool, *conditions: str) -> dict[str, Any]:
        return {
            "metadata": {"uid": uid},
            "spec": {"suspend": suspend},
            "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
        }

    assert job_settled(None, "u1"), "deleted (an orphaning delete too)"
    assert job_settled(job("u2", False), "u1"), "replaced under the same name"
    assert job_settled(job("u1", False, "Complete"), "u1")
    assert job_settled(job("u1", True, "Suspended"), "u1")
    assert not job_settled(job("u1", True), "u1"), "suspended, not taken in yet"
    assert not job_settled(job("u1", False, "Suspended"), "u1"), "unsuspended again"
    assert job_settled(job("u1", True, "SuccessCriteriaMet"), "u1"), "stopped as it succeeded"
    counting = job("u1", True, "Suspended")
    counting["status"]["terminating"] = 1
    assert not job_settled(counting, "u1"), "the controller still counts a terminating pod"
    counting["status"].update(terminating=0, active=1)
    assert not job_settled(counting, "u1"), "the controller still counts an active pod"
    counting["status"]["active"] = 0
    assert job_settled(counting, "u1"), "both counts 0"


async def test_a_stop_waits_out_its_quiet_period_for_a_pod_still_being_created() -> None:
    """A stop applied while the Job controller was creating a pod of the short run
    (its Suspended condition still True from before that run): the pod surfaces
    within the quiet period, and the stop waits for it (a fault run saw a late pod
    of a stopped run beside kuota's own restart of the Job)."""
    rig = Rig()
    rig.drains.quiet = 1.0
    rig.synced()
    rig.drains.add(decision("Preempted", uid="u1", workload="team/low"))
    assert await rig.drains.check() == 0, "no pod seen yet, but the quiet period is not over"
    rig.now = 0.5
    rig.pods.observe(pod("low-late", "u1"))  # the create that was in flight
    rig.now = 1.5
    assert await rig.drains.check() == 0, "the late pod holds the quota"
    rig.pods.observe(gone("low-late", "u1"))
    assert await rig.drains.check() == 1


async def test_a_failed_report_is_retried_not_lost() -> None:
    """The journal write may fail (Kafka restarting): the stop stays pending and
    the loop goes on (a fault run lost three reports when it did not)."""
    rig = Rig()
    rig.synced()
    calls: list[WorkloadStopped] = []

    async def flaky(event: WorkloadStopped) -> None:
        calls.append(event)
        if len(calls) == 1:
            raise RuntimeError("KafkaTimeoutError")
        rig.reports.append(event)

    rig.drains._report = flaky
    stop = asyncio.Event()
    rig.drains.add(decision("Preempted", uid="u1", workload="team/low"))
    task = asyncio.create_task(rig.drains.run(stop))
    for _ in range(100):
        if rig.reports:
            break
        await asyncio.sleep(0.05)
    stop.set()
    rig.drains._wake.set()
    await asyncio.wait_for(task, 3)
    assert len(calls) == 2 and len(rig.reports) == 1 and rig.drains.pending == {}


# --------------------------------------------------------------------------- PyTorchJobs (#18)


def owned(name: str, owner_uid: str, phase: str = "Running") -> Change:
    """A training-operator pod: no Job uid label, a controller owner reference."""
    md: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"pod-{name}",
        "labels": {TRAINING_JOB_NAME: "p"},
        "ownerReferences": [
            {"kind": "PyTorchJob", "name": "p", "uid": owner_uid, "controller": True}
        ],
    }
    return Change("UPSERT", "Pod", {"metadata": md, "status": {"phase": phase}})


def test_a_pytorchjobs_pods_are_counted_by_their_owner_over_every_cache() -> None:
    caches = PodCaches(None)
    jobs_cache, training_cache, ray_cache, _, _ = caches.caches
    assert caches.live("pt") is None, "not listed yet"
    for c in caches.caches:
        c.synced.set()
    training_cache.observe(owned("p-master-0", "pt"))
    training_cache.observe(owned("p-worker-0", "pt"))
    jobs_cache.observe(pod("j-1", "job"))
    assert (caches.live("pt"), caches.live("job")) == (2, 1)
    training_cache.observe(owned("p-master-0", "pt", phase="Failed"))  # done: holds nothing
    training_cache.observe(Change("DELETE", "Pod", owned("p-worker-0", "pt").object))
    assert caches.live("pt") == 0
    assert caches.changed.is_set(), "one event wakes the drains for every cache"
    ray_cache.observe(owned("r-head", "rc"))  # a RayCluster's pod (ray.io/cluster)
    assert caches.live("rc") == 1


def test_a_stopped_pytorchjob_is_settled_once_its_operator_says_suspended() -> None:
    pt: dict[str, Any] = {
        "kind": "PyTorchJob",
        "metadata": {"uid": "pt"},
        "spec": {"runPolicy": {"suspend": True}},
        "status": {"conditions": [{"type": "Running", "status": "True"}]},
    }
    assert not workload_settled(pt, "pt"), "the operator has not taken the stop in"
    pt["status"]["conditions"].append({"type": "Suspended", "status": "True"})
    assert workload_settled(pt, "pt")
    assert workload_settled(None, "pt") and workload_settled({"metadata": {"uid": "x"}}, "pt")
    done = {**pt, "status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert workload_settled(done, "pt")
    rc: dict[str, Any] = {
        "kind": "RayCluster",
        "metadata": {"uid": "rc"},
        "spec": {"suspend": True},
        "status": {"conditions": [{"type": "RayClusterSuspending", "status": "True"}]},
    }
    assert not workload_settled(rc, "rc")
    rc["status"]["conditions"] = [{"type": "RayClusterSuspended", "status": "True"}]
    assert workload_settled(rc, "rc")


# --------------------------------------------------------------------------- JobSets (#18)


def job_set_pod(name: str, job_set_uid: str, child_job_uid: str) -> Change:
    """A JobSet's pod: owned by a child Job (its controller-uid label), labelled with
    the JobSet's uid."""
    md: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"pod-{name}",
        "labels": {CONTROLLER_UID: child_job_uid, JOBSET_UID: job_set_uid},
        "ownerReferences": [
            {"kind": "Job", "name": "js-w-0", "uid": child_job_uid, "controller": True}
        ],
    }
    return Change("UPSERT", "Pod", {"metadata": md, "status": {"phase": "Running"}})


def test_a_job_sets_pods_are_counted_by_the_job_set_uid_not_their_jobs() -> None:
    caches = PodCaches(None)
    jobs_cache, _, _, job_set_cache, _ = caches.caches
    for c in caches.caches:
        c.synced.set()
    change = job_set_pod("js-w-0-0", "js", "child")
    job_set_cache.observe(change)
    jobs_cache.observe(change)  # the Job watch sees it too, under its Job
    assert (caches.live("js"), caches.live("child")) == (1, 1)
    job_set_cache.observe(Change("DELETE", "Pod", change.object))
    assert caches.live("js") == 0
    # the first list goes through the slim copy: still keyed by the JobSet
    slim = job_set_cache._slim(change.object)
    job_set_cache._rebuild({("ns", "js-w-0-0"): slim})
    assert caches.live("js") == 1


def test_a_stopped_job_set_is_settled_by_its_controller_or_when_none_reconciled_it() -> None:
    js: dict[str, Any] = {"kind": "JobSet", "metadata": {"uid": "js"}, "spec": {"suspend": True}}
    assert workload_settled(js, "js"), "suspended, no status: no controller made a Job of it"
    assert not workload_settled({**js, "spec": {"suspend": False}}, "js")
    js["status"] = {"replicatedJobsStatus": [{"name": "w", "active": 1}]}
    assert not workload_settled(js, "js"), "a controller runs it: wait for its Suspended"
    js["status"]["conditions"] = [{"type": "Suspended", "status": "True"}]
    assert workload_settled(js, "js")
    done = {
        **js,
        "spec": {"suspend": False},
        "status": {"conditions": [{"type": "Completed", "status": "True"}]},
    }
    assert workload_settled(done, "js")
    pt: dict[str, Any] = {"kind": "PyTorchJob", "metadata": {"uid": "pt"}}
    pt["spec"] = {"runPolicy": {"suspend": True}}
    assert not workload_settled(pt, "pt"), "only a JobSet settles without its controller"


# --------------------------------------------------------------------------- pod groups (#18)

QUEUE = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GATE = {"name": "kueue.x-k8s.io/admission"}


def group_pod(
    name: str,
    group: str | None = "g",
    phase: str = "Running",
    *,
    gated: bool = False,
    terminating: bool = False,
    owner: str | None = None,
) -> Change:
    """A Pod with the queue label: of pod group ``group`` (None: a single Pod)."""
    labels = {QUEUE: "lq"} | ({GROUP_LABEL: group} if group else {})
    md: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels}
    if terminating:
        md["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    if owner is not None:
        md["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": owner, "name": "j", "uid": "j", "controller": True}
        ]
    spec = {"schedulingGates": [GATE]} if gated else {}
    return Change("UPSERT", "Pod", {"metadata": md, "spec": spec, "status": {"phase": phase}})


def test_a_pod_groups_pods_are_counted_by_its_key_while_they_hold_anything() -> None:
    """The group's uid is its first Pod's: the others do not carry it. So its Pods are
    counted under the group's key: not ended, not gated, terminating ones included;
    a Job's pod with the queue label copied is its Job's, not a group's."""
    cache = PodGroupCache(None)
    cache.synced.set()
    cache.observe(group_pod("g-0", terminating=True))
    cache.observe(group_pod("g-1"))
    cache.observe(group_pod("g-2", gated=True))  # never started: holds nothing
    cache.observe(group_pod("g-3", phase="Succeeded"))
    cache.observe(group_pod("solo", group=None))
    cache.observe(group_pod("j-abc", owner="Job"))
    assert cache.live("ns/podgroup/g") == 2
    assert cache.live("uid-g-0") == 0, "not by the uid of any one Pod"
    assert cache.live("ns/pod/solo") == 1
    cache.observe(Change("DELETE", "Pod", group_pod("g-0").object))
    cache.observe(group_pod("g-1", phase="Failed"))  # kwok ends a deleted pod Failed first
    assert cache.live("ns/podgroup/g") == 0
    # the first list goes through the slim copy: still keyed by the group, still gated
    slim = {("ns", n): cache._slim(group_pod(n, **kw).object) for n, kw in
            (("g-1", {}), ("g-2", {"gated": True}), ("j-abc", {"owner": "Job"}))}  # fmt: skip
    cache._rebuild(slim)
    assert cache.live("ns/podgroup/g") == 1


async def test_a_pod_groups_stop_is_reported_once_its_pods_are_gone() -> None:
    now = [0.0]
    reports: list[WorkloadStopped] = []

    async def report(event: WorkloadStopped) -> None:
        reports.append(event)

    caches = PodCaches(None)
    for c in caches.caches:
        c.synced.set()
    group_cache = caches.caches[-1]
    assert isinstance(group_cache, PodGroupCache)
    drains = Drains(caches, report, settled=pods_settled, clock=lambda: now[0])
    for name in ("g-0", "g-1", "g-2"):
        group_cache.observe(group_pod(name))
    stop = decision("Preempted", workload="ns/podgroup/g", uid="uid-g-0")
    drains.add(stop)
    group_cache.observe(Change("DELETE", "Pod", group_pod("g-0").object))  # its uid's Pod
    assert await drains.check() == 0, "the group's other Pods still run"
    group_cache.observe(group_pod("g-1", terminating=True))
    group_cache.observe(Change("DELETE", "Pod", group_pod("g-2").object))
    assert await drains.check() == 0, "a terminating Pod still holds its GPUs"
    group_cache.observe(Change("DELETE", "Pod", group_pod("g-1").object))
    group_cache.observe(group_pod("g-0", gated=True))  # its owner made it again: gated
    assert await drains.check() == 1
    (stopped,) = reports
    assert (stopped.workload, stopped.uid, stopped.decision_id) == (
        "ns/podgroup/g",
        "uid-g-0",
        stop.id,
    )


def test_which_stops_are_a_pod_groups() -> None:
    assert pod_stop("ns/podgroup/g") and pod_stop("ns/pod/p")
    assert not pod_stop("ns/train") and not pod_stop("ns/pytorchjob/p")
    assert not pod_stop("ns/leaderworkerset/l/0")
    assert pods_settled(Stop("s", "Preempted", "ns/podgroup/g", "uid-g-0", 1.0))


# --------------------------------------------------------------------------- RayJobs (#18)


def ray_child(kind: str, name: str, uid: str, ray_job_uid: str, *, deleted: bool = False) -> Change:
    """A RayCluster or a submitter Job KubeRay made for a RayJob (its controller)."""
    md: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "labels": {"ray.io/originated-from-crd": "RayJob"},
        "ownerReferences": [
            {"apiVersion": "ray.io/v1", "kind": "RayJob", "uid": ray_job_uid, "controller": True}
        ],
    }
    return Change("DELETE" if deleted else "UPSERT", kind, {"metadata": md})


def cluster_pod(name: str, cluster_uid: str, phase: str = "Running") -> Change:
    """A pod of a RayJob's RayCluster: ray.io/cluster, owned by the RayCluster; KubeRay
    v1.5.0 puts no label naming the RayJob on it."""
    md: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"pod-{name}",
        "labels": {RAY_CLUSTER: "rj-x7k2p", "ray.io/node-type": "worker"},
        "ownerReferences": [
            {"kind": "RayCluster", "name": "rj-x7k2p", "uid": cluster_uid, "controller": True}
        ],
    }
    return Change("UPSERT", "Pod", {"metadata": md, "status": {"phase": phase}})


async def test_a_ray_jobs_pods_are_its_clusters_and_submitters_and_outlive_them() -> None:
    now = [0.0]
    caches = PodCaches(None)
    jobs_cache, _, ray_cache, _, _ = caches.caches
    children = caches.ray_jobs
    for owned_by in (children.clusters, children.jobs):
        owned_by._clock = lambda: now[0]
        assert (
            owned_by.resource.label_selector
            == RAY_JOB_CHILDREN
            == "ray.io/originated-from-crd=RayJob"
        )
    assert children.clusters.resource.path == "/apis/ray.io/v1/rayclusters"
    assert children.jobs.resource.path == "/apis/batch/v1/jobs"
    for c in caches.caches:
        c.synced.set()
    assert caches.live("rj", "RayJob") is None, "the RayClusters and Jobs not listed yet"
    children.clusters.synced.set()
    children.jobs.synced.set()
    # the pods are seen before their RayCluster: counted once it is known
    ray_cache.observe(cluster_pod("head", "c1"))
    ray_cache.observe(cluster_pod("w-0", "c1"))
    assert caches.live("rj", "RayJob") == 0
    children.clusters.observe(ray_child("RayCluster", "rj-x7k2p", "c1", "rj"))
    children.jobs.observe(ray_child("Job", "rj", "j1", "rj"))
    jobs_cache.observe(pod("rj-sub", "j1"))  # the submitter's pod, under its Job's uid
    assert caches.live("rj", "RayJob") == 3
    assert caches.live("rj") == 0, "without its kind, a uid is no RayJob's"
    assert caches.live("other", "RayJob") == 0
    # KubeRay deletes both in the background: their pods go after them, still counted
    children.clusters.observe(ray_child("RayCluster", "rj-x7k2p", "c1", "rj", deleted=True))
    children.jobs.observe(ray_child("Job", "rj", "j1", "rj", deleted=True))
    assert caches.live("rj", "RayJob") == 3
    ray_cache.observe(Change("DELETE", "Pod", cluster_pod("head", "c1").object))
    ray_cache.observe(cluster_pod("w-0", "c1", phase="Failed"))
    jobs_cache.observe(gone("rj-sub", "j1"))
    assert caches.live("rj", "RayJob") == 0
    # a deleted child is forgotten KEEP_GONE after its deletion
    now[0] = 3601.0
    assert children.clusters.children("rj") == [] and children.jobs.children("rj") == []


async def test_a_ray_job_child_deleted_while_no_watch_ran_is_kept_from_the_relist() -> None:
    now = [10.0]
    owned_by = PodCaches(None).ray_jobs.clusters
    owned_by._clock = lambda: now[0]
    owned_by.synced.set()
    owned_by.observe(ray_child("RayCluster", "a", "c1", "rj"))
    owned_by.observe(ray_child("RayCluster", "b", "c2", "rj"))
    kept = ray_child("RayCluster", "b", "c2", "rj").object
    owned_by.resync({("ns", "b"): kept})  # a new watcher listed: "a" is gone
    assert owned_by.children("rj") == ["c1", "c2"], "its pods may still go"
    now[0] = 10.0 + 3601.0
    assert owned_by.children("rj") == ["c2"], "the listed one stays"


async def test_a_stopped_ray_job_is_reported_once_its_children_pods_are_gone() -> None:
    caches = PodCaches(None)
    _, _, ray_cache, _, _ = caches.caches
    for c in (*caches.caches, caches.ray_jobs.clusters, caches.ray_jobs.jobs):
        c.synced.set()
    caches.ray_jobs.clusters.observe(ray_child("RayCluster", "rj-x7k2p", "c1", "rj"))
    ray_cache.observe(cluster_pod("head", "c1"))
    reports: list[WorkloadStopped] = []

    async def report(e: WorkloadStopped) -> None:
        reports.append(e)

    drains = Drains(caches, report)
    drains.add(decision("Evicted", uid="rj", workload="ns/rayjob/rj", reason="InactiveWorkload"))
    assert await drains.check() == 0, "the cluster's head pod still runs"
    ray_cache.observe(Change("DELETE", "Pod", cluster_pod("head", "c1").object))
    assert await drains.check() == 1
    assert reports[0].workload == "ns/rayjob/rj" and reports[0].uid == "rj"


def test_a_stopped_ray_job_is_settled_once_kuberay_says_suspended() -> None:
    rj: dict[str, Any] = {
        "kind": "RayJob",
        "metadata": {"uid": "rj"},
        "spec": {"suspend": True},
        "status": {"jobDeploymentStatus": "Running"},
    }
    assert not workload_settled(rj, "rj"), "KubeRay has not taken the stop in"
    for going in ("Initializing", "Suspending", "Retrying", "Waiting", "ValidationFailed"):
        rj["status"]["jobDeploymentStatus"] = going
        assert not workload_settled(rj, "rj"), going
    rj["status"]["jobDeploymentStatus"] = "Suspended"  # its RayCluster and Job deleted
    assert workload_settled(rj, "rj")
    rj["status"]["jobDeploymentStatus"] = "New"  # nothing made yet (Kueue: not active)
    assert workload_settled(rj, "rj")
    assert not workload_settled({**rj, "spec": {"suspend": False}}, "rj"), "not suspended"
    assert workload_settled({**rj, "status": {}}, "rj"), "never reconciled: nothing made"
    done = {**rj, "spec": {"suspend": False}, "status": {"jobDeploymentStatus": "Complete"}}
    assert workload_settled(done, "rj")
    assert workload_settled(None, "rj") and workload_settled({"metadata": {"uid": "x"}}, "rj")
