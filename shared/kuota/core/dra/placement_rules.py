"""The rules placement applies beyond class and selectors: device taints, claim
constraints, the claims of a pod's requests.

Theory of operation (issue #17; docs/design/dra-placement.md): what
:func:`~kuota.core.dra.placement.place_gang` needs to know, read as Kubernetes'
structured allocator (``k8s.io/dynamic-resource-allocation``, 1.36) reads it:

- :func:`taints_allow` — a device is a candidate for a request only when every
  ``NoSchedule``/``NoExecute`` taint it carries is tolerated by one of the
  request's tolerations (:func:`tolerates`: effect empty or equal, key empty or
  equal, ``Exists`` any value, ``Equal`` the same value); other effects never
  block.
- :func:`attribute_value` — the value of a fully qualified attribute on a
  device: the published name as is, or, when its domain is the device's
  driver, the bare name; with its kind, so ``"1"`` and ``1`` differ.
- :class:`PodConstraint` — a claim's ``matchAttribute`` constraint resolved to
  the indices of the pod's requests it binds (a claim's constraint with no
  ``requests`` binds all the claim's requests); :func:`pod_constraints` makes
  them from claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kuota.api.dra import Device, ExactDeviceRequest
from kuota.api.dra_rules import (
    TAINT_EFFECTS_THAT_BLOCK,
    DeviceConstraint,
    DeviceTaint,
    DeviceToleration,
)
from kuota.core.dra.inventory import DraInventory
from kuota.core.pickling import register_by_fields

__all__ = [
    "AttributeValue",
    "PodConstraint",
    "attribute_value",
    "attribute_values",
    "pod_constraints",
    "share_id",
    "taints_allow",
    "tolerates",
]

AttributeValue = tuple[str, object]  # (kind, value): kind is int | bool | string | version


@dataclass(frozen=True, slots=True)
class PodConstraint:
    """Every device given to the requests at ``requests`` (indices into the
    pod's requests) has ``attribute`` with one value (``distinct``: pairwise
    different values)."""

    attribute: str
    requests: tuple[int, ...]
    distinct: bool = False


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (Kubernetes' ToleratesTaint)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("", "Equal") and toleration.value == taint.value


def taints_allow(device: Device, request: ExactDeviceRequest) -> bool:
    """Whether every blocking taint of ``device`` is tolerated by ``request``."""
    for taint in device.taints:
        if taint.effect in TAINT_EFFECTS_THAT_BLOCK and not any(
            tolerates(t, taint) for t in request.tolerations
        ):
            return False
    return True


def attribute_value(device: Device, driver: str, name: str) -> AttributeValue | None:
    """The value of the fully qualified attribute ``name`` on ``device``, or None."""
    domain, _, bare = name.partition("/")
    for attribute in device.attributes:
        if attribute.name == name or (domain == driver and attribute.name == bare):
            return (attribute.kind, attribute.value)
    return None


def share_id(device: tuple[str, str, str]) -> Any:
    """The id of shared ``device``'s candidates in the placement: no held or
    claimed device has it, so taking a share takes the device from nobody
    (kuota.core.dra.placement, "Consumable capacity")."""
    return (*device, "share")


def attribute_values(
    inventory: DraInventory, name: str
) -> dict[tuple[str, str, str], AttributeValue]:
    """Per usable device that has attribute ``name``, its value (memoised with
    the inventory's placement memo)."""
    key = ("attribute", name)
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        out: dict[tuple[str, str, str], AttributeValue] = {}
        for d in inventory.usable_devices():
            value = attribute_value(d.device, d.driver, name)
            if value is not None:
                device = (d.driver, d.pool, d.device.name)
                out[device] = value
                if d.device.allow_multiple_allocations:
                    out[share_id(device)] = value  # its candidates' id
        found = memo[key] = out
    return found  # type: ignore[return-value]


def pod_constraints(
    claims: Sequence[tuple[Sequence[str], Sequence[DeviceConstraint]]],
) -> tuple[PodConstraint, ...]:
    """The constraints of a pod whose requests are, in order, those of
    ``claims`` (per claim: the names of its requests kept, its constraints); a
    constraint's name ``main/sub`` binds request ``main``."""
    out: list[PodConstraint] = []
    start = 0
    for names, constraints in claims:
        for c in constraints:
            wanted = {n.split("/", 1)[0] for n in c.requests}
            bound = tuple(start + i for i, n in enumerate(names) if not c.requests or n in wanted)
            if not bound:
                continue
            attribute = c.match_attribute or c.distinct_attribute or ""
            out.append(PodConstraint(attribute, bound, c.match_attribute is None))
        start += len(names)
    return tuple(out)


register_by_fields(PodConstraint)
