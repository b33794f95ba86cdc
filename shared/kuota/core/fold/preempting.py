"""The fold's preemption, fair-sharing order and WaitForPodsReady timers.

Theory of operation
-------------------
This layer puts the pure searches of :mod:`kuota.core.preemption.classical`,
:mod:`kuota.core.preemption.fair`, :mod:`kuota.core.quota.fairshare` and the rules of
:mod:`kuota.core.preemption.podsready` to work on the fold's state. It sits on
:class:`~kuota.core.fold.cycle.Cycles` and fills in its hooks.

**Preemption.** A head whose flavor assignment is *Preempt* (and whose
ClusterQueue has a preemption policy other than Never) gets a victim search
on the live quota tree, through :class:`FoldView` (the fold as a
:class:`~kuota.core.preemption.classical.ClusterView`): classical, or fair sharing when
``Configuration.fairSharing.enable``. Because the fold is the single writer,
a ``Preempted`` decision *releases the victim's quota at once* (the victim is
requeued, keeping its place by creation time, as in Kueue) and the preemptor
is admitted in the same cycle; its ``Admitted`` decision lists the victims.
The actuator applies a batch in order, so the victims' Jobs are suspended
before the preemptor's is unsuspended. A workload preempted during an event
does not preempt during the same event: every preemption then admits a
workload that has not yet been a victim, which bounds the work of one event
and rules out ping-pong.

With ``Fold(preemption="plans")`` (what the services run) the search is left
to the preemption service: a Preempt head is set aside, its group parked as
after a failed search, and remembered as *awaiting a plan*; its Inadmissible
reason says so (``WaitingForPreemptionPlan``, re-announced with the wait so
far after 5 s, 30 s, 2 min and 10 min of event time).
:meth:`Preempting.preemption_plans` searches for every awaiting head (what the
service's own fold of the same journal answers), an empty plan meaning "no
victims would make room". A ``PreemptionPlan`` event is acted on only if
:func:`~kuota.core.preemption.classical.validate_plan` accepts it on this fold's state
(the search, restricted to the plan's victims, picks exactly them); a stale
plan changes nothing and the head keeps awaiting (the service searches again).
An empty plan ends the wait with the ordinary quota reason, exactly where a
failed inline search leaves the head. In the default ``"inline"`` mode plans
are validated the same way (and are normally stale).

**Fair sharing** orders a cycle's heads by the tournament of
:func:`~kuota.core.quota.fairshare.tournament_winner`, one winner at a time, each
chosen after the previous one was admitted (or not).

**WaitForPodsReady.** Each admission starts a timer (a heap of
``(instant, kind, key)``, validated lazily against the workload's
:class:`~kuota.core.preemption.podsready.ReadyState`); ``PodsReady`` events stop or
restart it. When it fires: ``Evicted`` (``PodsReadyTimeout``, with
``requeue_at``) and the workload waits out its backoff outside any queue
(``Requeued`` when it is over), or ``Deactivated`` (``RequeuingLimitExceeded``)
once the requeue limit is reached; it stays deactivated until its Job
changes. Timers due before an event's instant fire before the event, those
due at its instant after it (a PodsReady at the deadline is in time).
``next_wakeup`` is the earliest live timer. With ``blockAdmission`` nothing
is admitted while an admitted workload's pods are not ready.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

from kuota.api.types import PreemptionPolicy, WaitForPodsReady, WorkloadSpec
from kuota.core.assign.flavors import Assignment, Mode, assign_flavors, still_fits
from kuota.core.fold.cycle import Cycles, Entry
from kuota.core.preemption.classical import (
    AdmittedWorkload,
    Plan,
    PreemptionResult,
    Preemptor,
    Search,
    Victim,
    classical_targets,
    plan_victims,
    validate_plan,
)
from kuota.core.preemption.fair import fair_targets
from kuota.core.preemption.podsready import (
    PODS_READY_TIMEOUT,
    REQUEUING_LIMIT_EXCEEDED,
    Deactivate,
    ReadyState,
    admission_blocked,
    admitted,
    deadline,
    on_timeout,
    pods_ready,
    queue_time,
    released,
    requeued,
)
from kuota.core.queueing.queues import STRICT_FIFO
from kuota.core.queueing.verdict import Verdict, assignment_verdict
from kuota.core.queueing.workload import ADMITTED, DEACTIVATED, PENDING, Fit, WorkloadRecord
from kuota.core.quota.fairshare import FairEntry, Weights, tournament_winner
from kuota.core.quota.tree import QuotaTree
from kuota.events.schema import PreemptionPlan

INLINE = "inline"
PLANS = "plans"
_TIMEOUT = 0
_BACKOFF = 1
_PLAN_WAIT = 2
WAITING_FOR_PLAN = "WaitingForPreemptionPlan"
# Event-time seconds after which a head still awaiting a plan is announced again.
PLAN_WAIT_NOTICES = (5.0, 30.0, 120.0, 600.0)

HUMAN_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "fair sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


class FoldView:
    """The fold's state as a :class:`~kuota.core.preemption.classical.ClusterView`."""

    __slots__ = ("_fold",)

    def __init__(self, fold: Preempting) -> None:
        self._fold = fold

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


class Preempting(Cycles):
    """Preemption, fair-sharing order and WaitForPodsReady (module docstring)."""

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
        self._pods: dict[str, ReadyState] = {}  # WaitForPodsReady state per workload
        self._not_ready: dict[str, None] = {}  # admitted workloads whose pods are not ready
        self._backoff: dict[str, float] = {}  # workload -> requeue instant
        self._limit_deactivated: dict[str, None] = {}
        self._timers: list[tuple[float, int, str]] = []

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
        return partial(fair_targets, weights=self._weights(), strategies=fs.preemption_strategies)

    def _weights(self) -> Weights:
        return Weights(
            {n: cq.fair_sharing_weight for n, cq in self._cqs.items()},
            {n: c.fair_sharing_weight for n, c in self._cohorts.items()},
        )

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
        if self._preemption_mode == PLANS:
            if rec.key not in self._awaiting_plan:
                self._awaiting_plan[rec.key] = at
                for after in PLAN_WAIT_NOTICES:
                    heapq.heappush(self._timers, (at + after, _PLAN_WAIT, rec.key))
            return False
        if rec.key in self._preempted_now:
            return False
        p = self._preemptor(rec, cq_name, assignment)
        result = self._search()(FoldView(self), p)
        if not result:
            return False
        return self._carry_out(rec, cq_name, assignment, p, result, at)

    def _carry_out(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        assignment: Assignment,
        p: Preemptor,
        result: PreemptionResult,
        at: float,
    ) -> bool:
        for victim in result.victims:
            self._preempt(self._workloads[victim.key], victim, p.key)
        if not still_fits(self._tree.queues[cq_name], assignment.usage):
            return False  # cannot happen: the search checked the fit
        self._awaiting_plan.pop(rec.key, None)
        self._admit(rec, cq_name, self._fit(assignment), at)
        self._out[-1]["victims"] = [v.key for v in result.victims]
        return True

    def _preempt(self, rec: WorkloadRecord, victim: Victim, preemptor: str) -> None:
        cq_name = rec.cluster_queue
        self._release(rec)
        rec.state = PENDING
        rec.cluster_queue = None
        self._preempted_now[rec.key] = None
        human = HUMAN_REASONS.get(victim.reason, victim.reason)
        self._out.append(
            {
                "type": "Preempted",
                "workload": rec.key,
                "uid": rec.spec.uid,
                "cluster_queue": cq_name,
                "reason": victim.reason,
                "message": f"Preempted to accommodate a workload ({preemptor}) due to {human}",
                "preemptor": preemptor,
                "policy": victim.policy,
            }
        )
        self._out.append(
            {
                "type": "Requeued",
                "workload": rec.key,
                "uid": rec.spec.uid,
                "cluster_queue": cq_name,
                "reason": "Preempted",
            }
        )
        self._place(rec)

    def _begin_event(self) -> None:
        self._preempted_now.clear()

    def _not_admitted(self, rec: WorkloadRecord, cq_name: str, assignment: Assignment) -> None:
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
        found = self._fresh_preemptor(key)
        if found is None:
            del self._awaiting_plan[key]
            return
        self._inadmissible(rec, self._wait_verdict(found[0], self._awaiting_plan[key]))

    # ------------------------------------------------------------------ plans

    def preemption_plans(self) -> list[Plan]:
        """Plans for the Preempt heads this fold set aside (``preemption="plans"``),
        in the order a cycle would consider them, without shared victims; an
        empty plan for a head no victims would make room for."""
        heads: list[tuple[int, tuple[int, float, str], Preemptor]] = []
        for key in list(self._awaiting_plan):
            found = self._fresh_preemptor(key)
            if found is None:
                del self._awaiting_plan[key]
                continue
            assignment, p = found
            heads.append((assignment.borrowing, self._workloads[key].order, p))
        heads.sort(key=lambda h: (h[0], h[1]))
        preemptors = [h[2] for h in heads]
        results = plan_victims(FoldView(self), preemptors, search=self._search())
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
        """Act on a plan only if this fold's state still justifies it exactly."""
        found = self._fresh_preemptor(plan.preemptor)
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
                    self._inadmissible(rec, assignment_verdict(assignment))
            return
        for key in plan.victims:
            victim = self._workloads.get(key)
            if victim is None or victim.state != ADMITTED:
                return
        result = validate_plan(FoldView(self), p, plan.victims, search=self._search())
        if result is None:
            return
        rec = self._workloads[plan.preemptor]
        if self._carry_out(rec, p.cluster_queue, assignment, p, result, at):
            self._ready[p.cluster_queue] = None  # the queue has a new head

    # ================================================================== fair sharing

    def _ordered(self, entries: list[Entry]) -> Iterable[Entry]:
        if not self._config.fair_sharing.enable or len(entries) < 2:
            return super()._ordered(entries)
        return self._fair_ordered(entries)

    def _fair_ordered(self, entries: list[Entry]) -> Iterator[Entry]:
        weights = self._weights()
        tree = self._tree
        by_key: dict[str, Entry] = {}
        groups: dict[str, list[FairEntry]] = {}
        for entry in entries:
            _, order, cq_name, rec, assignment, _ = entry
            by_key[rec.key] = entry
            node = tree.queues[cq_name]
            group = "cohort:" + node.root().name if node.parent is not None else "cq:"
            groups.setdefault(group, []).append(
                FairEntry(rec.key, cq_name, rec.priority, order[1], assignment.usage)
            )
        for name in sorted(groups):
            remaining = groups[name]
            while remaining:
                winner = tournament_winner(tree, weights, remaining)
                assert winner is not None
                remaining = [e for e in remaining if e is not winner]
                yield by_key[winner.key]  # the consumer admits it (or not) before the next

    # ================================================================== WaitForPodsReady

    @property
    def _wfpr(self) -> WaitForPodsReady:
        return self._config.wait_for_pods_ready

    def _admission_blocked(self) -> bool:
        not_ready = self._not_ready  # empty unless WaitForPodsReady is on
        return bool(not_ready) and admission_blocked(self._wfpr, not_ready=len(not_ready))

    def _admit(self, rec: WorkloadRecord, cq_name: str, fit: Fit, at: float) -> None:
        super()._admit(rec, cq_name, fit, at)
        if self._awaiting_plan:
            self._awaiting_plan.pop(rec.key, None)
        self._admissions += 1
        self._admission_number[rec.key] = self._admissions
        cfg = self._config.wait_for_pods_ready
        if cfg.enable:
            key = rec.key
            state = admitted(self._pods.get(key, ReadyState()), at=at)
            self._pods[key] = state
            self._not_ready[key] = None
            self._arm(cfg, key, state)

    def _release(self, rec: WorkloadRecord) -> None:
        super()._release(rec)
        key = rec.key
        self._admission_number.pop(key, None)
        if self._admitted_info:
            self._admitted_info.pop(key, None)
        if self._pods:
            self._not_ready.pop(key, None)
            state = self._pods.get(key)
            if state is not None:
                self._pods[key] = released(state)

    def _arm(self, cfg: WaitForPodsReady, key: str, state: ReadyState) -> None:
        when = deadline(cfg, state)
        if when is not None:
            heapq.heappush(self._timers, (when, _TIMEOUT, key))

    def _pods_ready(self, key: str, ready: bool, at: float) -> None:
        rec = self._workloads.get(key)
        if rec is None:
            return
        rec.pods_ready = ready
        state = self._pods.get(key)
        if state is None or rec.state != ADMITTED:
            return
        state = pods_ready(state, ready=ready, at=at)
        self._pods[key] = state
        if ready:
            self._not_ready.pop(key, None)
        else:
            self._not_ready[key] = None
            self._arm(self._wfpr, key, state)

    def _forget(self, key: str) -> None:
        """The workload finished or its Job is gone: drop its WaitForPodsReady memory."""
        # Mostly all empty (no WaitForPodsReady, no plans): test before popping.
        if self._pods:
            self._pods.pop(key, None)
        if self._not_ready:
            self._not_ready.pop(key, None)
        if self._backoff:
            self._backoff.pop(key, None)
        if self._limit_deactivated:
            self._limit_deactivated.pop(key, None)
        if self._awaiting_plan:
            self._awaiting_plan.pop(key, None)
        if self._admitted_info:
            self._admitted_info.pop(key, None)

    def _spec_changed(self, rec: WorkloadRecord, spec: WorkloadSpec) -> bool:
        """A pending workload's Job changed. True if this layer handled it: a
        workload in backoff keeps waiting (with the new spec); one deactivated
        by the requeue limit starts afresh."""
        key = rec.key
        if key in self._backoff:
            rec.spec = spec
            return True
        if key in self._limit_deactivated:
            del self._limit_deactivated[key]
            self._pods.pop(key, None)
        return False

    def _requeue_time(self, rec: WorkloadRecord) -> float | None:
        """The queue time that replaces creation after a PodsReady timeout."""
        state = self._pods.get(rec.key)
        if state is None or state.evicted_at is None:
            return None
        return queue_time(self._wfpr, creation=rec.spec.creation_seconds, state=state)

    def _next_timer(self) -> float | None:
        timers = self._timers
        while timers and not self._timer_live(*timers[0]):
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    def _timer_live(self, when: float, kind: int, key: str) -> bool:
        if kind == _BACKOFF:
            return self._backoff.get(key) == when and key in self._workloads
        if kind == _PLAN_WAIT:
            since = self._awaiting_plan.get(key)
            return since is not None and any(since + a == when for a in PLAN_WAIT_NOTICES)
        rec = self._workloads.get(key)
        state = self._pods.get(key)
        return (
            rec is not None
            and rec.state == ADMITTED
            and state is not None
            and deadline(self._wfpr, state) == when
        )

    def _fire_timers(self, now: float, *, inclusive: bool) -> None:
        """Fire the timers due before ``now`` (and at ``now`` if ``inclusive``)."""
        timers = self._timers
        while timers:
            when, kind, key = timers[0]
            if when > now or (when == now and not inclusive):
                return
            heapq.heappop(timers)
            if not self._timer_live(when, kind, key):
                continue
            if kind == _BACKOFF:
                self._end_backoff(key)
            elif kind == _PLAN_WAIT:
                self._plan_wait_notice(key, when)
            else:
                self._timed_out(key, when)

    def _timed_out(self, key: str, when: float) -> None:
        rec = self._workloads[key]
        cfg = self._wfpr
        state = self._pods[key]
        outcome = on_timeout(cfg, state, at=when, uid=rec.spec.uid)
        cq_name = rec.cluster_queue
        self._release(rec)
        rec.cluster_queue = None
        self._pods[key] = outcome.state
        base: dict[str, Any] = {"workload": key, "uid": rec.spec.uid, "cluster_queue": cq_name}
        if isinstance(outcome, Deactivate):
            rec.state = DEACTIVATED
            self._limit_deactivated[key] = None
            self._out.append(
                {
                    **base,
                    "type": "Deactivated",
                    "reason": REQUEUING_LIMIT_EXCEEDED,
                    "message": f"exceeded the PodsReady timeout {key} after {outcome.count} "
                    f"requeue(s); the limit (backoffLimitCount) is {cfg.backoff_limit_count}",
                }
            )
            return
        rec.state = PENDING
        self._backoff[key] = outcome.at
        heapq.heappush(self._timers, (outcome.at, _BACKOFF, key))
        self._out.append(
            {
                **base,
                "type": "Evicted",
                "reason": PODS_READY_TIMEOUT,
                "message": f"Exceeded the PodsReady timeout {key}; requeued after a backoff "
                f"of {outcome.delay:g}s (requeue {outcome.state.requeue_count})",
                "requeue_at": outcome.at,
            }
        )

    def _end_backoff(self, key: str) -> None:
        del self._backoff[key]
        rec = self._workloads[key]
        self._pods[key] = requeued(self._pods[key])
        lq = self._lqs.get((rec.spec.namespace, rec.spec.queue_name))
        self._out.append(
            {
                "type": "Requeued",
                "workload": key,
                "uid": rec.spec.uid,
                "cluster_queue": lq.cluster_queue if lq is not None else None,
                "reason": PODS_READY_TIMEOUT,
            }
        )
        self._place(rec)
