"""The order in which a scheduling cycle considers its entries.

Theory of operation: a cycle assigns flavors to the head of every ready
ClusterQueue (an :data:`Entry` each), then admits them one at a time in the
order :func:`cycle_order` gives. Without fair sharing that is Kueue's classical
iterator: not borrowing before borrowing (lower borrowing level first), then
priority, creation time and key. With ``Configuration.fairSharing.enable``
the entries of each cohort tree (and of lone ClusterQueues together) go by
the tournament of :func:`~kuota.core.quota.fairshare.tournament_winner`, trees
in name order: one winner at a time, each chosen after the cycle admitted the
previous one (or did not), since an admission changes every share. So the
fair order is a generator that the cycle consumes as it admits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kuota.api.types import ClusterQueue, Cohort
from kuota.core.assign.flavors import Assignment
from kuota.core.queueing.queues import OrderKey
from kuota.core.queueing.workload import Fit, WorkloadRecord
from kuota.core.quota.fairshare import FairEntry, Weights, tournament_winner
from kuota.core.quota.history import UsageHistory
from kuota.core.quota.tree import QuotaTree

# (borrowing level, order key, ClusterQueue, record, assignment, its Fit when it fits)
Entry = tuple[int, OrderKey, str, WorkloadRecord, Assignment, Fit | None]


def fair_weights(
    cqs: dict[str, ClusterQueue],
    cohorts: dict[str, Cohort],
    history: UsageHistory | None = None,
) -> Weights:
    """The fair-sharing weights of every ClusterQueue and Cohort, and the
    history the shares of opted-in ClusterQueues count (kuota.core.quota.history)."""
    if history is None or not history.weights:
        return Weights(
            {n: cq.fair_sharing_weight for n, cq in cqs.items()},
            {n: c.fair_sharing_weight for n, c in cohorts.items()},
        )
    past, weight = history.view()
    return Weights(
        {n: cq.fair_sharing_weight for n, cq in cqs.items()},
        {n: c.fair_sharing_weight for n, c in cohorts.items()},
        past,
        weight,
    )


def cycle_order(
    entries: list[Entry],
    *,
    fair_sharing: bool,
    tree: QuotaTree,
    cqs: dict[str, ClusterQueue],
    cohorts: dict[str, Cohort],
    history: UsageHistory | None = None,
) -> Iterable[Entry]:
    """The entries in the order the cycle admits them (module docstring)."""
    if not fair_sharing or len(entries) < 2:
        if len(entries) > 1:
            # By (borrowing, order): no two entries share an order key (it ends
            # with the workload's key), so comparing whole entries stops there,
            # without building a key per entry.
            entries.sort()
        return entries
    return _fair_order(entries, tree, fair_weights(cqs, cohorts, history))


def _fair_order(entries: list[Entry], tree: QuotaTree, weights: Weights) -> Iterator[Entry]:
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
