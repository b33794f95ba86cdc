"""Where a pending workload waits: a ClusterQueue's queue, or a hold.

Theory of operation: :meth:`Placement._place` makes the checks Kueue makes
before a workload can compete for quota, in order, and stops at the first that
fails: deactivated (``kuota.dev/active: "false"``, a Deactivated decision),
then an Inadmissible hold for a Job without a queue label (managed namespace,
or label removed: docs/design/backstop.md), a silent hold while the pods of
its previous admission are still stopping, a missing WorkloadPriorityClass, a missing or
stopped LocalQueue, a missing ClusterQueue, a namespaceSelector that does not
select the namespace (no selector at all selects every namespace, unlike
Kueue: docs/design/namespace-selector.md), a podset that cannot be charged
(DRA), a resource the ClusterQueue does not cover. A hold is filed under an
index key naming what could unblock it. A workload that passes joins its
queue under its *shape* (priority + charged podsets); charges are computed
once per (namespace, podsets) *charge group*, again by :meth:`_recharge` when
the DRA inventory or the configuration changes. :meth:`_detach` is the inverse.
"""

from __future__ import annotations

from kuota.api.types import PodSet
from kuota.core.assign.flavors import (
    PodSetRequest,
)
from kuota.core.dra.charging import (
    NotChargeable,
    charge_claim,
    charge_podset,
    direct_claims,
    pod_devices,
)
from kuota.core.fold.backstop import unlabelled_reason
from kuota.core.fold.decisions import deactivated
from kuota.core.fold.state import ChargeGroup, ChargeKey, ChargeResult, FoldState
from kuota.core.queueing.verdict import text_verdict
from kuota.core.queueing.workload import (
    ADMITTED,
    DEACTIVATED,
    PENDING,
    HoldKey,
    WorkloadRecord,
)


class Placement(FoldState):
    """Placing pending workloads (module docstring)."""

    def _hold(self, rec: WorkloadRecord, keys: tuple[HoldKey, ...], why: tuple[str, str]) -> None:
        rec.holds = keys
        for hk in keys:
            self._holds.setdefault(hk, {})[rec.key] = None
        self._inadmissible(rec, text_verdict(*why))

    def _charge(self, key: ChargeKey) -> ChargeResult:
        """Charge every podset (per-pod vector × count) against the current DRA
        inventory and configuration; each ResourceClaim named directly once, in the
        first podset naming it, unless it is already carried (core/fold/direct_claims.py)."""
        namespace, podsets, carried = key
        requests: list[PodSetRequest] = []
        seen: set[str] = set()
        for ps in podsets:
            charge = charge_podset(
                inventory=self._inventory, config=self._config, namespace=namespace, podset=ps
            )
            if isinstance(charge, NotChargeable):
                return charge
            totals = tuple((res, qty * ps.count) for res, qty in charge.per_pod)
            devices = pod_devices(inventory=self._inventory, namespace=namespace, podset=ps)
            claims: list[tuple[str, tuple[tuple[str, int], ...]]] = []
            for name in direct_claims(ps) if ps.claims else ():
                if name in seen or name in carried:
                    claims.append((name, ()))
                    continue
                seen.add(name)
                whole = charge_claim(
                    inventory=self._inventory,
                    config=self._config,
                    namespace=namespace,
                    name=name,
                    pod_claim=next(c.name for c in ps.claims if c.resource_claim_name == name),
                )
                if isinstance(whole, NotChargeable):
                    return whole
                summed = dict(totals)
                for res, qty in whole.per_pod:
                    summed[res] = summed.get(res, 0) + qty
                totals = tuple(sorted(summed.items()))
                claims.append((name, whole.per_pod))
            requests.append(
                PodSetRequest(
                    ps.name,
                    ps.count,
                    totals,
                    ps.node_selector,
                    ps.required_affinity,
                    ps.tolerations,
                    devices.requests,
                    devices.claims,
                    devices.constraints,
                    tuple(claims),
                )
            )
        return tuple(requests)

    def _charge_group(self, key: ChargeKey) -> tuple[int, ChargeGroup]:
        cid = self._charge_ids.get(key)
        if cid is not None:
            return cid, self._charge_groups[cid]
        if len(self._charge_groups) >= self._charge_prune_at:
            self._prune_charge_groups()
        cid = len(self._charge_ids)
        while cid in self._charge_groups:
            cid += 1
        self._charge_ids[key] = cid
        group = self._charge_groups[cid] = ChargeGroup(key, self._charge(key), {}, {})
        return cid, group

    def _prune_charge_groups(self) -> None:
        for cid in [c for c, g in self._charge_groups.items() if not g.members]:
            del self._charge_ids[self._charge_groups.pop(cid).key]
        self._charge_prune_at = max(1024, 2 * len(self._charge_groups))

    def _place(self, rec: WorkloadRecord) -> None:
        """Put a pending workload where it waits: a ClusterQueue queue or a hold."""
        spec = rec.spec
        key = rec.key  # == spec.key (the record's order key ends with it)
        rec.state = PENDING
        if not spec.active:
            self._set_cq(rec, None)
            rec.state = DEACTIVATED
            verdict = text_verdict("InactiveWorkload", "the workload is deactivated")
            if rec.last_verdict != verdict.key:
                rec.last_verdict = verdict.key
                self._out.append(
                    deactivated(
                        workload=key, uid=spec.uid, reason=verdict.reason, message=verdict.text
                    )
                )
            return
        if not spec.queue_name:
            self._set_cq(rec, None)
            self._hold(rec, (), unlabelled_reason(rec))  # the Job's next change re-places it
            return
        if self._draining and (key, spec.uid) in self._draining:
            # Stopped, and its pods still hold its quota: it competes again once they
            # are gone (QuotaReleased re-places it; docs/design/quota-until-pods-gone.md).
            self._set_cq(rec, None)
            hold = ("drain", key, spec.uid)
            rec.holds = (hold,)
            self._holds.setdefault(hold, {})[key] = None
            return
        lq_key = (spec.namespace, spec.queue_name)
        self._lq_members.setdefault(lq_key, {})[key] = None
        priority = 0
        if spec.priority_class is not None:
            wpc = self._wpcs.get(spec.priority_class)
            if wpc is None:
                self._set_cq(rec, None)
                self._hold(
                    rec,
                    (("wpc", spec.priority_class),),
                    (
                        "PriorityClassNotFound",
                        f"WorkloadPriorityClass {spec.priority_class} not found",
                    ),
                )
                return
            priority = wpc.value
        rec.priority = priority
        # After a PodsReady timeout, its Eviction time may order it instead of creation.
        requeued_at = self._timers.requeue_time(self._config, rec)
        rec.order = (-priority, spec.creation_seconds if requeued_at is None else requeued_at, key)
        lq = self._lqs.get(lq_key)
        if lq is None or lq.stop_policy != "None":
            self._set_cq(rec, None)
            why = (
                ("LocalQueueDoesNotExist", self._missing("LocalQueue", *lq_key))
                if lq is None
                else ("LocalQueueStopped", f"LocalQueue {spec.queue_name} is stopped")
            )
            self._hold(rec, (), why)  # lq_members is the index for LocalQueue changes
            return
        cq_name = lq.cluster_queue
        self._set_cq(rec, cq_name)
        cq = self._cqs.get(cq_name)
        if cq is None:
            self._hold(
                rec,
                (("cq", cq_name),),
                ("ClusterQueueDoesNotExist", self._missing("ClusterQueue", "", cq_name)),
            )
            return
        if not self._namespace_selected(cq, spec.namespace):
            text = (
                f"namespace {spec.namespace} doesn't match the namespaceSelector "
                f"of ClusterQueue {cq_name}"
            )
            self._hold(rec, (("cq", cq_name),), ("NamespaceNotSelected", text))
            return
        carried = (
            self._carried(cq_name, spec.namespace, spec.podsets) if self._claim_charges else ()
        )
        cid, group = self._charge_group((spec.namespace, spec.podsets, carried))
        group.members[key] = None
        rec.charge_id = cid
        result = group.result
        if isinstance(result, NotChargeable):
            self._hold(rec, (), (result.reason, result.message))
            return
        view = self._views[cq_name]
        for ps in result:
            for res, qty in ps.totals:
                if qty and res not in view.group_of:
                    self._hold(
                        rec,
                        (("cq", cq_name),),
                        (
                            "ResourceNotCovered",
                            f"couldn't assign flavors to podset {ps.name}: "
                            f"resource {res} unavailable in ClusterQueue {cq_name}",
                        ),
                    )
                    return
        rec.requests = result
        queue = self._queues[cq_name]
        lane = ""
        if queue.fair:  # admission fair sharing: a lane per LocalQueue
            lane = f"{spec.namespace}/{spec.queue_name}"
            lane_key = (priority, result, lane)
            shape = self._lane_shapes.get(lane_key, -1)
            if shape < 0:
                shape = len(self._shapes) + len(self._lane_shapes)
                self._lane_shapes[lane_key] = shape
            if lane not in queue.ranks:
                queue.ranks[lane] = self._lane_rank(lq_key)
        else:
            shape = group.shapes.get(priority, -1)
            if shape < 0:
                shape_key = (priority, result)
                shape = self._shapes.get(shape_key, -1)
                if shape < 0:
                    shape = len(self._shapes) + len(self._lane_shapes)
                    self._shapes[shape_key] = shape
                group.shapes[priority] = shape
        rec.shape = shape
        rec.queued = True
        group_q = queue.push(rec.order, shape, lane)
        inactive = self._inactive.get(cq_name)
        if inactive is not None:
            self._inadmissible(rec, inactive)
        elif group_q.parked:
            assert group_q.verdict is not None
            self._inadmissible(rec, group_q.verdict)
        else:
            self._ready[cq_name] = None

    def _carried(
        self, cq_name: str, namespace: str, podsets: tuple[PodSet, ...]
    ) -> tuple[str, ...]:
        """The ResourceClaims the podsets name directly whose charge is already
        carried in ``cq_name`` (core/fold/direct_claims.py)."""
        charges = self._claim_charges
        return tuple(
            sorted(
                {
                    c.resource_claim_name
                    for ps in podsets
                    for c in ps.claims
                    if c.resource_claim_name
                    and (cq_name, namespace, c.resource_claim_name) in charges
                }
            )
        )

    def _lane_rank(self, lq: tuple[str, str]) -> float:
        """A lane's rank (a hook: ``FairAdmission`` gives its LocalQueue's usage)."""
        return 0.0

    def _missing(self, kind: str, namespace: str, name: str) -> str:
        """Why a LocalQueue or ClusterQueue a workload names is not there: never
        applied, or its latest version was Rejected (and none is in force)."""
        where = f" in namespace {namespace}" if namespace else ""
        obj = f"{kind} {namespace + '/' if namespace else ''}{name}"
        rejection = self._rejections.get(obj)
        if rejection is None:
            return f"{kind} {name} doesn't exist{where}"
        return f"{kind} {name}{where} was rejected: {rejection[1].removeprefix(obj + ': ')}"

    def _detach(self, rec: WorkloadRecord) -> None:
        """Take a pending workload out of its queue or holds (before re-placing it)."""
        key = rec.key
        spec = rec.spec
        if rec.queued:
            cq_name = rec.cluster_queue or ""
            queue = self._queues.get(cq_name)
            if queue is not None:
                queue.remove(key, rec.shape)
                self._ready[cq_name] = None  # a StrictFIFO queue may have a new head
            rec.queued = False
        for hk in rec.holds:
            members = self._holds.get(hk)
            if members is not None:
                members.pop(key, None)
                if not members:
                    del self._holds[hk]
        rec.holds = ()
        group = self._charge_groups.get(rec.charge_id)
        if group is not None:
            group.members.pop(key, None)
        rec.charge_id = -1
        lq_key = (spec.namespace, spec.queue_name)
        lq_members = self._lq_members.get(lq_key)
        if lq_members is not None:
            lq_members.pop(key, None)
            if not lq_members:
                del self._lq_members[lq_key]
        self._set_cq(rec, None)

    def _reevaluate(self, keys: dict[str, None] | list[str]) -> None:
        """Detach and place again the given pending workloads, in queue order."""
        recs = [self._workloads[k] for k in keys if k in self._workloads]
        recs = [r for r in recs if r.state != ADMITTED]
        recs.sort(key=lambda r: r.order)
        for rec in recs:
            self._detach(rec)
        for rec in recs:
            self._place(rec)

    def _recharge(self) -> None:
        """The DRA inventory or the configuration changed: charge every group of
        pending workloads again and re-place the members whose charge changed."""
        self._prune_charge_groups()
        changed: dict[str, None] = {}
        for group in list(self._charge_groups.values()):
            result = self._charge(group.key)
            if result != group.result:
                group.result = result
                group.shapes.clear()
                changed.update(group.members)
        # Workloads held before charging (e.g. no LocalQueue yet) are charged when placed.
        self._reevaluate(changed)
