"""History-aware fair sharing: each ClusterQueue's decayed share, in event time.

Theory of operation (kuota's own, beyond Kueue; docs/design/fair-sharing-history.md):
a root Cohort annotated ``kuota.dev/fair-sharing-history-half-life`` and/or
``kuota.dev/fair-sharing-history-weight`` opts its whole tree in. Every
ClusterQueue of such a tree keeps ``history``, an exponential moving average
of its Dominant Resource Share (what it borrows, over what the cohort could
lend, over its weight), sampled every :data:`INTERVAL` seconds of event time:
the first event at or past a grid instant samples at that instant; usage is
constant between events, so one step over ``n`` intervals is ``n`` steps. The
DRS that orders admissions and fair-sharing preemption is then the current
share plus ``w * history`` (``w`` the tree's weight): a queue that borrowed
much lately yields to one that did not, until their histories even out. With
``w = 0`` (or no annotation) it is exactly today's DRS; a ClusterQueue that
never borrows has no history; a weight-0 ClusterQueue keeps its infinite share.
Cohorts' own shares are unchanged. :meth:`UsageHistory.view` gives the
rounded history the shares read, fixed between samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kuota.api.types import Cohort
from kuota.core.quota.fairshare import Weights, dominant_resource_share
from kuota.core.quota.tree import QuotaTree

INTERVAL = 60.0  # seconds of event time between samples


def tree_settings(tree: QuotaTree, cohorts: Mapping[str, Cohort]) -> dict[str, tuple[int, int]]:
    """ClusterQueue -> (half-life seconds, weight milli) of its root cohort, for
    the ClusterQueues of opted-in trees only."""
    out: dict[str, tuple[int, int]] = {}
    for name in sorted(tree.queues):
        node = tree.queues[name]
        if node.parent is None:
            continue
        root = cohorts.get(node.root().name)
        if root is not None and root.history_half_life_seconds > 0:
            out[name] = (root.history_half_life_seconds, root.history_weight)
    return out


class UsageHistory:
    """Every opted-in ClusterQueue's decayed share (module docstring)."""

    def __init__(self) -> None:
        self.share: dict[str, float] = {}  # ClusterQueue -> decayed share (x1000 of DRS)
        self.last: dict[str, float] = {}
        self.next_sample = -math.inf
        self.weights: dict[str, int] = {}  # ClusterQueue -> history weight (milli), w > 0
        self.rounded: dict[str, int] = {}  # ClusterQueue -> round(share * 1000), nonzero

    def due(self, at: float) -> bool:
        return at >= self.next_sample

    def sample(
        self,
        tree: QuotaTree,
        settings: Mapping[str, tuple[int, int]],
        plain: Weights,
        at: float,
    ) -> None:
        """Decay every opted-in ClusterQueue's history to the last grid instant,
        toward its current (plain) share."""
        grid = math.floor(at / INTERVAL) * INTERVAL
        # A new member starts with no past at the previous sample (it joined since):
        # the events in between left the tree as it is now, so it counts from there.
        start = grid if self.next_sample == -math.inf else self.next_sample - INTERVAL
        for name in [n for n in self.share if n not in settings]:
            del self.share[name]
            self.last.pop(name, None)
        for name, (half_life, _) in settings.items():
            old = self.share.get(name)
            if old is None:
                old = self.share[name] = 0.0
                self.last[name] = start
            elapsed = grid - self.last[name]
            if elapsed <= 0:
                continue
            now = dominant_resource_share(tree.queues[name], plain)
            value = 0.0 if now.infinite else float(now.value)
            keep = math.pow(0.5, elapsed / half_life)
            self.share[name] = old * keep + value * (1.0 - keep)
            self.last[name] = grid
        self.weights = {n: w for n, (_, w) in settings.items() if w > 0}
        rounded: dict[str, int] = {}
        for name in sorted(self.weights):
            milli = round(self.share[name] * 1000)
            if milli:
                rounded[name] = milli
        self.rounded = rounded
        self.next_sample = grid + INTERVAL

    def view(self) -> tuple[Mapping[str, int], Mapping[str, int]]:
        """(history, weight) per ClusterQueue whose DRS counts history."""
        return self.rounded, self.weights
