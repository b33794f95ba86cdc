"""The fold's FitMemo changes no decision (#17, bench-core with Nodes).

``make bench-core``'s trace with its Nodes, made small (8 nodes, 8 queues,
400 Jobs of whole GPUs, gangs and MIG slices fragmenting the GPUs' counters),
is folded twice: once as the fold runs, keeping which pods fit alone on which
nodes from one event to the next, and once with that memory dropped after
every event. Both must decide the same, and the trace must have heads that no
node could take (else the memo would never have been asked).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kuota.core.dra.placement import FitMemo
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent
from kuota.sim.engine import Simulator

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import bench_core


def small_bench_trace() -> list[dict[str, Any]]:
    """``bench_core``'s trace with its Nodes, small: 8 nodes, 8 queues, 400 Jobs."""
    shape = dict(queues=8, gpu_quota=8, mig_quota_gi=40)
    manifests = bench_core.cluster(
        cohorts=2, nodes=8, share_quota_gi=0, afs_local_queues=0, with_nodes=True, **shape
    )
    return manifests + bench_core.jobs(count=400, load=1.0, seed=3, **shape)


class _Forgetful:
    """The fold, its FitMemo replaced by an empty one after every event."""

    def __init__(self) -> None:
        self.fold = Fold()
        self.next_wakeup = self.fold.next_wakeup

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]:
        out = self.fold.apply(event, offset=offset)
        self.fold._fit_memo = FitMemo()
        return out


def _decisions(fold: Any) -> list[str]:
    out = []
    for step in Simulator(small_bench_trace(), fold=fold).steps():
        out.extend(d.model_dump_json(exclude={"id"}) for d in step.decisions)
    return out


def test_remembering_which_pods_fit_where_changes_no_decision() -> None:
    kept = _decisions(Fold())
    forgot = _decisions(_Forgetful())
    assert kept == forgot
    assert sum('"NoNodePlacement"' in d for d in kept) > 20
    assert sum('"Admitted"' in d for d in kept) == 400
