"""The messages of :func:`~kuota.core.dra.placement.place_gang`: what a pod
needs, and what each eligible node has free for it.

Theory of operation: a :class:`~kuota.core.dra.placement.NoPlacement` names the
first pod no node can take alone and, per eligible node (sorted, at most
``NODES_NAMED``), how many of each request's candidates are free there (not
taken, their counters not exhausted; an adminAccess request's taken ones
count, as it may share them; a shared device counts while it has the share's
capacity left), and for each matchAttribute constraint the most
free candidates that share one value (distinctAttribute: how many values
they have). Nodes without any matching device are
counted, not named. Pure: the same arguments give the same text.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Any, Protocol

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.placement_rules import AttributeValue, PodConstraint
from kuota.quantity import format_quantity

__all__ = [
    "NODES_NAMED",
    "free_for",
    "free_text",
    "named_nodes",
    "needs_text",
    "node_free",
    "pods_text",
]

NODES_NAMED = 10  # a message names at most this many nodes

# (driver, pool, device name), or a shared device's share_id: typed Any
DeviceId = Any
CounterKey = str  # placement_types.counter_key: driver, pool, counter set, counter


class _Candidate(Protocol):
    @property
    def id(self) -> DeviceId: ...

    @property
    def consumes(self) -> tuple[tuple[CounterKey, int], ...]: ...


class _Pod(Protocol):  # a GangPod (kuota.core.dra.placement imports this module)
    @property
    def requests(self) -> tuple[ExactDeviceRequest, ...]: ...

    @property
    def nodes(self) -> frozenset[str] | None: ...

    @property
    def constraints(self) -> tuple[PodConstraint, ...]: ...


def pods_text(n: int) -> str:
    return "1 pod" if n == 1 else f"a gang of {n} pods"


def needs_text(request: ExactDeviceRequest) -> str:
    noun = "device" if request.count == 1 else "devices"
    text = f"{request.count} {noun} of class {request.device_class_name}"
    if request.allocation_mode == "All":
        text = f"all {text} on one node (allocationMode All)"
    if request.selectors:
        n = len(request.selectors)
        text += f" matching {n} selector{'s' if n > 1 else ''}"
    if request.capacity_requests:  # consumable capacity: what each device must give
        text += " with " + " and ".join(
            f"{format_quantity(amount)} of {name}" for name, amount in request.capacity_requests
        )
    if request.admin_access:
        text += " (admin access)"
    return text


def _same(pod: _Pod, c: PodConstraint) -> str:
    how = "distinct" if c.distinct else "the same"
    if len(c.requests) == len(pod.requests):
        return f"all with {how} {c.attribute}"
    which = ", ".join(str(r + 1) for r in c.requests)
    return f"requests {which} with {how} {c.attribute}"


def free_for(
    pod: _Pod,
    nodes: tuple[str, ...],
    candidates: Sequence[Mapping[str, Sequence[_Candidate]]],
    limits: dict[CounterKey, int],
    used: dict[CounterKey, int],
    taken: Container[DeviceId],
    attrs: Sequence[dict[DeviceId, AttributeValue]],
) -> str:
    """What the pod needs and what each eligible node has free for it."""
    needs, names, more, bare = named_nodes(pod, nodes, candidates)
    parts = [node_free(pod, node, candidates, limits, used, taken, attrs) for node in names]
    return free_text(needs, parts, more, bare)


def named_nodes(
    pod: _Pod, nodes: tuple[str, ...], candidates: Sequence[Mapping[str, Sequence[_Candidate]]]
) -> tuple[str, tuple[str, ...], int, int]:
    """What the pod needs; the eligible nodes a message names (at most
    ``NODES_NAMED``, sorted), how many more it counts, and how many nodes
    without any matching device it counts (-1: no node is eligible)."""
    needs = " and ".join(needs_text(q) for q in pod.requests) or "no devices"
    needs += "".join(f", {_same(pod, c)}" for c in pod.constraints)
    eligible = [n for n in nodes if pod.nodes is None or n in pod.nodes]
    if not eligible:
        return needs, (), 0, -1
    # nodes without any matching device are counted, not named
    bare = [n for n in eligible if not any(n in candidates[r] for r in range(len(pod.requests)))]
    if pod.requests and len(bare) < len(eligible):
        eligible = [n for n in eligible if n not in bare]
    else:
        bare = []
    more = max(0, len(eligible) - NODES_NAMED)
    return needs, tuple(eligible[:NODES_NAMED]), more, len(bare)


def node_free(
    pod: _Pod,
    node: str,
    candidates: Sequence[Mapping[str, Sequence[_Candidate]]],
    limits: dict[CounterKey, int],
    used: dict[CounterKey, int],
    taken: Container[DeviceId],
    attrs: Sequence[dict[DeviceId, AttributeValue]],
) -> str:
    """What ``node`` has free for the pod: per request its free candidates (not
    taken, their counters not exhausted), per constraint the most sharing a value."""
    free: list[list[DeviceId]] = [
        [
            d.id
            for d in candidates[r].get(node, ())
            if (q.admin_access or d.id not in taken)
            and all(used.get(key, 0) + a <= limits.get(key, 0) for key, a in d.consumes)
        ]
        for r, q in enumerate(pod.requests)
    ]
    counts = [len(ids) for ids in free]
    if len(counts) == 1:
        part = f"{node} has {counts[0]} free"
    else:
        per = ", ".join(
            f"{c} of class {q.device_class_name}" for c, q in zip(counts, pod.requests, strict=True)
        )
        part = f"{node} has free {per}"
    for c, values in zip(pod.constraints, attrs, strict=True):
        groups: dict[AttributeValue, set[DeviceId]] = {}
        for r in c.requests:
            for ident in free[r]:
                groups.setdefault(values[ident], set()).add(ident)
        if c.distinct:
            part += f" ({len(groups)} distinct {c.attribute})"
            continue
        most = max((len(g) for g in groups.values()), default=0)
        part += f" (at most {most} with the same {c.attribute})"
    return part


def free_text(needs: str, parts: Sequence[str], more: int, bare: int) -> str:
    """The message from :func:`named_nodes` and each named node's :func:`node_free`."""
    if bare < 0:
        return f"needs {needs}; no node is eligible"
    out = list(parts)
    if more:
        out.append(f"and {more} more nodes")
    if bare:
        out.append("1 other node has none" if bare == 1 else f"{bare} other nodes have none")
    return f"needs {needs}; {', '.join(out)}"
