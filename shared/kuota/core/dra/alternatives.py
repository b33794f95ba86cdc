"""What a ``firstAvailable`` request and an allocation mode ``All`` request take.

Theory of operation (issue #17; docs/design/dra-placement.md, "firstAvailable
and All"): for both forms what kube-scheduler allocates depends on the node,
while kuota charges quota before it places the pods. These functions fix, from
the published devices alone (the inventory, nothing taken), the one answer that
is charged, and the placement then accepts a node only where the scheduler's
allocator would take exactly that:

- :func:`first_available`: the index of the first alternative (subrequest) some
  node can give at all — its devices, of one node, within their counters
  (:func:`~kuota.core.dra.placement.place_gang` for that alternative alone, on an
  empty cluster: a shared device's capacity included), or, when a device it
  matches is not local to a node, enough matching devices in the cluster. An
  earlier alternative no node can ever give is one the scheduler can never
  allocate, on any node, whatever is taken: on the node chosen for the charged
  alternative, the scheduler's first fitting alternative is the charged one.
- :func:`choose`: the alternatives of all the ``firstAvailable`` requests of one
  pod together, as the allocator picks them: it tries the combinations in
  lexicographic order (the first request's alternatives outermost) and keeps the
  first with which every request of the pod is allocated on the node. The
  combination charged is the first that some node can give with the pod's
  other requests beside it (on the empty cluster); every earlier one no node
  can ever give, so the scheduler never allocates it. When the pod has too many
  combinations (more than :data:`MAX_COMBINATIONS`), or none fits beside the
  rest, each request takes its own :func:`first_available`.
- :func:`all_count`: how many devices ``All`` takes: the most that one node's
  matching devices number, among the nodes where all of them can be taken
  together (their shared counters allow it); when a matching device is not
  local to a node or is shared, every matching device of the cluster (the most
  the scheduler could give one node). 0 when no node can give any.

The Nodes the fold knows play no part: only the slices' ``nodeName``, so the
answer is the same before and after Nodes are ingested. Pure and deterministic;
the answers are memoised in the inventory's ``placement_memo`` (dropped when a
DeviceClass or ResourceSlice changes).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from kuota.api.dra import DeviceRequest, ExactDeviceRequest
from kuota.core.dra.inventory import DraInventory, PoolDevice
from kuota.core.dra.placement import GangPod, Placement, SearchBudgetExhausted, place_gang
from kuota.core.dra.placement import matching_devices as _matching

__all__ = ["MAX_COMBINATIONS", "all_count", "can_satisfy", "choose", "first_available"]

MAX_COMBINATIONS = 64  # firstAvailable combinations of one pod tried together

_ALL = "all-count"  # placement_memo key prefixes
_SATISFY = "can-satisfy"
_CHOOSE = "choose"


def _per_node(
    inventory: DraInventory, matched: tuple[PoolDevice, ...], shares: bool = False
) -> dict[str, int] | None:
    """How many of ``matched`` each node has; None when one is not local to a
    node, or may be shared (allowMultipleAllocations) unless ``shares``."""
    out: dict[str, int] = {}
    for d in matched:
        node = inventory.node_name(d)
        if node is None or (d.device.allow_multiple_allocations and not shares):
            return None
        out[node] = out.get(node, 0) + 1
    return out


def all_count(inventory: DraInventory, request: ExactDeviceRequest) -> int:
    """How many devices allocation mode All takes for ``request`` (module
    docstring); 0 when none, or when its class or selectors cannot be evaluated."""
    key = (_ALL, request.device_class_name, request.selectors, request.capacity_requests)
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        found = memo[key] = _all_count(inventory, request)
    return found  # type: ignore[return-value]


def _all_count(inventory: DraInventory, request: ExactDeviceRequest) -> int:
    matched = _matching(inventory, request)
    if isinstance(matched, str):
        return 0
    per_node = _per_node(inventory, matched)
    if per_node is None or request.capacity_requests:
        return len(matched)
    for count in sorted(set(per_node.values()), reverse=True):
        whole = replace(request, allocation_mode="All", count=count)
        if isinstance(place_gang(inventory=inventory, pods=(GangPod((whole,)),)), Placement):
            return count
    return 0


def can_satisfy(inventory: DraInventory, request: ExactDeviceRequest) -> bool:
    """Whether some node (or, for devices not local to one node, the cluster) can
    give ``request`` when nothing is taken. A search that runs out of budget counts
    as yes: charging it can only make the placement stricter, never the charge
    smaller than what the scheduler allocates."""
    if request.allocation_mode == "All":
        return all_count(inventory, request) > 0
    key = (_SATISFY, request)
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        found = memo[key] = _can_satisfy(inventory, request)
    return bool(found)


def _can_satisfy(inventory: DraInventory, request: ExactDeviceRequest) -> bool:
    matched = _matching(inventory, request)
    if isinstance(matched, str):
        return False
    if request.count <= 0:
        return True
    if _per_node(inventory, matched, shares=True) is None:
        return len(matched) >= request.count
    result = place_gang(inventory=inventory, pods=(GangPod((request,)),))
    return isinstance(result, Placement | SearchBudgetExhausted)


def first_available(inventory: DraInventory, alternatives: tuple[ExactDeviceRequest, ...]) -> int:
    """The index of the alternative charged and placed (module docstring); -1
    when no alternative can be given."""
    for i, alternative in enumerate(alternatives):
        if can_satisfy(inventory, alternative):
            return i
    return -1


def choose(
    inventory: DraInventory, requests: Sequence[DeviceRequest | ExactDeviceRequest]
) -> tuple[int, ...]:
    """Per ``firstAvailable`` request of one pod (a :class:`DeviceRequest` with
    alternatives; the others are its ``exactly`` requests, in the allocator's
    order: claims, then requests), the index of the alternative charged, -1 when
    none can be given (module docstring)."""
    key = (_CHOOSE, tuple(requests))
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        found = memo[key] = _choose(inventory, requests)
    return found  # type: ignore[return-value]


def _choose(
    inventory: DraInventory, requests: Sequence[DeviceRequest | ExactDeviceRequest]
) -> tuple[int, ...]:
    options: list[list[int]] = []
    fixed: list[ExactDeviceRequest] = []
    for request in requests:
        if isinstance(request, DeviceRequest):
            alternatives = request.alternatives
            options.append([i for i, a in enumerate(alternatives) if can_satisfy(inventory, a)])
        else:
            placed = _placed(inventory, request)
            if placed is not None:
                fixed.append(placed)
    alone = tuple(ids[0] if ids else -1 for ids in options)
    combinations = 1
    for ids in options:
        combinations *= len(ids)
    if not options or combinations <= 1 or combinations > MAX_COMBINATIONS:
        return alone
    chosen_requests = [r for r in requests if isinstance(r, DeviceRequest)]
    for combination in itertools.product(*options):
        pod = list(fixed)
        for request, i in zip(chosen_requests, combination, strict=True):
            placed = _placed(inventory, request.alternatives[i])
            if placed is not None:
                pod.append(placed)
        result = place_gang(inventory=inventory, pods=(GangPod(tuple(pod)),))
        if isinstance(result, Placement | SearchBudgetExhausted):
            return tuple(combination)
    return alone


def _placed(inventory: DraInventory, request: ExactDeviceRequest) -> ExactDeviceRequest | None:
    """``request`` as the placement takes it (All with its count), or None when
    it takes nothing on a node: adminAccess, devices not local to a node (or
    shared, with allocation mode All), or a class or selectors it cannot
    evaluate."""
    if request.admin_access:
        return None
    matched = _matching(inventory, request)
    if isinstance(matched, str) or _per_node(inventory, matched, shares=True) is None:
        return None
    if request.allocation_mode == "All":
        if request.capacity_requests or _per_node(inventory, matched) is None:
            return None
        count = all_count(inventory, request)
        return replace(request, count=count) if count > 0 else None
    return request
