"""The fold's state, and the helpers every layer of it uses.

Theory of operation: :class:`FoldState` holds everything a Fold knows, in
plain picklable containers (dicts used as ordered sets, lists, frozen
dataclasses), so that a deepcopy or pickle continues exactly as the original:
the observed objects (with each ClusterQueue's
:class:`~kuota.core.assign.flavors.QueueView`), the quota forest, one queue
per ClusterQueue and the ``ready`` set of those that may have a head to try,
the workload records and their *holds* (what could unblock a workload that
cannot reach a queue -> its key), the *waiters* (per cohort tree,
flavor-resource and ClusterQueue, a heap of what parked groups and blocked
heads need), caches keyed by interned ids, and the
:class:`~kuota.core.fold.timers.Timers` component. Field by field:
docs/design/fold.md. The layers on top: ``placement``, ``cycle``,
``preempting``, ``fold`` (see :mod:`kuota.core.fold.hooks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kuota.api.nodes import Node
from kuota.api.types import (
    ClusterQueue,
    Cohort,
    Configuration,
    LabelSelector,
    LocalQueue,
    ObjectRef,
    PodMember,
    PodSet,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from kuota.core.assign.fitting import Picks
from kuota.core.assign.flavors import (
    PodSetPlan,
    PodSetRequest,
    QueueView,
)
from kuota.core.dra.charging import DraInventory, NotChargeable
from kuota.core.dra.placement import CounterKey, DeviceId, FitMemo, GangPod
from kuota.core.dra.placement_types import Consumes
from kuota.core.fold.decisions import inadmissible, rejected
from kuota.core.fold.node_fit import NodeSets, Placed
from kuota.core.fold.timers import Timers
from kuota.core.pickling import register_by_fields
from kuota.core.queueing.afs import AfsLedger
from kuota.core.queueing.queues import ClusterQueueQueue
from kuota.core.queueing.verdict import Verdict, gang_prefix
from kuota.core.queueing.workload import (
    INADMISSIBLE,
    Fit,
    HoldKey,
    WorkloadRecord,
)
from kuota.core.quota.history import UsageHistory
from kuota.core.quota.tree import (
    FlavorResource,
    QuotaTree,
)

# Messages are cut here: they may quote a bad value (a Rejected's field value,
# an Inadmissible's CEL expression), and a decision must stay far below Kafka's
# record size limit (1 MB by default) or admission could not produce it. No
# message of valid input comes near the Inadmissible cap.
MAX_REJECTED_MESSAGE = 2000
MAX_INADMISSIBLE_MESSAGE = 100_000


def _capped(message: str, limit: int) -> str:
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit} more characters)"


# (namespace, podsets, the ResourceClaims they name directly that are already
# carried in the ClusterQueue they would be admitted to: charged nothing here)
ChargeKey = tuple[str, tuple[PodSet, ...], tuple[str, ...]]
ChargeResult = tuple[PodSetRequest, ...] | NotChargeable
Waiter = tuple[int, int, int]  # (amount needed, shape or BLOCKED_HEAD, epoch)


@dataclass(slots=True)
class Drain:
    """The quota a stopped workload keeps until the actuator reports its pods gone
    (``WorkloadStopped`` for ``decision``, the stop decision's id;
    docs/design/quota-until-pods-gone.md)."""

    decision: str
    workload: str
    uid: str
    cluster_queue: str
    usage: tuple[tuple[FlavorResource, int], ...]


@dataclass(slots=True)
class ChargeGroup:
    """Workloads that share (namespace, podsets) and so share a charge. Kept for
    the current DRA inventory and configuration; pruned when empty."""

    key: ChargeKey
    result: ChargeResult
    members: dict[str, None]  # pending members
    shapes: dict[int, int]  # priority -> shape id of (priority, result)


@dataclass(slots=True)
class ClaimCharge:
    """A direct ResourceClaim's charge carried in one ClusterQueue: the quota it
    took when its first user there was admitted, held until its last admitted
    user there stops (core/fold/direct_claims.py)."""

    usage: tuple[tuple[FlavorResource, int], ...]
    users: dict[str, None]  # admitted (or draining) workloads naming it


def selector_matches(selector: LabelSelector, labels: dict[str, str]) -> bool:
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In":
            ok = present and labels[req.key] in req.values
        elif req.operator == "NotIn":
            ok = not present or labels[req.key] not in req.values
        elif req.operator == "Exists":
            ok = present
        elif req.operator == "DoesNotExist":
            ok = not present
        else:
            ok = False
        if not ok:
            return False
    return True


class FoldState:
    """All the state of a Fold (see the module docstring)."""

    def __init__(self) -> None:
        self._now = 0.0
        self._flavors: dict[str, ResourceFlavor] = {}
        self._cqs: dict[str, ClusterQueue] = {}
        self._views: dict[str, QueueView] = {}
        self._cohorts: dict[str, Cohort] = {}
        # Cohorts whose latest version would close a cycle of cohorts: not in force
        # (the previous version, if any, is), tried again whenever a cohort changes.
        self._cohort_pending: dict[str, Cohort] = {}
        self._lqs: dict[tuple[str, str], LocalQueue] = {}
        self._wpcs: dict[str, WorkloadPriorityClass] = {}
        self._namespaces: dict[str, dict[str, str]] = {}
        self._config = Configuration()
        self._config_source: ObjectRef | None = None
        self._inventory = DraInventory()
        self._nodes: dict[str, Node] = {}  # by name (per-node DRA placement, #17)
        # Devices kuota placed admitted workloads on, held until their pods are gone
        # (core/fold/node_fit.py), or until they are all ready, when their claims
        # stand for them: workload -> devices, and device -> workload
        self._device_holds: dict[str, tuple[DeviceId, ...]] = {}
        self._devices_held: dict[DeviceId, str] = {}
        # Direct ResourceClaims not allocated yet whose devices were placed with their
        # first user (core/fold/holds.py): (namespace, claim) -> the node; their
        # devices are held under holds.claim_hold_key until the claim is allocated,
        # deleted, or named by no admitted workload
        self._claim_holds: dict[tuple[str, str], str] = {}
        # What the cluster really allocated: each allocated ResourceClaim, whoever owns
        # it, (namespace, name) -> its devices; and device -> how many of those claims
        # take it (a device shared by several claims counts once). Taken = held or
        # claimed (core/fold/node_fit.py); kept apart from the DRA inventory, whose
        # generation a claim, frequent and charging nothing, must not move.
        self._claims: dict[tuple[str, str], tuple[DeviceId, ...]] = {}
        self._claimed: dict[DeviceId, int] = {}
        # Shares of devices several claims may use at once (allowMultipleAllocations,
        # KEP-5075): taken from nobody, they spend the device's capacity counters.
        # Per holder (a workload or a claim's holds.claim_hold_key), the shares it
        # holds with what each spends; per allocated claim, its shares as the
        # scheduler recorded them (device, consumedCapacity), what they spend read
        # from the inventory when counted (placement_devices.claim_share).
        self._share_holds: dict[str, tuple[tuple[DeviceId, Consumes], ...]] = {}
        self._claim_shares: dict[
            tuple[str, str], tuple[tuple[DeviceId, tuple[tuple[str, int], ...]], ...]
        ] = {}
        # When a hold may end at PodsReady: only once a claim of the workload's
        # namespace was allocated after its hold began (its pods' claims, as far as
        # the fold can tell; a journal from before ingest watched claims, or a
        # simulator file, whose pods get none, keeps holds until the pods are gone).
        # The number of claim allocations seen, the latest one's per namespace, and
        # that number when each hold began.
        self._claim_seq = 0
        self._allocated_at: dict[str, int] = {}
        self._held_since: dict[str, int] = {}
        # What a preemption's victim frees once its hold ended (core/fold/node_victims.py):
        # each allocated claim's allocation number, and per admitted workload whose hold
        # ended at PodsReady (until its pods are gone) the allocation numbers its hold
        # spanned and the nodes of its hold: (began, ended, nodes)
        self._claim_at: dict[tuple[str, str], int] = {}
        self._stood_for: dict[str, tuple[int, int, frozenset[str]]] = {}
        # the devices a preemptor waiting for its victims' pods will be placed on
        # (found with the victims' devices freed): device -> preemptor; taken for
        # every other head until it is admitted or gone (core/fold/preempting.py)
        self._devices_reserved: dict[DeviceId, str] = {}
        # (ClusterQueue, shape or BLOCKED_HEAD) -> epoch: heads whose quota fit but
        # that no node could take; a hold released, a claim's devices freed, or a
        # node or DRA change wakes them
        # (epoch, its pods, whether they are its whole gang: woken only once the
        # gang can be placed, what it asks: holds.DeviceHolds._question)
        self._placement_waiters: dict[
            tuple[str, int], tuple[int, tuple[GangPod, ...], bool, object]
        ] = {}
        # the same waiters by what they ask: the question's number -> (the
        # question, waiter -> its place in _placement_waiters' order), so that a
        # release asks each question once and visits only the waiters it wakes
        self._asking: dict[int, tuple[object, dict[tuple[str, int], int]]] = {}
        self._waiter_seq = 0  # the place the next new placement waiter takes
        # the number of the last question made (the fold's, not the memo's: a
        # question outlives the memo that made it, in the waiters that ask it)
        self._question_seq = 0
        # the placement found for the head about to be admitted: (workload, placed)
        self._placing: tuple[str, Placed] | None = None
        # (constraints, flavors) -> the nodes they allow, and each workload's gang as
        # placement built it; cleared when a Node or a ResourceFlavor changes
        self._eligible = NodeSets()
        # the counters the held and claimed devices spend (each once), and their
        # shares, as of inventory generation _counters_at
        self._held_counters: dict[CounterKey, int] = {}
        self._counters_at = -1
        # which pods fit alone on which nodes, with what is held and claimed now:
        # every change of those touches the nodes it concerns
        self._fit_memo = FitMemo()
        self._tree = QuotaTree()
        self._queues: dict[str, ClusterQueueQueue] = {}
        self._inactive: dict[str, Verdict] = {}  # ClusterQueue -> why it admits nothing
        self._ready: dict[str, None] = {}  # ClusterQueues that may have a head to try
        self._workloads: dict[str, WorkloadRecord] = {}  # not finished
        self._finished_uids: dict[str, str] = {}  # finished workload -> uid, until deleted
        # an object that is several workloads (a LeaderWorkerSet) -> their keys
        self._workload_groups: dict[str, tuple[str, ...]] = {}
        # pod groups (kuota.core.fold.pod_groups): workload key -> Pod -> member;
        # (namespace, Pod) -> workload key; an incomplete group -> pods announced
        self._pod_groups: dict[str, dict[str, PodMember]] = {}
        self._pod_of: dict[tuple[str, str], str] = {}
        self._pod_waiting: dict[str, int] = {}
        self._holds: dict[HoldKey, dict[str, None]] = {}
        # JobChanged refusals: workload -> the Job's generation the actuator found,
        # which the fold must see before it admits the workload again
        self._job_changed: dict[str, int | None] = {}
        self._lq_members: dict[tuple[str, str], dict[str, None]] = {}
        self._admitted: dict[str, dict[str, None]] = {}
        self._pending_count: dict[str, int] = {}  # ClusterQueue -> pending workloads for it
        # cohort tree -> flavor-resource -> ClusterQueue -> heap of (needed, shape, epoch)
        self._waiters: dict[str, dict[FlavorResource, dict[str, list[Waiter]]]] = {}
        # cohort tree -> (ClusterQueue, shape or BLOCKED_HEAD) -> epoch: the parked
        # groups and blocked heads whose preemption search found no victim; any
        # release in the tree sends them to search again (Kueue requeues a
        # tree's inadmissible workloads when one of its workloads finishes or is
        # evicted), however little it frees
        self._searchers: dict[str, dict[tuple[str, int], int]] = {}
        self._shapes: dict[tuple[int, tuple[PodSetRequest, ...]], int] = {}
        # admission fair sharing: shapes per (priority, charge, lane) in fair queues
        # (ids shared with _shapes), and the LocalQueues' usage (core/fold/fairadmission.py)
        self._lane_shapes: dict[tuple[int, tuple[PodSetRequest, ...], str], int] = {}
        self._afs = AfsLedger()
        self._history = UsageHistory()  # history-aware fair sharing (core/quota/history.py)
        # Direct ResourceClaims (core/fold/direct_claims.py): (ClusterQueue, namespace,
        # claim) -> its charge there; and workload -> the keys it is a user of
        self._claim_charges: dict[tuple[str, str, str], ClaimCharge] = {}
        self._claim_users: dict[str, tuple[tuple[str, str, str], ...]] = {}
        self._charge_ids: dict[ChargeKey, int] = {}
        self._charge_groups: dict[int, ChargeGroup] = {}
        self._charge_prune_at = 1024
        # (queue, shape) -> its podsets' plan, and the Assignment of each fit seen
        self._plans: dict[tuple[str, int], tuple[tuple[PodSetPlan, ...], dict[Picks, Fit]]] = {}
        self._formatted: dict[int, str] = {}
        self._ns_cache: dict[tuple[str, str], bool] = {}
        self._out: list[dict[str, Any]] = []  # the current event's decisions (decisions.py)
        self._timers = Timers()  # WaitForPodsReady and plan-wait timers
        # Stopped workloads whose pods may still run (kuota.core.fold.draining): stop
        # decision id -> its Drain, and (workload, uid) -> that decision id
        self._drains: dict[str, Drain] = {}
        self._draining: dict[tuple[str, str], str] = {}
        # preemptor waiting for its victims' pods -> (ClusterQueue, usage): charged in
        # the search's view of the tree (Draining._lift), so no other head counts on
        # the quota its victims free
        self._reserved: dict[str, tuple[str, tuple[tuple[FlavorResource, int], ...]]] = {}
        self._cause = ""  # the id of the event being applied (its decisions' ids derive from it)
        # Objects whose latest version was Rejected ("ClusterQueue a" -> (reason,
        # message)), until a version is accepted or the object is deleted: the
        # message of a workload whose ClusterQueue or LocalQueue was rejected, and
        # the simulator's summary (Fold.rejections)
        self._rejections: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------ decisions

    def _inadmissible(self, rec: WorkloadRecord, verdict: Verdict) -> None:
        rec.state = INADMISSIBLE
        seen = verdict.key
        if rec.last_verdict == seen:
            return
        rec.last_verdict = seen
        message = verdict.message()
        if verdict.podsets and len(rec.requests) > 1:  # a gang short of quota: say of what
            message = gang_prefix(rec.spec.owner_kind, rec.requests) + message
        self._out.append(
            inadmissible(
                workload=rec.key,
                uid=rec.spec.uid,
                cluster_queue=rec.cluster_queue,
                reason=verdict.reason,
                message=_capped(message, MAX_INADMISSIBLE_MESSAGE),
            )
        )

    def _rejected(self, ref: ObjectRef, message: str, reason: str = "InvalidObject") -> None:
        message = _capped(message, MAX_REJECTED_MESSAGE)  # it may quote a huge bad value
        obj = str(ref)
        self._rejections.pop(obj, None)  # the latest last (Fold.rejections is in order)
        self._rejections[obj] = (reason, message)
        self._out.append(rejected(object=obj, reason=reason, message=message))

    # ------------------------------------------------------------------ lookups

    def _drains_in(self, cq_name: str) -> int:
        """How many stopped workloads still keep quota in this ClusterQueue."""
        if not self._drains:
            return 0
        return sum(1 for d in self._drains.values() if d.cluster_queue == cq_name)

    def _set_cq(self, rec: WorkloadRecord, cq: str | None) -> None:
        if rec.cluster_queue == cq:
            return
        if rec.cluster_queue is not None:
            self._pending_count[rec.cluster_queue] -= 1
        if cq is not None:
            self._pending_count[cq] = self._pending_count.get(cq, 0) + 1
        rec.cluster_queue = cq

    def _namespace_selected(self, cq: ClusterQueue, namespace: str) -> bool:
        ck = (cq.name, namespace)
        hit = self._ns_cache.get(ck)
        if hit is None:
            selector = cq.namespace_selector
            labels = self._namespaces.get(namespace, {})
            # No selector at all admits every namespace; see docs/design/namespace-selector.md.
            hit = selector is None or selector_matches(selector, labels)
            self._ns_cache[ck] = hit
        return hit


register_by_fields(Drain, ClaimCharge)
