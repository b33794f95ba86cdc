"""The fold's preemption: victim searches, plans, and who awaits one.

Theory of operation: this layer puts the pure searches of
:mod:`kuota.core.preemption.classical` and :mod:`kuota.core.preemption.fair` to
work on the live fold, through :class:`FoldView`, and implements the cycle's
``_try_preempt`` hook (:mod:`kuota.core.fold.hooks`). Every search sees the
tree as it will be once stopped workloads' pods are gone
(:mod:`kuota.core.fold.draining`). Inline (the default), a Preempt head's search
runs in the cycle: ``Preempted`` stops each victim, and the preemptor waits for
their pods, picking no more victims, then is admitted listing them; a workload
preempted during an event does not preempt during it. With
``Fold(preemption="plans")`` (the services) a Preempt head awaits a plan from
the preemption service (``WaitingForPreemptionPlan``, announced again after 5 s,
30 s, 2 min and 10 min), acted on only if ``validate_plan`` accepts it on this
fold's state. A preemptor whose pods need node-local devices that no node has
free gets a room (:mod:`kuota.core.fold.node_victims`): its victims must also
free a node that can take its pods, in both modes (the plan's check included);
when none do, it waits ``NoNodePlacement`` and no one is evicted. Details:
docs/design/preemption.md, docs/design/dra-placement.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from kuota.api.types import PreemptionPolicy
from kuota.core.assign.flavors import Assignment, Mode, assign_flavors, still_fits
from kuota.core.fold.decisions import preempted, requeued
from kuota.core.fold.draining import WAITING_FOR_STOP, drain_verdict
from kuota.core.fold.node_victims import NodeRoom, NodeVictims, VictimDevices
from kuota.core.fold.ordering import fair_weights
from kuota.core.fold.timers import BACKOFF, PLAN_WAIT, PLAN_WAIT_NOTICES
from kuota.core.preemption.classical import (
    AdmittedWorkload,
    Plan,
    PreemptionResult,
    Preemptor,
    Room,
    Search,
    Victim,
    classical_targets,
    plan_victims,
    validate_plan,
)
from kuota.core.preemption.fair import fair_targets
from kuota.core.queueing.queues import STRICT_FIFO
from kuota.core.queueing.verdict import Verdict, assignment_verdict
from kuota.core.queueing.workload import ADMITTED, PENDING, Fit, WorkloadRecord
from kuota.core.quota.tree import QuotaTree
from kuota.events.schema import PreemptionPlan, WorkloadStopped

if TYPE_CHECKING:
    from kuota.core.fold.hooks import FoldHooks

INLINE = "inline"
PLANS = "plans"
WAITING_FOR_PLAN = "WaitingForPreemptionPlan"

HUMAN_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "fair sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


class FoldView:
    """The fold's state as a :class:`~kuota.core.preemption.classical.ClusterView`."""

    __slots__ = ("_fold", "_rooms")

    def __init__(self, fold: Preempting, rooms: dict[str, NodeRoom] | None = None) -> None:
        self._fold = fold
        self._rooms = rooms

    @property
    def tree(self) -> QuotaTree:
        return self._fold._tree

    def policy(self, cluster_queue: str) -> PreemptionPolicy:
        cq = self._fold._cqs.get(cluster_queue)
        return cq.preemption if cq is not None else PreemptionPolicy()

    def admitted(self, cluster_queue: str) -> Iterable[AdmittedWorkload]:
        fold = self._fold
        for key in fold._admitted.get(cluster_queue, ()):
            yield fold._admitted_workload(key)

    def room(self, preemptor: Preemptor) -> Room | None:
        return self._rooms.get(preemptor.key) if self._rooms else None


class Preempting(NodeVictims):
    """Preemption, inline or through plans (module docstring)."""

    def __init__(self, *, preemption: str = INLINE) -> None:
        super().__init__()
        if preemption not in (INLINE, PLANS):
            raise ValueError(f"preemption must be {INLINE!r} or {PLANS!r}, not {preemption!r}")
        self._preemption_mode = preemption
        self._admitted_info: dict[str, AdmittedWorkload] = {}
        self._admissions = 0  # admissions so far: orders those at the same instant
        self._admission_number: dict[str, int] = {}  # admitted workload -> its number
        self._preempted_now: dict[str, None] = {}  # victims of the current event
        self._awaiting_plan: dict[str, float] = {}  # plans mode: Preempt head -> since
        self._preempted_for: dict[str, list[str]] = {}  # preemptor -> victims, until admitted
        # a head that fits once stopped workloads' pods are gone, during one attempt
        self._waiting_stop: dict[str, None] = {}
        # preemptor waiting for its victims' pods -> the reports of those already
        # gone, whose quota is held for it until the last one's pods are gone too
        self._held_stops: dict[str, list[WorkloadStopped]] = {}

    # ================================================================== preemption

    @property
    def preemption_mode(self) -> str:
        """``"inline"`` (the victim search runs in the cycle) or ``"plans"``."""
        return self._preemption_mode

    def _admitted_workload(self, key: str) -> AdmittedWorkload:
        rec = self._workloads[key]
        adm = rec.admission
        assert adm is not None
        info = self._admitted_info.get(key)
        number = self._admission_number.get(key, 0)
        if info is None or info.sequence != number:
            info = AdmittedWorkload(
                key,
                adm.cluster_queue,
                rec.priority,
                adm.at,
                rec.order[1],
                adm.usage,
                sequence=number,
            )
            self._admitted_info[key] = info
        return info

    def _search(self) -> Search:
        fs = self._config.fair_sharing
        if not fs.enable:
            return classical_targets
        weights = fair_weights(self._cqs, self._cohorts, self._history)
        return partial(fair_targets, weights=weights, strategies=fs.preemption_strategies)

    @staticmethod
    def _preemptor(rec: WorkloadRecord, cq_name: str, assignment: Assignment) -> Preemptor:
        contested = frozenset(
            (s.flavor, s.resource)
            for ps in assignment.podsets
            for s in ps.shortfalls
            if s.mode is Mode.PREEMPT
        )
        return Preemptor(rec.key, cq_name, rec.priority, rec.order[1], assignment.usage, contested)

    def _try_preempt(
        self, rec: WorkloadRecord, cq_name: str, assignment: Assignment, at: float
    ) -> bool:
        if assignment.mode is not Mode.PREEMPT or not self._views[cq_name].may_preempt:
            return False
        lifted = self._lift(cq_name, exclude=(rec.key,)) if self._drains else []
        if lifted:  # the tree once the stopped workloads' pods are gone
            freed = assign_flavors(
                view=self._views[cq_name],
                node=self._tree.queues[cq_name],
                flavors=self._flavors,
                podsets=rec.requests,
            )
            if freed.mode is Mode.FIT:
                self._unlift(lifted)
                self._waiting_stop[rec.key] = None  # _not_admitted says so
                return False
            assignment = freed
        if self._preemption_mode == PLANS:
            self._unlift(lifted)
            since = self._awaiting_plan.pop(rec.key, None)
            if since is None:
                since = at
                for after in PLAN_WAIT_NOTICES:
                    self._timers.push(at + after, PLAN_WAIT, rec.key)
            # re-inserted: the map keeps the order in which the cycles met the
            # heads, the order inline mode searches them in (preemption_plans)
            self._awaiting_plan[rec.key] = since
            return False
        if rec.key in self._preempted_now:
            self._unlift(lifted)
            return False
        p = self._preemptor(rec, cq_name, assignment)
        room = self._room(rec, assignment)
        result = self._search()(FoldView(self, {p.key: room} if room else None), p)
        self._unlift(lifted)
        if not result:
            self._no_room_for(rec.key, room)
            return False
        return self._carry_out(rec, cq_name, assignment, p, result, at, room)

    def _carry_out(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        assignment: Assignment,
        p: Preemptor,
        result: PreemptionResult,
        at: float,
        room: NodeRoom | None = None,
    ) -> bool:
        """Preempt the victims; admit the preemptor if it fits now, else it waits
        for their pods to be gone (False: the caller sets it aside). With a room,
        the devices it will be placed on are reserved for it meanwhile."""
        if room is not None:
            self._reserve_room(rec.key, room, (v.key for v in result.victims))
        for victim in result.victims:
            self._preempt(self._workloads[victim.key], victim, p.key)
        victims = self._preempted_for.setdefault(rec.key, [])
        victims.extend(v.key for v in result.victims)
        self._awaiting_plan.pop(rec.key, None)
        if not still_fits(self._tree.queues[cq_name], assignment.usage):
            self._waiting_stop[rec.key] = None  # the victims' pods still hold their quota
            self._reserved[rec.key] = (cq_name, assignment.usage)  # what they will free
            return False
        fit = self._fit(assignment)
        if not self._claims_current(rec, cq_name):
            return True  # placed again, charged for a claim no longer carried
        if self._nodes and not self._placeable(rec, cq_name, fit):
            return True  # set aside until their devices are freed (their pods gone)
        self._admit(rec, cq_name, fit, at, victims)
        return True

    def _preempt(self, rec: WorkloadRecord, victim: Victim, preemptor: str) -> None:
        cq_name = rec.cluster_queue
        self._release(rec)
        rec.state = PENDING
        rec.cluster_queue = None
        self._preempted_now[rec.key] = None
        human = HUMAN_REASONS.get(victim.reason, victim.reason)
        key, uid = rec.key, rec.spec.uid
        self._out.append(
            preempted(
                workload=key,
                uid=uid,
                cluster_queue=cq_name,
                reason=victim.reason,
                message=f"Preempted to accommodate a workload ({preemptor}) due to {human}",
                preemptor=preemptor,
                policy=victim.policy,
            )
        )
        self._out.append(requeued(workload=key, uid=uid, cluster_queue=cq_name, reason="Preempted"))
        self._place(rec)

    def _preemptor_head(self, cq_name: str) -> WorkloadRecord | None:
        for key, (queue, _) in self._reserved.items():
            if queue == cq_name:
                rec = self._workloads.get(key)
                if rec is None or not rec.queued or rec.cluster_queue != cq_name:
                    continue
                # BestEffortFIFO only (Kueue's preemptor is sticky there alone);
                # set aside (waiting for the pods): not a head until woken
                q = self._queues[cq_name]
                if q.strategy == STRICT_FIFO:
                    return None
                group = q.groups.get(rec.shape)
                if group is not None and not group.parked:
                    return rec
        return None

    def _not_admitted(self, rec: WorkloadRecord, cq_name: str, assignment: Assignment) -> None:
        no_room = self._no_room.pop(rec.key, None) if self._no_room else None
        if no_room is not None:
            # searched: a release in its tree sends it to search again; unplaced:
            # so do devices freed on a node where one of its pods now fits alone
            self._awaiting_plan.pop(rec.key, None)
            verdict, pods = no_room
            self._set_aside(
                rec, cq_name, verdict, assignment.blocking, searched=True, unplaced=pods
            )
            return
        if self._waiting_stop and self._waiting_stop.pop(rec.key, 0) is None:
            self._awaiting_plan.pop(rec.key, None)
            verdict = drain_verdict(self._drains_of_tree(cq_name))
            self._set_aside(rec, cq_name, verdict, assignment.blocking)
            return
        since = self._awaiting_plan.get(rec.key) if self._awaiting_plan else None
        if (
            since is None
            or assignment.mode is not Mode.PREEMPT
            or not self._views[cq_name].may_preempt
        ):
            if since is not None:
                del self._awaiting_plan[rec.key]  # no longer a preemptor
            super()._not_admitted(rec, cq_name, assignment)
            return
        quota = assignment_verdict(assignment)
        if rec.last_verdict == quota.key:
            # Searching again (a release in its tree) for the reason it already
            # has: the wait is not announced, so that an empty plan says nothing
            # new either, as a failed inline search does not.
            self._set_aside(rec, cq_name, quota, assignment.blocking)
            return
        self._set_aside(rec, cq_name, self._wait_verdict(assignment, since), assignment.blocking)

    def _wait_verdict(self, assignment: Assignment, since: float) -> Verdict:
        waited = self._now - since
        notice = 0.0
        for after in PLAN_WAIT_NOTICES:
            if waited >= after:
                notice = after
        lag = f" (preemption service lag {notice:g} s)" if notice else ""
        quota = assignment_verdict(assignment)
        return Verdict(
            WAITING_FOR_PLAN,
            (notice, quota.signature),
            f"waiting for a preemption plan from the preemption service{lag}: {quota.message()}",
        )

    def awaits_plan(self, key: str) -> bool:
        """Whether a pending workload waits for a preemption plan (plans mode)."""
        return key in self._awaiting_plan

    def plans_awaited(self) -> tuple[str, ...]:
        """The pending workloads that wait for a preemption plan (plans mode)."""
        return tuple(self._awaiting_plan)

    def _plan_wait_notice(self, key: str, when: float) -> None:
        """A timer: announce again, with the wait so far, a head still awaiting."""
        rec = self._workloads.get(key)
        if rec is None or not rec.queued or rec.cluster_queue is None:
            return
        lifted = self._lift(rec.cluster_queue, exclude=(key,))
        found = self._fresh_preemptor(key)
        self._unlift(lifted)
        if found is None:
            del self._awaiting_plan[key]
            return
        self._inadmissible(rec, self._wait_verdict(found[0], self._awaiting_plan[key]))

    # ------------------------------------------------------------------ plans

    def preemption_plans(self) -> list[Plan]:
        """Plans for the Preempt heads this fold set aside (``preemption="plans"``),
        in the order the cycles set them aside, without shared victims; an
        empty plan for a head no victims would make room for."""
        preemptors: list[Preemptor] = []
        rooms: dict[str, NodeRoom] = {}
        devices: VictimDevices | None = None
        # the tree as it will be once stopped workloads' pods are gone
        lifted = self._lift(exclude=self._awaiting_plan)
        # in the order the cycles met them (the cycle's own order within a cycle,
        # classical or fair), as inline mode searches them
        for key in list(self._awaiting_plan):
            found = self._fresh_preemptor(key)
            if found is None:
                del self._awaiting_plan[key]
                continue
            preemptors.append(found[1])
            if self._nodes:
                if devices is None:
                    devices = self._victim_devices()
                room = self._room(self._workloads[key], found[0], devices)
                if room is not None:
                    rooms[key] = room
        results = plan_victims(FoldView(self, rooms), preemptors, search=self._search())
        self._unlift(lifted)
        return [
            Plan(p.key, tuple(v.key for v in r.victims), {v.key: v.reason for v in r.victims})
            for p, r in zip(preemptors, results, strict=True)
        ]

    def _fresh_preemptor(self, key: str) -> tuple[Assignment, Preemptor] | None:
        """The pending workload's assignment now, if it is Preempt."""
        rec = self._workloads.get(key)
        if rec is None or rec.state == ADMITTED or not rec.queued or rec.cluster_queue is None:
            return None
        cq_name = rec.cluster_queue
        if cq_name in self._inactive or cq_name not in self._views:
            return None
        view = self._views[cq_name]
        assignment = assign_flavors(
            view=view, node=self._tree.queues[cq_name], flavors=self._flavors, podsets=rec.requests
        )
        if assignment.mode is not Mode.PREEMPT or not view.may_preempt:
            return None
        return assignment, self._preemptor(rec, cq_name, assignment)

    def _apply_plan(self, plan: PreemptionPlan, at: float) -> None:
        """Act on a plan only if this fold's state still justifies it exactly (the
        tree as it will be once stopped workloads' pods are gone, as it was planned)."""
        rec = self._workloads.get(plan.preemptor)
        lifted = []
        if rec is not None and self._drains:
            lifted = self._lift(rec.cluster_queue, exclude=(plan.preemptor,))
        found = self._fresh_preemptor(plan.preemptor)
        result: PreemptionResult | None = None
        room: NodeRoom | None = None
        if found is not None and rec is not None:
            room = self._room(rec, found[0])
        view = FoldView(self, {plan.preemptor: room} if room is not None else None)
        if found is not None and plan.victims:
            for key in plan.victims:
                victim = self._workloads.get(key)
                if victim is None or victim.state != ADMITTED:
                    break
            else:
                search = self._search()
                result = validate_plan(
                    view, found[1], plan.victims, search=search, reasons=plan.reasons
                )
        elif (
            found is not None
            and room is not None
            and plan.preemptor in self._awaiting_plan
            and not self._search()(view, found[1])
        ):
            # An empty plan for a head whose devices no node has free: searched
            # here too, for its reason (victims that free quota but no node).
            self._no_room_for(plan.preemptor, room)
        self._unlift(lifted)
        if found is None:
            self._awaiting_plan.pop(plan.preemptor, None)
            return
        assignment, p = found
        if not plan.victims:
            # The search found no victims: the head is set aside as a failed inline
            # search leaves it, until quota frees up. Its group (or blocked queue)
            # takes the quota reason too: a workload placed in the parked group
            # later inherits the group's reason, and must not be told it waits
            # for a plan that nobody will write.
            if self._awaiting_plan.pop(plan.preemptor, None) is not None:
                rec = self._workloads[plan.preemptor]
                queue = self._queues[p.cluster_queue]
                if queue.strategy != STRICT_FIFO or queue.blocked_head == rec.key:
                    self._not_admitted(rec, p.cluster_queue, assignment)
                else:  # StrictFIFO, blocked at another head since: its own reason only
                    no_room = self._no_room.pop(rec.key, None) if self._no_room else None
                    self._inadmissible(
                        rec, no_room[0] if no_room is not None else assignment_verdict(assignment)
                    )
            self._no_room.pop(plan.preemptor, None)
            return
        if result is None:
            return
        rec = self._workloads[plan.preemptor]
        if self._carry_out(rec, p.cluster_queue, assignment, p, result, at, room):
            self._ready[p.cluster_queue] = None  # the queue has a new head
            return
        # Waits for the victims' pods: set aside with what it lacks in the tree as it is.
        cq_name = p.cluster_queue
        now = assign_flavors(
            view=self._views[cq_name],
            node=self._tree.queues[cq_name],
            flavors=self._flavors,
            podsets=rec.requests,
        )
        queue = self._queues[cq_name]
        if queue.strategy != STRICT_FIFO or queue.blocked_head == rec.key:
            self._not_admitted(rec, cq_name, now)
        else:
            self._waiting_stop.pop(rec.key, None)
            self._inadmissible(rec, drain_verdict(self._drains_of_tree(cq_name)))

    # ================================================================== victims' quota

    def _workload_stopped(self, event: WorkloadStopped) -> None:
        """A victim's pods are gone while its preemptor still waits for another
        victim's: the quota stays held for the preemptor, and the victim stays out
        of its queue, until the last victim's pods are gone; then all are released
        together, and the cycle that follows orders the preemptor and the victims
        as Kueue's does (a cycle in which the preemptor waits charges its usage
        before the heads ordered after it). Released one by one, each victim's
        quota went back to whoever could use it first: usually the victim itself,
        admitted again and preempted again once the preemptor could run."""
        holder = self._holder(event) if self._reserved else None
        if holder is None:
            super()._workload_stopped(event)
            return
        held = self._held_stops.setdefault(holder, [])
        held.append(event)
        if not self._victims_draining(holder):
            self._release_held(holder)

    def _holder(self, event: WorkloadStopped) -> str | None:
        """The waiting preemptor whose victim's stop this report ends, if any."""
        drain = self._drains.get(event.decision_id)
        if drain is None or drain.workload != event.workload or drain.uid != event.uid:
            return None
        for preemptor, victims in self._preempted_for.items():
            if preemptor in self._reserved and drain.workload in victims:
                return preemptor
        return None

    def _victims_draining(self, preemptor: str) -> bool:
        """Whether a victim of ``preemptor`` still has pods (a stop not yet reported)."""
        victims = self._preempted_for.get(preemptor, ())
        gone = {e.decision_id for e in self._held_stops.get(preemptor, ())}
        return any(d.workload in victims and d.decision not in gone for d in self._drains.values())

    def _release_held(self, preemptor: str) -> None:
        """Release the quota held for ``preemptor`` (its victims' pods are all gone,
        it was admitted, or it is gone), in the order the reports came."""
        if not self._held_stops:
            return
        for event in self._held_stops.pop(preemptor, ()):
            super()._workload_stopped(event)

    # ================================================================== hooks

    def _admit(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        fit: Fit,
        at: float,
        victims: list[str] | None = None,
    ) -> None:
        if self._preempted_for:
            mine = self._preempted_for.pop(rec.key, None)
            self._reserved.pop(rec.key, None)
            if victims is None and mine is not None:
                victims = mine  # admitted once its victims' pods were gone
                queue = self._queues.get(cq_name)
                group = queue.groups.get(rec.shape) if queue is not None else None
                verdict = group.verdict if group is not None else None
                if group is not None and verdict is not None and verdict.reason == WAITING_FOR_STOP:
                    group.verdict = None  # its wait: the group's next head may preempt
        super()._admit(rec, cq_name, fit, at, victims)
        if self._devices_reserved:
            reserved = self._unreserve(rec.key)
            held = self._devices_held
            left = tuple(d for d in reserved if held.get(d) != rec.key)
            if left:
                self._wake_unplaced(left)
        if self._awaiting_plan:
            self._awaiting_plan.pop(rec.key, None)
        self._admissions += 1
        self._admission_number[rec.key] = self._admissions
        self._release_held(rec.key)  # admitted before its last victim stopped

    def _release(self, rec: WorkloadRecord, *, drain: bool = True) -> None:
        super()._release(rec, drain=drain)
        key = rec.key
        self._admission_number.pop(key, None)
        if self._admitted_info:
            self._admitted_info.pop(key, None)

    def _forget(self, key: str) -> None:
        """The workload finished or its Job is gone: drop what preemption and the
        timers remember of it."""
        self._timers.forget(key)
        if self._job_changed:
            self._job_changed.pop(key, None)
        # Mostly empty (no plans mode, no preemption): test before popping.
        if self._awaiting_plan:
            self._awaiting_plan.pop(key, None)
        if self._admitted_info:
            self._admitted_info.pop(key, None)
        if self._preempted_for:
            self._preempted_for.pop(key, None)
            self._reserved.pop(key, None)
            self._release_held(key)
        if self._devices_reserved:
            mine = self._unreserve(key)
            if mine:
                self._wake_unplaced(mine)

    # ================================================================== timers

    def _fire_timers(self, now: float, *, inclusive: bool) -> None:
        """Fire the timers due before ``now`` (and at ``now`` if ``inclusive``),
        in (instant, kind, key) order: plan-wait notices here, PodsReady
        timeouts and backoffs in :class:`~kuota.core.fold.cycle.Cycles`."""
        timers = self._timers
        while (
            timer := timers.pop_due(
                now, inclusive, self._config, self._workloads, self._awaiting_plan
            )
        ) is not None:
            when, kind, key = timer
            if kind == BACKOFF:
                self._end_backoff(key)
            elif kind == PLAN_WAIT:
                self._plan_wait_notice(key, when)
            else:
                self._timed_out(key, when)

    def _next_timer(self) -> float | None:
        return self._timers.next_wakeup(self._config, self._workloads, self._awaiting_plan)


if TYPE_CHECKING:
    from kuota.core.fold.cycle import Cycles

    # Both the base layer and the full stack implement every hook.
    _cycles_hooks: type[FoldHooks] = Cycles
    _preempting_hooks: type[FoldHooks] = Preempting
