"""Node-aware preemption (#17), as properties over small clusters: 2-3 nodes of
1-3 GPUs, full of 1-GPU Jobs of random priorities (some not preemptable), and a
preemptor that needs 1-3 GPUs on one node, in a ClusterQueue whose quota is all
the GPUs (so quota never lacks where a node has room).

- a brute force over the nodes decides whether some node can be freed (its free
  GPUs and its preemptable Jobs' make the count): then the preemptor is
  admitted on such a node and every victim is on it; else no one is evicted
  and it waits NoNodePlacement (or for quota, when even all preemptable Jobs
  together do not free enough);
- plans mode chooses the same victims and the same node as inline mode."""

from __future__ import annotations

from typing import Any

from builders import manifests
from core_builders import Driver, admitted, claim_template, cq, last, wpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fold_node_placement import GPU, cluster, gpu_job, gpus

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NODES = ("node-a", "node-b", "node-c")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    """(GPUs per node, each Job's priority in admission order, Jobs, GPUs the
    preemptor needs): the Jobs fill some of the GPUs first fit."""
    sizes = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=3)))
    total = sum(sizes)
    jobs = draw(st.integers(total - 1, total))
    priorities = tuple(
        draw(st.lists(st.sampled_from((1, 2, 5, 100)), min_size=jobs, max_size=jobs))
    )
    need = draw(st.integers(1, min(3, total)))
    return sizes, priorities, jobs, need


def build(
    mode: str, sizes: tuple[int, ...], priorities: tuple[int, ...]
) -> tuple[Driver, dict[str, str]]:
    """The cluster and each Job's node."""
    d = Driver(Fold(preemption=mode))
    base = cluster(*(gpus(n, s) for n, s in zip(NODES, sizes, strict=False)), quota=sum(sizes))
    for event in base.events:
        d.feed(event)
    d.n, d.t = base.n, base.t
    queue = cq("cq").flavor("default", {"nvidia-gpu": sum(sizes)})
    queue.m["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    d.apply(
        *(manifests.node(n) for n in NODES[2 : len(sizes)]),  # cluster knows a and b
        queue,
        *(wpc(f"p{p}", p) for p in (1, 2, 5, 100)),
        *(claim_template("team-a", f"k{k}", GPU, count=k) for k in (1, 2, 3)),
    )
    where: dict[str, str] = {}
    for i, p in enumerate(priorities):
        out = d.apply(gpu_job(f"j{i}").priority(f"p{p}"))
        assert admitted(out) == [f"team-a/j{i}"]
        (where[f"team-a/j{i}"],) = last(out, "Admitted").nodes["main"]
    return d, where


def plan_now(d: Driver) -> list[Decision]:
    out: list[Decision] = []
    while plans := d.fold.preemption_plans():
        for plan in plans:
            out += d.plan(plan.preemptor, list(plan.victims))
    return out


def run(mode: str, case: tuple[tuple[int, ...], tuple[int, ...], int, int]) -> tuple[Any, ...]:
    sizes, priorities, _, need = case
    d, where = build(mode, sizes, priorities)
    out = d.apply(gpu_job("big", template=f"k{need}").priority("p100"))
    if mode == "plans":
        out += plan_now(d)
    victims = sorted(
        x.workload or "" for x in out if x.type == "Preempted" and x.preemptor == "team-a/big"
    )
    got = [x for x in out if x.type == "Admitted" and x.workload == "team-a/big"]
    nodes = got[-1].nodes["main"] if got else None
    waits = [x.reason for x in out if x.type == "Inadmissible" and x.workload == "team-a/big"]
    return victims, nodes, waits, where


@SETTINGS
@given(clusters())
def test_victims_free_a_node_exactly_when_one_can_be_freed(
    case: tuple[tuple[int, ...], tuple[int, ...], int, int],
) -> None:
    sizes, priorities, _, need = case
    victims, nodes, waits, where = run("inline", case)
    room: dict[str, int] = dict(zip(NODES, sizes, strict=False))
    for key, node in where.items():
        if priorities[int(key.split("/j")[1])] >= 100:
            room[node] -= 1  # not preemptable
    possible = [n for n, free in room.items() if free >= need]
    if possible:
        assert nodes is not None and len(nodes) == 1 and nodes[0] in possible, (victims, nodes)
        assert all(where[v] == nodes[0] for v in victims), (victims, nodes, where)
    else:
        assert victims == [] and nodes is None
        # quota alone lacks when even every preemptable Job's GPU is not enough
        quota = sum(room.values()) >= need
        assert waits[-1] == ("NoNodePlacement" if quota else "InsufficientQuota")


@SETTINGS
@given(clusters())
def test_plans_mode_chooses_the_victims_and_node_of_inline_mode(
    case: tuple[tuple[int, ...], tuple[int, ...], int, int],
) -> None:
    inline = run("inline", case)
    plans = run("plans", case)
    assert plans[:2] == inline[:2]


def test_the_cluster_builder_places_first_fit() -> None:
    _, where = build("inline", (1, 2), (1, 1, 1))
    assert where == {"team-a/j0": "node-a", "team-a/j1": "node-b", "team-a/j2": "node-b"}
    _, where = build("inline", (1, 1, 1), (1, 1, 1))
    assert sorted(where.values()) == ["node-a", "node-b", "node-c"]
