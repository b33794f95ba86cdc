"""Node-aware preemption: victims must free room on a node where the preemptor fits.

Theory of operation (issue #17; docs/design/dra-placement.md, "Preemption on a
node"): a preemptor whose pods need node-local DRA devices that no node has free
now gets a :class:`NodeRoom`, which the victim searches
(:mod:`kuota.core.preemption.classical`, :mod:`kuota.core.preemption.fair`) ask
whether a set of victims, once evicted, leaves a node that can take every pod
(:func:`~kuota.core.fold.node_fit.place_workload` with the victims' devices
counted free). :class:`VictimDevices` says what evicting an admitted workload
frees, conservatively (a device counted free that is not freed would evict the
victims for nothing):

- the devices kuota holds for it (its placement, until its pods are ready);
- the devices of the allocated ResourceClaims that can only be its own: claims
  of its namespace, allocated while its hold lasted (after its admission, and
  before its pods were all ready when the hold ended then), whose devices are
  all on the nodes of its hold, and that no other workload of its namespace
  with a hold (or a hold that ended) spanning that allocation on one of those
  nodes could own. The fold does not see Pods, so a claim is attributed by
  when and where it was allocated, not by ``reservedFor``;
- a device is freed only if every claim that takes it is attributed to the
  victim (a device a claim of someone else takes stays taken).

A workload admitted before the fold knew any Node holds nothing and frees
nothing the search can count: it can still be evicted for quota, together with
victims that make room, but never to make room by itself.

Pure: the same fold state gives the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kuota.core.dra.placement import DeviceId
from kuota.core.fold.node_fit import PlaceOutcome, Unplaceable
from kuota.core.preemption.classical import AdmittedWorkload

#: At most this many placements per room: a search that needs more evicts no one
#: (the head waits, as when no victim set makes room). Each placement is bounded
#: by the placement search's own step budget.
MAX_PLACEMENTS = 256

# A hold's span: (began, ended or None while it lasts, its nodes)
Span = tuple[int, int | None, frozenset[str]]


class VictimDevices:
    """What evicting each admitted workload frees (module docstring), computed on
    demand and memoised for one search (the fold does not change meanwhile)."""

    __slots__ = ("_claims", "_claim_at", "_claimed", "_where", "_spans", "_by_ns", "_memo")

    def __init__(
        self,
        *,
        claims: Mapping[tuple[str, str], tuple[DeviceId, ...]],
        claim_at: Mapping[tuple[str, str], int],
        claimed: Mapping[DeviceId, int],
        where: Mapping[DeviceId, str],
        spans: Mapping[str, tuple[str, Span, tuple[DeviceId, ...]]],
    ) -> None:
        """``spans``: per workload with a hold, or whose hold ended at PodsReady,
        its namespace, its span and the devices it still holds."""
        self._claims = claims
        self._claim_at = claim_at
        self._claimed = claimed
        self._where = where
        self._spans = spans
        self._by_ns: dict[str, list[tuple[tuple[str, str], tuple[DeviceId, ...]]]] | None = None
        self._memo: dict[str, frozenset[DeviceId]] = {}

    def _claims_of(self, namespace: str) -> list[tuple[tuple[str, str], tuple[DeviceId, ...]]]:
        by_ns = self._by_ns
        if by_ns is None:
            by_ns = self._by_ns = {}
            for key, devices in self._claims.items():
                by_ns.setdefault(key[0], []).append((key, devices))
        return by_ns.get(namespace, [])

    def freed(self, key: str) -> frozenset[DeviceId]:
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._compute(key)
        return found

    def _compute(self, key: str) -> frozenset[DeviceId]:
        entry = self._spans.get(key)
        if entry is None:
            return frozenset()
        namespace, (began, ended, nodes), held = entry
        rivals = [
            span
            for other, (ns, span, _) in self._spans.items()
            if ns == namespace and other != key and span[2] & nodes
        ]
        attributed: dict[DeviceId, int] = {}
        where = self._where
        for claim, devices in self._claims_of(namespace):
            at = self._claim_at.get(claim, 0)
            if at <= began or (ended is not None and at > ended):
                continue
            on = {where.get(d) for d in devices}
            if None in on or not on <= nodes:
                continue
            if any(
                b < at and (e is None or at <= e) and not on.isdisjoint(n) for b, e, n in rivals
            ):
                continue  # as well another's
            for d in devices:
                attributed[d] = attributed.get(d, 0) + 1
        claimed = self._claimed
        return frozenset(
            d
            for d in (*held, *attributed)
            if claimed.get(d, 0) == attributed.get(d, 0)
        )


class NodeRoom:
    """A :class:`~kuota.core.preemption.classical.Room` for one preemptor whose
    pods no node can take now. ``place`` places it with the given devices counted
    free. After the search, :attr:`quota_met` says whether some victims freed its
    quota, and :attr:`unplaceable` what the last placement that failed said."""

    __slots__ = ("_place", "_freed", "_memo", "placements", "quota_met", "unplaceable")

    def __init__(
        self,
        place: Callable[[frozenset[DeviceId]], PlaceOutcome],
        freed: Callable[[str], frozenset[DeviceId]],
        unplaceable: Unplaceable,
    ) -> None:
        self._place = place
        self._freed = freed
        self._memo: dict[frozenset[DeviceId], bool] = {}
        self.placements = 0
        self.quota_met = False
        self.unplaceable = unplaceable  # as things are, until a search says more

    def frees(self, workload: AdmittedWorkload) -> bool:
        return bool(self._freed(workload.key))

    def fits(self, victims: Sequence[AdmittedWorkload]) -> bool:
        self.quota_met = True
        freed: set[DeviceId] = set()
        for w in victims:
            freed.update(self._freed(w.key))
        if not freed:
            return False  # nothing freed: as things are, where no node can take it
        key = frozenset(freed)
        known = self._memo.get(key)
        if known is not None:
            return known
        if self.placements >= MAX_PLACEMENTS:
            return False
        self.placements += 1
        outcome = self._place(key)
        ok = not isinstance(outcome, Unplaceable)
        if isinstance(outcome, Unplaceable):
            self.unplaceable = outcome
        self._memo[key] = ok
        return ok
