"""The quota tree's objects: ClusterQueues, Cohorts and ResourceFlavors, and
whether each ClusterQueue can admit.

Theory of operation: a layer of the fold (:mod:`kuota.core.fold.hooks`), between
``preempting.Preempting`` and ``fold.Fold``. A ClusterQueue, Cohort or
ResourceFlavor that changes restructures the quota tree, announces the
ClusterQueue's quota (``QuotaChanged``) and wakes the cohort trees it touches.
``_update_activity`` says whether a ClusterQueue can admit (stopped, a flavor
missing or rejected, under a cycle of cohorts) and tells its queued workloads
why not. A Cohort whose update would close a cycle of cohorts is Rejected and
kept pending; the ClusterQueues under the cycle are inactive (``CohortCycle``)
until a later change breaks it, and then the pending version takes effect
(docs/design/bad-input.md, docs/design/fold.md).
"""

from __future__ import annotations

from kuota.api.types import ClusterQueue, Cohort, ObjectRef, ResourceFlavor
from kuota.core.assign.flavors import queue_view
from kuota.core.fold.decisions import quota_changed, quota_deleted
from kuota.core.fold.preempting import Preempting
from kuota.core.queueing.queues import ClusterQueueQueue
from kuota.core.queueing.verdict import Verdict, text_verdict
from kuota.core.quota.rows import quota_of


def _covered(cq: ClusterQueue) -> tuple[str, ...]:
    return tuple(sorted(r for g in cq.resource_groups for r in g.covered_resources))


def _flavor_names(cq: ClusterQueue) -> list[str]:
    return [f.name for g in cq.resource_groups for f in g.flavors]


def _quota_of(cq: ClusterQueue) -> tuple[str | None, dict[str, dict[str, dict[str, str]]]]:
    """The cohort and quotas a QuotaChanged decision carries (docs/design/quota-view.md)."""
    return cq.cohort, quota_of(cq)


class Cohorts(Preempting):
    """ClusterQueues, Cohorts and ResourceFlavors (see the module docstring)."""

    def _update_activity(self, cq_name: str) -> None:
        """Recompute whether a ClusterQueue can admit; announce it to its queue."""
        cq = self._cqs.get(cq_name)
        verdict: Verdict | None = None
        if cq is not None:
            if cq.stop_policy != "None":
                verdict = text_verdict("ClusterQueueStopped", f"ClusterQueue {cq_name} is stopped")
            else:
                missing = [f for f in _flavor_names(cq) if f not in self._flavors]
                if missing:
                    flavor = f"ResourceFlavor {missing[0]}"
                    rejection = self._rejections.get(flavor)
                    why = (
                        "not found"
                        if rejection is None
                        else f"was rejected: {rejection[1].removeprefix(flavor + ': ')}"
                    )
                    verdict = text_verdict(
                        "FlavorNotFound", f"ClusterQueue {cq_name} is inactive: {flavor} {why}"
                    )
                elif self._cohort_pending:
                    verdict = self._cycle_verdict(cq)
        before = self._inactive.get(cq_name)
        if verdict is None:
            self._inactive.pop(cq_name, None)
        else:
            self._inactive[cq_name] = verdict
        if verdict is not None and verdict != before:
            queue = self._queues.get(cq_name)
            if queue is not None:
                for key in queue.queued_keys():
                    self._inadmissible(self._workloads[key], verdict)

    def _set_flavor(self, name: str, flavor: ResourceFlavor | None) -> None:
        if flavor is None:
            if self._flavors.pop(name, None) is None:
                return
        elif self._flavors.get(name) == flavor:
            return
        else:
            self._flavors[name] = flavor
        self._eligible.clear()  # the nodes a podset may use (placement) depend on it
        self._flavor_changed(name)

    def _flavor_changed(self, name: str) -> None:
        """The ClusterQueues that name this flavor: active or not, and why."""
        users = [q for q in sorted(self._cqs) if name in _flavor_names(self._cqs[q])]
        for q in users:
            self._update_activity(q)
        self._wake_roots([self._tree.root_name(q) for q in users if q in self._tree.queues])

    def _set_cluster_queue(self, cq: ClusterQueue) -> None:
        name = cq.name
        old = self._cqs.get(name)
        if old == cq:
            return
        before = self._roots()
        self._cqs[name] = cq
        if old is None or (old.cohort, old.resource_groups) != (cq.cohort, cq.resource_groups):
            # Before the decisions the change causes: readers charge them against it.
            cohort, quota = _quota_of(cq)
            self._out.append(quota_changed(cluster_queue=name, cohort=cohort, quota=quota))
        self._views[name] = queue_view(cq, fair_sharing=self._config.fair_sharing.enable)
        self._plans.clear()
        self._ns_cache.clear()
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = ClusterQueueQueue(strategy=cq.queueing_strategy)
        queue.strategy = cq.queueing_strategy
        self._afs_refresh(name)
        self._tree.set_queue(name, cohort=cq.cohort, groups=cq.resource_groups)
        self._update_activity(name)
        if cq.stop_policy == "HoldAndDrain":
            for key in list(self._admitted.get(name, {})):
                self._evict(
                    self._workloads[key],
                    "ClusterQueueStopped",
                    f"ClusterQueue {name} is stopped with HoldAndDrain",
                    requeue=True,
                )
        self._restructured(before, [self._tree.root_name(name)])
        recheck = dict(self._holds.pop(("cq", name), {}))
        if old is not None and (
            old.namespace_selector != cq.namespace_selector or _covered(old) != _covered(cq)
        ):
            recheck.update(dict.fromkeys(queue.queued_keys()))
        self._reevaluate(recheck)

    def _remove_cluster_queue(self, name: str) -> None:
        if name not in self._cqs:
            return
        before = self._roots()
        queued = self._queues[name].queued_keys()
        del self._cqs[name]
        self._out.append(quota_deleted(cluster_queue=name))
        del self._views[name]
        self._plans.clear()
        self._inactive.pop(name, None)
        self._ns_cache.clear()
        held = self._holds.pop(("cq", name), {})
        if not self._admitted.get(name) and not self._drains_in(name):
            # Kueue keeps a terminating ClusterQueue until its workloads finish; we
            # keep its quota node while it has admitted workloads.
            self._tree.remove_queue(name)
        self._restructured(before, [before[name]] if name in before else [])
        recheck = dict.fromkeys(queued)
        recheck.update(held)
        self._reevaluate(recheck)
        self._queues.pop(name, None)
        self._ready.pop(name, None)

    def _set_cohort(self, cohort: Cohort) -> None:
        old = self._cohorts.get(cohort.name)
        pending = self._cohort_pending.pop(cohort.name, None)
        if old == cohort:
            if pending is not None:  # back to the version in force: no cycle any more
                self._refresh_cycles()
            return
        before = self._roots()
        extra = self._cohort_roots(cohort.name)
        if not self._tree.set_cohort(
            cohort.name, parent=cohort.parent, groups=cohort.resource_groups
        ):
            self._cohort_pending[cohort.name] = cohort
            cycle = " -> ".join(self._cohort_cycle(cohort.name))
            self._rejected(
                ObjectRef("Cohort", cohort.name),
                f"Cohort {cohort.name}: spec.parentName: parent {cohort.parent} would make a "
                f"cycle of cohorts ({cycle}); the previous version stays in force and the "
                "ClusterQueues under the cycle admit nothing until it is broken",
                reason="CohortCycle",
            )
            self._refresh_cycles()
            return
        self._cohorts[cohort.name] = cohort
        extra += self._cohort_roots(cohort.name)
        if self._cohort_pending or pending is not None:
            extra += self._retry_pending_cohorts()
            self._refresh_cycles()
        self._restructured(before, extra)

    def _remove_cohort(self, name: str) -> None:
        pending = self._cohort_pending.pop(name, None)
        if self._cohorts.pop(name, None) is None:
            if pending is not None:
                self._refresh_cycles()
            return
        before = self._roots()
        extra = self._cohort_roots(name)
        self._tree.remove_cohort(name)
        if self._cohort_pending or pending is not None:
            extra += self._retry_pending_cohorts()
            self._refresh_cycles()
        self._restructured(before, extra + self._cohort_roots(name))

    # Circular cohorts (docs/design/bad-input.md): the Cohort whose update closes a
    # cycle is Rejected and kept pending; the ClusterQueues whose cohort chain
    # reaches a cohort of the cycle are inactive (CohortCycle) until a later change
    # breaks it, when the pending version takes effect.

    def _retry_pending_cohorts(self) -> list[str]:
        """Put in force the pending cohorts that no longer close a cycle; their roots."""
        roots: list[str] = []
        progress = True
        while progress:
            progress = False
            for name in sorted(self._cohort_pending):
                c = self._cohort_pending[name]
                roots += self._cohort_roots(name)
                if self._tree.set_cohort(name, parent=c.parent, groups=c.resource_groups):
                    del self._cohort_pending[name]
                    self._rejections.pop(f"Cohort {name}", None)
                    self._cohorts[name] = c
                    roots += self._cohort_roots(name)
                    progress = True
        return roots

    def _desired_parent(self, name: str) -> str | None:
        pending = self._cohort_pending.get(name)
        return pending.parent if pending is not None else self._tree.cohort_parent(name)

    def _cohort_cycle(self, name: str) -> list[str]:
        """The cycle ``name``'s desired parents run into, as ``[a, b, ..., a]``."""
        path: list[str] = []
        current: str | None = name
        while current is not None and current not in path:
            path.append(current)
            current = self._desired_parent(current)
        if current is None:
            return path  # defensive: no cycle after all
        return [*path[path.index(current) :], current]

    def _cycle_members(self) -> dict[str, str]:
        """Cohort -> the cycle it is on (``a -> b -> a``), for every pending cohort."""
        members: dict[str, str] = {}
        for name in sorted(self._cohort_pending):
            cycle = self._cohort_cycle(name)
            text = " -> ".join(cycle)
            for member in cycle:
                members.setdefault(member, text)
        return members

    def _cycle_verdict(self, cq: ClusterQueue) -> Verdict | None:
        members = self._cycle_members()
        current, seen = cq.cohort, set()
        while current is not None and current not in seen:
            if current in members:
                return text_verdict(
                    "CohortCycle",
                    f"ClusterQueue {cq.name} is inactive: Cohort {current} is in a cycle "
                    f"of cohorts ({members[current]})",
                )
            seen.add(current)
            current = self._tree.cohort_parent(current)
        return None

    def _refresh_cycles(self) -> None:
        """Recompute which ClusterQueues a cycle of cohorts stops; wake those freed."""
        freed: list[str] = []
        for name in sorted(self._cqs):
            was = name in self._inactive
            self._update_activity(name)
            if was and name not in self._inactive and name in self._tree.queues:
                freed.append(self._tree.root_name(name))
        self._wake_roots(freed)
