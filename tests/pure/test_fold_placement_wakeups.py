"""Waking placement waiters by question decides exactly what waking each does.

``DeviceHolds._wake_unplaced`` keeps the heads that no node could take grouped
by the question they ask (their pods' shapes and node sets), asks each question
once per release, with the fold's FitMemo, and wakes its waiters in the order
they were set aside. ``PlainPlacementWakeFold`` below is the rule as the design
page states it: at every release, every waiter, in order, is asked on its own
pods, without the memo, and woken when one of its pods fits alone on a node
where devices were freed (and its whole gang passes the placement's
prunings). ``make bench-core``'s trace with its Nodes, made small (8 nodes, 8
queues, 400 Jobs), must give the same decisions through both, and have heads
woken for placement (else the rule was never asked).
"""

from __future__ import annotations

from typing import Any

from test_fold_fit_memo import small_bench_trace

from kuota.core.dra.placement import device_nodes
from kuota.core.dra.placement_types import Taken
from kuota.core.fold.fold import Fold
from kuota.core.fold.node_fit import fits_on
from kuota.sim.engine import Simulator


class PlainPlacementWakeFold(Fold):
    woken = 0

    def _wake_unplaced(self, freed: Any = None) -> None:
        if freed is None or not self._placement_waiters:
            super()._wake_unplaced(freed)
            return
        where = device_nodes(self._inventory)
        nodes = {where[d] for d in freed if d in where}
        if not nodes:
            return
        taken = Taken(self._devices_held, self._claimed)
        consumed = self._counters_taken()
        woken: dict[tuple[str, int], int] = {}
        for key, (epoch, pods, whole, question) in list(self._placement_waiters.items()):
            if fits_on(
                inventory=self._inventory,
                pods=pods,
                nodes=nodes,
                taken=taken,
                consumed=consumed,
                whole=whole,
            ):
                woken[key] = epoch
                del self._placement_waiters[key]
                number = question[2]  # type: ignore[index]
                self._asking[number][1].pop(key)
                if not self._asking[number][1]:
                    del self._asking[number]
        PlainPlacementWakeFold.woken += len(woken)
        if woken:
            self._wake_searchers(woken)


def _decisions(fold: Fold) -> list[str]:
    out = []
    for step in Simulator(small_bench_trace(), fold=fold).steps():
        out.extend(d.model_dump_json() for d in step.decisions)
    return out


def test_waking_by_question_decides_what_waking_each_waiter_decides() -> None:
    PlainPlacementWakeFold.woken = 0
    grouped = _decisions(Fold())
    plain = _decisions(PlainPlacementWakeFold())
    assert grouped == plain
    assert PlainPlacementWakeFold.woken > 20
    assert sum('"Admitted"' in d for d in grouped) == 400
