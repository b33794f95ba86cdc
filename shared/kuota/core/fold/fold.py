"""The decision fold: journal events in, Kueue-style decisions out.

Theory of operation: ``Fold.apply`` takes one journal event, updates the
state and returns the decisions it caused. Nothing else moves the state: no
clock, no randomness, no I/O, and every iteration is over lists, sorted keys
or insertion-ordered dicts, so the same events always give the same
decisions, and a deepcopy or pickle of a Fold continues exactly as the
original. This module is the top layer (the layers: :mod:`kuota.core.fold.hooks`):
the public API, the dispatch of journal events, and the queue objects whose
changes re-evaluate or wake the workloads they affect (a priority class,
LocalQueue or Namespace re-places those held for it; a Configuration or DRA
object charges pending workloads again, but a ResourceClaim, which takes or
frees devices on nodes, charges again only the pending workloads whose pods
name it directly (core/fold/direct_claims.py); a ClusterQueue, Cohort or
ResourceFlavor, which wakes whole cohort trees, is the layer below's:
:mod:`kuota.core.fold.cohorts`). Decision ids are ``decision_id(event.id, i)``, with
``cause`` the event id and ``cause_offset`` the offset given. Details, and the
handling of invalid objects and cycles of cohorts: docs/design/fold.md.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kuota import kinds
from kuota.api.dra import ResourceClaim, parse_dra_object
from kuota.api.managed import namespace_managed
from kuota.api.nodes import Node
from kuota.api.parse import object_ref, parse_job, parse_object
from kuota.api.types import (
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    ObjectRef,
    PodMember,
    ResourceFlavor,
    ValidationError,
    WorkloadGroup,
    WorkloadPriorityClass,
    WorkloadSpec,
)
from kuota.core.assign.flavors import (
    queue_view,
)
from kuota.core.dra.charging import DraInventory
from kuota.core.fold.backstop import (
    JOB_CHANGED,
    LOCAL_QUEUE_CHANGED,
    PODSETS_CHANGED,
    QUEUE_LABEL_REMOVED,
    generation_seen,
    observation_only,
    podsets_change,
    runs_without_admission,
)
from kuota.core.fold.claim_templates import dra_changed
from kuota.core.fold.cohorts import Cohorts
from kuota.core.fold.decisions import (
    finished,
    identify,
    requeued,
    suspended,
)
from kuota.core.fold.pod_groups import remove_pod, upsert_pod
from kuota.core.pickling import register_by_fields
from kuota.core.queueing.workload import (
    ADMITTED,
    FINISHED,
    WorkloadRecord,
)
from kuota.core.quota.rows import ClusterQueueSummary, QuotaRow, summarise
from kuota.events.schema import (
    ActuationFailed,
    Decision,
    JournalEvent,
    decision_id,
    trusted_decision,
)

__all__ = ["ClusterQueueSummary", "Fold"]

_CONFIG_KINDS = kinds.names("config")
_WORKLOAD_KINDS = kinds.names("workload")
# ActuationFailed of an Admitted decision: JobNotFound keeps the quota (the Job's
# delete, which releases it, is on its way); these requeue (contention, not the
# Job), and JobChanged once the fold has seen the changed Job (Cycle._refused_changed);
# any other reason holds the workload until its Job changes.
JOB_NOT_FOUND = "JobNotFound"
REQUEUE_FAILURES = frozenset({"Conflict", "ActuationLoop"})


class Fold(Cohorts):
    """State + journal event -> new state + decisions (see the module docstring)."""

    @property
    def now(self) -> float:
        """The latest event time seen."""
        return self._now

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]:
        """Fold one journal event; returns the decisions it caused, in order."""
        at = event.at
        if at > self._now:
            self._now = at
        elif event.type == "ActuationFailed":
            at = self._now  # its at is the failed decision's: decide at the time known now
        out: list[dict[str, Any]] = []
        self._out, self._cause = out, event.id
        if self._preempted_now:
            self._preempted_now.clear()  # who was preempted during the previous event
        if self._timers.heap:
            self._fire_timers(at, inclusive=False)  # overdue: before the event
        if self._config.admission_fair_sharing is not None and self._afs.due(at):
            self._afs_sample(at)  # core/fold/fairadmission.py
        if self._config.fair_sharing.enable and self._history.due(at):
            self._history_sample(at)
        # Dispatch on the discriminator: isinstance on pydantic models is slow.
        if event.type == "ObjectUpserted":
            self._upsert(event.object, at)
        elif event.type == "WorkloadFinished":
            key = event.workload or f"{event.namespace}/{event.name}"
            self._finished(key, event.succeeded, event.message)
        elif event.type == "PodsReady":
            rec = self._workloads.get(event.workload or f"{event.namespace}/{event.name}")
            self._timers.pods_ready(self._config, rec, event.ready, at)
            if event.ready and self._device_holds and rec is not None and rec.state == ADMITTED:
                self._end_hold(rec)  # its claims stand for its devices now (#17)
        elif event.type == "ObjectDeleted":
            self._delete(event.kind, event.name, event.namespace)
        elif event.type == "PreemptionPlan":
            self._apply_plan(event, at)
        elif event.type == "ActuationFailed":
            self._actuation_failed(event)
        elif event.type == "WorkloadStopped":  # its pods are gone (core/fold/draining.py)
            self._workload_stopped(event)
        # else: Tick: time only.
        if self._timers.heap:
            self._fire_timers(at, inclusive=True)  # due at this instant: after the event
        if self._ready:
            self._schedule(at)
        self._out = []
        if not out:
            return []
        eid = event.id
        decisions: list[Decision] = []
        for i, d in enumerate(out):
            d["id"] = did = decision_id(eid, i)
            d["cause"] = eid
            d["cause_offset"] = offset
            d["at"] = at
            identify(d)
            if d["type"] == "Admitted":  # the backstop's staleness rule
                rec = self._workloads.get(d["workload"])
                if rec is not None:
                    rec.admitted_id = did
            decisions.append(trusted_decision(d))  # built here: no validation needed
        return decisions

    def next_wakeup(self) -> float | None:
        """Earliest event time at which a timer fires (a PodsReady timeout, the
        end of a requeue backoff), or None."""
        return self._next_timer()

    def workload_state(self, key: str) -> str | None:
        rec = self._workloads.get(key)
        if rec is not None:
            return rec.state
        return FINISHED if key in self._finished_uids else None

    def rejections(self) -> list[tuple[str, str, str]]:
        """(object, reason, message) of every object whose latest version was
        Rejected and is not in force, in the order they were rejected."""
        return [(obj, reason, message) for obj, (reason, message) in self._rejections.items()]

    def summary(self) -> list[ClusterQueueSummary]:
        """Every ClusterQueue's quota rows and workload counts (kuota.core.quota.rows)."""
        return summarise(self._cqs, self._tree, self._pending_count, self._admitted)

    # ================================================================== decisions

    def _upsert(self, manifest: dict[str, Any], at: float) -> None:
        kind = manifest.get("kind")
        if self._rejections:  # a new version: rejected again below, or no longer
            self._rejections.pop(str(object_ref(manifest)), None)
        if kind == "ResourceClaim":
            self._upsert_claim(manifest)
            return
        if isinstance(kind, str) and DraInventory.handles(kind):
            before = self._inventory.generation
            error = self._inventory.upsert(manifest)
            if error is not None:
                self._rejected(error.ref, str(error))
            if self._inventory.generation != before:
                dra_changed(self)  # a template: only its namespace's users
            return
        obj = parse_object(manifest, at=at)
        if obj is None:
            if kind == "Job":
                self._unlabelled_job(manifest, at)
            return
        if type(obj) is WorkloadSpec:  # the commonest by far
            self._upsert_workload(obj)
        elif isinstance(obj, ValidationError):
            self._rejected(obj.ref, str(obj))
            self._queue_rejected(obj.ref)
        elif isinstance(obj, WorkloadSpec):
            self._upsert_workload(obj)
        elif isinstance(obj, WorkloadGroup):
            self._upsert_group(obj)
        elif isinstance(obj, PodMember):
            upsert_pod(self, obj)
        elif isinstance(obj, ResourceFlavor):
            self._set_flavor(obj.name, obj)
        elif isinstance(obj, ClusterQueue):
            self._set_cluster_queue(obj)
        elif isinstance(obj, Cohort):
            self._set_cohort(obj)
        elif isinstance(obj, LocalQueue):
            self._set_local_queue((obj.namespace, obj.name), obj)
        elif isinstance(obj, WorkloadPriorityClass):
            self._wpcs[obj.name] = obj
            self._reevaluate(self._holds.pop(("wpc", obj.name), {}))
        elif isinstance(obj, Namespace):
            self._set_namespace(obj.name, dict(obj.labels))
        elif isinstance(obj, Node):
            if self._nodes.get(obj.name) != obj:
                self._nodes[obj.name] = obj  # placement (#17): what a node offers moved
                self._eligible.clear()
                self._wake_unplaced()
        elif isinstance(obj, Configuration):
            ref = ObjectRef(str(kind), _meta_name(manifest), _meta_namespace(manifest, str(kind)))
            self._set_config(obj, ref)

    def _delete(self, kind: str, name: str, namespace: str) -> None:
        if self._rejections:
            ref = object_ref({"kind": kind, "metadata": {"name": name, "namespace": namespace}})
            self._rejections.pop(str(ref), None)
        if DraInventory.handles(kind):
            before = self._inventory.generation
            self._inventory.delete(kind=kind, name=name, namespace=namespace)
            if self._inventory.generation != before:
                dra_changed(self)
        elif kind == "ResourceClaim":
            if self._claims or self._claim_shares:
                self._set_claim((namespace, name), ())
            if self._claim_holds:
                self._release_claim_hold(namespace or "default", name)
            if self._inventory.set_claim(namespace or "default", name, None):
                self._claim_changed(namespace or "default", name)
        elif kind == "Job":
            self._delete_workload(f"{namespace or 'default'}/{name}")
        elif kind == "Pod":
            remove_pod(self, namespace or "default", name)
        elif kind in _WORKLOAD_KINDS:
            ns = namespace or "default"
            group = self._workload_groups.pop(kinds.workload_key(kind, ns, name), None)
            if group is not None:  # a LeaderWorkerSet: each of its groups
                for key in group:
                    self._delete_workload(key)
            else:
                self._delete_workload(kinds.workload_key(kind, ns, name))
        elif kind == "ResourceFlavor":
            self._set_flavor(name, None)
        elif kind == "ClusterQueue":
            self._remove_cluster_queue(name)
        elif kind == "Cohort":
            self._remove_cohort(name)
        elif kind == "LocalQueue":
            self._set_local_queue((namespace or "default", name), None)
        elif kind == "WorkloadPriorityClass":
            self._wpcs.pop(name, None)  # admitted and queued workloads keep their priority
        elif kind == "Namespace":
            self._set_namespace(name, None)
        elif kind == "Node":
            if self._nodes.pop(name, None) is not None:
                self._eligible.clear()
                self._wake_unplaced()  # its holds stay until their workloads' pods are gone
        elif kind in _CONFIG_KINDS:
            source = self._config_source
            if source is not None and (source.kind, source.name) == (kind, name):
                self._set_config(Configuration(), None)

    def _upsert_claim(self, manifest: dict[str, Any]) -> None:
        """A ResourceClaim, whoever owns it: the devices its allocation takes count as
        taken on their nodes (``DeviceHolds._set_claim``); only the pending workloads
        whose pods name it directly, and whose charge read it, are charged again
        (``DirectClaims._claim_changed``; claims change often). An invalid claim is
        Rejected and its previous version stays in force: forgetting the devices it
        took would count them free."""
        claim = parse_dra_object(manifest)
        if isinstance(claim, ValidationError):
            self._rejected(claim.ref, str(claim))
        elif isinstance(claim, ResourceClaim):
            shares = tuple(((d, p, n), consumed) for d, p, n, _, consumed in claim.shares)
            exclusive = claim.allocated
            if shares:  # a share takes its device from nobody
                shared = {d for d, _ in shares}
                exclusive = tuple(d for d in exclusive if d not in shared)
            self._set_claim((claim.namespace, claim.name), exclusive, shares)
            if self._inventory.set_claim(claim.namespace, claim.name, claim):
                self._claim_changed(claim.namespace, claim.name)  # a direct claim's users

    def _queue_rejected(self, ref: ObjectRef) -> None:
        """A ClusterQueue, LocalQueue or ResourceFlavor with no version in force was
        rejected: the workloads that wait for it say so (Placement._missing, and
        the inactive ClusterQueue's verdict for a flavor)."""
        if ref.kind == "ClusterQueue" and ref.name not in self._cqs:
            self._reevaluate(dict(self._holds.pop(("cq", ref.name), {})))
        elif ref.kind == "LocalQueue" and (ref.namespace, ref.name) not in self._lqs:
            self._reevaluate(dict(self._lq_members.get((ref.namespace, ref.name), {})))
        elif ref.kind == "ResourceFlavor" and ref.name not in self._flavors:
            self._flavor_changed(ref.name)

    def _upsert_group(self, group: WorkloadGroup) -> None:
        """An object that is several workloads (a LeaderWorkerSet's groups): each
        is upserted; a group it no longer has is deleted (scaled down)."""
        specs = group.specs
        keys = tuple(spec.key for spec in specs)
        key = kinds.workload_key(group.kind, group.namespace, group.name)
        for gone in self._workload_groups.get(key, ()):
            if gone not in keys:
                self._delete_workload(gone)
        self._workload_groups[key] = keys
        for spec in specs:
            self._upsert_workload(spec)

    def _unlabelled_job(self, manifest: dict[str, Any], at: float) -> None:
        """A Job without a queue label: ours if kuota already queued it (same uid)
        or its namespace is managed (docs/design/backstop.md); else ignored."""
        meta = manifest.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        ns, name = meta.get("namespace") or "default", meta.get("name")
        if not isinstance(ns, str) or not isinstance(name, str):
            return
        known = self._workloads.get(f"{ns}/{name}")
        managed = namespace_managed(self._config, ns, self._namespaces.get(ns, {}))
        if known is None and not managed:
            return
        spec = parse_job(manifest, at=at, managed=True)
        if isinstance(spec, ValidationError):
            if managed or (known is not None and known.spec.uid == meta.get("uid")):
                self._rejected(spec.ref, str(spec))
        elif spec is not None and (managed or (known is not None and known.spec.uid == spec.uid)):
            self._upsert_workload(spec)

    def _suspend(self, rec: WorkloadRecord) -> None:
        """The backstop (kuota.core.fold.backstop): suspend the Job again."""
        self._out.append(
            suspended(workload=rec.key, uid=rec.spec.uid, cluster_queue=rec.cluster_queue)
        )

    def _upsert_workload(self, spec: WorkloadSpec) -> None:
        key = spec.key
        finished_uid = self._finished_uids.get(key)
        if finished_uid is not None:
            if finished_uid == spec.uid:
                return  # the finished Job seen again (a status update)
            del self._finished_uids[key]  # a new Job under the same name
        rec = self._workloads.get(key)
        if rec is not None and rec.spec.uid != spec.uid:
            # The Job was replaced under the same name without us seeing the delete.
            self._delete_workload(key)
            rec = None
        if rec is None:
            rec = WorkloadRecord(spec=spec, order=(0, spec.creation_seconds, key))  # order_key
            self._workloads[key] = rec
            self._place(rec)
            if spec.suspended is False and runs_without_admission(rec, spec):
                self._suspend(rec)
            return
        if rec.spec == spec:
            return
        old = rec.spec
        if old.queue_name and not spec.queue_name:
            rec.label_removed = True
        if rec.state == ADMITTED:
            self._admitted_changed(rec, spec)
            return
        if spec.suspended is False and runs_without_admission(rec, spec):
            self._suspend(rec)
        elif spec.suspended is True and rec.admitted_id is not None:
            rec.admitted_id = None  # kuota's stop seen: a start under that id now is forged
        # A JobChanged refusal waits for the Job as the actuator found it (or later).
        refused = key in self._job_changed and generation_seen(spec, self._job_changed[key])
        if refused:
            del self._job_changed[key]
        if observation_only(old, spec) and not refused:
            rec.spec = spec  # only spec.suspend or the actuator's record: it keeps its place
            return
        if self._timers.spec_changed(rec, spec):
            return  # waiting out a PodsReady backoff with the new spec
        self._detach(rec)
        rec.spec = spec
        self._place(rec)

    def _admitted_changed(self, rec: WorkloadRecord, spec: WorkloadSpec) -> None:
        """An admitted workload's Job changed: it keeps its admission unless it
        was deactivated, lost its queue label, was moved to another LocalQueue (the
        admission was in the old one's ClusterQueue: evicted and queued in the new
        one), or its podsets changed (Kueue makes a new Workload then: evicted and
        queued again, never charged the old shape)."""
        old = rec.spec
        if not spec.active:
            self._evict(rec, "InactiveWorkload", "the workload was deactivated", requeue=False)
        elif not spec.queue_name:
            self._evict(
                rec,
                QUEUE_LABEL_REMOVED,
                "the queue label was removed from the admitted Job; its quota is released",
                requeue=False,
            )
        elif spec.podsets != old.podsets or spec.queue_name != old.queue_name:
            key, cq_name = rec.key, rec.cluster_queue
            if spec.podsets != old.podsets:
                reason, message = PODSETS_CHANGED, podsets_change(old, spec)
            else:
                reason = LOCAL_QUEUE_CHANGED
                message = (
                    f"the {old.owner_kind} was moved from LocalQueue {old.queue_name} to "
                    f"{spec.queue_name} after it was admitted; it is queued there"
                )
            self._evict(rec, reason, message, requeue=False)
            self._out.append(
                requeued(workload=key, uid=spec.uid, cluster_queue=cq_name, reason=reason)
            )
        else:
            if spec.generation != old.generation:  # the generation the next Admitted carries
                rec.spec = replace(old, generation=spec.generation)
            return  # an admitted workload keeps its admission
        rec.spec = spec
        self._place(rec)

    def _delete_workload(self, key: str) -> None:
        self._finished_uids.pop(key, None)
        rec = self._workloads.pop(key, None)
        if rec is None:
            return
        self._forget(key)
        if rec.state == ADMITTED:
            self._release(rec)
            message = (
                f"the {rec.spec.owner_kind} was deleted; "
                "its quota is released once its pods are gone"
            )
        else:
            self._detach(rec)
            message = f"the {rec.spec.owner_kind} was deleted before it was admitted"
        self._out.append(
            finished(
                workload=key,
                uid=rec.spec.uid,
                cluster_queue=rec.cluster_queue,
                reason="Deleted",
                message=message,
            )
        )

    def _finished(self, key: str, succeeded: bool, message: str) -> None:
        rec = self._workloads.get(key)
        if rec is None:
            return
        if rec.state == ADMITTED:
            self._release(rec, drain=False)  # a finished Job's pods are done
        else:
            self._detach(rec)
        # A finished workload is only remembered by its uid (until its Job is
        # deleted): state stays small however long the journal is.
        del self._workloads[key]
        self._forget(key)
        self._finished_uids[key] = rec.spec.uid
        reason = "Succeeded" if succeeded else "Failed"
        self._out.append(
            finished(
                workload=key,
                uid=rec.spec.uid,
                cluster_queue=rec.cluster_queue,
                reason=reason,
                message=message or f"the {rec.spec.owner_kind} {reason.lower()}",
            )
        )

    def _actuation_failed(self, event: ActuationFailed) -> None:
        """The actuator could not start an admitted Job (transient errors it
        retries untold). The quota goes back at once; the workload is queued
        again after contention, else held until its Job changes, which would
        fail the same way (Kueue finishes it; docs/kueue-differences.md)."""
        if event.decision_type != "Admitted" or event.reason == JOB_NOT_FOUND:
            return  # a stop that could not be written, or a Job whose delete is coming
        key = event.workload
        rec = self._workloads.get(key)
        adm = rec.admission if rec is not None else None
        if rec is None or adm is None or rec.state != ADMITTED or adm.at != event.at:
            return  # not the admission that failed (a later one, or none any more)
        if rec.admitted_id is not None and rec.admitted_id != event.decision_id:
            return  # a later admission at the same event time
        message = (
            f"the Job could not be started with its admission: {event.message or event.reason}"
        )
        if event.reason == JOB_CHANGED:
            self._refused_changed(rec, event.generation, message)
            return
        if event.reason in REQUEUE_FAILURES:
            self._evict(
                rec, event.reason, message + "; it is queued again", requeue=True, drain=False
            )
            return
        self._evict(
            rec, event.reason, message + "; its quota is released", requeue=False, drain=False
        )
        self._forget(key)
        self._hold(
            rec,
            (("failed", key),),
            (event.reason, message + "; it waits until the Job is changed"),
        )

    def _set_local_queue(self, key: tuple[str, str], lq: LocalQueue | None) -> None:
        if lq is None:
            if self._lqs.pop(key, None) is None:
                return
        elif self._lqs.get(key) == lq:
            return
        else:
            self._lqs[key] = lq
        self._reevaluate(self._lq_members.get(key, {}))
        if lq is not None:  # its weight may have changed
            self._afs_rerank(lq.cluster_queue, [f"{key[0]}/{key[1]}"])

    def _set_namespace(self, name: str, labels: dict[str, str] | None) -> None:
        if labels is None:
            if self._namespaces.pop(name, None) is None:
                return
        elif self._namespaces.get(name) == labels:
            return
        else:
            self._namespaces[name] = labels
        self._ns_cache.clear()
        keys: dict[str, None] = {}
        for (ns, _), members in self._lq_members.items():
            if ns == name:
                keys.update(members)
        self._reevaluate(keys)

    def _set_config(self, config: Configuration, source: ObjectRef | None) -> None:
        self._config_source = source
        if config == self._config:
            return
        fair_changed = config.fair_sharing.enable != self._config.fair_sharing.enable
        old_afs = self._config.admission_fair_sharing
        afs_changed = config.admission_fair_sharing != old_afs
        afs_toggled = (config.admission_fair_sharing is None) != (old_afs is None)
        self._config = config
        if fair_changed:
            for name, cq in self._cqs.items():
                self._views[name] = queue_view(cq, fair_sharing=config.fair_sharing.enable)
            self._plans.clear()
        self._recharge()
        if afs_changed:
            self._afs_reset(afs_toggled)
        self._wake_roots(self._tree.all_roots())

    # ================================================================== visibility

    def pending_workloads(self, cluster_queue: str) -> list[tuple[str, str]]:
        """Kueue's pending-workloads visibility for a ClusterQueue: its queued
        workloads in queue order (priority, then creation time; in a
        ClusterQueue with admission fair sharing, by their LocalQueue's usage
        first), parked ones included, each as (``namespace/name``, LocalQueue name). Workloads held
        outside any queue (no LocalQueue, priority class or ClusterQueue yet)
        are not listed. Read-only; for ``kuota explain``."""
        queue = self._queues.get(cluster_queue)
        if queue is None:
            return []
        workloads = self._workloads
        return [(key, workloads[key].spec.queue_name) for key in queue.queued_keys()]


def _meta_name(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _meta_namespace(manifest: dict[str, Any], kind: str) -> str:
    if kind != "ConfigMap":
        return ""
    meta = manifest.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return ns if isinstance(ns, str) and ns else "default"


register_by_fields(QuotaRow, ClusterQueueSummary)
