"""Quota AND a placement: can a workload's pods get nodes and their DRA devices?

Theory of operation (issue #17; docs/design/dra-placement.md): once a workload's
quota fits, :func:`place_workload` asks :func:`~kuota.core.dra.placement.place_gang`
whether every pod of its podsets that asks for DRA devices can be given a node of
its flavors (the flavors' nodeLabels, the pod's nodeSelector and required node
affinity, taints and tolerations, cordoned nodes:
:func:`~kuota.core.assign.node_match.node_mismatch`) with free devices on that
node, all pods or none. *Free* is what the ResourceSlices publish minus what is
taken: the devices kuota holds for the workloads it admitted (``held``: their
placed devices, until their pods are ready or gone) and the devices of every
allocated ResourceClaim, whoever owns it (``claimed``), a device both held and
claimed taken once. The answer is one of:

- :data:`NOT_PLACED` — placement does not apply, and the workload is admitted on
  quota alone, as Kueue does: the fold knows no Node (a journal from before
  Nodes were ingested, a simulator trace), no pod asks for devices, a request
  matches a device of a slice that names no node (``nodeSelector``,
  ``allNodes``), or a pod names a ResourceClaim directly that is allocated on
  devices of several nodes or of none;
- :class:`Placed` — the nodes per podset (for the Admitted decision: the
  actuator pins the podset to them), the devices to hold (not those of
  ``adminAccess`` requests: they take nothing), the shares of devices several
  claims may use at once (``allowMultipleAllocations``) with what each spends
  of the device's capacities, and the devices and shares of the direct
  ResourceClaims not allocated yet that it placed, with their node;
- :class:`Unplaceable` — no placement exists (proven), or none was found within
  the search budget; its message names the nodes and what each has free, or
  which nodes were tried for the pods sharing a claim.

Direct ResourceClaims (docs/design/dra-placement.md, "Direct ResourceClaims"):
a podset whose pods name a claim allocated on one node's devices, or held there
for an earlier user, may use that node only (``only``); its pods take nothing
more for the claim. A claim not allocated nor held yet is placed with the
workload: its requests are added to the first pod of the first podset naming it
(``shared``), and every pod of every podset naming such a claim (``together``)
must land on that pod's node: when the search puts them on several nodes, it is
run again with them all pinned to each common node in turn, in name order.

Pure: the same arguments give the same answer.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kuota.api.dra import ExactDeviceRequest
from kuota.api.nodes import Node
from kuota.api.types import ResourceFlavor
from kuota.core.assign.flavors import PodSetRequest
from kuota.core.assign.node_match import node_mismatch
from kuota.core.dra.charging import DraInventory
from kuota.core.dra.placement import (
    CounterKey,
    DeviceId,
    FitMemo,
    GangPod,
    NoPlacement,
    Placement,
    PlacementInvalid,
    device_consumes,
    fits_alone,
    matching_devices,
    may_place,
    place_gang,
    request_devices,
)
from kuota.core.dra.placement_types import Consumes, Taken
from kuota.core.dra.pod_devices import PodDevices
from kuota.core.pickling import register_by_fields

#: The Inadmissible reason of a workload whose quota fits but whose pods no node
#: can take.
NO_NODE_PLACEMENT = "NoNodePlacement"


# A share of a device several claims may use at once: (the device, what it spends)
Share = tuple[DeviceId, Consumes]


@dataclass(slots=True, init=False, eq=True)  # a written-out constructor: docs/design/native-core.md
class Placed:
    nodes: Final[dict[str, list[str]]]  # podset -> its pods' nodes, sorted, unique
    devices: Final[tuple[DeviceId, ...]]  # every device placed for its own pods, sorted
    # the shared direct ResourceClaims placed with it: (claim, node, its devices,
    # its shares)
    claims: Final[tuple[tuple[str, str, tuple[DeviceId, ...], tuple[Share, ...]], ...]]
    shares: Final[tuple[Share, ...]]  # the shares placed for its own pods, sorted

    def __init__(
        self,
        nodes: dict[str, list[str]],
        devices: tuple[DeviceId, ...],
        claims: tuple[tuple[str, str, tuple[DeviceId, ...], tuple[Share, ...]], ...] = (),
        shares: tuple[Share, ...] = (),
    ) -> None:
        self.nodes = nodes
        self.devices = devices
        self.claims = claims
        self.shares = shares


# podset -> the direct ResourceClaims not allocated yet that its first pod carries
# in the placement: (claim name, what it asks)
SharedClaims = Mapping[str, tuple[tuple[str, PodDevices], ...]]


@dataclass(slots=True, init=False, unsafe_hash=True)  # a value (docs/design/native-core.md)
class Unplaceable:
    message: Final[str]
    key: Final[str]  # what it needs, without what nodes have free: the verdict's key
    pods: Final[tuple[GangPod, ...]]  # its distinct pods, with the nodes each may use
    gang: Final[tuple[GangPod, ...]]  # all its pods (a podset's: one object repeated)

    def __init__(
        self, message: str, key: str, pods: tuple[GangPod, ...], gang: tuple[GangPod, ...] = ()
    ) -> None:
        self.message = message
        self.key = key
        self.pods = pods
        self.gang = gang


class _NotPlaced:
    """Placement does not apply (see the module docstring)."""

    def __repr__(self) -> str:
        return "NOT_PLACED"


NOT_PLACED = _NotPlaced()

PlaceOutcome = Placed | Unplaceable | _NotPlaced


@dataclass(slots=True)
class NodeSets:
    """What :func:`place_workload` keeps between calls, until a Node or a
    ResourceFlavor changes (the caller then clears it): the nodes each
    (constraints, flavors) may use (``eligible``), and per workload the gang it
    last built (``gangs``, by the identity of its requests: a record keeps the
    same tuple until its Job changes)."""

    eligible: dict[tuple[object, ...], frozenset[str]] = field(default_factory=dict)
    gangs: dict[int, _Gang] = field(default_factory=dict)

    def clear(self) -> None:
        self.eligible.clear()
        self.gangs.clear()

    def gang(
        self,
        requests: Sequence[PodSetRequest],
        podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
        generation: int,
    ) -> _Gang | None:
        """The gang last built for these requests, if it was for the same flavors
        and inventory generation."""
        found = self.gangs.get(id(requests))
        if (
            found is not None
            and found.requests is requests
            and found.generation == generation
            and (found.podset_flavors is podset_flavors or found.podset_flavors == podset_flavors)
        ):
            return found
        return None

    def keep(self, gang: _Gang) -> None:
        if len(self.gangs) >= GANGS_KEPT:
            self.gangs.clear()
        self.gangs[id(gang.requests)] = gang


@dataclass(slots=True)
class _Gang:
    """A workload's pods as placement sees them, for one flavor assignment and
    inventory generation (None: placement does not apply), with what its
    messages add; and the last message made from a search's (whose text is
    memoised: the same object while nothing changed)."""

    requests: Sequence[PodSetRequest]  # kept alive: its id is the key
    podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]]
    generation: int
    pods: tuple[GangPod, ...] | None
    owner: tuple[str, ...] = ()  # the podset of each pod
    # podsets with no pod in the gang but pinned to a node (they share a claim's
    # node), with the nodes they may use
    pinned: tuple[tuple[str, frozenset[str]], ...] = ()
    common: frozenset[str] = frozenset()  # the nodes the podsets ``together`` may all use
    # pod index -> the shared claims that pod carries (its requests end with theirs)
    carries: dict[int, tuple[tuple[str, PodDevices], ...]] = field(default_factory=dict)
    distinct: tuple[GangPod, ...] = ()  # one per podset, in order
    where: str = ""  # "in flavor ... "
    prefix: str = ""  # the gang's, when it has several podsets or some without devices
    raw: str | None = None
    message: str = ""
    key: str = ""


GANGS_KEPT = 65536  # workloads whose gang NodeSets keeps before it starts afresh


def place_workload(
    *,
    inventory: DraInventory,
    nodes: Mapping[str, Node],
    flavors: Mapping[str, ResourceFlavor],
    requests: Sequence[PodSetRequest],
    podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
    held: Mapping[DeviceId, str],
    claimed: Mapping[DeviceId, int],
    eligible_memo: NodeSets | None = None,
    consumed: Mapping[CounterKey, int] | None = None,
    only: Mapping[str, str] | None = None,
    freed: frozenset[DeviceId] = frozenset(),
    memo: FitMemo | None = None,
    shared: SharedClaims | None = None,
    together: frozenset[str] = frozenset(),
    shares: Mapping[CounterKey, int] | None = None,
) -> PlaceOutcome:
    """Place every DRA pod of a workload whose quota fits (module docstring).
    ``podset_flavors``: per podset, its (resource, flavor) assignment; ``held``:
    the devices kuota holds (device -> workload); ``claimed``: the devices
    allocated claims take (device -> how many claims); ``eligible_memo``: what
    is kept between calls (:class:`NodeSets`); ``consumed``: the counters the
    held devices spend, when the caller keeps them (else computed); ``only``:
    podset -> the one node its pods may use (the node of the ResourceClaims they
    name directly, allocated or held there; a podset with direct claims neither
    in it nor in ``together`` is not placed); ``shared``: the direct claims not
    allocated yet whose devices a podset's first pod carries in the search;
    ``together``: the podsets naming those claims, whose pods all share one node
    (docs/design/dra-placement.md, "Direct ResourceClaims"); ``freed``: devices
    held or claimed that count as free (a preemption's victims':
    core/fold/node_victims.py); ``memo``: which pods fit alone on which nodes,
    for ``held`` and ``claimed`` as they are (used only with ``consumed``, the
    counters both spend, and nothing ``freed``); ``shares``: the counters the
    shares held and claimed spend (added when ``consumed`` is computed here)."""
    if not nodes:
        return NOT_PLACED
    if consumed is None or freed:
        consumed = taken_counters(inventory, Taken(held, claimed, freed).devices())
        for key, amount in (shares or {}).items():
            consumed[key] = consumed.get(key, 0) + amount
        memo = None
    # once: unless the pods sharing a claim land on several nodes; then pinned to
    # each node they may all use in turn, in name order, until one fits
    pinned = only
    split: _Gang | None = None
    left: list[str] = []
    while True:
        outcome = _place_once(
            inventory,
            nodes,
            flavors,
            requests,
            podset_flavors,
            held,
            claimed,
            freed,
            consumed,
            memo,
            eligible_memo,
            pinned,
            shared,
            together,
        )
        if isinstance(outcome, _Split):
            if split is not None:
                break  # pinned, they cannot split: never reached
            split = outcome.gang
            left = sorted(split.common)
        elif split is None or isinstance(outcome, Placed):
            return outcome
        if not left:
            break
        node = left.pop(0)
        pinned = {**(only or {}), **dict.fromkeys(together, node)}
    assert split is not None
    names = ", ".join(sorted({c for cs in (shared or {}).values() for c, _ in cs}))
    tried = sorted(split.common)
    listed = ", ".join(tried[:4]) + (f" and {len(tried) - 4} more" if len(tried) > 4 else "")
    message = (
        f"{split.prefix}no node {split.where}can take together the pods "
        f"that share ResourceClaim {names}, whose devices they must find on their own node; "
        f"tried {listed}"
    )
    return Unplaceable(message, message.split("; ", 1)[0], split.distinct, split.pods or ())


class _Split:
    """A placement that put the pods sharing a claim on several nodes."""

    def __init__(self, gang: _Gang) -> None:
        self.gang = gang


def _place_once(
    inventory: DraInventory,
    nodes: Mapping[str, Node],
    flavors: Mapping[str, ResourceFlavor],
    requests: Sequence[PodSetRequest],
    podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
    held: Mapping[DeviceId, str],
    claimed: Mapping[DeviceId, int],
    freed: frozenset[DeviceId],
    consumed: Mapping[CounterKey, int],
    memo: FitMemo | None,
    eligible_memo: NodeSets | None,
    only: Mapping[str, str] | None,
    shared: SharedClaims | None,
    together: frozenset[str],
) -> PlaceOutcome | _Split:
    """One search of :func:`place_workload` (its arguments), with ``only`` as given."""
    # a gang with ``only`` or shared claims is not kept
    kept = eligible_memo if only is None and not together else None
    gang = kept.gang(requests, podset_flavors, inventory.generation) if kept is not None else None
    if gang is None:
        gang = _build_gang(
            inventory,
            nodes,
            flavors,
            requests,
            podset_flavors,
            eligible_memo,
            only or {},
            shared or {},
            together,
        )
        if kept is not None:
            kept.keep(gang)
    pods = gang.pods
    if pods is None:
        return NOT_PLACED
    if gang.pinned and only:
        for name, allowed in gang.pinned:
            node = only.get(name)
            if node is not None and node not in allowed:
                message = (
                    f"{gang.prefix}the pods of podset {name} must run on node {node}, where "
                    "the ResourceClaims they name are, and their node constraints exclude it"
                )
                return Unplaceable(message, message, gang.distinct, pods)
    taken = Taken(held, claimed, freed)
    result = (
        place_gang(inventory=inventory, pods=pods, taken=taken, consumed=consumed, memo=memo)
        if pods
        else Placement((), 0)
    )
    if isinstance(result, Placement):
        return _placed(inventory, gang, result, only, together)
    if isinstance(result, PlacementInvalid):
        return NOT_PLACED
    if gang.raw != result.message:  # the same text (often the same object): the same message
        message = result.message
        if isinstance(result, NoPlacement):
            message = message.replace("no node can take", f"no node {gang.where}can take", 1)
        gang.raw = result.message
        gang.message = gang.prefix + message
        gang.key = gang.message.split("; ", 1)[0]
    return Unplaceable(gang.message, gang.key, gang.distinct, pods)


def _placed(
    inventory: DraInventory,
    gang: _Gang,
    result: Placement,
    only: Mapping[str, str] | None,
    together: frozenset[str],
) -> Placed | _Split:
    """The nodes per podset and the devices and shares to hold of a placement
    found; a :class:`_Split` when the pods ``together`` are not on one node."""
    assert gang.pods is not None
    by_podset: dict[str, set[str]] = {}
    devices: list[DeviceId] = []
    shares: list[Share] = []
    claims: list[tuple[str, str, tuple[DeviceId, ...], tuple[Share, ...]]] = []
    carries = gang.carries
    for i, (name, gang_pod, placed) in enumerate(
        zip(gang.owner, gang.pods, result.pods, strict=True)
    ):
        found = by_podset.get(name)
        if found is None:
            found = by_podset[name] = set()
        found.add(placed.node)
        carried = carries.get(i) if carries else None
        requests = gang_pod.requests
        if carried is None:
            _taken(inventory, placed.node, requests, placed.devices, devices, shares)
            continue
        at = len(requests)
        for _, wanted in carried:
            at -= len(wanted.requests)
        _taken(inventory, placed.node, requests[:at], placed.devices[:at], devices, shares)
        for claim, wanted in carried:
            end = at + len(wanted.requests)
            own: list[DeviceId] = []
            parts: list[Share] = []
            _taken(inventory, placed.node, requests[at:end], placed.devices[at:end], own, parts)
            claims.append((claim, placed.node, tuple(sorted(own)), tuple(sorted(parts))))
            at = end
    shared_nodes: list[str] = []
    if together:
        shared_nodes = sorted({n for name in together for n in by_podset.get(name, ())})
        if len(shared_nodes) > 1:
            return _Split(gang)
    for name, _ in gang.pinned:
        node = (only or {}).get(name) or (shared_nodes[0] if shared_nodes else None)
        if node is not None:
            by_podset.setdefault(name, set()).add(node)
    return Placed(
        {name: sorted(ns) for name, ns in sorted(by_podset.items())},
        tuple(sorted(devices)),
        tuple(sorted(claims)),
        tuple(sorted(shares)),
    )


def _taken(
    inventory: DraInventory,
    node: str,
    requests: Sequence[ExactDeviceRequest],
    chosen: Sequence[tuple[Any, ...]],  # a DeviceId, or a share's id (placement.share_id)
    devices: list[DeviceId],
    shares: list[Share],
) -> None:
    """Add what ``requests`` take of the devices ``chosen`` for them on ``node``
    to ``devices`` (taken whole) and ``shares`` (a share of a shared device,
    with what it spends); adminAccess requests take nothing."""
    for request, ids in zip(requests, chosen, strict=True):
        if request.admin_access:
            continue
        for d in ids:
            if len(d) == 3:
                devices.append(d)
                continue
            spends: Consumes = ()
            candidates = request_devices(inventory, request)
            if not isinstance(candidates, str):
                for c in candidates.get(node, ()):
                    if c.id == d:
                        spends = c.consumes
                        break
            shares.append(((d[0], d[1], d[2]), spends))


def _build_gang(
    inventory: DraInventory,
    nodes: Mapping[str, Node],
    flavors: Mapping[str, ResourceFlavor],
    requests: Sequence[PodSetRequest],
    podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
    kept: NodeSets | None,
    only: Mapping[str, str],
    shared: SharedClaims,
    together: frozenset[str],
) -> _Gang:
    generation = inventory.generation
    placed = [
        ps
        for ps in requests
        if ps.count > 0 and (ps.devices or ps.name in together or (ps.claims and ps.name in only))
    ]
    if not any(ps.devices for ps in placed) and not shared and not only:
        return _Gang(requests, podset_flavors, generation, None)
    for ps in placed:
        if ps.claims and ps.name not in only and ps.name not in together:
            # its pods also share a direct ResourceClaim placed nowhere (on several
            # nodes, or on devices of no node): quota alone (docs/design/
            # dra-placement.md, "Direct ResourceClaims")
            return _Gang(requests, podset_flavors, generation, None)
        asked = list(ps.devices)
        for _, wanted in shared.get(ps.name, ()):
            asked.extend(wanted.requests)
        for request in asked:
            if not _node_local(inventory, request):
                return _Gang(requests, podset_flavors, generation, None)
    assigned = dict(podset_flavors)
    eligible_memo = kept.eligible if kept is not None else None
    allowed: dict[str, frozenset[str]] = {}
    flavor_names: set[str] = set()
    for ps in placed:
        names = sorted({f for _, f in assigned.get(ps.name, ())})
        flavor_names.update(names)
        key = (ps.node_selector, ps.required_affinity, ps.tolerations, tuple(names))
        eligible = eligible_memo.get(key) if eligible_memo is not None else None
        if eligible is None:
            of = [flavors[n] for n in names if n in flavors]
            eligible = frozenset(
                n for n, node in nodes.items() if node_mismatch(node, ps, of) is None
            )
            if eligible_memo is not None:
                eligible_memo[key] = eligible
        allowed[ps.name] = eligible
    common = frozenset(nodes)
    for name in together:
        common = common & allowed.get(name, frozenset())
    pods: list[GangPod] = []
    owner: list[str] = []  # the podset of each pod
    distinct: list[GangPod] = []  # one per podset, in order (its pods are one object)
    pinned: list[tuple[str, frozenset[str]]] = []
    carries: dict[int, tuple[tuple[str, PodDevices], ...]] = {}
    for ps in placed:
        eligible = common if ps.name in together else allowed[ps.name]
        if ps.name in only:
            eligible = eligible & frozenset((only[ps.name],))
        carried = shared.get(ps.name, ())
        count = ps.count
        if carried:
            carries[len(pods)] = carried
            carrier = _carrier(ps, carried, eligible)
            pods.append(carrier)
            owner.append(ps.name)
            distinct.append(carrier)
            count = count - 1 if ps.devices else 0
        if ps.devices and count > 0:
            pod = GangPod(ps.devices, eligible, ps.device_constraints, ps.device_claims)
            pods.extend([pod] * count)
            owner.extend([ps.name] * count)
            distinct.append(pod)
        elif not carried and not ps.devices:
            pinned.append((ps.name, allowed[ps.name]))  # no pod in the gang, one node
    where = "in flavor " + ", ".join(sorted(flavor_names)) + " " if flavor_names else ""
    several = len(placed) < len(requests) or len(placed) > 1
    return _Gang(
        requests,
        podset_flavors,
        generation,
        tuple(pods),
        tuple(owner),
        tuple(pinned),
        common,
        carries,
        tuple(distinct),
        where,
        f"{_gang_text(placed)}: " if several else "",
    )


def _carrier(
    ps: PodSetRequest, carried: tuple[tuple[str, PodDevices], ...], nodes: frozenset[str]
) -> GangPod:
    """The first pod of ``ps``, carrying the devices of the shared claims it names
    that are not allocated yet: its own requests, then each claim's, each claim
    with an index of its own and its constraints over its own requests."""
    requests = list(ps.devices)
    claims = list(ps.device_claims) if ps.device_claims else list(range(len(ps.devices)))
    constraints = list(ps.device_constraints)
    for _, wanted in carried:
        at = len(requests)
        index = max(claims) + 1 if claims else 0
        requests.extend(wanted.requests)
        claims.extend(index + c for c in wanted.claims)
        constraints.extend(
            replace(c, requests=tuple(at + i for i in c.requests)) for c in wanted.constraints
        )
    return GangPod(tuple(requests), nodes, tuple(constraints), tuple(claims))


def fits_on(
    *,
    inventory: DraInventory,
    pods: Sequence[GangPod],
    nodes: Iterable[str],
    taken: Container[DeviceId],
    consumed: Mapping[CounterKey, int],
    memo: FitMemo | None = None,
    whole: bool = False,
) -> bool:
    """Whether one of ``pods`` alone could now be placed on one of ``nodes`` (what
    a waiter needs, at least, for capacity freed there to matter); when they are
    its ``whole`` gang, also whether they pass the checks a placement makes
    before its search (each fits alone somewhere, a repeated pod's nodes have
    enough free devices together: else its next try would fail the same way)."""
    wanted = tuple(nodes)
    seen: list[GangPod] = []
    alone = False
    for pod in pods:
        if any(pod is s for s in seen):
            continue
        seen.append(pod)
        if fits_alone(
            inventory=inventory, pod=pod, nodes=wanted, taken=taken, consumed=consumed, memo=memo
        ):
            alone = True
            break
    if not alone:
        return False
    if not whole or len(pods) < 2:
        return True
    return may_place(inventory=inventory, pods=pods, taken=taken, consumed=consumed, memo=memo)


def _node_local(inventory: DraInventory, request: ExactDeviceRequest) -> bool:
    """Whether every device the request may take is local to a node; memoised
    with the inventory's placement memo."""
    key = ("node-local", request.device_class_name, request.selectors)
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        matched = matching_devices(inventory, request)
        found = memo[key] = not isinstance(matched, str) and all(
            inventory.node_name(d) is not None for d in matched
        )
    return bool(found)


def taken_counters(inventory: DraInventory, taken: Iterable[DeviceId]) -> dict[CounterKey, int]:
    """The shared counters the taken devices spend, each device once."""
    out: dict[CounterKey, int] = {}
    consumes = device_consumes(inventory)
    for device in taken:
        for key, amount in consumes.get(device, ()):
            out[key] = out.get(key, 0) + amount
    return out


def _gang_text(podsets: Sequence[PodSetRequest]) -> str:
    parts = ", ".join(f"{ps.name} {ps.count}" for ps in podsets)
    return f"pods placed as one gang ({parts})"


register_by_fields(Placed, Unplaceable)
