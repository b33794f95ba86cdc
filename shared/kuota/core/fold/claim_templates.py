"""ResourceClaimTemplate changes: charge again only what reads the template (#23 items 4, 6).

Theory of operation: a template is namespaced and read only by the charges of
its namespace's workloads that name it, so :func:`dra_changed` sends a template
change to :func:`template_changed` (a DeviceClass or ResourceSlice change to
``Placement._recharge``, as before). A template no charge has read since it was
last found unused is skipped; else the namespace's pending charge groups naming
it are charged again (empty ones dropped) and re-placed if changed, and each
admitted workload naming it is checked against ``rec.requests``, the charged
podsets its admission was assigned from. If it now asks more of any resource,
or cannot be charged, it is ``Evicted`` + ``Requeued``
(:data:`CLAIM_TEMPLATE_CHANGED`) and charged for the new shape; a charge that
does not grow keeps the admission, and so does a deleted template (no pod can
be made without it). docs/design/claim-templates.md.
"""

from __future__ import annotations

from kuota.api.types import PodSet
from kuota.core.assign.flavors import PodSetRequest
from kuota.core.dra.charging import NotChargeable, Reason
from kuota.core.fold.cycle import Cycles
from kuota.core.fold.state import ChargeResult
from kuota.core.queueing.workload import ADMITTED
from kuota.quantity import format_quantity

CLAIM_TEMPLATE_CHANGED = "ClaimTemplateChanged"


def dra_changed(fold: Cycles) -> None:
    """The DRA inventory changed (its generation moved): charge again what it affects."""
    changed = fold._inventory.changed_template
    if changed is None:
        fold._recharge()
        fold._wake_unplaced()  # a slice or class: what nodes have free may differ
    else:
        template_changed(fold, *changed)


def names_template(podsets: tuple[PodSet, ...], name: str) -> bool:
    """Whether a pod claim of any podset is made from the template ``name``."""
    return any(c.resource_claim_template_name == name for ps in podsets for c in ps.claims)


def template_changed(fold: Cycles, namespace: str, name: str) -> None:
    """ResourceClaimTemplate ``namespace/name`` changed (created, updated, deleted)."""
    inventory = fold._inventory
    if not inventory.template_read(namespace, name):
        return  # no charge read it: no workload names it (a tenant's churn costs O(1))
    changed: dict[str, None] = {}
    groups = fold._charge_groups
    named = [
        cid
        for cid, group in groups.items()
        if group.key[0] == namespace and names_template(group.key[1], name)
    ]
    for cid in named:
        group = groups[cid]
        if not group.members:
            del fold._charge_ids[group.key]
            del groups[cid]
            continue
        result = fold._charge(group.key)
        if result != group.result:
            group.result = result
            group.shapes.clear()
            changed.update(group.members)
    users = [
        rec
        for members in fold._admitted.values()
        for rec in (fold._workloads[key] for key in members)
        if rec.state == ADMITTED
        and rec.spec.namespace == namespace
        and names_template(rec.spec.podsets, name)
    ]
    if not users and not any(cid in groups for cid in named):
        inventory.forget_read(namespace, name)  # no live user: the next change is free
    for rec in users:
        carried = tuple(sorted({n for ps in rec.requests for n, part in ps.claims if not part}))
        grown = growth(rec.requests, fold._charge((namespace, rec.spec.podsets, carried)))
        if grown is not None:
            message = (
                f"ResourceClaimTemplate {namespace}/{name} changed while the Job was admitted "
                f"({grown}); its quota is released and it is queued again with the new charge"
            )
            fold._evict(rec, CLAIM_TEMPLATE_CHANGED, message, requeue=True)
    fold._reevaluate(changed)


def growth(charged: tuple[PodSetRequest, ...], now: ChargeResult) -> str | None:
    """How ``now`` asks more than ``charged`` (per podset and resource), or None if
    it does not: equal or less, or a template of it is missing."""
    if isinstance(now, NotChargeable):
        if now.reason == Reason.UNKNOWN_RESOURCE_CLAIM_TEMPLATE:
            return None  # no pod of it can be created: the charge stays until it returns
        return f"it can no longer be charged: {now.reason}: {now.message}"
    parts: list[str] = []
    for old, new in zip(charged, now, strict=False):
        was = dict(old.totals)
        for res, qty in new.totals:
            before = was.get(res, 0)
            if qty > before:
                parts.append(
                    f"podset {new.name}: {res} {format_quantity(before)} -> {format_quantity(qty)}"
                )
    return "; ".join(parts) or None
