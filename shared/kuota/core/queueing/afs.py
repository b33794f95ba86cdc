"""Admission fair sharing: each LocalQueue's decayed usage, in event time.

Theory of operation (Kueue's semantics, docs/design/admission-fair-sharing.md):
with ``Configuration.admissionFairSharing`` set, every LocalQueue keeps
*consumed* resources, an exponential moving average of what its admitted
workloads use. It is *sampled* at every multiple of
``usageSamplingInterval`` (event time: the first event at or past a grid
instant samples at that instant; usage is constant between events, so one
step over ``n`` intervals equals ``n`` steps): ``consumed <- consumed *
(1 - a) + live * a`` with ``a = 1 - 0.5 ** (elapsed / usageHalfLifeTime)``
(half-life 0: consumed is reset to nothing). An admission into a
ClusterQueue with ``admissionScope.admissionMode:
UsageBasedAdmissionFairSharing`` *settles* at once: the same step up to the
admission instant (``live`` includes the new workload), plus an *entry
penalty* of ``a(usageSamplingInterval)`` times the workload's charged
requests, so a burst of submissions is priced before the next sample. A
LocalQueue's *usage* for the order is ``sum(resourceWeight * consumed) /
weight`` (resources in their units, weight 1 when not listed; weight 0:
infinite). Pending workloads of such a ClusterQueue are ordered by their
LocalQueue's usage, lowest first, then by the usual order.

:class:`AfsLedger` is a component the fold holds, like the timers; it reads
no clock (the fold passes event times) and iterates dicts in insertion order
only where the order does not change a result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kuota.api.types import AdmissionFairSharingConfig, LocalQueue
from kuota.core.pickling import register_by_fields
from kuota.quantity import format_quantity

USAGE_BASED = "UsageBasedAdmissionFairSharing"

LqKey = tuple[str, str]  # (namespace, name)
Usage = dict[str, float]  # resource -> milli-units (a decayed amount is fractional)


def alpha(elapsed: float, half_life: float) -> float:
    """The weight of the newest value after ``elapsed`` seconds (Kueue's alpha)."""
    if half_life <= 0:
        return 0.0
    return 1.0 - math.pow(0.5, max(0.0, elapsed) / half_life)


def decayed(old: Usage, live: dict[str, int], elapsed: float, half_life: float) -> Usage:
    """One sampling step: ``old * (1 - a) + live * a``."""
    a = alpha(elapsed, half_life)
    keep = 1.0 - a
    out: Usage = {}
    for res, value in old.items():
        out[res] = value * keep
    for res, qty in live.items():
        out[res] = out.get(res, 0.0) + qty * a
    return out


def weighted_usage(consumed: Usage, weights: dict[str, int], lq_weight: int) -> float:
    """A LocalQueue's usage for the order: the resource-weighted sum of its
    consumed resources (in their units) over its weight (both in milli)."""
    if lq_weight <= 0:
        return math.inf
    total = 0.0
    for res in sorted(consumed):
        total += weights.get(res, 1000) / 1000.0 * (consumed[res] / 1000.0)
    return total / (lq_weight / 1000.0)


def consumed_quantities(consumed: Usage) -> dict[str, str]:
    """Consumed resources as Kubernetes quantities (the LocalQueue status's
    ``consumedResources``), rounded to milli-units, zeros left out."""
    out: dict[str, str] = {}
    for res in sorted(consumed):
        milli = round(consumed[res])
        if milli:
            out[res] = format_quantity(milli)
    return out


@dataclass(slots=True)
class AfsEntry:
    """One LocalQueue's ledger: consumed resources and when they were last decayed."""

    consumed: Usage
    last: float


class AfsLedger:
    """Every LocalQueue's consumed usage and live admitted usage (module docstring)."""

    def __init__(self) -> None:
        self.entries: dict[LqKey, AfsEntry] = {}
        self.live: dict[LqKey, dict[str, int]] = {}  # admitted usage per LocalQueue
        self.next_sample = -math.inf  # the next grid instant to sample at
        self.reported: dict[LqKey, dict[str, str]] = {}  # last consumed announced
        self._weights_of: tuple[tuple[str, int], ...] = ()  # resourceWeights, as a dict:
        self._weights: dict[str, int] = {}

    def entry(self, lq: LqKey, at: float) -> AfsEntry:
        e = self.entries.get(lq)
        if e is None:
            e = self.entries[lq] = AfsEntry({}, at)
        return e

    def add_live(self, lq: LqKey, usage: dict[str, int], sign: int) -> None:
        live = self.live.get(lq)
        if live is None:
            live = self.live[lq] = {}
        for res, qty in usage.items():
            value = live.get(res, 0) + sign * qty
            if value:
                live[res] = value
            else:
                live.pop(res, None)
        if not live:
            del self.live[lq]

    def settle(
        self, config: AdmissionFairSharingConfig, lq: LqKey, requests: dict[str, int], at: float
    ) -> None:
        """An admission into a fair-sharing ClusterQueue (already in ``live``):
        decay up to ``at``, then add the entry penalty."""
        half_life = float(config.usage_half_life_seconds)
        e = self.entry(lq, at)
        if half_life <= 0:
            e.consumed = {}
        else:
            e.consumed = decayed(e.consumed, self.live.get(lq, {}), at - e.last, half_life)
            penalty = alpha(float(config.usage_sampling_interval_seconds), half_life)
            for res, qty in requests.items():
                e.consumed[res] = e.consumed.get(res, 0.0) + qty * penalty
        e.last = max(e.last, at)

    def due(self, at: float) -> bool:
        return at >= self.next_sample

    def sample(
        self, config: AdmissionFairSharingConfig, lqs: dict[LqKey, LocalQueue], at: float
    ) -> float:
        """Sample every known LocalQueue at the last grid instant at or before
        ``at``; returns that instant. LocalQueues first seen start then."""
        interval = float(max(1, config.usage_sampling_interval_seconds))
        grid = math.floor(at / interval) * interval
        half_life = float(config.usage_half_life_seconds)
        # A LocalQueue first seen starts with nothing at the previous sample: the
        # events since left its live usage as it is now (it counts from there).
        start = grid if self.next_sample == -math.inf else min(grid, self.next_sample - interval)
        for lq in lqs:
            e = self.entries.get(lq)
            if e is None:
                e = self.entries[lq] = AfsEntry({}, start)
            if half_life <= 0:
                e.consumed = {}
            elif grid > e.last:
                e.consumed = decayed(e.consumed, self.live.get(lq, {}), grid - e.last, half_life)
            e.last = max(e.last, grid)
        for lq in [k for k in self.entries if k not in lqs]:
            del self.entries[lq]  # a deleted LocalQueue's history goes with it, as in Kueue
            self.reported.pop(lq, None)
        self.next_sample = grid + interval
        return grid

    def usage(self, config: AdmissionFairSharingConfig, lq: LqKey, lq_weight: int) -> float:
        e = self.entries.get(lq)
        if e is None or not e.consumed:
            return 0.0 if lq_weight > 0 else math.inf
        if config.resource_weights != self._weights_of:
            self._weights_of = config.resource_weights
            self._weights = dict(config.resource_weights)
        return weighted_usage(e.consumed, self._weights, lq_weight)


register_by_fields(AfsEntry)
