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
  claims);
- :class:`Placed` — the nodes per podset (for the Admitted decision: the
  actuator pins the podset to them) and the devices to hold;
- :class:`Unplaceable` — no placement exists (proven), or none was found within
  the search budget; its message names the nodes and what each has free.

Pure: the same arguments give the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kuota.api.dra import ExactDeviceRequest
from kuota.api.nodes import Node
from kuota.api.types import ResourceFlavor
from kuota.core.assign.flavors import PodSetRequest
from kuota.core.assign.node_match import node_mismatch
from kuota.core.dra.charging import DraInventory
from kuota.core.dra.placement import (
    CounterKey,
    DeviceId,
    GangPod,
    NoPlacement,
    Placement,
    PlacementInvalid,
    matching_devices,
    place_gang,
)

#: The Inadmissible reason of a workload whose quota fits but whose pods no node
#: can take.
NO_NODE_PLACEMENT = "NoNodePlacement"


@dataclass(frozen=True, slots=True)
class Placed:
    nodes: dict[str, list[str]]  # podset -> its pods' nodes, sorted, unique
    devices: tuple[DeviceId, ...]  # every device placed, sorted


@dataclass(frozen=True, slots=True)
class Unplaceable:
    message: str


class _NotPlaced:
    """Placement does not apply (see the module docstring)."""

    def __repr__(self) -> str:
        return "NOT_PLACED"


NOT_PLACED = _NotPlaced()

PlaceOutcome = Placed | Unplaceable | _NotPlaced


def place_workload(
    *,
    inventory: DraInventory,
    nodes: Mapping[str, Node],
    flavors: Mapping[str, ResourceFlavor],
    requests: Sequence[PodSetRequest],
    podset_flavors: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
    held: Mapping[DeviceId, str],
    claimed: Mapping[DeviceId, int],
) -> PlaceOutcome:
    """Place every DRA pod of a workload whose quota fits (module docstring).
    ``podset_flavors``: per podset, its (resource, flavor) assignment; ``held``:
    the devices kuota holds (device -> workload); ``claimed``: the devices
    allocated claims take (device -> how many claims)."""
    if not nodes:
        return NOT_PLACED
    with_devices = [ps for ps in requests if ps.devices and ps.count > 0]
    if not with_devices:
        return NOT_PLACED
    for ps in with_devices:
        for request in ps.devices:
            if request.capacity_requests or not _node_local(inventory, request):
                return NOT_PLACED
    assigned = dict(podset_flavors)
    pods: list[GangPod] = []
    owner: list[str] = []  # the podset of each pod
    flavor_names: set[str] = set()
    for ps in with_devices:
        names = sorted({f for _, f in assigned.get(ps.name, ())})
        flavor_names.update(names)
        of = [flavors[n] for n in names if n in flavors]
        eligible = frozenset(n for n, node in nodes.items() if node_mismatch(node, ps, of) is None)
        pods.extend([GangPod(ps.devices, eligible)] * ps.count)
        owner.extend([ps.name] * ps.count)
    taken = frozenset(held).union(claimed)
    result = place_gang(
        inventory=inventory, pods=pods, taken=taken, consumed=_consumed(inventory, taken)
    )
    if isinstance(result, Placement):
        by_podset: dict[str, set[str]] = {}
        devices: list[DeviceId] = []
        for name, pod in zip(owner, result.pods, strict=True):
            by_podset.setdefault(name, set()).add(pod.node)
            for chosen in pod.devices:
                devices.extend(chosen)
        return Placed(
            {name: sorted(ns) for name, ns in sorted(by_podset.items())}, tuple(sorted(devices))
        )
    if isinstance(result, PlacementInvalid):
        return NOT_PLACED
    message = result.message
    where = "in flavor " + ", ".join(sorted(flavor_names)) + " " if flavor_names else ""
    if isinstance(result, NoPlacement):
        message = message.replace("no node can take", f"no node {where}can take", 1)
    if len(with_devices) < len(requests) or len(with_devices) > 1:
        message = f"{_gang(with_devices)}: {message}"
    return Unplaceable(message)


def _node_local(inventory: DraInventory, request: ExactDeviceRequest) -> bool:
    """Whether every device the request may take is local to a node and taken
    whole (a device shared by several claims is consumable capacity: not placed)."""
    matched = matching_devices(inventory, request)
    if isinstance(matched, str):
        return False
    return all(
        inventory.node_name(d) is not None and not d.device.allow_multiple_allocations
        for d in matched
    )


def _consumed(inventory: DraInventory, taken: frozenset[DeviceId]) -> dict[CounterKey, int]:
    """The shared counters the taken devices spend, each device once."""
    out: dict[CounterKey, int] = {}
    if not taken:
        return out
    for d in inventory.usable_devices():
        if (d.driver, d.pool, d.device.name) not in taken:
            continue
        for use in d.device.consumes_counters:
            for counter, amount in use.counters:
                key = (d.driver, d.pool, use.counter_set, counter)
                out[key] = out.get(key, 0) + amount
    return out


def _gang(podsets: Sequence[PodSetRequest]) -> str:
    parts = ", ".join(f"{ps.name} {ps.count}" for ps in podsets)
    return f"pods placed as one gang ({parts})"
