"""Admission fair sharing on the live fold: lanes, samples, settlements.

Theory of operation: the rules are in :mod:`kuota.core.queueing.afs`; this
layer applies them. A ClusterQueue is *fair* when the configuration has
``admissionFairSharing`` and its ``admissionScope.admissionMode`` is
``UsageBasedAdmissionFairSharing``; its queue then has one *lane* per
LocalQueue (``namespace/name``) ranked by that LocalQueue's usage
(:meth:`FairAdmission._afs_rank`), and its shapes are per lane
(``Placement._place``). An admission adds the workload's charged usage to its
LocalQueue's live usage (every ClusterQueue: the samples count it) and, in a
fair ClusterQueue, settles at once and re-ranks the lane; a release takes it
off. :meth:`FairAdmission._afs_sample` runs before an event at or past the next
grid instant: it decays every LocalQueue, re-ranks every fair queue and
emits one ``LocalQueueUsage`` decision per LocalQueue whose consumed
resources changed (the LocalQueue status's ``fairSharing``).
"""

from __future__ import annotations

import math
from typing import cast

from kuota.api.types import AdmissionFairSharingConfig
from kuota.core.fold.decisions import local_queue_usage
from kuota.core.fold.ordering import fair_weights
from kuota.core.fold.placement import Placement
from kuota.core.queueing.afs import USAGE_BASED, AfsLedger, LqKey, consumed_quantities
from kuota.core.queueing.workload import ADMITTED, WorkloadRecord
from kuota.core.quota.history import tree_settings
from kuota.core.quota.tree import FlavorResource

AFS_EXTRA = "afs"  # WorkloadRecord.extra: (LocalQueue, usage by resource) while admitted


def by_resource(usage: tuple[tuple[FlavorResource, int], ...]) -> dict[str, int]:
    """Charged usage summed over flavors, per resource."""
    out: dict[str, int] = {}
    for (_, res), qty in usage:
        out[res] = out.get(res, 0) + qty
    return out


class FairAdmission(Placement):
    """Admission fair sharing (module docstring)."""

    def _afs_fair(self, cq_name: str) -> bool:
        cq = self._cqs.get(cq_name)
        return (
            cq is not None
            and cq.admission_mode == USAGE_BASED
            and self._config.admission_fair_sharing is not None
        )

    def _lane_rank(self, lq: LqKey) -> float:
        config = self._config.admission_fair_sharing
        return 0.0 if config is None else self._afs_rank(config, lq)

    def _afs_rank(self, config: AdmissionFairSharingConfig, lq: LqKey) -> float:
        local = self._lqs.get(lq)
        return self._afs.usage(config, lq, 1000 if local is None else local.fair_sharing_weight)

    def _afs_rerank(self, cq_name: str, lanes: list[str] | None = None) -> None:
        """Set the ranks of a fair queue's lanes (all of them by default)."""
        config = self._config.admission_fair_sharing
        queue = self._queues.get(cq_name)
        if config is None or queue is None or not queue.fair:
            return
        for lane in sorted(queue.lane_shapes) if lanes is None else lanes:
            ns, _, name = lane.partition("/")
            queue.set_rank(lane, self._afs_rank(config, (ns, name)))
        self._ready[cq_name] = None  # another lane may be first now

    def _afs_refresh(self, cq_name: str) -> None:
        """Turn a queue's lanes on or off to match its ClusterQueue and the
        configuration; its pending workloads are placed again (new shapes)."""
        queue = self._queues.get(cq_name)
        fair = self._afs_fair(cq_name)
        if queue is None or queue.fair == fair:
            return
        queued = queue.queued_keys()
        queue.set_fair(fair, {})
        self._reevaluate(queued)  # detached, then placed in their lanes

    def _afs_reset(self, toggled: bool) -> None:
        """``admissionFairSharing`` changed: when it was turned on or off, a fresh
        ledger (live usage from the admitted workloads); else the history stays
        and the new parameters apply from now. Queues get or lose their lanes."""
        if toggled:
            self._afs_restart()
        for name in sorted(self._queues):
            self._afs_refresh(name)
            self._afs_rerank(name)

    def _afs_restart(self) -> None:
        ledger = self._afs = AfsLedger()
        on = self._config.admission_fair_sharing is not None
        for rec in self._workloads.values():
            rec.extra.pop(AFS_EXTRA, None)
            if on and rec.state == ADMITTED and rec.admission is not None:
                lq = (rec.spec.namespace, rec.spec.queue_name)
                usage = by_resource(rec.admission.usage)
                rec.extra[AFS_EXTRA] = (lq, usage)
                ledger.add_live(lq, usage, 1)

    def _afs_admitted(self, rec: WorkloadRecord, cq_name: str, at: float) -> None:
        config = self._config.admission_fair_sharing
        adm = rec.admission
        if config is None or adm is None:
            return
        lq = (rec.spec.namespace, rec.spec.queue_name)
        usage = by_resource(adm.usage)
        rec.extra[AFS_EXTRA] = (lq, usage)
        self._afs.add_live(lq, usage, 1)
        if self._afs_fair(cq_name):
            self._afs.settle(config, lq, usage, at)
            self._afs_rerank(cq_name, [f"{lq[0]}/{lq[1]}"])

    def _afs_released(self, rec: WorkloadRecord) -> None:
        held = cast("tuple[LqKey, dict[str, int]] | None", rec.extra.pop(AFS_EXTRA, None))
        if held is not None:
            self._afs.add_live(held[0], held[1], -1)

    def _afs_sample(self, at: float) -> None:
        """Sample every LocalQueue at the last grid instant (module docstring)."""
        config = self._config.admission_fair_sharing
        if config is None:
            return
        ledger = self._afs
        ledger.sample(config, self._lqs, at)
        for lq in sorted(self._lqs):
            entry = ledger.entries.get(lq)
            consumed = consumed_quantities(entry.consumed) if entry is not None else {}
            if ledger.reported.get(lq) == consumed:
                continue
            ledger.reported[lq] = consumed
            local = self._lqs[lq]
            usage = self._afs_rank(config, lq)
            self._out.append(
                local_queue_usage(
                    object=f"LocalQueue {lq[0]}/{lq[1]}",
                    cluster_queue=local.cluster_queue,
                    consumed=consumed,
                    weighted_usage=None if usage == math.inf else usage,
                )
            )
        for name in sorted(self._queues):
            self._afs_rerank(name)

    # ------------------------------------------------------------------ history

    def _history_sample(self, at: float) -> None:
        """History-aware fair sharing: decay every opted-in ClusterQueue's usage
        history to the last grid instant (kuota.core.quota.history)."""
        settings = tree_settings(self._tree, self._cohorts)
        self._history.sample(self._tree, settings, fair_weights(self._cqs, self._cohorts), at)

    # ------------------------------------------------------------------ visibility

    def local_queue_usage(self, cluster_queue: str) -> list[tuple[str, float, dict[str, str]]]:
        """Admission fair sharing of a ClusterQueue: each of its LocalQueues as
        (``namespace/name``, usage, consumed resources), lowest usage first (the
        order its pending workloads go in when the ClusterQueue is fair), then
        by name. Empty unless the ClusterQueue is fair. Read-only."""
        config = self._config.admission_fair_sharing
        if config is None or not self._afs_fair(cluster_queue):
            return []
        rows = []
        for lq, local in self._lqs.items():
            if local.cluster_queue != cluster_queue:
                continue
            entry = self._afs.entries.get(lq)
            consumed = consumed_quantities(entry.consumed) if entry is not None else {}
            rows.append((self._afs_rank(config, lq), f"{lq[0]}/{lq[1]}", consumed))
        rows.sort(key=lambda r: (r[0], r[1]))
        return [(name, usage, consumed) for usage, name, consumed in rows]
