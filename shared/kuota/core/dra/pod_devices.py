"""What one pod asks of DRA devices, for the placement (issue #17).

Theory of operation: :func:`pod_devices` lists a chargeable pod's requests as
``exactly`` requests in the allocator's order (its ResourceClaimTemplates'
claims, their requests, then its extended resources backed by a DeviceClass),
each with the index of its claim, and its claims' matchAttribute constraints.
A ``firstAvailable`` request is the alternative charging charged
(:func:`kuota.core.dra.alternatives.choose`, the same memoised choice charging
reads through :func:`pod_requests`), an allocation mode ``All`` request the
count charged (:func:`kuota.core.dra.alternatives.all_count`). adminAccess
requests are kept (they need a device on the node, take none). Call it only
once :func:`kuota.core.dra.charging.charge_podset` charged the podset: what
charging refuses (missing templates) is skipped; direct ResourceClaims are not a
pod's own requests (docs/design/dra-placement.md, "Direct ResourceClaims").

Pure: reads the inventory only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kuota.api.dra import DeviceRequest, ExactDeviceRequest, ResourceClaim
from kuota.api.dra_rules import DeviceConstraint
from kuota.api.types import PodSet
from kuota.core.dra.alternatives import all_count, choose
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement_rules import PodConstraint, pod_constraints
from kuota.quantity import MILLI

_Wanted = tuple[DeviceRequest | ExactDeviceRequest, int, str | None]


def _pod_wanted(
    inventory: DraInventory, namespace: str, podset: PodSet
) -> tuple[list[_Wanted], list[tuple[DeviceConstraint, ...]]]:
    """What one pod asks of DRA devices, in the allocator's order (claims, then
    their requests, then extended resources): a firstAvailable request as it is,
    the others as ``exactly`` requests, each with the index of its claim and its
    name (None: an extended resource); and per template claim its constraints."""
    wanted: list[_Wanted] = []
    constraints: list[tuple[DeviceConstraint, ...]] = []
    for claim in podset.claims:
        name = claim.resource_claim_template_name
        if not name or claim.resource_claim_name:
            continue
        template = inventory.claim_template(namespace, name)
        if template is None:
            continue
        for request in template.requests:
            if request.alternatives:
                wanted.append((request, len(constraints), request.name))
            elif request.exactly is not None:
                wanted.append((request.exactly, len(constraints), request.name))
        constraints.append(template.constraints)
    for resource, amount in podset.requests:
        device_class = inventory.device_class_for_extended_resource(resource)
        if device_class is not None and amount > 0 and amount % MILLI == 0:
            wanted.append(
                (ExactDeviceRequest(device_class.name, amount // MILLI), len(constraints), None)
            )
    return wanted, constraints


def _choosing(wanted: list[_Wanted]) -> list[DeviceRequest | ExactDeviceRequest]:
    """The requests a pod's firstAvailable alternatives are chosen beside: those
    that take devices (not adminAccess ones)."""
    return [r for r, _, _ in wanted if isinstance(r, DeviceRequest) or not r.admin_access]


def pod_requests(
    inventory: DraInventory, namespace: str, podset: PodSet
) -> list[DeviceRequest | ExactDeviceRequest]:
    return _choosing(_pod_wanted(inventory, namespace, podset)[0])


def device_requests(
    *, inventory: DraInventory, namespace: str, podset: PodSet
) -> tuple[ExactDeviceRequest, ...]:
    """What one pod of a chargeable ``podset`` asks of DRA devices, as ``exactly``
    requests (:func:`pod_devices`, its requests alone)."""
    return pod_devices(inventory=inventory, namespace=namespace, podset=podset).requests


@dataclass(frozen=True, slots=True)
class PodDevices:
    """What one pod asks of DRA devices, for placement: its requests, per request
    the index of its claim, and its claims' matchAttribute constraints."""

    requests: tuple[ExactDeviceRequest, ...] = ()
    claims: tuple[int, ...] = ()
    constraints: tuple[PodConstraint, ...] = ()


def pod_devices(*, inventory: DraInventory, namespace: str, podset: PodSet) -> PodDevices:
    """What one pod of a chargeable ``podset`` asks of DRA devices, as ``exactly``
    requests in the allocator's order (claims, then their requests, then extended
    resources): its templates' requests (adminAccess ones included: they take
    nothing, but need a device; a firstAvailable request as the alternative
    charged; allocation mode All with the count charged), with their claims'
    constraints, and its extended resources backed by a DeviceClass (``count``
    devices of that class, one claim). Call it only once ``charge_podset``
    charged the podset: what it refuses (missing templates) is skipped here, and
    direct claims are not a pod's own requests."""
    wanted, constraints = _pod_wanted(inventory, namespace, podset)
    return _exact(inventory, wanted, constraints)


def claim_devices(inventory: DraInventory, claim: ResourceClaim) -> PodDevices:
    """What a direct ResourceClaim that is not allocated yet asks of DRA devices,
    for the one pod that carries it in a placement (docs/design/dra-placement.md,
    "Direct ResourceClaims"): its requests as :func:`pod_devices` makes a
    template's (a firstAvailable request as the alternative charging charged,
    ``All`` with the count charged, adminAccess kept), all of one claim, with its
    constraints."""
    wanted: list[_Wanted] = []
    for request in claim.requests:
        if request.alternatives:
            wanted.append((request, 0, request.name))
        elif request.exactly is not None:
            wanted.append((request.exactly, 0, request.name))
    return _exact(inventory, wanted, [claim.constraints])


def _exact(
    inventory: DraInventory, wanted: list[_Wanted], constraints: list[tuple[DeviceConstraint, ...]]
) -> PodDevices:
    """``wanted`` as ``exactly`` requests (:func:`pod_devices`)."""
    choices = list(choose(inventory, _choosing(wanted)))
    out: list[ExactDeviceRequest] = []
    claims: list[int] = []
    names: list[list[str]] = [[] for _ in constraints]
    for asked, index, request_name in wanted:
        exact: ExactDeviceRequest | None
        if isinstance(asked, DeviceRequest):
            chosen = choices.pop(0) if choices else -1
            exact = asked.alternatives[chosen] if chosen >= 0 else None
        else:
            exact = asked
        if exact is not None and exact.allocation_mode == "All" and not exact.admin_access:
            count = all_count(inventory, exact)
            exact = replace(exact, count=count) if count > 0 else None
        if exact is None:
            continue
        out.append(exact)
        claims.append(index)
        if request_name is not None:
            names[index].append(request_name)
    shapes = list(zip(names, constraints, strict=True))
    return PodDevices(tuple(out), tuple(claims), pod_constraints(shapes))
