"""The inventory's devices as the gang placement sees them, memoised with the
inventory's placement memo until a DeviceClass or ResourceSlice changes: each
node-local device's node and counters, the nodes whose free devices its being
taken may change, every counter's limit (a shared device's capacities
included: :func:`capacity_key`), and per request its candidates per node
(:func:`request_devices`). Theory: :mod:`kuota.core.dra.placement`.

Pure: no clock, no randomness, no I/O.
"""

from __future__ import annotations

from typing import Any

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.capacity import capacity_name, share_amounts
from kuota.core.dra.cel import CompiledSelector, SelectorError, compile_selector
from kuota.core.dra.inventory import DraInventory, MatchError, PoolDevice
from kuota.core.dra.placement_rules import taints_allow
from kuota.core.dra.placement_types import (
    ByNode,
    Consumes,
    CounterKey,
    DeviceId,
    SearchDevice,
    counter_key,
    share_id,
)

__all__ = [
    "capacity_key",
    "claim_share",
    "device_consumes",
    "device_nodes",
    "device_scope",
    "matching_devices",
    "request_devices",
    "static_limits",
]


_LIMITS = "limits"  # placement_memo key of the counter limits, and of the nodes
_CONSUMES = "consumes"  # placement_memo key of device -> what it consumes
_NODES = "nodes"  # placement_memo key of device -> its node
_SCOPE = "scope"  # placement_memo key of device -> the nodes of its pool
_COUNTERS = "counters"  # placement_memo key of CounterKey -> the one object for it


def static_limits(inventory: DraInventory) -> tuple[tuple[str, ...], dict[CounterKey, int]]:
    """The nodes that have devices, and every counter's limit (memoised until a
    DeviceClass or ResourceSlice changes)."""
    memo = inventory.placement_memo
    found = memo.get(_LIMITS)
    if found is None:
        node_names: set[str] = set()
        limits: dict[CounterKey, int] = {}
        pools: set[tuple[str, str]] = set()
        for d in inventory.usable_devices():
            node = inventory.node_name(d)
            if node is not None:
                node_names.add(node)
                pools.add((d.driver, d.pool))
                if d.device.allow_multiple_allocations:  # its capacities: counters
                    for name, value in d.device.capacity:
                        limits[capacity_key(inventory, d.driver, d.pool, d.device.name, name)] = (
                            value
                        )
        for driver, pool in sorted(pools):
            for cs in inventory.counter_sets(driver, pool):
                for counter, amount in cs.counters:
                    limits[_counter(inventory, driver, pool, cs.name, counter)] = amount
        found = memo[_LIMITS] = (tuple(sorted(node_names)), limits)
    return found  # type: ignore[return-value]


def device_consumes(inventory: DraInventory) -> dict[DeviceId, Consumes]:
    """Per usable device that consumes counters, what it consumes (memoised)."""
    memo = inventory.placement_memo
    found = memo.get(_CONSUMES)
    if found is None:
        out: dict[DeviceId, Consumes] = {}
        for d in inventory.usable_devices():
            if d.device.consumes_counters:
                out[(d.driver, d.pool, d.device.name)] = _consumption(inventory, d)
        found = memo[_CONSUMES] = out
    return found  # type: ignore[return-value]


def device_nodes(inventory: DraInventory) -> dict[DeviceId, str]:
    """The node of every node-local usable device (memoised)."""
    memo = inventory.placement_memo
    found = memo.get(_NODES)
    if found is None:
        out: dict[DeviceId, str] = {}
        for d in inventory.usable_devices():
            node = inventory.node_name(d)
            if node is not None:
                out[(d.driver, d.pool, d.device.name)] = node
        found = memo[_NODES] = out
    return found  # type: ignore[return-value]


def device_scope(inventory: DraInventory) -> dict[DeviceId, tuple[str, ...]]:
    """Per usable device, the nodes whose free devices its being taken may change:
    those of every device of its pool (they may share its counters); memoised."""
    memo = inventory.placement_memo
    found = memo.get(_SCOPE)
    if found is None:
        pools: dict[tuple[str, str], set[str]] = {}
        for device, node in device_nodes(inventory).items():
            pools.setdefault((device[0], device[1]), set()).add(node)
        scopes = {pool: tuple(sorted(nodes)) for pool, nodes in pools.items()}
        out: dict[DeviceId, tuple[str, ...]] = {}
        for d in inventory.usable_devices():
            scope = scopes.get((d.driver, d.pool))
            if scope:
                out[(d.driver, d.pool, d.device.name)] = scope
        found = memo[_SCOPE] = out
    return found  # type: ignore[return-value]


def capacity_key(inventory: DraInventory, driver: str, pool: str, device: str, name: str) -> Any:
    """The counter of capacity ``name`` of shared ``device`` (a counter set named
    ``capacity/<device>``: no counter set's name holds a slash)."""
    return _counter(inventory, driver, pool, f"capacity/{device}", name)


def claim_share(
    inventory: DraInventory, device: DeviceId, consumed: tuple[tuple[str, int], ...]
) -> Consumes:
    """What one share of an allocated claim spends on shared ``device``: the
    device's own counters and, per capacity, the ``consumedCapacity`` the
    scheduler recorded (a capacity it did not record: all of it, the most the
    share can hold); () when the device is not a known shared one."""
    found = _by_id(inventory).get(device)
    if found is None or not found.device.allow_multiple_allocations:
        return ()
    recorded: dict[str, int] = {}
    for name, amount in consumed:  # by the device's own names
        key = capacity_name(found.device, found.driver, name)
        if key is not None:
            recorded[key] = amount
    amounts = tuple((key, recorded.get(key, value)) for key, value in found.device.capacity)
    return _share_spends(inventory, found, amounts)


def _share_spends(
    inventory: DraInventory, d: PoolDevice, amounts: tuple[tuple[str, int], ...]
) -> Consumes:
    """What a share of shared device ``d`` spends: its own counters, and
    ``amounts`` (capacity, by the device's names -> amount) of its capacities."""
    out = list(_consumption(inventory, d))
    out.extend(
        (capacity_key(inventory, d.driver, d.pool, d.device.name, name), amount)
        for name, amount in amounts
    )
    out.sort()
    return tuple(out)


_BY_ID = "by-id"  # placement_memo key of device id -> its PoolDevice


def _by_id(inventory: DraInventory) -> dict[DeviceId, PoolDevice]:
    memo = inventory.placement_memo
    found = memo.get(_BY_ID)
    if found is None:
        found = memo[_BY_ID] = {
            (d.driver, d.pool, d.device.name): d for d in inventory.usable_devices()
        }
    return found  # type: ignore[return-value]


def _consumption(inventory: DraInventory, d: PoolDevice) -> Consumes:
    out: list[tuple[Any, int]] = []
    for use in d.device.consumes_counters:
        for counter, amount in use.counters:
            out.append((_counter(inventory, d.driver, d.pool, use.counter_set, counter), amount))
    out.sort()
    return tuple(out)


def _counter(inventory: DraInventory, driver: str, pool: str, counter_set: str, name: str) -> Any:
    """The CounterKey of a counter, one object per counter (memoised): the dicts
    of counters are looked up with the very key they hold (typed Any: see
    Consumes, placement_types.py)."""
    memo = inventory.placement_memo
    keys: dict[Any, Any] | None = memo.get(_COUNTERS)  # type: ignore[assignment]
    if keys is None:
        keys = {}
        memo[_COUNTERS] = keys
    key = counter_key(driver, pool, counter_set, name)
    return keys.setdefault(key, key)


def request_devices(inventory: DraInventory, request: ExactDeviceRequest) -> ByNode | str:
    """The devices the request may take, per node (node-local; a shared one by its
    :func:`share_id`, consuming its share), whether taken or not; or why the
    request cannot be evaluated (memoised)."""
    key = (
        request.device_class_name,
        request.selectors,
        request.tolerations,
        request.capacity_requests,
    )
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        matched = matching_devices(inventory, request)
        if isinstance(matched, str):
            found = matched
        else:
            grouped: dict[str, list[SearchDevice]] = {}
            # equal consumptions are one object: a search that found one short of
            # its counters skips the next by identity (placement_search.py)
            shared: dict[Consumes, Consumes] = {}
            for d in matched:
                node = inventory.node_name(d)
                if node is None:
                    continue
                if d.device.taints and not taints_allow(d.device, request):
                    continue  # a taint the request does not tolerate
                device = (d.driver, d.pool, d.device.name)
                multi = d.device.allow_multiple_allocations
                amounts: tuple[tuple[str, int], ...] | None = None
                if multi or request.capacity_requests:
                    amounts = share_amounts(d.device, d.driver, request.capacity_requests)
                    if amounts is None:
                        continue  # it cannot give what the request asks
                if multi and amounts is not None:
                    consumes = _share_spends(inventory, d, amounts)
                else:
                    consumes = _consumption(inventory, d)
                consumes = shared.setdefault(consumes, consumes)
                grouped.setdefault(node, []).append(
                    SearchDevice(share_id(device) if multi else device, consumes, multi)
                )
            found = {n: tuple(sorted(ds, key=lambda x: x.id)) for n, ds in grouped.items()}
        memo[key] = found
    return found  # type: ignore[return-value]


def matching_devices(
    inventory: DraInventory, request: ExactDeviceRequest, where: str = "request"
) -> tuple[PoolDevice, ...] | str:
    """The usable devices the request's class and selectors match, or why they
    cannot be evaluated."""
    device_class = inventory.device_class(request.device_class_name)
    if device_class is None:
        return f"{where}: DeviceClass {request.device_class_name} not found"
    compiled: list[CompiledSelector] = []
    for expression in (*device_class.selectors, *request.selectors):
        selector = compile_selector(expression)
        if isinstance(selector, SelectorError):
            return f"{where}: {selector}"
        compiled.append(selector)
    matched = inventory.matching_devices(selectors=tuple(compiled), driver=None)
    if isinstance(matched, MatchError):
        return f"{where}: {matched.error} failed on device {matched.device}"
    return matched
