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
  ``allNodes``), or a request takes a form placement does not handle yet
  (consumable capacity: a capacity request, or a device shared by several
  claims; a ``distinctAttribute`` constraint), or a pod that asks for devices
  of its own also names a ResourceClaim directly that is not allocated on one
  node's devices (one that is restricts the pod to that node: ``only``);
- :class:`Placed` — the nodes per podset (for the Admitted decision: the
  actuator pins the podset to them) and the devices to hold (not those of
  ``adminAccess`` requests: they take nothing);
- :class:`Unplaceable` — no placement exists (proven), or none was found within
  the search budget; its message names the nodes and what each has free.

Pure: the same arguments give the same answer.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

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
)
from kuota.core.dra.placement_types import Taken
from kuota.core.pickling import register_by_fields

#: The Inadmissible reason of a workload whose quota fits but whose pods no node
#: can take.
NO_NODE_PLACEMENT = "NoNodePlacement"


@dataclass(frozen=True, slots=True)
class Placed:
    nodes: dict[str, list[str]]  # podset -> its pods' nodes, sorted, unique
    devices: tuple[DeviceId, ...]  # every device placed, sorted


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
) -> PlaceOutcome:
    """Place every DRA pod of a workload whose quota fits (module docstring).
    ``podset_flavors``: per podset, its (resource, flavor) assignment; ``held``:
    the devices kuota holds (device -> workload); ``claimed``: the devices
    allocated claims take (device -> how many claims); ``eligible_memo``: what
    is kept between calls (:class:`NodeSets`); ``consumed``: the counters the
    held devices spend, when the caller keeps them (else computed); ``only``:
    podset -> the one node its pods may use (the node of the allocated
    ResourceClaims they name directly; a podset with direct claims not in it is
    not placed); ``freed``: devices held or claimed that count as free (a
    preemption's victims': core/fold/node_victims.py); ``memo``: which pods fit
    alone on which nodes, for ``held`` and ``claimed`` as they are (used only
    with ``consumed``, the counters both spend, and nothing ``freed``)."""
    if not nodes:
        return NOT_PLACED
    kept = eligible_memo if only is None else None  # a gang with ``only`` is not kept
    gang = kept.gang(requests, podset_flavors, inventory.generation) if kept is not None else None
    if gang is None:
        gang = _build_gang(inventory, nodes, flavors, requests, podset_flavors, eligible_memo, only)
        if kept is not None:
            kept.keep(gang)
    pods = gang.pods
    if pods is None:
        return NOT_PLACED
    taken = Taken(held, claimed, freed)
    if consumed is None or freed:
        consumed, memo = taken_counters(inventory, taken.devices()), None
    result = place_gang(inventory=inventory, pods=pods, taken=taken, consumed=consumed, memo=memo)
    if isinstance(result, Placement):
        by_podset: dict[str, set[str]] = {}
        devices: list[DeviceId] = []
        for name, gang_pod, placed in zip(gang.owner, pods, result.pods, strict=True):
            by_podset.setdefault(name, set()).add(placed.node)
            for request, chosen in zip(gang_pod.requests, placed.devices, strict=True):
                if not request.admin_access:  # adminAccess takes nothing: not held
                    devices.extend(chosen)
        return Placed(
            {name: sorted(ns) for name, ns in sorted(by_podset.items())}, tuple(sorted(devices))
        )
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


def _build_gang(
    inventory: DraInventory,
    nodes: Mapping[str, Node],
    flavors: Mapping[str, ResourceFlavor],
    requests: Sequence[PodSetRequest],
    podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
    kept: NodeSets | None,
    only: Mapping[str, str] | None,
) -> _Gang:
    generation = inventory.generation
    with_devices = [ps for ps in requests if ps.devices and ps.count > 0]
    if not with_devices:
        return _Gang(requests, podset_flavors, generation, None)
    for ps in with_devices:
        if ps.claims and (only is None or ps.name not in only):
            # its pods also share a direct ResourceClaim not allocated on one node:
            # where its devices will be is not placed yet (docs/design/
            # dra-placement.md, "Direct ResourceClaims"): quota alone
            return _Gang(requests, podset_flavors, generation, None)
        for request in ps.devices:
            if request.capacity_requests or not _node_local(inventory, request):
                return _Gang(requests, podset_flavors, generation, None)
    assigned = dict(podset_flavors)
    eligible_memo = kept.eligible if kept is not None else None
    pods: list[GangPod] = []
    owner: list[str] = []  # the podset of each pod
    distinct: list[GangPod] = []  # one per podset, in order (its pods are one object)
    flavor_names: set[str] = set()
    for ps in with_devices:
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
        if only is not None and ps.name in only:
            eligible = eligible & frozenset((only[ps.name],))
        pod = GangPod(ps.devices, eligible, ps.device_constraints, ps.device_claims)
        pods.extend([pod] * ps.count)
        owner.extend([ps.name] * ps.count)
        distinct.append(pod)
    where = "in flavor " + ", ".join(sorted(flavor_names)) + " " if flavor_names else ""
    several = len(with_devices) < len(requests) or len(with_devices) > 1
    return _Gang(
        requests,
        podset_flavors,
        generation,
        tuple(pods),
        tuple(owner),
        tuple(distinct),
        where,
        f"{_gang_text(with_devices)}: " if several else "",
    )


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
    """Whether every device the request may take is local to a node and taken
    whole (a device shared by several claims is consumable capacity: not placed);
    memoised with the inventory's placement memo."""
    key = ("node-local", request.device_class_name, request.selectors)
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        matched = matching_devices(inventory, request)
        found = memo[key] = not isinstance(matched, str) and all(
            inventory.node_name(d) is not None and not d.device.allow_multiple_allocations
            for d in matched
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
