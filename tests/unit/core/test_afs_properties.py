"""Properties of admission fair sharing over random inputs.

1. A fair queue's order is a total order: whatever the push order and however
   lane ranks change on the way, it hands out heads by (lane rank, priority,
   creation, key), and its visible order (``queued_keys``) is the same.
2. Replaying the same events through a fair ClusterQueue gives the same
   decisions; a pickle of the fold taken mid-way continues exactly as the
   original (the ledger, lanes and ranks are state like any other).
"""

from __future__ import annotations

import pickle
from typing import Any

from builders import manifests
from core_builders import cq, flavor, job, lq, manifest, wpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.core.fold.fold import Fold
from kuota.core.queueing.queues import ClusterQueueQueue, OrderKey
from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectUpserted,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LANES = ("a/lq", "b/lq", "c/lq")
RANKS = st.sampled_from([0.0, 0.5, 1.0, 2.0, float("inf")])


@given(st.data())
@SETTINGS
def test_a_fair_queue_hands_out_heads_in_one_total_order(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    items: list[tuple[OrderKey, str, int]] = []
    for i in range(n):
        lane_i = data.draw(st.integers(0, 2))
        priority = data.draw(st.sampled_from([0, 100]))
        created = float(data.draw(st.integers(0, 3)))
        # a shape per (lane, priority), as the fold gives fair queues
        items.append(((-priority, created, f"w{i}"), LANES[lane_i], lane_i * 2 + (priority > 0)))
    items = data.draw(st.permutations(items))
    ranks = {lane: data.draw(RANKS) for lane in LANES}
    q = ClusterQueueQueue()
    q.set_fair(True, {})
    for order, lane, shape in items:
        if data.draw(st.booleans()):  # ranks change while workloads arrive
            lane2 = data.draw(st.sampled_from(LANES))
            ranks[lane2] = data.draw(RANKS)
            q.set_rank(lane2, ranks[lane2])
        q.push(order, shape, lane)
    for lane in LANES:
        q.set_rank(lane, ranks[lane])
    want = [o[2] for _, o in sorted((ranks[lane], o) for o, lane, _ in items)]
    assert q.queued_keys() == want
    got = []
    while (head := q.head()) is not None:
        order, shape = head
        got.append(order[2])
        q.remove(order[2], shape)
    assert got == want


def events(data: st.DataObject) -> list[JournalEvent]:
    objs: list[dict[str, Any]] = [
        manifests.configuration(
            admissionFairSharing={
                "usageHalfLifeTime": data.draw(st.sampled_from(["0s", "10m", "1h"])),
                "usageSamplingInterval": data.draw(st.sampled_from(["1m", "5m"])),
                "resourceWeights": {"cpu": data.draw(st.sampled_from([1, 2]))},
            }
        ),
        manifest(flavor("f")),
        manifest(wpc("high", 100)),
    ]
    q = (
        cq("cq")
        .flavor("f", cpu=data.draw(st.integers(1, 4)))
        .strategy(data.draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])))
    )
    q.m["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    objs.append(manifest(q))
    for ns in ("a", "b", "c"):
        local = lq(ns, "lq", "cq")
        weight = data.draw(st.sampled_from([None, "0", "1", "3"]))
        if weight is not None:
            local.m["spec"]["fairSharing"] = {"weight": weight}
        objs.append(manifest(local))
    out: list[JournalEvent] = [
        ObjectUpserted(id=f"o{i}", at=0.0, object=o) for i, o in enumerate(objs)
    ]
    t = 0.0
    jobs: list[str] = []
    for i in range(data.draw(st.integers(1, 25))):
        t += data.draw(st.sampled_from([0.0, 30.0, 120.0, 900.0]))
        what = data.draw(st.sampled_from(["job", "job", "finish", "tick"]))
        if what == "job" or not jobs:
            ns = data.draw(st.sampled_from(["a", "b", "c"]))
            j = job(ns, f"j{i}").queue("lq").requests(cpu=data.draw(st.integers(1, 2)))
            if data.draw(st.booleans()):
                j = j.priority("high")
            jobs.append(f"{ns}/j{i}")
            out.append(ObjectUpserted(id=f"e{i}", at=t, object=manifest(j.created(t))))
        elif what == "finish":
            key = data.draw(st.sampled_from(jobs))
            ns, _, name = key.partition("/")
            out.append(WorkloadFinished(id=f"e{i}", at=t, namespace=ns, name=name, succeeded=True))
        else:
            out.append(Tick(id=f"e{i}", at=t))
    return out


def run(fold: Fold, evs: list[JournalEvent]) -> list[Decision]:
    decided: list[Decision] = []
    for ev in evs:
        out = fold.apply(ev)
        decided += out
        for d in out:
            if d.type == "Preempted" or (d.type == "Finished" and d.reason == "Deleted"):
                decided += fold.apply(
                    WorkloadStopped(
                        id=f"{d.id}-s",
                        at=ev.at,
                        workload=d.workload or "",
                        uid=d.uid or "",
                        decision_id=d.id,
                    )
                )
    return decided


@given(st.data())
@SETTINGS
def test_replay_and_a_snapshot_give_the_same_decisions(data: st.DataObject) -> None:
    evs = events(data)
    first = run(Fold(), evs)
    assert run(Fold(), evs) == first
    cut = data.draw(st.integers(0, len(evs)))
    fold = Fold()
    before = run(fold, evs[:cut])
    restored: Fold = pickle.loads(pickle.dumps(fold))
    assert before + run(restored, evs[cut:]) == first
    # the queue order it shows is the order by usage: lowest first
    rows = restored.local_queue_usage("cq")
    assert [u for _, u, _ in rows] == sorted(u for _, u, _ in rows)
