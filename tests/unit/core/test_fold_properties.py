"""Properties of the fold over random topologies and event sequences.

1. Usage never exceeds a ClusterQueue's nominal quota + borrowing limit, nor a
   root cohort's subtree quota, after every event; the usage the decisions add
   up to equals the fold's (a stopped workload's usage counted until its
   ``QuotaReleased``, the actuator's ``WorkloadStopped`` coming 0-3 events after
   the stop); the cohort tree's incremental usage equals a rebuild; and nothing
   admissible is left waiting (the precise wake-ups miss nothing).
2. Replaying the same events (the pods-gone reports included) gives the same
   decisions; a deepcopy or a pickle of the fold taken mid-way continues
   exactly as the original.
3. Queue objects given at the same time, in any order, before any Job, give the
   same decisions.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from typing import Any

from core_builders import cohort, cq, flavor, job, lq, manifest, wpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.core.assign.flavors import assign_flavors
from kuota.core.fold.fold import Fold
from kuota.core.quota.tree import QuotaTree
from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
)

STOPS = frozenset({"Preempted", "Evicted", "Deactivated"})

FLAVORS = ("f1", "f2")
PRIORITIES = ("low", "high")
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Topology:
    objects: tuple[dict[str, Any], ...]  # flavors, cohorts, queues, local queues, priorities
    queues: int


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    objs: list[dict[str, Any]] = [manifest(flavor(f)) for f in FLAVORS]
    objs += [manifest(wpc("low", 0)), manifest(wpc("high", 100))]
    hierarchical = draw(st.booleans())
    objs.append(manifest(cohort("root").flavor("f1", cpu=draw(st.integers(0, 3)))))
    if hierarchical:
        child = cohort("child").parent("root")
        if draw(st.booleans()):
            child = child.flavor("f1", cpu=(0, draw(st.integers(0, 3))))
        objs.append(manifest(child))
    n = draw(st.integers(1, 4))
    for i in range(n):
        where = draw(st.sampled_from([None, "root", "child"] if hierarchical else [None, "root"]))
        q = cq(f"q{i}").strategy(draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])))
        if where:
            q = q.cohort(where)
        flavors = draw(st.sampled_from([("f1",), ("f1", "f2"), ("f2", "f1")]))
        for f in flavors:
            nominal = draw(st.integers(0, 6))
            borrowing = draw(st.none() | st.integers(0, 4)) if where else None
            lending = draw(st.none() | st.integers(0, nominal)) if where else None
            q = q.flavor(f, cpu=(nominal, borrowing, lending))
        if draw(st.booleans()):
            q = q.fungibility(borrow="TryNextFlavor")
        objs.append(manifest(q))
        objs.append(manifest(lq(f"ns{i}", "lq", f"q{i}")))
    return Topology(tuple(objs), n)


Op = tuple[str, int, int, int, int]  # (kind, a, b, c, d)


def ops(queues: int) -> st.SearchStrategy[list[Op]]:
    create = st.tuples(
        st.just("create"),
        st.integers(0, queues - 1),  # queue
        st.integers(0, 4),  # cpu per pod
        st.integers(1, 3),  # pods
        st.integers(0, 1),  # priority
    )
    finish = st.tuples(st.just("finish"), st.integers(0, 60), st.just(0), st.just(0), st.just(0))
    delete = st.tuples(st.just("delete"), st.integers(0, 60), st.just(0), st.just(0), st.just(0))
    tick = st.tuples(st.just("tick"), st.just(0), st.just(0), st.just(0), st.just(0))
    quota = st.tuples(
        st.just("quota"), st.integers(0, queues - 1), st.integers(0, 8), st.just(0), st.just(0)
    )
    # Bursts of Jobs, then finishes that free quota for several heads at once.
    burst = st.lists(create, min_size=1, max_size=6)
    singles = st.lists(st.one_of(finish, finish, delete, tick, quota), min_size=1, max_size=4)
    rounds = st.lists(st.tuples(burst, singles), min_size=2, max_size=8)
    return rounds.map(lambda rs: [op for b, s in rs for op in (*b, *s)])


def events(topology: Topology, steps: list[Op], *, quota_changes: bool) -> list[JournalEvent]:
    out: list[JournalEvent] = []
    for o in topology.objects:
        kind, name = o["kind"], o["metadata"]["name"]
        ns = o["metadata"].get("namespace", "")
        out.append(ObjectUpserted(id=f"setup/{kind}/{ns}/{name}", at=0.0, object=o))
    created: list[tuple[str, str]] = []
    t = 1.0
    for i, (kind, a, b, c, d) in enumerate(steps):
        t += 1.0
        eid = f"e{i}"
        if kind == "create":
            name = f"j{len(created)}"
            j = job(f"ns{a}", name).queue("lq").requests(cpu=b).parallelism(c)
            j = j.priority(PRIORITIES[d]).created(t)
            created.append((f"ns{a}", name))
            out.append(ObjectUpserted(id=eid, at=t, object=manifest(j)))
        elif kind in ("finish", "delete") and created:
            ns, name = created[a % len(created)]
            if kind == "finish":
                out.append(WorkloadFinished(id=eid, at=t, namespace=ns, name=name))
            else:
                out.append(ObjectDeleted(id=eid, at=t, kind="Job", name=name, namespace=ns))
        elif kind == "quota" and quota_changes:
            q = next(o for o in topology.objects if o["metadata"]["name"] == f"q{a}")
            q = copy.deepcopy(q)
            q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = b
            for res in q["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
                if res.get("lendingLimit", 0) > b:
                    res["lendingLimit"] = b
            out.append(ObjectUpserted(id=eid, at=t, object=q))
        else:
            out.append(Tick(id=eid, at=t))
    return out


def with_stops(
    fold: Fold, evs: list[JournalEvent], delays: list[int]
) -> tuple[list[JournalEvent], list[Decision]]:
    """Apply ``evs``, answering every stop decision with its WorkloadStopped
    ``delays[i]`` events later (the i-th stop; the rest at the end, at once); the
    events as applied and the decisions."""
    applied: list[JournalEvent] = []
    decisions: list[Decision] = []
    pending: list[tuple[int, WorkloadStopped]] = []
    stops = 0

    def feed(event: JournalEvent) -> None:
        nonlocal stops
        applied.append(event)
        for d in fold.apply(event):
            decisions.append(d)
            if d.type in STOPS or (d.type == "Finished" and d.reason == "Deleted"):
                assert d.workload is not None
                delay = delays[stops] if stops < len(delays) else 0
                stops += 1
                report = WorkloadStopped(
                    id=f"stopped/{d.id}",
                    at=event.at,
                    workload=d.workload,
                    uid=d.uid or "",
                    decision_id=d.id,
                )
                pending.append((len(applied) + delay, report))

    for event in evs:
        feed(event)
        while due := [p for p in pending if p[0] <= len(applied)]:
            pending.remove(due[0])
            feed(due[0][1].model_copy(update={"at": max(due[0][1].at, event.at)}))
    while pending:
        feed(pending.pop(0)[1].model_copy(update={"at": applied[-1].at}))
    return applied, decisions


def key(d: Decision) -> tuple[Any, ...]:
    return (d.id, d.cause, d.type, d.workload, d.reason, d.message, d.flavors, d.usage, d.object)


# --------------------------------------------------------------------------- 1. bounds


def check_bounds(fold: Fold, decided: dict[str, dict[tuple[str, str], int]]) -> None:
    tree: QuotaTree = fold._tree
    for name, node in tree.queues.items():
        for fr, limits in node.limits.items():
            used = node.usage.get(fr, 0)
            if node.parent is None:
                assert used <= limits.nominal, (name, fr)
            elif limits.borrowing_limit is not None:
                assert used <= limits.nominal + limits.borrowing_limit, (name, fr)
    for name, node in tree.cohorts.items():
        for fr, used in node.usage.items():
            if node.parent is None:
                assert used <= node.subtree.get(fr, 0), (name, fr)
    # The decisions add up to the fold's usage.
    for s in fold.summary():
        want = {(r.flavor, r.resource): r.usage for r in s.resources if r.usage}
        got = {fr: v for fr, v in decided.get(s.name, {}).items() if v}
        assert got == want, s.name
    # Incremental cohort usage equals a rebuild from the queues' usage.
    rebuilt = copy.deepcopy(tree)
    rebuilt._rebuild()
    for name, node in tree.cohorts.items():
        assert {k: v for k, v in node.usage.items() if v} == {
            k: v for k, v in rebuilt.cohorts[name].usage.items() if v
        }, name


def check_nothing_admissible_waits(fold: Fold) -> None:
    """Liveness: after the cycles of an event, no queued workload that Kueue would
    try (any in a BestEffortFIFO queue, the head of a StrictFIFO one) fits."""
    for name, queue in fold._queues.items():
        if name in fold._inactive:
            continue
        keys = queue.queued_keys()
        if queue.strategy == "StrictFIFO":
            keys = keys[:1]
        for k in keys:
            rec = fold._workloads[k]
            got = assign_flavors(
                view=fold._views[name],
                node=fold._tree.queues[name],
                flavors=fold._flavors,
                podsets=rec.requests,
            )
            assert not got.fits, (name, k)


def parse_usage(d: Decision) -> dict[tuple[str, str], int]:
    from kuota.quantity import parse_quantity

    return {
        (flavor_name, res): parse_quantity(q)
        for flavor_name, per in (d.usage or {}).items()
        for res, q in per.items()
    }


@SETTINGS
@given(st.data())
def test_usage_stays_within_limits(data: st.DataObject) -> None:
    topology = data.draw(topologies())
    steps = data.draw(ops(topology.queues))
    delays = data.draw(st.lists(st.integers(0, 3), max_size=40))
    evs, _ = with_stops(Fold(), events(topology, steps, quota_changes=False), delays)
    fold = Fold()
    decided: dict[str, dict[tuple[str, str], int]] = {}
    charged: dict[str, tuple[str, dict[tuple[str, str], int]]] = {}
    draining: dict[str, tuple[str, dict[tuple[str, str], int]]] = {}  # stop id -> its usage
    for event in evs:
        for d in fold.apply(event):
            assert d.workload is not None or d.type in ("Rejected", "QuotaChanged")
            if d.type == "Admitted":
                assert d.cluster_queue is not None and d.workload not in charged
                usage = parse_usage(d)
                charged[d.workload] = (d.cluster_queue, usage)
                per = decided.setdefault(d.cluster_queue, {})
                for fr, v in usage.items():
                    per[fr] = per.get(fr, 0) + v
            elif d.type == "Finished" and d.reason != "Deleted" and d.workload in charged:
                q, usage = charged.pop(d.workload)
                for fr, v in usage.items():
                    decided[q][fr] -= v
            elif d.type in ("Finished", *STOPS) and d.workload in charged:
                draining[d.id] = charged.pop(d.workload)  # kept until its pods are gone
            elif d.type == "QuotaReleased":
                assert d.stop_id is not None
                q, usage = draining.pop(d.stop_id)
                assert q == d.cluster_queue and usage == parse_usage(d)
                for fr, v in usage.items():
                    decided[q][fr] -= v
            assert d.type != "Rejected", d.message
        check_bounds(fold, decided)
        check_nothing_admissible_waits(fold)
    assert not draining and not fold._drains  # every stop was answered and released


# --------------------------------------------------------------------------- 2. replay


@SETTINGS
@given(st.data())
def test_replay_and_snapshots_give_the_same_decisions(data: st.DataObject) -> None:
    topology = data.draw(topologies())
    steps = data.draw(ops(topology.queues))
    delays = data.draw(st.lists(st.integers(0, 3), max_size=40))
    evs, _ = with_stops(Fold(), events(topology, steps, quota_changes=True), delays)
    cut = data.draw(st.integers(0, len(evs)))

    first = Fold()
    want = [key(d) for e in evs for d in first.apply(e)]

    second = Fold()
    got = [key(d) for e in evs[:cut] for d in second.apply(e)]
    copied = copy.deepcopy(second)
    pickled = pickle.loads(pickle.dumps(second))
    rest = evs[cut:]
    tail = [key(d) for e in rest for d in second.apply(e)]
    assert got + tail == want
    assert [key(d) for e in rest for d in copied.apply(e)] == tail
    assert [key(d) for e in rest for d in pickled.apply(e)] == tail
    assert copied.summary() == second.summary() == first.summary()


# --------------------------------------------------------------------------- 3. reordering


@SETTINGS
@given(st.data())
def test_reordering_independent_objects_changes_nothing(data: st.DataObject) -> None:
    topology = data.draw(topologies())
    steps = data.draw(ops(topology.queues))
    evs = events(topology, steps, quota_changes=False)
    setup, rest = evs[: len(topology.objects)], evs[len(topology.objects) :]
    shuffled = data.draw(st.permutations(setup))

    def run(order: list[JournalEvent]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        fold = Fold()
        before = sorted(key(d) for e in order for d in fold.apply(e))
        return before, [key(d) for e in rest for d in fold.apply(e)]

    assert run(list(shuffled)) == run(setup)
