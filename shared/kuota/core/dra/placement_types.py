"""The types the gang placement shares between its modules (issue #17).

``DeviceId`` and ``CounterKey`` name devices and counters; :class:`GangPod` is
one pod of a gang (kuota.core.dra.placement, ``place_gang``);
:class:`SearchDevice` is a candidate device with what it consumes; the
aliases are the search's per-pod tables. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.placement_rules import AttributeValue, PodConstraint

DeviceId = tuple[str, str, str]  # (driver, pool, device name)
CounterKey = tuple[str, str, str, str]  # (driver, pool, counter set, counter)


@dataclass(frozen=True, slots=True)
class GangPod:
    """One pod of the gang: its device requests and the nodes it may use;
    ``constraints``: its claims' matchAttribute constraints; ``claims``: per
    request, the index of its claim (() : each request a claim of its own)."""

    requests: tuple[ExactDeviceRequest, ...] = ()
    nodes: frozenset[str] | None = None  # None: every node
    constraints: tuple[PodConstraint, ...] = ()
    claims: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchDevice:
    id: DeviceId
    consumes: tuple[tuple[CounterKey, int], ...]


Candidates = tuple[tuple[dict[str, tuple[SearchDevice, ...]], ...], ...]  # pod -> request -> node
ByNode = dict[str, tuple[SearchDevice, ...]]  # node -> its matching devices, sorted
Attrs = tuple[tuple[dict[DeviceId, AttributeValue], ...], ...]  # pod -> constraint -> values


@dataclass(frozen=True, slots=True)
class PodPlacement:
    node: str
    devices: tuple[tuple[DeviceId, ...], ...]  # per request, in request order
