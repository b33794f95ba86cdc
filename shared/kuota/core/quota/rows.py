"""Quota rows: one vocabulary for a ClusterQueue's quota and usage.

Theory of operation: a ClusterQueue's quota is parsed once, by ``kuota.api.parse``,
into integers (milli-units, ``kuota.quantity``). :func:`flavor_resources` walks
it in spec order (resource group, flavor, resource) for every reader: the quota
tree's limits, the flavor assigner's nominal quotas, the ``QuotaChanged``
decision and the summary. A :class:`QuotaRow` is one (ClusterQueue, flavor,
resource) with its quota and usage, whoever knows them: ``Fold.summary``
(exact), the actuator's read model (from decisions) or ``kuota status`` (from
Redis). Amounts cross a process boundary as quantity strings in two wire forms,
both encoded and decoded here only: the ``QuotaChanged`` decision's ``quota``
(:func:`quota_of`, :func:`rows_from_quota`) and the status documents' ``quota``
and ``flavorsUsage`` entries (:func:`quota_fields`, :func:`usage_fields`).
The texts people see (:func:`nominal_text`, :func:`row_line`, :func:`row_json`)
are here too; ``kuota.status.render`` lays them out (docs/design/quota-rows.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kuota.api.types import ClusterQueue, Cohort, ResourceGroup, ResourceQuota
from kuota.core.pickling import register_by_fields
from kuota.quantity import QuantityError, format_quantity, parse_quantity

if TYPE_CHECKING:
    from kuota.core.quota.tree import QuotaTree

__all__ = [
    "ClusterQueueSummary",
    "QuotaRow",
    "flavor_resources",
    "nominal_text",
    "quantity_text",
    "quota_fields",
    "quota_of",
    "read_quantity",
    "row_json",
    "row_line",
    "rows_from_quota",
    "summarise",
    "usage_fields",
]

#: The ``quota`` of a ``QuotaChanged`` decision: flavor -> resource -> field -> quantity.
WireQuota = dict[str, dict[str, dict[str, str]]]


def flavor_resources(
    source: ClusterQueue | Cohort | Iterable[ResourceGroup],
) -> Iterator[tuple[str, str, ResourceQuota]]:
    """(flavor, resource, quota) of a ClusterQueue's or Cohort's resource groups,
    in spec order: group by group, each flavor's resources in coveredResources order."""
    groups = source.resource_groups if isinstance(source, ClusterQueue | Cohort) else source
    for group in groups:
        for fq in group.flavors:
            for rq in fq.resources:
                yield fq.name, rq.name, rq


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One flavor/resource of a ClusterQueue: quota and usage in milli-units."""

    cluster_queue: str
    flavor: str
    resource: str
    nominal: int | None  # None: the reader does not know it (a document without quota)
    borrowing_limit: int | None = None  # None: unlimited
    lending_limit: int | None = None  # None: lends everything
    usage: int = 0  # charged by admitted workloads

    @property
    def borrowed(self) -> int:
        """Usage beyond the nominal quota (0 when the nominal quota is not known)."""
        return 0 if self.nominal is None else max(0, self.usage - self.nominal)


@dataclass(frozen=True, slots=True)
class ClusterQueueSummary:
    """A ClusterQueue as the fold sees it (``Fold.summary``)."""

    name: str
    cohort: str | None
    resources: tuple[QuotaRow, ...]  # in resource-group, flavor, resource order
    pending: int  # workloads waiting for this ClusterQueue (queued or held)
    admitted: int

    @property
    def pending_by_status(self) -> tuple[tuple[str, int], ...]:
        return ()  # the fold counts every waiting workload together

    @property
    def problem(self) -> str | None:
        return None  # always readable (a status document may not be)


def summarise(
    cluster_queues: Mapping[str, ClusterQueue],
    tree: QuotaTree,
    pending: Mapping[str, int],
    admitted: Mapping[str, Collection[Any]],
) -> list[ClusterQueueSummary]:
    """``Fold.summary``: every ClusterQueue by name, its quota rows in spec order,
    then any flavor/resource still charged that its quota no longer lists
    (quota removed under admitted workloads: nominal 0)."""
    out: list[ClusterQueueSummary] = []
    for name in sorted(cluster_queues):
        cq = cluster_queues[name]
        node = tree.queues.get(name)
        usage = dict(node.usage) if node is not None else {}
        rows = [
            QuotaRow(
                name,
                f,
                r,
                q.nominal_quota,
                q.borrowing_limit,
                q.lending_limit,
                usage.pop((f, r), 0),
            )
            for f, r, q in flavor_resources(cq)
        ]
        rows += [QuotaRow(name, f, r, 0, usage=used) for (f, r), used in sorted(usage.items())]
        out.append(
            ClusterQueueSummary(
                name, cq.cohort, tuple(rows), pending.get(name, 0), len(admitted.get(name, ()))
            )
        )
    return out


# --------------------------------------------------------------------------- wire forms


def read_quantity(value: object) -> int | None:
    """A quantity from a wire form, None when absent or unreadable (never raises)."""
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _text(milli: int | None) -> str | None:
    return None if milli is None else format_quantity(milli)


def quota_of(cq: ClusterQueue) -> WireQuota:
    """The ``quota`` a ``QuotaChanged`` decision carries: ``nominalQuota``, and
    ``borrowingLimit`` / ``lendingLimit`` when set, in spec order."""
    quota: WireQuota = {}
    for flavor, resource, q in flavor_resources(cq):
        fields = {"nominalQuota": format_quantity(q.nominal_quota)}
        if q.borrowing_limit is not None:
            fields["borrowingLimit"] = format_quantity(q.borrowing_limit)
        if q.lending_limit is not None:
            fields["lendingLimit"] = format_quantity(q.lending_limit)
        quota.setdefault(flavor, {})[resource] = fields
    return quota


def rows_from_quota(
    cluster_queue: str, quota: Mapping[str, Mapping[str, Mapping[str, str]]]
) -> tuple[QuotaRow, ...]:
    """The rows of a ``QuotaChanged`` decision's ``quota``, in its order (usage 0;
    an unreadable nominal quota reads as 0, an unreadable limit as unset)."""
    return tuple(
        QuotaRow(
            cluster_queue,
            flavor,
            resource,
            read_quantity(fields.get("nominalQuota")) or 0,
            read_quantity(fields.get("borrowingLimit")),
            read_quantity(fields.get("lendingLimit")),
        )
        for flavor, resources in quota.items()
        for resource, fields in resources.items()
    )


def quota_fields(row: QuotaRow) -> dict[str, str | None]:
    """A row's entry in a status document's ``quota`` list (Redis only)."""
    return {
        "flavor": row.flavor,
        "resource": row.resource,
        "nominalQuota": _text(row.nominal),
        "borrowingLimit": _text(row.borrowing_limit),
        "lendingLimit": _text(row.lending_limit),
    }


def usage_fields(row: QuotaRow) -> dict[str, str]:
    """A row's resource entry in Kueue's ``flavorsUsage`` / ``flavorsReservation``."""
    return {
        "name": row.resource,
        "total": format_quantity(row.usage),
        "borrowed": format_quantity(row.borrowed),
    }


# --------------------------------------------------------------------------- for people


def quantity_text(milli: int | None) -> str:
    """A quantity for people; ``?`` when it is not known (never ``0``)."""
    return "?" if milli is None else format_quantity(milli)


def nominal_text(row: QuotaRow) -> str:
    """``8``, or ``8 (+4)`` when borrowing is capped at 4."""
    text = quantity_text(row.nominal)
    if row.borrowing_limit is not None:
        text += f" (+{format_quantity(row.borrowing_limit)})"
    return text


def row_line(row: QuotaRow) -> str:
    """``h100/nvidia.com/gpu 12/8 (borrowing 4) [limit +4]``: usage/nominal on one line."""
    text = f"{row.flavor}/{row.resource} {format_quantity(row.usage)}/{quantity_text(row.nominal)}"
    if row.borrowed:
        text += f" (borrowing {format_quantity(row.borrowed)})"
    if row.borrowing_limit is not None:
        text += f" [limit +{format_quantity(row.borrowing_limit)}]"
    return text


def row_json(row: QuotaRow) -> dict[str, str | None]:
    """A row for ``--json`` output: quantities as strings, null when unknown or unset."""
    return {
        "flavor": row.flavor,
        "resource": row.resource,
        "usage": format_quantity(row.usage),
        "nominal": _text(row.nominal),
        "borrowing_limit": _text(row.borrowing_limit),
        "lending_limit": _text(row.lending_limit),
        "borrowed": format_quantity(row.borrowed),
    }


register_by_fields(QuotaRow, ClusterQueueSummary)
