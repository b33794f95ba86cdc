"""Stopped Jobs' pods, watched until they are gone: the ``WorkloadStopped`` reports.

Theory of operation: the fold keeps a stopped workload's quota until the
actuator says its pods are gone (docs/design/quota-until-pods-gone.md). A
:class:`PodCache` lists and watches the pods that carry the Job controller's
``batch.kubernetes.io/controller-uid`` label (in every namespace; a slim copy:
name, uid label, phase, deletionTimestamp) and counts per Job uid the pods not
in phase Succeeded or Failed, terminating ones included. :class:`Drains` holds
the stops waiting for that count to reach 0: one entry per stop decision
(Preempted, Evicted, Deactivated, Finished with reason Deleted), added once the
lane applied the stop (so a suspended Job and an orphaned one alike), and at
start-up from the read model's stops without ``QuotaReleased`` (a restart loses
no report). When the count is 0 on a synced watch, the stop has been watched
for ``quiet`` seconds, and the Job controller has taken the stop in (``settled``:
the Job gone, replaced, finished or with its ``Suspended`` condition True and its
own ``active`` and ``terminating`` counts 0, so no pod it was still creating
comes late), it journals ``WorkloadStopped``;
until then it logs and writes a Warning Event every ``warn_every`` seconds. It
runs beside the lanes: no decision waits for it.

A pod group or a single Pod (#18) has no uid of its own that its Pods carry: the
group's uid is the uid of its first Pod (``kuota.api.parse_workloads.
pod_group_workload``), which the other Pods know nothing of. So its Pods are
watched by the queue label and counted by the group's workload key
(:class:`PodGroupCache`: ``ns/podgroup/<group>``, ``ns/pod/<name>``), and a
stop of a pod group waits for that key's count: its Pods not ended and not
gated (a Pod still gated never ran and never will without an admission; Kueue
leaves it too). Nothing but the group's owner makes its Pods again, and a new
Pod is gated at creation, so the stop is settled once they are gone
(:func:`pods_settled`).

A RayJob (#18) owns no pod itself: KubeRay v1.5.0 makes a RayCluster and, in
``K8sJobMode``, a submitter Job for it, both with the RayJob as controller owner
and the label ``ray.io/originated-from-crd: RayJob``, and their pods carry no
label naming the RayJob (only ``ray.io/cluster`` and the Job controller's). So
:class:`RayJobChildren` list+watches RayClusters and Jobs with that label and
remembers each one's uid under its owner's; a RayJob's pods are its children's,
counted by the ``ray.io/cluster`` and the Job watches under the child's uid. A
child's entry outlives its deletion (``keep`` seconds): KubeRay deletes both in
the background when the RayJob is suspended, so their pods are still going away
when the RayJob already says ``Suspended``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kuota import kinds
from kuota.actuation.patch import STOPPING, EventSpec
from kuota.actuation.plan_workloads import finished
from kuota.actuation.workloads import suspended
from kuota.api.parse_workloads import ADMISSION_GATE, POD_GROUP_NAME_LABEL, pod_workload_key
from kuota.events.schema import Decision, WorkloadStopped
from kuota.kube.watch import Change, Resource, Watcher

log = logging.getLogger("kuota.actuator")

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
#: The label the training-operator puts on a PyTorchJob's pods (#18); they are
#: counted by their controller owner's uid, the PyTorchJob's.
TRAINING_JOB_NAME = "training.kubeflow.org/job-name"
#: What the pods of each kind kuota stops carry: (label selector of the watch,
#: whether the owner is read from the Job controller's uid label, else the owner).
#: KubeRay's label on a RayCluster's pods (#18), counted by their owner too.
RAY_CLUSTER = "ray.io/cluster"
#: The JobSet controller's label on every pod of a JobSet (#18): its pods are owned
#: by its child Jobs, so they are counted by this label's value, the JobSet's uid.
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
POD_SELECTORS = (
    (CONTROLLER_UID, True),
    (TRAINING_JOB_NAME, False),
    (RAY_CLUSTER, False),
    (JOBSET_UID, True),
)
#: KubeRay's label on the RayCluster and the submitter Job it makes for a RayJob (not
#: on their pods): :class:`RayJobChildren` watches them for their owner's uid.
RAY_ORIGIN = "ray.io/originated-from-crd"
RAY_JOB_CHILDREN = f"{RAY_ORIGIN}=RayJob"
#: Seconds a deleted child of a RayJob stays counted under it (its pods go after it).
KEEP_GONE = 3600.0
#: The kinds whose controller may never have written a status: a JobSet (or a RayJob)
#: is settled once suspended if no controller has reconciled it (module docstring of
#: the loop).
UNRECONCILED_SETTLES = frozenset({"JobSet", "RayJob"})
#: A RayJob's ``status.jobDeploymentStatus`` once KubeRay has taken a suspension in
#: (its RayCluster and submitter Job deleted: ``Suspended``), or in which KubeRay has
#: made neither yet (``New``; Kueue's ``IsActive`` is false for both).
RAY_JOB_SETTLED = frozenset({"Suspended", "New"})
#: The condition each operator sets once it has taken a suspension in (the pods deleted).
SUSPENDED_CONDITIONS = frozenset({"Suspended", "RayClusterSuspended"})
PODS_PATH = "/api/v1/pods"
DONE_PHASES = frozenset({"Succeeded", "Failed"})
REPORT_TIMEOUT = 30.0  # seconds one WorkloadStopped write may take before it is retried


def is_stop(decision: Decision) -> bool:
    """A decision after which the Job's pods must be gone before its quota is free."""
    return decision.type in STOPPING or (
        decision.type == "Finished" and decision.reason == "Deleted"
    )


def _owner_uid(md: dict[str, Any]) -> str | None:
    for ref in md.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


def _slim(pod: dict[str, Any], key: str = CONTROLLER_UID) -> dict[str, Any]:
    md = pod.get("metadata") or {}
    uid = _job_uid(pod, key)  # a training kind's pod: its controller's uid
    return {
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
            "labels": {CONTROLLER_UID: uid},
            "deletionTimestamp": md.get("deletionTimestamp"),
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def _job_uid(pod: dict[str, Any], key: str = CONTROLLER_UID) -> str | None:
    """The uid of the workload object a pod belongs to: the label ``key`` (the Job
    controller's; a JobSet's pod: ``JOBSET_UID``), else the controller owner's (a
    PyTorchJob's pod). A slim copy keeps it under ``CONTROLLER_UID``."""
    md = pod.get("metadata") or {}
    labels = md.get("labels") or {}
    uid = labels.get(key)
    if not isinstance(uid, str):
        uid = labels.get(CONTROLLER_UID) if key != CONTROLLER_UID else None
    return uid if isinstance(uid, str) else _owner_uid(md)


def _running(pod: dict[str, Any]) -> bool:
    """Not done: pending, running, unknown, or terminating (deletionTimestamp set)."""
    return (pod.get("status") or {}).get("phase") not in DONE_PHASES


class PodCache:
    """Job pods by their Job's uid: how many are not done (module docstring).
    ``selector``: the pods watched (a Job's; a PyTorchJob's by ``TRAINING_JOB_NAME``,
    counted by their controller owner's uid, #18). Subclasses say otherwise how a
    pod is counted (:meth:`key_of`, :meth:`holds`, :meth:`_slim`)."""

    def __init__(
        self,
        api: client.ApiClient | None,
        selector: str = CONTROLLER_UID,
        changed: asyncio.Event | None = None,
        *,
        by_label: bool = False,
    ) -> None:
        self._api = api
        self._selector = selector
        # the workload's uid is the selector label's value (a Job's, a JobSet's pods)
        self._key = selector if by_label else CONTROLLER_UID
        self._live: dict[str, set[tuple[str, str]]] = {}  # Job uid -> pods not done
        self._watcher: Watcher | None = None
        self.synced = asyncio.Event()  # the current watcher has listed
        self.changed = changed if changed is not None else asyncio.Event()

    def live(self, uid: str) -> int | None:
        """Pods of the Job ``uid`` not done, or None while the list is not in."""
        if not self.synced.is_set():
            return None
        return len(self._live.get(uid, ()))

    def key_of(self, pod: dict[str, Any]) -> str | None:
        """What the pod is counted under: its workload's uid (None: not counted)."""
        return _job_uid(pod, self._key)

    def holds(self, pod: dict[str, Any]) -> bool:
        """The pod still holds what its workload was charged: not done."""
        return _running(pod)

    def observe(self, change: Change) -> None:
        uid = self.key_of(change.object)
        if uid is None:
            return
        pods = self._live.setdefault(uid, set())
        if change.type == "UPSERT" and self.holds(change.object):
            pods.add(change.key)
        else:
            pods.discard(change.key)
        if not pods:
            del self._live[uid]
        self.changed.set()

    def _rebuild(self, known: dict[tuple[str, str], dict[str, Any]]) -> None:
        live: dict[str, set[tuple[str, str]]] = {}
        for key, pod in known.items():
            uid = self.key_of(pod)
            if uid is not None and self.holds(pod):
                live.setdefault(uid, set()).add(key)
        self._live = live

    async def run(self) -> None:
        assert self._api is not None
        backoff = 0.5
        resource = Resource("Pod", PODS_PATH, label_selector=self._selector)
        while True:
            self.synced.clear()
            watcher = Watcher(self._api, resource, remember=self._slim)
            poll = asyncio.create_task(self._mark_synced(watcher))
            try:
                async for change in watcher.changes():
                    self.observe(change)  # the first list's too: adding twice is a no-op
                    backoff = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure: list and watch again
                log.warning(
                    "Pod (%s): list/watch failed (%s); retrying in %.1fs",
                    self._selector,
                    err,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 15.0)
            finally:
                poll.cancel()

    def _slim(self, pod: dict[str, Any]) -> dict[str, Any]:
        return _slim(pod, self._key)

    async def _mark_synced(self, watcher: Watcher) -> None:
        # The Watcher fills ``known`` and sets ``resource_version`` in one step of
        # its first list: the full list, so pods deleted while no watch ran are gone.
        while watcher.resource_version is None:
            await asyncio.sleep(0.02)
        self._rebuild(watcher.known)
        self.synced.set()
        self.changed.set()


def _gated(pod: dict[str, Any]) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates
    )


class PodGroupCache(PodCache):
    """The Pods of pod groups and single Pods (#18): those with the queue label, but a
    Job's (or another admitted kind's) pod, counted by their group's workload key
    while they hold anything: not ended, and not gated (module docstring)."""

    def __init__(self, api: client.ApiClient | None, changed: asyncio.Event | None = None):
        super().__init__(api, kinds.QUEUE_NAME_LABEL, changed)

    def key_of(self, pod: dict[str, Any]) -> str | None:
        return pod_workload_key(pod)

    def holds(self, pod: dict[str, Any]) -> bool:
        return _running(pod) and not _gated(pod)

    def _slim(self, pod: dict[str, Any]) -> dict[str, Any]:
        md = pod.get("metadata") or {}
        labels = md.get("labels") or {}
        kept = (kinds.QUEUE_NAME_LABEL, POD_GROUP_NAME_LABEL)
        owners = [
            {k: ref.get(k) for k in ("apiVersion", "kind", "controller")}
            for ref in md.get("ownerReferences") or ()
            if isinstance(ref, dict) and ref.get("controller") is True
        ]
        return {
            "metadata": {
                "name": md.get("name"),
                "namespace": md.get("namespace"),
                "uid": md.get("uid"),
                "resourceVersion": md.get("resourceVersion"),
                "labels": {k: labels[k] for k in kept if k in labels},
                "ownerReferences": owners,
                "deletionTimestamp": md.get("deletionTimestamp"),
            },
            "spec": {"schedulingGates": [{"name": ADMISSION_GATE}] if _gated(pod) else []},
            "status": {"phase": (pod.get("status") or {}).get("phase")},
        }


def pod_stop(workload: str) -> bool:
    """The stop is a pod group's or a single Pod's: its Pods are counted by its key."""
    ref = kinds.workload_ref(workload) if workload.count("/") == 2 else None
    return ref is not None and ref.kind == "Pod"


def pods_settled(_stop: Stop) -> bool:
    """A stopped pod group is settled once its Pods are gone: no controller of kuota's
    makes them again (its owner's new Pods are gated at creation)."""
    return True


class OwnedBy:
    """The objects of one kind that KubeRay made for RayJobs (selected by
    :data:`RAY_JOB_CHILDREN`): each one's uid under its controller owner's uid, kept
    ``keep`` seconds after it is deleted (module docstring)."""

    def __init__(
        self,
        api: client.ApiClient | None,
        kind: str,
        changed: asyncio.Event | None = None,
        *,
        keep: float = KEEP_GONE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self.resource = Resource(kind, kinds.get(kind).path(), label_selector=RAY_JOB_CHILDREN)
        self.changed = changed if changed is not None else asyncio.Event()
        self._keep = keep
        self._clock = clock
        self._owner: dict[str, str] = {}  # child uid -> its owner's uid
        self._gone: dict[str, float] = {}  # child uid -> when it was seen deleted
        self.synced = asyncio.Event()

    def children(self, owner: str) -> list[str] | None:
        """The uids of ``owner``'s children (deleted ones within ``keep``), or None while
        the first list is not in."""
        if not self.synced.is_set():
            return None
        now = self._clock()
        for uid, since in list(self._gone.items()):
            if now - since > self._keep:
                del self._gone[uid]
                self._owner.pop(uid, None)
        return sorted(uid for uid, o in self._owner.items() if o == owner)

    def observe(self, change: Change) -> None:
        md = change.object.get("metadata") or {}
        uid, owner = md.get("uid"), _owner_uid(md)
        if not isinstance(uid, str) or owner is None:
            return
        self._owner[uid] = owner
        if change.type == "DELETE":
            self._gone.setdefault(uid, self._clock())
        else:
            self._gone.pop(uid, None)
        self.changed.set()

    def resync(self, known: dict[tuple[str, str], dict[str, Any]]) -> None:
        """A new watcher has listed: a child missing from the list was deleted while no
        watch ran (its entry kept ``keep`` seconds from now)."""
        listed = {(o.get("metadata") or {}).get("uid") for o in known.values()}
        now = self._clock()
        for uid in self._owner:
            if uid not in listed:
                self._gone.setdefault(uid, now)

    async def run(self) -> None:
        assert self._api is not None
        backoff = 0.5
        while True:
            watcher = Watcher(self._api, self.resource, remember=_slim_owned)
            poll = asyncio.create_task(self._mark_synced(watcher))
            try:
                async for change in watcher.changes():
                    self.observe(change)
                    backoff = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure: list and watch again
                if isinstance(err, ApiException) and err.status == 404:
                    # no KubeRay CRD: no RayJob has children here; looked for again
                    self.synced.set()
                    backoff = 30.0
                log.warning(
                    "%s (%s): list/watch failed (%s); retrying in %.1fs",
                    self.resource.kind,
                    RAY_JOB_CHILDREN,
                    err,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)
            finally:
                poll.cancel()

    async def _mark_synced(self, watcher: Watcher) -> None:
        while watcher.resource_version is None:
            await asyncio.sleep(0.02)
        self.resync(watcher.known)
        self.synced.set()
        self.changed.set()


def _slim_owned(obj: dict[str, Any]) -> dict[str, Any]:
    md = obj.get("metadata") or {}
    owners = [
        {"uid": ref.get("uid"), "controller": True}
        for ref in md.get("ownerReferences") or ()
        if isinstance(ref, dict) and ref.get("controller") is True
    ]
    return {
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
            "ownerReferences": owners,
        }
    }


class RayJobChildren:
    """The RayClusters and submitter Jobs of RayJobs (:class:`OwnedBy` each): a RayJob's
    pods are theirs (module docstring)."""

    def __init__(self, api: client.ApiClient | None, changed: asyncio.Event | None = None):
        self.clusters = OwnedBy(api, "RayCluster", changed)
        self.jobs = OwnedBy(api, "Job", changed)

    def of(self, ray_job_uid: str) -> list[str] | None:
        """The uids of the RayJob's RayClusters and submitter Jobs, or None until both
        lists are in."""
        clusters, jobs = self.clusters.children(ray_job_uid), self.jobs.children(ray_job_uid)
        if clusters is None or jobs is None:
            return None
        return clusters + jobs


class PodCaches:
    """Several :class:`PodCache` (one per selector of :data:`POD_SELECTORS`, and the
    pod groups' :class:`PodGroupCache`) read as one: a workload's pods not done over
    all of them, None until each has listed. A Job's uid is no pod group's key, nor
    the reverse, so each count comes from the caches that know it. A RayJob's pods
    are its children's (:class:`RayJobChildren`)."""

    def __init__(self, api: client.ApiClient | None) -> None:
        self.changed = asyncio.Event()
        self.caches = [
            PodCache(api, sel, self.changed, by_label=by_label) for sel, by_label in POD_SELECTORS
        ]
        self.caches.append(PodGroupCache(api, self.changed))
        self.ray_jobs = RayJobChildren(api, self.changed)

    def live(self, uid: str, kind: str = "") -> int | None:
        """Pods not done of the workload ``uid`` (of ``kind``: a RayJob's are its
        children's), None while a list is not in."""
        uids = [uid]
        if kind == "RayJob":
            children = self.ray_jobs.of(uid)
            if children is None:
                return None
            uids += children
        total = 0
        for cache in self.caches:
            for one in uids:
                n = cache.live(one)
                if n is None:
                    return None
                total += n
        return total


@dataclass(slots=True)
class Stop:
    """A stop decision whose Job's pods are awaited."""

    stop_id: str
    kind: str  # the decision's type
    workload: str
    uid: str
    at: float  # the decision's event time


@dataclass(slots=True)
class _Pending:
    stop: Stop
    since: float
    warned: float


Report = Callable[[WorkloadStopped], Awaitable[None]]
Warn = Callable[[Stop, EventSpec, int], None]
Settled = Callable[[Stop], bool]


def job_settled(job: dict[str, Any] | None, uid: str) -> bool:
    """Whether the Job controller is done with a stopped Job's pods: the Job is gone
    or replaced, finished, or suspended with its ``Suspended`` condition True (it
    sets that once it has taken the suspension in; a pod it was creating from an
    earlier sync exists by then)."""
    if job is None or ((job.get("metadata") or {}).get("uid") or uid) != uid:
        return True
    conditions = (job.get("status") or {}).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if not isinstance(c, dict) or c.get("status") != "True":
            continue
        if c.get("type") in ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"):
            return True  # finished, or finishing: it creates no more pods
        if c.get("type") == "Suspended" and (job.get("spec") or {}).get("suspend") is True:
            # and the controller's own count agrees (Kueue's rule: active and
            # terminating both 0), so a pod our watch has not delivered yet is no
            # surprise; an absent count is 0 (a status never written)
            status = job.get("status") or {}
            return not status.get("active") and not status.get("terminating")
    return False


def workload_settled(obj: dict[str, Any] | None, uid: str) -> bool:
    """:func:`job_settled` for a training kind (#18): gone or replaced, finished, or
    suspended with its operator's suspended condition True (``Suspended``, KubeRay's
    ``RayClusterSuspended``: set in the reconcile that deletes the pods, so no pod
    of the stopped run comes after it). A JobSet (:data:`UNRECONCILED_SETTLES`)
    also once suspended with no status at all: no JobSet controller has reconciled
    it, so no child Job, hence no pod, of it exists (docs/design/workload-kinds.md).
    A RayJob has no such condition: settled once suspended with KubeRay's
    ``status.jobDeploymentStatus`` in :data:`RAY_JOB_SETTLED` (``Suspended``: its
    RayCluster and submitter Job deleted; ``New``: neither made yet), or with no
    status (KubeRay's first reconcile of a RayJob makes neither)."""
    if obj is None or ((obj.get("metadata") or {}).get("uid") or uid) != uid:
        return True
    if finished(obj):
        return True
    if obj.get("kind") in UNRECONCILED_SETTLES and not obj.get("status"):
        return suspended(obj) is True
    if obj.get("kind") == "RayJob":
        deployment = (obj.get("status") or {}).get("jobDeploymentStatus")
        return suspended(obj) is True and deployment in (*RAY_JOB_SETTLED, "", None)
    conditions = (obj.get("status") or {}).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(c, dict)
            and c.get("type") in SUSPENDED_CONDITIONS
            and c.get("status") == "True"
        ):
            return suspended(obj) is True
    return False


class Drains:
    """The stops whose Jobs still have pods, reported once they are gone."""

    def __init__(
        self,
        pods: PodCache | PodCaches,
        report: Report,
        *,
        warn: Warn | None = None,
        warn_every: float = 60.0,
        settled: Settled = lambda _stop: True,
        quiet: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pods = pods
        self._report = report
        self._warn = warn
        self._settled = settled
        # seconds a stop is watched before it may be reported: a pod the Job
        # controller was creating when the stop was applied surfaces by then
        self.quiet = quiet
        self.warn_every = warn_every
        self._clock = clock
        self.pending: dict[str, _Pending] = {}  # stop decision id -> its wait
        self._wake = asyncio.Event()

    def add(self, decision: Decision) -> None:
        """Watch the pods of a stop's Job until they are gone."""
        if is_stop(decision) and decision.workload:
            self.watch(
                Stop(decision.id, decision.type, decision.workload, decision.uid or "", decision.at)
            )

    def watch(self, stop: Stop) -> None:
        """Watch a stop's Job pods (also a stop the read model still drains at start-up)."""
        if stop.stop_id in self.pending:
            return
        now = self._clock()
        self.pending[stop.stop_id] = _Pending(stop, now, now)
        self._wake.set()

    def released(self, stop_id: str | None) -> None:
        """The fold released that stop's quota (its QuotaReleased): nothing to report."""
        if stop_id is not None:
            self.pending.pop(stop_id, None)

    async def check(self) -> int:
        """Report the stops whose pods are gone; warn about long waits. Returns
        how many were reported."""
        reported = 0
        now = self._clock()
        for stop_id, wait in list(self.pending.items()):
            d = wait.stop
            # a pod group's Pods by its key (module docstring), any other's by its uid
            counted = d.workload if pod_stop(d.workload) else d.uid
            live = self._live(counted, d.workload) if counted else 0
            # not settled: the Job controller may still create a pod of the stopped run
            if live == 0 and now - wait.since >= self.quiet and self._settled(d):
                waited = now - wait.since
                report = self._report(
                    WorkloadStopped(
                        id=f"workloadstopped/{stop_id}",
                        at=d.at,  # the actuator never advances event time
                        workload=d.workload,
                        uid=d.uid,
                        decision_id=stop_id,
                        waited=round(waited, 3),
                    )
                )
                await asyncio.wait_for(report, REPORT_TIMEOUT)  # a hung write is retried
                self.pending.pop(stop_id, None)
                reported += 1
                log.info("%s %s %s: pods gone after %.1fs", stop_id, d.kind, d.workload, waited)
            elif live is not None and now - wait.warned >= self.warn_every:
                wait.warned = now
                text = (
                    f"{live} pod(s) of the stopped Job are not gone after {now - wait.since:.0f}s "
                    f"(terminating ones included); its quota stays charged until they are"
                    if live
                    else f"the Job controller has not taken the stop in after "
                    f"{now - wait.since:.0f}s (no Suspended condition); its quota stays charged"
                )
                log.warning("%s %s %s: %s", stop_id, d.kind, d.workload, text)
                if self._warn is not None:
                    self._warn(d, EventSpec("StopPending", text, "Warning"), int(now - wait.since))
        return reported

    def _live(self, counted: str, workload: str) -> int | None:
        if not isinstance(self._pods, PodCaches):
            return self._pods.live(counted)
        ref = kinds.workload_ref(workload) if workload.count("/") == 2 else None
        return self._pods.live(counted, ref.kind if ref is not None else "")

    async def run(self, stop: asyncio.Event) -> None:
        failures = 0
        while not stop.is_set():
            self._wake.clear()
            self._pods.changed.clear()
            if self.pending:
                try:
                    await self.check()
                    failures = 0
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # e.g. Kafka away: the stop stays pending
                    failures += 1
                    log.warning("pods-gone report not written (%r); retrying", err)
                    await asyncio.sleep(min(5.0, 0.2 * 2**failures))
            waits = [
                asyncio.ensure_future(self._wake.wait()),
                asyncio.ensure_future(self._pods.changed.wait()),
            ]
            timeout = 1.0
            for wait in self.pending.values():  # wake when a quiet period ends
                left = wait.since + self.quiet - self._clock()
                if left > 0:
                    timeout = min(timeout, left + 0.01)
            try:
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(*waits, return_exceptions=True)
