"""Scheduling cycles, and what quota changes wake up.

Theory of operation: after every event :meth:`Cycles._schedule` runs cycles
until one admits nothing, as Kueue's scheduler does:

1. take the head of every ClusterQueue in the ``ready`` set (sorted by name);
   a head whose group (or StrictFIFO block) remembers what its last attempt
   was short of, and none of that is available now, would fail the same way:
   it is set aside again without a flavor assignment;
2. assign flavors to every head against the same usage (the snapshot);
3. order the entries as Kueue's classical iterator: not borrowing before
   borrowing (lower borrowing level first), then priority, then creation
   time, then key;
4. admit each entry that still fits after the admissions before it; an entry
   that no longer fits stays at its queue's head for the next cycle; one that
   did not fit is *set aside*: its group parks (BestEffortFIFO) or its queue
   blocks (StrictFIFO), and it registers as a *waiter* for each
   flavor-resource it was short of, with the amount it needs, in its cohort
   tree.

Admission adds the usage to the quota tree (reserving it at the event's time)
and emits Admitted. Releasing (finish, delete, eviction) removes it and wakes
the waiters on the freed flavor-resources in that tree whose ClusterQueue now
has what they need; the others stay parked with their verdict. A structural
change (a ClusterQueue, Cohort, flavor or configuration) wakes whole trees.
"""

from __future__ import annotations

import heapq

from kuota.core.flavors import (
    Assignment,
    assign_flavors,
    could_fit_now,
    plan_podsets,
    still_fits,
)
from kuota.core.placement import Placement
from kuota.core.quantity import format_quantity
from kuota.core.queues import BLOCKED_HEAD, STRICT_FIFO, Needs
from kuota.core.quota import (
    FlavorResource,
    add_usage,
    available,
    available_below,
    remove_usage,
)
from kuota.core.state import Waiter
from kuota.core.verdict import Verdict, assignment_verdict
from kuota.core.workload import (
    ADMITTED,
    PENDING,
    Admission,
    WorkloadRecord,
)


class Cycles(Placement):
    def _schedule(self, at: float) -> None:
        queues = self._queues
        workloads = self._workloads
        tree_queues = self._tree.queues
        while self._ready:
            heads: list[tuple[str, WorkloadRecord]] = []
            for cq_name in sorted(self._ready):
                queue = queues.get(cq_name)
                rec = None
                if queue is not None and cq_name not in self._inactive:
                    node = tree_queues[cq_name]
                    while (head := queue.head()) is not None:
                        rec = workloads[head[0][2]]
                        again = queue.recheck(rec.key, head[1])
                        if again is None or could_fit_now(node, again[1]):
                            break
                        # Still short of everything it was short of: the same attempt
                        # would fail the same way, so set it aside without running it.
                        self._set_aside(rec, cq_name, again[0], again[1])
                        rec = None
                if rec is None:
                    del self._ready[cq_name]
                    continue
                heads.append((cq_name, rec))
            if not heads:
                return
            entries: list[tuple[int, tuple[int, float, str], str, WorkloadRecord, Assignment]] = []
            plans = self._plans
            for cq_name, rec in heads:
                view = self._views[cq_name]
                plan = plans.get((cq_name, rec.shape))
                if plan is None:
                    plan = plans[(cq_name, rec.shape)] = plan_podsets(view, rec.requests)
                assignment = assign_flavors(
                    view=view,
                    node=tree_queues[cq_name],
                    flavors=self._flavors,
                    podsets=rec.requests,
                    plan=plan,
                )
                entries.append((assignment.borrowing, rec.order, cq_name, rec, assignment))
            entries.sort(key=lambda e: (e[0], e[1]))
            root_of = self._tree.root_of
            changed: set[str] = set()  # trees with an admission earlier in this cycle
            for _, _, cq_name, rec, assignment in entries:
                if assignment.fits:
                    root = root_of[cq_name]
                    if root not in changed or still_fits(tree_queues[cq_name], assignment.usage):
                        self._admit(rec, cq_name, assignment, at)
                        changed.add(root)
                    # else: left at the head; the next cycle assigns it again
                    continue
                self._not_admitted(rec, cq_name, assignment)

    def _not_admitted(self, rec: WorkloadRecord, cq_name: str, assignment: Assignment) -> None:
        self._set_aside(rec, cq_name, assignment_verdict(assignment), assignment.blocking)

    def _set_aside(self, rec: WorkloadRecord, cq_name: str, verdict: Verdict, needs: Needs) -> None:
        """Park the head's group (BestEffortFIFO) or block the queue (StrictFIFO),
        and register as a waiter for what the attempt was short of."""
        queue = self._queues[cq_name]
        if queue.strategy == STRICT_FIFO:
            shape, epoch, todo = BLOCKED_HEAD, queue.block(rec.key, verdict, needs), needs
        else:
            shape = rec.shape
            epoch, todo = queue.park(shape, verdict, needs)
        if todo:
            root = self._tree.root_name(cq_name)
            waiters = self._waiters.setdefault(root, {})
            for fr, needed in todo:
                heap = waiters.setdefault(fr, {}).setdefault(cq_name, [])
                heapq.heappush(heap, (needed, shape, epoch))
                if len(heap) > 2 * len(queue.groups) + 32:
                    heap[:] = [e for e in heap if queue.is_registered(e[1], e[2], fr)]
                    heapq.heapify(heap)
        self._inadmissible(rec, verdict)

    def _admit(self, rec: WorkloadRecord, cq_name: str, assignment: Assignment, at: float) -> None:
        self._detach(rec)
        node = self._tree.queues[cq_name]
        for fr, qty in assignment.usage:
            add_usage(node, fr, qty)
        flavors = tuple((ps.name, ps.flavors) for ps in assignment.podsets)
        rec.admission = Admission(cq_name, assignment.usage, flavors, at)
        rec.state = ADMITTED
        rec.cluster_queue = cq_name
        rec.last_verdict = None
        self._admitted.setdefault(cq_name, {})[rec.key] = None
        usage: dict[str, dict[str, str]] = {}
        formatted = self._formatted
        for (flavor, res), qty in assignment.usage:
            text = formatted.get(qty)
            if text is None:
                if len(formatted) > 4096:
                    formatted.clear()
                text = formatted[qty] = format_quantity(qty)
            usage.setdefault(flavor, {})[res] = text
        self._out.append(
            {
                "type": "Admitted",
                "workload": rec.key,
                "uid": rec.spec.uid,
                "cluster_queue": cq_name,
                "flavors": {name: dict(fl) for name, fl in flavors},
                "usage": usage,
            }
        )

    def _release(self, rec: WorkloadRecord) -> None:
        """Give back an admitted workload's quota and wake who waited for it."""
        adm = rec.admission
        assert adm is not None
        node = self._tree.queues.get(adm.cluster_queue)
        rec.admission = None
        admitted = self._admitted.get(adm.cluster_queue)
        if admitted is not None:
            admitted.pop(rec.key, None)
        if node is None:
            return
        for fr, qty in adm.usage:
            remove_usage(node, fr, qty)
        if adm.cluster_queue not in self._cqs and not admitted:
            # The last workload of a deleted ClusterQueue is gone: drop its node.
            before = self._roots()
            self._tree.remove_queue(adm.cluster_queue)
            self._restructured(before, [before[adm.cluster_queue]])
            return
        waiters = self._waiters.get(self._tree.root_name(adm.cluster_queue))
        if waiters:
            self._wake_waiters(waiters, [fr for fr, _ in adm.usage])

    def _wake_waiters(
        self, waiters: dict[FlavorResource, dict[str, list[Waiter]]], frs: list[FlavorResource]
    ) -> None:
        """Wake the parked groups (and blocked heads) that now have what they
        were short of; the others stay parked with their verdict."""
        tree_queues = self._tree.queues
        for fr in frs:
            by_cq = waiters.get(fr)
            if not by_cq:
                continue
            from_parent: dict[str, int] = {}  # cohort -> its available(fr), shared by its queues
            for cq_name in list(by_cq):
                heap = by_cq[cq_name]
                node = tree_queues.get(cq_name)
                queue = self._queues.get(cq_name)
                if node is None or queue is None:
                    del by_cq[cq_name]
                    continue
                parent = node.parent
                if parent is None:
                    free = available(node, fr)
                else:
                    above = from_parent.get(parent.name)
                    if above is None:
                        above = from_parent[parent.name] = available(parent, fr)
                    free = available_below(node, fr, above)
                while heap and heap[0][0] <= free:
                    _, shape, epoch = heapq.heappop(heap)
                    if queue.wake(shape, epoch, fr):
                        self._ready[cq_name] = None
                if not heap:
                    del by_cq[cq_name]
            if not by_cq:
                del waiters[fr]

    def _evict(self, rec: WorkloadRecord, reason: str, message: str, *, requeue: bool) -> None:
        cq_name = rec.cluster_queue
        self._release(rec)
        rec.state = PENDING
        rec.cluster_queue = None
        self._out.append(
            {
                "type": "Evicted",
                "workload": rec.key,
                "uid": rec.spec.uid,
                "cluster_queue": cq_name,
                "reason": reason,
                "message": message,
            }
        )
        if requeue:
            self._out.append(
                {
                    "type": "Requeued",
                    "workload": rec.key,
                    "uid": rec.spec.uid,
                    "cluster_queue": cq_name,
                    "reason": reason,
                }
            )
            self._place(rec)

    def _wake_roots(self, roots: list[str]) -> None:
        for root in sorted(set(roots)):
            self._waiters.pop(root, None)
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
