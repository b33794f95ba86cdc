"""The optimised wake-up after a release decides exactly what the plain one does.

``Cycles._wake_waiters`` shares the cohort's ``available`` among its queues,
skips a queue whose smallest need exceeds it (when nothing is kept back under
a lending limit) and unparks groups inline. ``PlainWakeFold`` below is the rule
written out as the design page states it: for every freed flavor-resource and
every ClusterQueue of the tree with waiters on it, pop each entry whose need is
at most ``available(queue, fr)`` and wake its group through ``queue.wake``. On
random cohort forests, queueing strategies, lending and borrowing limits,
bursts, finishes, deletes and quota changes, both folds must emit the same
decisions, field for field, and end in the same state.
"""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st
from test_fold_properties import SETTINGS, events, ops, topologies

from kuota.core.fold.fold import Fold
from kuota.core.fold.state import Waiter
from kuota.core.quota.tree import FlavorResource, available


class PlainWakeFold(Fold):
    def _wake_waiters(
        self,
        waiters: dict[FlavorResource, dict[str, list[Waiter]]],
        freed: tuple[tuple[FlavorResource, int], ...],
    ) -> None:
        for fr, _ in freed:
            by_cq = waiters.get(fr, {})
            for cq_name in list(by_cq):
                heap = by_cq[cq_name]
                node = self._tree.queues.get(cq_name)
                queue = self._queues.get(cq_name)
                if node is None or queue is None:
                    del by_cq[cq_name]
                    continue
                free = available(node, fr)
                while heap and heap[0][0] <= free:
                    _, shape, epoch = heapq.heappop(heap)
                    if queue.wake(shape, epoch, fr):
                        self._ready[cq_name] = None
                if not heap:
                    del by_cq[cq_name]
            if fr in waiters and not waiters[fr]:
                del waiters[fr]


@SETTINGS
@given(st.data())
def test_optimised_wakeups_decide_what_plain_wakeups_decide(data: st.DataObject) -> None:
    topology = data.draw(topologies())
    steps = data.draw(ops(topology.queues))
    evs = events(topology, steps, quota_changes=data.draw(st.booleans()))
    fast, plain = Fold(), PlainWakeFold()
    for i, event in enumerate(evs):
        got = [d.model_dump() for d in fast.apply(event, offset=i)]
        want = [d.model_dump() for d in plain.apply(event, offset=i)]
        assert got == want, (i, event)
    assert fast.summary() == plain.summary()
    for name, queue in fast._queues.items():
        assert queue.queued_keys() == plain._queues[name].queued_keys()
        assert [k for k in fast._workloads] == [k for k in plain._workloads]
