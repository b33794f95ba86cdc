"""Quota that follows the pods: a stopped workload keeps its charge until they are gone.

Theory of operation: a stop of an admitted workload (Preempted, Evicted,
Deactivated, its Job deleted) ends its admission at once, but its quota stays
charged on its ClusterQueue's node as a :class:`~kuota.core.fold.state.Drain`,
named by the stop decision's id, because its pods may still run (a long
termination grace period, an orphaning delete). The actuator reports when no
pod of the Job is left, terminating ones included (``WorkloadStopped`` with that
decision id); only then is the quota given back (a ``QuotaReleased`` decision),
the waiters woken, and the workload itself, held silently meanwhile, placed in
its queue again. A Job that finished releases at once: its pods are done. For
the preemption search, :meth:`Draining._lift` takes the drains' usage off the
tree and :meth:`Draining._unlift` puts it back, so a head that fits once the
drains end waits for them instead of picking more victims. Why and how:
docs/design/quota-until-pods-gone.md.
"""

from __future__ import annotations

from collections.abc import Container

from kuota.core.fold.cycle import Cycles
from kuota.core.fold.decisions import quota_released
from kuota.core.fold.state import Drain
from kuota.core.queueing.verdict import Verdict
from kuota.core.queueing.workload import Admission, WorkloadRecord
from kuota.core.quota.tree import FlavorResource, add_usage, remove_usage
from kuota.events.schema import WorkloadStopped, decision_id
from kuota.kinds import workload_identity
from kuota.quantity import format_quantity

#: The reason of a head that fits once the stopped workloads' pods are gone.
WAITING_FOR_STOP = "WaitingForStoppedWorkloads"
#: One change of the search's view: (ClusterQueue, usage, added) — a drain taken
#: off (added False) or a waiting preemptor's usage charged (added True).
Lift = tuple[str, tuple[tuple[FlavorResource, int], ...], bool]


class Draining(Cycles):
    """Drains: the quota of stopped workloads, kept until their pods are gone."""

    def _keep_charge(self, rec: WorkloadRecord, adm: Admission) -> bool:
        # Every caller appends the stop decision right after the release: its index.
        did = decision_id(self._cause, len(self._out))
        key, uid = rec.key, rec.spec.uid
        self._drains[did] = Drain(did, key, uid, adm.cluster_queue, adm.usage)
        self._draining[(key, uid)] = did
        return True

    def _workload_stopped(self, event: WorkloadStopped) -> None:
        """The actuator saw the stopped Job's pods gone: release what its stop kept.
        A report for no drain (a repeat, a stop of a workload that held no quota)
        changes nothing."""
        drain = self._drains.get(event.decision_id)
        if drain is None or drain.workload != event.workload or drain.uid != event.uid:
            return
        del self._drains[drain.decision]
        pair = (drain.workload, drain.uid)
        if self._draining.get(pair) == drain.decision:
            del self._draining[pair]
        usage: dict[str, dict[str, str]] = {}
        for (flavor, res), qty in drain.usage:
            usage.setdefault(flavor, {})[res] = format_quantity(qty)
        waited = f" after {event.waited:.0f}s" if event.waited >= 1 else ""
        identity = workload_identity(drain.workload)
        kind = identity[0] if identity is not None else "Job"
        self._out.append(
            quota_released(
                workload=drain.workload,
                uid=drain.uid,
                cluster_queue=drain.cluster_queue,
                usage=usage,
                stop_id=drain.decision,
                message=f"the pods of the stopped {kind} are gone{waited}; its quota is released",
            )
        )
        self._give_back(drain.cluster_queue, drain.usage)
        if self._claim_users:
            self._claims_released(drain.workload)
        if self._device_holds or self._stood_for:
            self._release_devices(drain.workload)
        held = self._holds.pop(("drain", drain.workload, drain.uid), None)
        if held:
            self._reevaluate(held)

    # ------------------------------------------------------------------ the search's view

    def _drains_of_tree(self, cq_name: str) -> list[Drain]:
        """The drains in ``cq_name``'s cohort tree."""
        root_of = self._tree.root_of
        root = root_of.get(cq_name)
        return [d for d in self._drains.values() if root_of.get(d.cluster_queue) == root]

    def _lift(self, cq_name: str | None = None, *, exclude: Container[str] = ()) -> list[Lift]:
        """Turn the quota tree (``cq_name``'s cohort tree, or all) into what it will
        be once the stopped workloads' pods are gone: their drains taken off, and the
        usage of each preemptor that waits for them (but those in ``exclude``)
        charged instead. Always undone by :meth:`_unlift` before anything else
        changes the tree."""
        if not self._drains:
            return []
        tree = self._tree
        root = tree.root_of.get(cq_name) if cq_name is not None else None
        if cq_name is not None and root is None:
            return []
        changes: list[Lift] = []
        for drain in self._drains.values():
            changes.append((drain.cluster_queue, drain.usage, False))
        for key, (queue, usage) in self._reserved.items():
            if key not in exclude:
                changes.append((queue, usage, True))
        done: list[Lift] = []
        for queue, usage, add in changes:
            node = tree.queues.get(queue)
            if node is None or (root is not None and tree.root_of.get(queue) != root):
                continue
            for fr, qty in usage:
                if add:
                    add_usage(node, fr, qty)
                else:
                    remove_usage(node, fr, qty)
            done.append((queue, usage, add))
        return done

    def _unlift(self, lifted: list[Lift]) -> None:
        queues = self._tree.queues
        for queue, usage, added in reversed(lifted):
            node = queues[queue]
            for fr, qty in reversed(usage):
                if added:
                    remove_usage(node, fr, qty)
                else:
                    add_usage(node, fr, qty)


def drain_verdict(lifted: list[Drain]) -> Verdict:
    """A head that fits once ``lifted`` drains end: it waits for them (Kueue's
    "Pending the preemption of N workload(s)"), announced once per wait."""
    names = ", ".join(d.workload for d in lifted[:3]) + (", ..." if len(lifted) > 3 else "")
    return Verdict(
        WAITING_FOR_STOP,
        (),
        f"waiting for {len(lifted)} stopped workload(s) to stop ({names}): their pods still "
        "hold the quota it needs; no more workloads are preempted for it meanwhile",
    )
