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

:class:`NodeVictims` is the fold layer (between ``Draining`` and ``Preempting``)
that builds the rooms, says why a head waits when no victims make room on a
node, and reserves for a preemptor waiting for its victims' pods the devices
it will be placed on, so that no other head takes them first.

Pure: the same fold state gives the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kuota.core.assign.flavors import Assignment
from kuota.core.dra.charging import DraInventory
from kuota.core.dra.placement import DeviceId, GangPod, device_nodes, request_devices
from kuota.core.fold.draining import Draining
from kuota.core.fold.node_fit import (
    NO_NODE_PLACEMENT,
    Placed,
    PlaceOutcome,
    Unplaceable,
    place_workload,
)
from kuota.core.preemption.classical import AdmittedWorkload
from kuota.core.queueing.verdict import Verdict
from kuota.core.queueing.workload import WorkloadRecord

#: At most this many placements per room (those a cheap count over the nodes
#: where victims free devices does not rule out): a search that needs more evicts
#: no one (the head waits, as when no victim set makes room). Each placement is
#: bounded by the placement search's own step budget.
MAX_PLACEMENTS = 256

# A hold's span: (began, ended or None while it lasts, its nodes)
Span = tuple[int, int | None, frozenset[str]]
# (namespace, node) -> the claims with a device there; and -> the spans on it
_Index = tuple[
    dict[tuple[str, str], list[tuple[tuple[str, str], tuple[DeviceId, ...]]]],
    dict[tuple[str, str], list[tuple[str, Span]]],
]


class VictimDevices:
    """What evicting each admitted workload frees (module docstring), computed on
    demand and memoised for one search (the fold does not change meanwhile)."""

    __slots__ = ("_claim_at", "_claimed", "_claims", "_index", "_memo", "_spans", "_where")

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
        self._index: _Index | None = None
        self._memo: dict[str, frozenset[DeviceId]] = {}

    def _at(self) -> _Index:
        """(namespace, node) -> the claims with a device there, and the spans on
        it: built once per search, so that a victim reads only its own nodes'."""
        index = self._index
        if index is None:
            claims: dict[tuple[str, str], list[tuple[tuple[str, str], tuple[DeviceId, ...]]]] = {}
            where = self._where
            for key, devices in self._claims.items():
                for node in sorted({where.get(d) or "" for d in devices}):
                    claims.setdefault((key[0], node), []).append((key, devices))
            spans: dict[tuple[str, str], list[tuple[str, Span]]] = {}
            for workload, (ns, span, _) in self._spans.items():
                for node in sorted(span[2]):
                    spans.setdefault((ns, node), []).append((workload, span))
            index = self._index = (claims, spans)
        return index

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
        claims_at, spans_at = self._at()
        attributed: dict[DeviceId, int] = {}
        where = self._where
        seen: set[tuple[str, str]] = set()
        for node in sorted(nodes):
            for claim, devices in claims_at.get((namespace, node), ()):
                if claim in seen:
                    continue
                seen.add(claim)
                at = self._claim_at.get(claim, 0)
                if at <= began or (ended is not None and at > ended):
                    continue
                on = {where.get(d) for d in devices}
                if None in on or not on <= nodes:
                    continue
                if any(
                    other != key and b < at and (e is None or at <= e)
                    for n in on
                    for other, (b, e, _) in spans_at.get((namespace, n or ""), ())
                ):
                    continue  # as well another's
                for d in devices:
                    attributed[d] = attributed.get(d, 0) + 1
        claimed = self._claimed
        return frozenset(
            d for d in (*held, *attributed) if claimed.get(d, 0) == attributed.get(d, 0)
        )


class NodeRoom:
    """A :class:`~kuota.core.preemption.classical.Room` for one preemptor whose
    pods no node can take now (``unplaceable`` says why). ``place`` places it
    with the given devices counted free; ``held`` and ``claimed`` are what is
    taken (device -> holder, device -> claims). After the search,
    :attr:`quota_met` says whether some victims freed its quota, and
    :meth:`explain` why no node could take it even then."""

    __slots__ = (
        "_claimed",
        "_freed",
        "_held",
        "_memo",
        "_place",
        "_placed",
        "_requests",
        "_where",
        "_widest",
        "placements",
        "quota_met",
        "unplaceable",
    )

    def __init__(
        self,
        place: Callable[[frozenset[DeviceId]], PlaceOutcome],
        freed: Callable[[str], frozenset[DeviceId]],
        unplaceable: Unplaceable,
        *,
        inventory: DraInventory,
        held: Mapping[DeviceId, object],
        claimed: Mapping[DeviceId, int],
    ) -> None:
        self._place = place
        self._freed = freed
        self._held = held
        self._claimed = claimed
        self._where = device_nodes(inventory)
        # per distinct pod: the nodes it may use, and per request its count and
        # its candidates per node (None: a request the placement cannot evaluate)
        requests: list[
            tuple[frozenset[str] | None, tuple[tuple[int, Mapping[str, tuple[Any, ...]]], ...]]
        ] = []
        for pod in unplaceable.pods:
            # (a share's id is no DeviceId: placement.share_id)
            per_request: list[tuple[int, Mapping[str, tuple[Any, ...]]]] = []
            for request in pod.requests:
                found = request_devices(inventory, request)
                if isinstance(found, str):
                    break
                per_request.append(
                    (request.count, {n: tuple(d.id for d in ds) for n, ds in found.items()})
                )
            else:
                requests.append((pod.nodes, tuple(per_request)))
        self._requests = requests
        self._memo: dict[frozenset[DeviceId], bool] = {}
        self._widest: frozenset[DeviceId] = frozenset()
        # the last placement found: the devices freed for it, the nodes it uses
        self._placed: tuple[frozenset[DeviceId], frozenset[str]] | None = None
        self.placements = 0
        self.quota_met = False
        self.unplaceable = unplaceable  # as things are

    def frees(self, workload: AdmittedWorkload) -> bool:
        return bool(self._freed(workload.key))

    def freed(self, key: str) -> frozenset[DeviceId]:
        """The devices evicting ``key`` frees."""
        return self._freed(key)

    def placed(self, freed: frozenset[DeviceId]) -> Placed | None:
        """Where the preemptor goes with ``freed`` free (the chosen victims')."""
        outcome = self._place(freed)
        return outcome if isinstance(outcome, Placed) else None

    def explain(self) -> Unplaceable:
        """Why no node takes it with the most devices any victims asked about
        freed (as things are, when none freed any)."""
        if self._widest:
            outcome = self._place(self._widest)
            if isinstance(outcome, Unplaceable):
                return outcome
        return self.unplaceable

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
        if len(key) > len(self._widest):
            self._widest = key
        if self._still_placed(key):
            self._memo[key] = True
            return True
        ok = False
        if self._may_fit(key) and self.placements < MAX_PLACEMENTS:
            self.placements += 1
            outcome = self._place(key)
            ok = not isinstance(outcome, Unplaceable)
            if isinstance(outcome, Placed):
                where = self._where
                self._placed = (key, frozenset(where[d] for d in outcome.devices if d in where))
        self._memo[key] = ok
        return ok

    def _still_placed(self, freed: frozenset[DeviceId]) -> bool:
        """Whether the last placement found stands with only ``freed`` freed: it
        was found with more freed, and none of the devices now taken again (nor
        the counters they spend, in their pool: on their node) is on a node it
        uses. What makes the fill-back cheap: a victim on another node is added
        back without a placement."""
        placed = self._placed
        if placed is None or not freed < placed[0]:
            return False
        where = self._where
        return all(where.get(d) not in placed[1] for d in placed[0] - freed)

    def _may_fit(self, freed: frozenset[DeviceId]) -> bool:
        """Whether one of its pods alone could use, on a node where ``freed`` has
        a device, enough devices not taken or freed for each of its requests
        (counters aside). No node took it as things were, so a placement with
        ``freed`` has a pod using a freed device (or one its counters freed, in
        the same pool: on the same node): without this, none exists."""
        where = self._where
        nodes = {where[d] for d in freed if d in where}
        held, claimed = self._held, self._claimed
        for allowed, per_request in self._requests:
            for node in nodes:
                if allowed is not None and node not in allowed:
                    continue
                for count, by_node in per_request:
                    free = 0
                    for d in by_node.get(node, ()):
                        if d in freed or (d not in held and d not in claimed):
                            free += 1
                            if free >= count:
                                break
                    if free < count:
                        break
                else:
                    return True
        return False


class NodeVictims(Draining):
    """The fold's side of node-aware preemption (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        # a head whose victims freed quota but no node, during one attempt: its
        # verdict and pods (Preempting._not_admitted sets it aside with them)
        self._no_room: dict[str, tuple[Verdict, tuple[GangPod, ...]]] = {}

    def _room(
        self, rec: WorkloadRecord, assignment: Assignment, devices: VictimDevices | None = None
    ) -> NodeRoom | None:
        """The node check of a preemptor whose pods need node-local devices that
        no node has free now (core/fold/node_victims.py); None when quota alone
        decides (no Node known, no devices, not node-local, or a node can take
        it already: freeing devices never undoes a placement)."""
        if not self._nodes or not any(ps.devices for ps in rec.requests):
            return None
        podset_flavors = tuple((ps.name, ps.flavors) for ps in assignment.podsets)
        inventory, nodes, flavors = self._inventory, self._nodes, self._flavors
        held, consumed = self._taken_for(rec.key)
        claimed, eligible = self._claimed, self._eligible
        # what shares spend, a victim's too (freeing them is not tried: docs/design/
        # dra-placement.md, "Consumable capacity")
        shares = self._shares_spent() if self._share_holds or self._claim_shares else None
        requests = rec.requests
        now = place_workload(
            inventory=inventory,
            nodes=nodes,
            flavors=flavors,
            requests=requests,
            podset_flavors=podset_flavors,
            held=held,
            claimed=claimed,
            eligible_memo=eligible,
            consumed=consumed,
            shares=shares,
        )
        if not isinstance(now, Unplaceable):
            return None

        def place(freed: frozenset[DeviceId]) -> PlaceOutcome:
            return place_workload(
                inventory=inventory,
                nodes=nodes,
                flavors=flavors,
                requests=requests,
                podset_flavors=podset_flavors,
                held=held,
                claimed=claimed,
                eligible_memo=eligible,
                freed=freed,
                shares=shares,
            )

        if devices is None:
            devices = self._victim_devices()
        return NodeRoom(place, devices.freed, now, inventory=inventory, held=held, claimed=claimed)

    def _victim_devices(self) -> VictimDevices:
        """What evicting each admitted workload frees, for one search."""
        where = device_nodes(self._inventory)
        workloads = self._workloads
        spans: dict[str, tuple[str, Span, tuple[DeviceId, ...]]] = {}
        for key, held in self._device_holds.items():
            rec = workloads.get(key)
            if rec is not None:
                nodes = frozenset(where[d] for d in held if d in where)
                span: Span = (self._held_since.get(key, 0), None, nodes)
                spans[key] = (rec.spec.namespace, span, held)
        for key, (began, ended, nodes) in self._stood_for.items():
            rec = workloads.get(key)
            if rec is not None and key not in spans:
                spans[key] = (rec.spec.namespace, (began, ended, nodes), ())
        return VictimDevices(
            claims=self._claims,
            claim_at=self._claim_at,
            claimed=self._claimed,
            where=where,
            spans=spans,
        )

    def _reserve_room(self, key: str, room: NodeRoom, victims: Iterable[str]) -> None:
        """Reserve for preemptor ``key`` the devices it will be placed on once its
        victims' devices are free, so that no other head takes them first (a
        victim's claims may be deallocated after its pods' stop is reported)."""
        freed: set[DeviceId] = set()
        for victim in victims:
            freed.update(room.freed(victim))
        placed = room.placed(frozenset(freed))
        if placed is not None:
            for device in placed.devices:
                self._devices_reserved.setdefault(device, key)

    def _unreserve(self, key: str) -> tuple[DeviceId, ...]:
        """End ``key``'s reservation; the devices it reserved."""
        reserved = self._devices_reserved
        mine = tuple(d for d, owner in reserved.items() if owner == key)
        for device in mine:
            del reserved[device]
        return mine

    def _no_room_for(self, key: str, room: NodeRoom | None) -> None:
        """The search found no victims: when some freed its quota but no node
        could then take it, the head waits for a node (``_not_admitted``)."""
        if room is None or not room.quota_met:
            return
        u = room.explain()
        message = f"preempting would free its quota but no node: {u.message}"
        self._no_room[key] = (Verdict(NO_NODE_PLACEMENT, ("preempt", u.key), message), u.pods)
