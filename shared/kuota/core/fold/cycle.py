"""Scheduling cycles, admission, release, and what a release wakes.

Theory of operation: after every event :meth:`Cycles._schedule` runs cycles
until one admits nothing, as Kueue's scheduler does: take the head of every
ready ClusterQueue (by name), skipping a head whose last attempt was short of
what is still short; assign flavors to each against the same usage (the fast
:func:`~kuota.core.assign.fitting.fit_picks` first, the full search when
something does not fit, to say why); take the entries in
:func:`~kuota.core.fold.ordering.cycle_order`; admit each that still fits after
the admissions before it. One that did not fit is *set aside*: its group parks
(BestEffortFIFO) or its queue blocks (StrictFIFO), and it registers as a
*waiter* for each flavor-resource it was short of. Releasing (finish, delete,
eviction, a PodsReady timeout) wakes only the waiters of that cohort tree
whose ClusterQueue now has what they need; a structural change wakes whole
trees. The steps and why they are exact: docs/design/fold.md.
"""

from __future__ import annotations

import heapq

from kuota.core.assign.fitting import fit_assignment, fit_picks
from kuota.core.assign.flavors import (
    Assignment,
    Mode,
    assign_flavors,
    plan_podsets,
    still_fits,
)
from kuota.core.dra.placement import GangPod
from kuota.core.fold.backstop import JOB_CHANGED, generation_seen
from kuota.core.fold.decisions import (
    admitted,
    deactivated,
    evicted,
    quota_released,
    requeued,
)
from kuota.core.fold.direct_claims import DirectClaims
from kuota.core.fold.fairadmission import AFS_EXTRA
from kuota.core.fold.ordering import Entry, cycle_order
from kuota.core.fold.state import Waiter
from kuota.core.preemption.podsready import (
    PODS_READY_TIMEOUT,
    REQUEUING_LIMIT_EXCEEDED,
    Deactivate,
)
from kuota.core.queueing.queues import BLOCKED_HEAD, STRICT_FIFO, Needs
from kuota.core.queueing.verdict import Verdict, assignment_verdict
from kuota.core.queueing.workload import (
    ADMITTED,
    DEACTIVATED,
    INADMISSIBLE,
    PENDING,
    Admission,
    Fit,
    WorkloadRecord,
)
from kuota.core.quota.tree import (
    FlavorResource,
    QuotaNode,
    add_usage,
    available,
    available_below,
    remove_usage,
)
from kuota.events.schema import decision_id
from kuota.quantity import format_quantity


class Cycles(DirectClaims):
    """Scheduling cycles (module docstring); hooks: :mod:`kuota.core.fold.hooks`."""

    def _try_preempt(
        self, rec: WorkloadRecord, cq_name: str, assignment: Assignment, at: float
    ) -> bool:
        """Make room for a Preempt head and admit it; False if it was not done
        (a hook: ``Preempting`` searches; here there is no preemption)."""
        return False

    def _preemptor_head(self, cq_name: str) -> WorkloadRecord | None:
        """A preemptor of ``cq_name`` waiting for its victims' pods, once woken: its
        queue's head, before any other, until it is admitted, as Kueue's sticky
        preemptor in a BestEffortFIFO queue (a hook: ``Preempting`` knows them;
        here there is none)."""
        return None

    def _schedule(self, at: float) -> None:
        ready = self._ready
        queues = self._queues
        workloads = self._workloads
        inactive = self._inactive
        tree_queues = self._tree.queues
        timers = self._timers
        config = self._config
        while ready:
            if timers.blocks_admission(config):
                return
            # Each ready queue's head, assigned against the same usage (setting a
            # head aside changes no usage, so assigning as heads are found is the
            # same as finding them all first).
            entries: list[Entry] = []
            plans = self._plans
            flavors = self._flavors
            for cq_name in sorted(ready) if len(ready) > 1 else list(ready):
                queue = queues.get(cq_name)
                rec = None
                if queue is not None and cq_name not in inactive:
                    node = tree_queues[cq_name]
                    if self._reserved:
                        rec = self._preemptor_head(cq_name)
                    while rec is None and (found := queue.next_head()) is not None:
                        head, verdict, needs = found
                        rec = workloads[head[0][2]]
                        if verdict is None:
                            break
                        for fr, needed in needs:  # could_fit_now(node, needs), inlined
                            if available(node, fr) >= needed:
                                break
                        else:
                            # Still short of everything it was short of: the same attempt
                            # would fail the same way, so set it aside without running it.
                            self._set_aside(rec, cq_name, verdict, needs)
                            rec = None
                            continue
                        break
                if rec is None:
                    del ready[cq_name]
                    continue
                view = self._views[cq_name]
                cached = plans.get((cq_name, rec.shape))
                if cached is None:
                    cached = plans[(cq_name, rec.shape)] = (plan_podsets(view, rec.requests), {})
                plan, fitted = cached
                picks = fit_picks(view=view, node=node, flavors=flavors, plan=plan)
                if picks is None:  # something does not fit: the full search says why
                    assignment = assign_flavors(
                        view=view, node=node, flavors=flavors, podsets=rec.requests, plan=plan
                    )
                    entries.append(
                        (assignment.borrowing, rec.order, cq_name, rec, assignment, None)
                    )
                    continue
                fit = fitted.get(picks)
                if fit is None:
                    fit = fitted[picks] = self._fit(fit_assignment(plan, picks))
                assignment = fit.assignment
                entries.append((assignment.borrowing, rec.order, cq_name, rec, assignment, fit))
            if not entries:
                return
            root_of = self._tree.root_of
            changed: set[str] = set()  # trees with an admission earlier in this cycle
            ordered = cycle_order(
                entries,
                fair_sharing=config.fair_sharing.enable,
                tree=self._tree,
                cqs=self._cqs,
                cohorts=self._cohorts,
                history=self._history,
            )
            for _, _, cq_name, rec, assignment, fit in ordered:
                if assignment.mode is Mode.FIT:
                    root = root_of[cq_name]
                    if root not in changed or still_fits(tree_queues[cq_name], assignment.usage):
                        if timers.blocks_admission(config):
                            return  # heads stay; a PodsReady event unblocks
                        fit = fit or self._fit(assignment)
                        if not self._claims_current(rec, cq_name):
                            continue
                        if self._nodes and not self._placeable(rec, cq_name, fit):
                            continue
                        self._admit(rec, cq_name, fit, at)
                        changed.add(root)
                    # else: left at the head; the next cycle assigns it again
                    continue
                if assignment.mode is Mode.PREEMPT and self._views[cq_name].may_preempt:
                    root = root_of[cq_name]
                    if root in changed:
                        continue  # assigned before this cycle's admissions: again next cycle
                    if timers.blocks_admission(config):
                        return
                    if self._try_preempt(rec, cq_name, assignment, at):
                        changed.add(root)
                        continue
                self._not_admitted(rec, cq_name, assignment)

    def _not_admitted(self, rec: WorkloadRecord, cq_name: str, assignment: Assignment) -> None:
        """Set aside a head the cycle could not admit (a hook: ``Preempting``
        gives a head awaiting a preemption plan its own verdict)."""
        searched = assignment.mode is Mode.PREEMPT and self._views[cq_name].may_preempt
        self._set_aside(
            rec, cq_name, assignment_verdict(assignment), assignment.blocking, searched=searched
        )

    def _set_aside(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        verdict: Verdict,
        needs: Needs,
        *,
        searched: bool = False,
        unplaced: tuple[GangPod, ...] | None = None,
        whole: bool = False,
    ) -> None:
        """Park the head's group (BestEffortFIFO) or block the queue (StrictFIFO),
        and register as a waiter for what the attempt was short of; ``searched``:
        its preemption search found no victim, so it also registers as a
        *searcher*, sent to search again by any release in its cohort tree."""
        queue = self._queues[cq_name]
        if queue.strategy == STRICT_FIFO:
            shape, epoch, todo = BLOCKED_HEAD, queue.block(rec.key, verdict, needs), needs
        else:
            shape = rec.shape
            epoch, todo = queue.park(shape, verdict, needs)
        if unplaced is not None:
            self._wait_for_nodes((cq_name, shape), epoch, unplaced, whole)
        if searched:
            root = self._tree.root_of[cq_name]
            searchers = self._searchers.get(root)
            if searchers is None:
                searchers = self._searchers[root] = {}
            searchers[(cq_name, shape)] = epoch
        if todo:
            root = self._tree.root_of[cq_name]
            waiters = self._waiters.get(root)
            if waiters is None:
                waiters = self._waiters[root] = {}
            for fr, needed in todo:
                by_cq = waiters.get(fr)
                if by_cq is None:
                    by_cq = waiters[fr] = {}
                heap = by_cq.get(cq_name)
                if heap is None:
                    by_cq[cq_name] = [(needed, shape, epoch)]
                    continue
                heapq.heappush(heap, (needed, shape, epoch))
                if len(heap) > 2 * len(queue.groups) + 32:
                    heap[:] = [e for e in heap if queue.is_registered(e[1], e[2], fr)]
                    heapq.heapify(heap)
        if rec.last_verdict != verdict.key:
            self._inadmissible(rec, verdict)
        else:
            rec.state = INADMISSIBLE  # what _inadmissible does when nothing is new

    def _fit(self, assignment: Assignment) -> Fit:
        """What admitting with a fitting ``assignment`` records and announces."""
        flavors = tuple((ps.name, ps.flavors) for ps in assignment.podsets)
        usage: dict[str, dict[str, str]] = {}
        formatted = self._formatted
        for (flavor, res), qty in assignment.usage:
            text = formatted.get(qty)
            if text is None:
                if len(formatted) > 4096:
                    formatted.clear()
                text = formatted[qty] = format_quantity(qty)
            usage.setdefault(flavor, {})[res] = text
        return Fit(assignment, flavors, {name: dict(fl) for name, fl in flavors}, usage)

    def _admit(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        fit: Fit,
        at: float,
        victims: list[str] | None = None,
    ) -> None:
        """Charge the quota tree and emit Admitted (listing ``victims`` when it
        preempted); start its PodsReady timer. (A hook: ``Preempting`` numbers
        admissions.)"""
        self._detach(rec)
        node = self._tree.queues[cq_name]
        usage = fit.assignment.usage
        if any(ps.claims for ps in rec.requests):
            usage = self._claims_admitted(rec, cq_name, fit)  # direct claims: once
        for fr, qty in usage:
            add_usage(node, fr, qty)
        rec.admission = Admission(cq_name, usage, fit.flavors, at)
        rec.state = ADMITTED
        rec.cluster_queue = cq_name
        rec.last_verdict = None
        key = rec.key
        members = self._admitted.get(cq_name)
        if members is None:
            members = self._admitted[cq_name] = {}
        members[key] = None
        nodes = self._hold_devices(rec) if self._placing is not None else None
        # The nested maps are shared by every admission with this fit:
        # trusted_decision copies them.
        self._out.append(
            admitted(
                workload=key,
                uid=rec.spec.uid,
                cluster_queue=cq_name,
                flavors=fit.decision_flavors,
                usage=fit.decision_usage,
                victims=victims,
                generation=rec.spec.generation,
                nodes=nodes,
            )
        )
        self._timers.admitted(self._config, key, at)
        if self._config.admission_fair_sharing is not None:
            self._afs_admitted(rec, cq_name, at)

    def _keep_charge(self, rec: WorkloadRecord, adm: Admission) -> bool:
        """Keep a stopped workload's quota charged until its pods are gone (a hook:
        ``Draining`` records the drain and returns True; here the quota goes back)."""
        return False

    def _release(self, rec: WorkloadRecord, *, drain: bool = True) -> None:
        """End an admitted workload's admission; stop its PodsReady timer. Its quota
        goes back at once when ``drain`` is False (the Job finished: no pod is left),
        else it stays charged until its pods are gone (``_keep_charge``). (A hook:
        ``Preempting`` forgets its admission number.)"""
        self._timers.released(rec.key)
        adm = rec.admission
        assert adm is not None
        cq_name = adm.cluster_queue
        rec.admission = None
        if AFS_EXTRA in rec.extra:
            self._afs_released(rec)
        admitted = self._admitted.get(cq_name)
        if admitted is not None:
            admitted.pop(rec.key, None)
        if drain and cq_name in self._tree.queues and self._keep_charge(rec, adm):
            return  # its devices too, until its pods are gone (Draining)
        self._give_back(cq_name, adm.usage)
        if self._claim_users:
            self._claims_released(rec.key)
        if self._device_holds or self._stood_for:
            self._release_devices(rec.key)

    def _give_back(self, cq_name: str, usage: tuple[tuple[FlavorResource, int], ...]) -> None:
        """Take ``usage`` off the ClusterQueue's quota node and wake who waited for it."""
        node = self._tree.queues.get(cq_name)
        if node is None:
            return
        for fr, qty in usage:
            remove_usage(node, fr, qty)
        gone = cq_name not in self._cqs
        if gone and not self._admitted.get(cq_name) and not self._drains_in(cq_name):
            # The last workload of a deleted ClusterQueue is gone: drop its node.
            before = self._roots()
            self._tree.remove_queue(cq_name)
            self._restructured(before, [before[cq_name]])
            return
        root = self._tree.root_of[cq_name]
        waiters = self._waiters.get(root)
        if waiters:
            self._wake_waiters(waiters, usage)
        if self._searchers:
            searchers = self._searchers.pop(root, None)
            if searchers:
                self._wake_searchers(searchers)

    def _wake_waiters(
        self,
        waiters: dict[FlavorResource, dict[str, list[Waiter]]],
        freed: tuple[tuple[FlavorResource, int], ...],
    ) -> None:
        """Wake the parked groups (and blocked heads) that now have what they
        were short of; the others stay parked with their verdict."""
        tree_queues = self._tree.queues
        queues = self._queues
        ready = self._ready
        heappop = heapq.heappop
        for fr, _ in freed:
            by_cq = waiters.get(fr)
            if not by_cq:
                continue
            # available(parent, fr), computed once per cohort and shared by its queues
            last_parent: QuotaNode | None = None
            above = 0
            for cq_name, heap in list(by_cq.items()):
                node = tree_queues.get(cq_name)
                queue = queues.get(cq_name)
                if node is None or queue is None or not heap:
                    del by_cq[cq_name]
                    continue
                top = heap[0][0]
                parent = node.parent
                if parent is None:
                    free = available(node, fr)
                else:
                    if parent is not last_parent:
                        last_parent, above = parent, available(parent, fr)
                    if top > above:
                        # available_below() adds to ``above`` only what the queue
                        # keeps back under a lending limit: without any, still short.
                        caps = node.caps.get(fr)
                        if caps[0] == 0 if caps is not None else fr not in node.limits:
                            continue
                    free = available_below(node, fr, above)
                if top > free:
                    continue  # the usual case: still short
                groups = queue.groups
                woke = False
                while heap and heap[0][0] <= free:
                    _, shape, epoch = heappop(heap)
                    # queue.wake(shape, epoch, fr), inlined for parked groups
                    group = groups.get(shape)
                    if group is not None and shape != BLOCKED_HEAD:
                        if group.epoch == epoch:
                            group.live.pop(fr, None)
                            if group.parked:
                                queue.unpark(group)
                                woke = True
                    elif queue.wake(shape, epoch, fr):
                        woke = True
                if woke:
                    ready[cq_name] = None
                if not heap:
                    del by_cq[cq_name]
            if not by_cq:
                del waiters[fr]

    def _evict(
        self, rec: WorkloadRecord, reason: str, message: str, *, requeue: bool, drain: bool = True
    ) -> None:
        """``drain`` False: no pod can run under the admission (its start was never
        written), so its quota goes back at once, said by a ``QuotaReleased``
        (reason ``NotStarted``) right after the stop, as a drain's end would be."""
        cq_name = rec.cluster_queue
        adm = rec.admission
        self._release(rec, drain=drain)
        rec.state = PENDING
        rec.cluster_queue = None
        key, uid = rec.key, rec.spec.uid
        stop_id = decision_id(self._cause, len(self._out))
        self._out.append(
            evicted(workload=key, uid=uid, cluster_queue=cq_name, reason=reason, message=message)
        )
        if not drain and adm is not None:
            usage: dict[str, dict[str, str]] = {}
            for (flavor, res), qty in adm.usage:
                usage.setdefault(flavor, {})[res] = format_quantity(qty)
            self._out.append(
                quota_released(
                    workload=key,
                    uid=uid,
                    cluster_queue=adm.cluster_queue,
                    usage=usage,
                    stop_id=stop_id,
                    message="the Job was never started under this admission; its quota is released",
                    reason="NotStarted",
                )
            )
        if requeue:
            self._out.append(requeued(workload=key, uid=uid, cluster_queue=cq_name, reason=reason))
            self._place(rec)

    def _refused_changed(self, rec: WorkloadRecord, found: int | None, message: str) -> None:
        """The actuator did not start ``rec``: its Job was at generation ``found``,
        not the admission's. Evicted and Requeued (as for a Conflict); admitted
        again at once if the fold has seen that generation, else when it does."""
        cq_name = rec.cluster_queue
        self._evict(rec, JOB_CHANGED, message + "; it is queued again", requeue=False, drain=False)
        self._out.append(
            requeued(workload=rec.key, uid=rec.spec.uid, cluster_queue=cq_name, reason=JOB_CHANGED)
        )
        if generation_seen(rec.spec, found):
            self._place(rec)
            return
        self._job_changed[rec.key] = found  # Fold._upsert_workload re-places it
        self._hold(rec, (), (JOB_CHANGED, message + "; it waits to see the changed Job"))

    def _timed_out(self, key: str, when: float) -> None:
        """A PodsReady timer fired: evict, to wait out a backoff outside any
        queue, or deactivate once the requeue limit is reached."""
        rec = self._workloads[key]
        outcome = self._timers.timeout(self._config, rec, when)
        cq_name = rec.cluster_queue
        self._release(rec)
        rec.cluster_queue = None
        self._timers.timed_out(key, outcome)
        uid = rec.spec.uid
        if isinstance(outcome, Deactivate):
            rec.state = DEACTIVATED
            limit = self._config.wait_for_pods_ready.backoff_limit_count
            message = (
                f"exceeded the PodsReady timeout {key} after {outcome.count} "
                f"requeue(s); the limit (backoffLimitCount) is {limit}"
            )
            self._out.append(
                deactivated(
                    workload=key,
                    uid=uid,
                    cluster_queue=cq_name,
                    reason=REQUEUING_LIMIT_EXCEEDED,
                    message=message,
                )
            )
            return
        rec.state = PENDING
        message = (
            f"Exceeded the PodsReady timeout {key}; requeued after a backoff "
            f"of {outcome.delay:g}s (requeue {outcome.state.requeue_count})"
        )
        self._out.append(
            evicted(
                workload=key,
                uid=uid,
                cluster_queue=cq_name,
                reason=PODS_READY_TIMEOUT,
                message=message,
                requeue_at=outcome.at,
            )
        )

    def _end_backoff(self, key: str) -> None:
        """A requeue backoff is over: the workload joins its queue again."""
        self._timers.end_backoff(key)
        rec = self._workloads[key]
        lq = self._lqs.get((rec.spec.namespace, rec.spec.queue_name))
        cq_name = lq.cluster_queue if lq is not None else None
        self._out.append(
            requeued(
                workload=key, uid=rec.spec.uid, cluster_queue=cq_name, reason=PODS_READY_TIMEOUT
            )
        )
        self._place(rec)

    def _wake_roots(self, roots: list[str]) -> None:
        for root in sorted(set(roots)):
            self._waiters.pop(root, None)
            self._searchers.pop(root, None)
            for cq_name in self._tree.queues_in_tree(root):
                queue = self._queues.get(cq_name)
                if queue is not None:
                    queue.wake_all()
                    self._ready[cq_name] = None

    def _roots(self) -> dict[str, str]:
        return {q: self._tree.root_name(q) for q in self._tree.queues}

    def _restructured(self, before: dict[str, str], extra: list[str]) -> None:
        after = self._roots()
        roots = list(extra)
        for q in sorted(set(before) | set(after)):
            b, a = before.get(q), after.get(q)
            if b != a:
                roots.extend(r for r in (b, a) if r is not None)
        self._wake_roots(roots)

    def _cohort_roots(self, name: str) -> list[str]:
        node = self._tree.cohorts.get(name)
        if node is None:
            return []
        root = node.root()
        return [f"cohort:{root.name}"]
