"""Consumable capacity (KEP-5075): what one request takes of a shared device.

Theory of operation: a device with ``allowMultipleAllocations: true`` serves
several claims at once; each consumes an amount of each of its capacities.
:func:`consumed` is that amount for one capacity of one device, as the
scheduler computes it: the request's ``capacity.requests`` entry, else the
requestPolicy's ``default``, else the whole capacity; then rounded up per the
policy (the smallest ``validValues`` entry not below it; or at least
``validRange.min``, aligned up to ``min + n*step``); then checked against the
policy's maximum and the capacity itself. An amount the device can never give
is a :class:`CapacityProblem`, never a smaller charge: rounding only rounds up.
:func:`capacity_of` finds a capacity by the names DRA accepts (a name without
a domain is in the driver's domain). Exact integers in milli-units, no state.
Rules and their sources: docs/design/consumable-capacity.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuota.api.dra import CapacityRequestPolicy, Device
from kuota.quantity import format_quantity

__all__ = [
    "NO_VALID_VALUE",
    "OUT_OF_RANGE",
    "CapacityProblem",
    "capacity_name",
    "capacity_of",
    "consumed",
    "share_amounts",
]

OUT_OF_RANGE = "out-of-range"  # above validRange.max or the capacity itself
NO_VALID_VALUE = "no-valid-value"  # above every validValues entry


@dataclass(frozen=True, slots=True)
class CapacityProblem:
    """Why a device can never give a request this capacity."""

    kind: str  # OUT_OF_RANGE | NO_VALID_VALUE
    text: str


def capacity_name(device: Device, driver: str, name: str) -> str | None:
    """The name under which ``device`` publishes capacity ``name``, or None when
    it does not. ``memory`` and ``<driver>/memory`` are one name."""
    bare = name
    if "/" in name:
        domain, _, bare = name.partition("/")
        if domain != driver:
            bare = ""
    candidates = (name, bare, f"{driver}/{bare}") if bare else (name,)
    for candidate in candidates:
        for key, _ in device.capacity:
            if key == candidate:
                return key
    return None


def capacity_of(
    device: Device, driver: str, name: str
) -> tuple[int, CapacityRequestPolicy | None] | None:
    """The (value, requestPolicy) of capacity ``name`` on ``device``, or None when
    the device does not publish it. ``memory`` and ``<driver>/memory`` are one name."""
    key = capacity_name(device, driver, name)
    if key is None:
        return None
    return dict(device.capacity)[key], dict(device.request_policies).get(key)


def share_amounts(
    device: Device, driver: str, requests: tuple[tuple[str, int], ...]
) -> tuple[tuple[str, int], ...] | None:
    """What one allocation of shared ``device`` for a request asking ``requests``
    (its ``capacity.requests``) consumes of each capacity the device publishes,
    by the device's names, as the scheduler computes it (:func:`consumed`: a
    capacity the request does not name takes the policy's default, else all of
    it); None when the device cannot serve the request (a capacity it does not
    publish, an amount it can never give)."""
    asked: dict[str, int] = {}
    for name, amount in requests:
        key = capacity_name(device, driver, name)
        if key is None:
            return None
        asked[key] = amount
    policies = dict(device.request_policies)
    out: list[tuple[str, int]] = []
    for key, value in device.capacity:
        verdict = consumed(value=value, policy=policies.get(key), request=asked.get(key))
        if isinstance(verdict, CapacityProblem):
            return None
        out.append((key, verdict))
    return tuple(out)


def consumed(
    *, value: int, policy: CapacityRequestPolicy | None, request: int | None
) -> int | CapacityProblem:
    """What a request (``None`` = the claim names no amount) consumes of a capacity
    of ``value``, or why it cannot (module docstring)."""
    if request is not None:
        amount = request
    elif policy is not None and policy.default is not None:
        amount = policy.default
    else:
        amount = value
    if policy is not None and policy.valid_values:
        for valid in policy.valid_values:
            if valid >= amount:
                amount = valid
                break
        else:
            allowed = ", ".join(format_quantity(v) for v in policy.valid_values)
            return CapacityProblem(
                NO_VALID_VALUE,
                f"{format_quantity(amount)} is more than every valid value ({allowed})",
            )
    elif policy is not None and policy.range_min is not None:
        lo = policy.range_min
        amount = max(amount, lo)
        step = policy.step
        if step is not None and (amount - lo) % step:
            amount = lo + ((amount - lo) // step + 1) * step
        if policy.range_max is not None and amount > policy.range_max:
            return CapacityProblem(
                OUT_OF_RANGE,
                f"{_rounded(amount, request)} is above the valid range's max "
                f"{format_quantity(policy.range_max)}",
            )
    if amount > value:
        return CapacityProblem(
            OUT_OF_RANGE,
            f"{_rounded(amount, request)} is more than the device's {format_quantity(value)}",
        )
    return amount


def _rounded(amount: int, request: int | None) -> str:
    if request is None or request == amount:
        return format_quantity(amount)
    return f"{format_quantity(request)} (rounded up to {format_quantity(amount)})"
