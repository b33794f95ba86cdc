"""Admission fair sharing (Kueue's semantics): LocalQueues' decayed usage
orders the pending workloads of a UsageBasedAdmissionFairSharing
ClusterQueue; samples at the interval, entry penalties, weights, visibility.
docs/design/admission-fair-sharing.md."""

from __future__ import annotations

import math
from typing import Any

import pytest
from builders import manifests
from core_builders import Driver, cq, flavor, job, lq

from kuota.core.queueing.afs import alpha, decayed, weighted_usage

HOUR = 3600.0


def afs_config(half_life: str = "1h", interval: str = "5m", **weights: float) -> dict[str, Any]:
    section: dict[str, Any] = {"usageHalfLifeTime": half_life, "usageSamplingInterval": interval}
    if weights:
        section["resourceWeights"] = {k.replace("_", "."): v for k, v in weights.items()}
    return manifests.configuration(admissionFairSharing=section)


def fair_cq(name: str = "cq", cpu: Any = 4, fair: bool = True) -> Any:
    b = cq(name).flavor("default", cpu=cpu)
    if fair:
        b.m["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    return b


def weighted_lq(namespace: str, name: str, weight: str | None = None) -> Any:
    b = lq(namespace, name, "cq")
    if weight is not None:
        b.m["spec"]["fairSharing"] = {"weight": weight}
    return b


def cpu_job(ns: str, name: str, created: float, cpu: Any = 1) -> Any:
    return job(ns, name).queue("lq").requests(cpu=cpu).created(created)


def setup(*, config: bool = True, fair: bool = True, weight_b: str | None = None) -> Driver:
    d = Driver()
    objs: list[Any] = [flavor("default"), fair_cq(fair=fair)]
    if config:
        objs.insert(0, afs_config())
    objs += [weighted_lq("a", "lq"), weighted_lq("b", "lq", weight_b)]
    d.apply(*objs, at=0.0)
    return d


def admitted_order(d: Driver) -> list[str]:
    return [x.workload or "" for x in d.decisions if x.type == "Admitted"]


# --------------------------------------------------------------------------- the rules


def test_alpha_is_kueues_half_life_weight() -> None:
    assert alpha(3600, 3600) == pytest.approx(0.5)
    assert alpha(7200, 3600) == pytest.approx(0.75)
    assert alpha(0, 3600) == 0.0
    assert alpha(300, 0) == 0.0  # half-life 0: no history at all
    assert alpha(-5, 3600) == 0.0  # never negative


@pytest.mark.parametrize(
    ("old", "live", "elapsed", "want"),
    [
        ({}, {"cpu": 4000}, 3600, {"cpu": 2000.0}),
        ({"cpu": 4000.0}, {}, 3600, {"cpu": 2000.0}),
        ({"cpu": 1000.0}, {"cpu": 3000}, 3600, {"cpu": 2000.0}),
        ({"cpu": 1000.0}, {"memory": 2000}, 0, {"cpu": 1000.0, "memory": 0.0}),
    ],
)
def test_decay_is_an_exponential_moving_average(
    old: dict[str, float], live: dict[str, int], elapsed: float, want: dict[str, float]
) -> None:
    assert decayed(old, live, elapsed, 3600) == pytest.approx(want)


@pytest.mark.parametrize(
    ("consumed", "weights", "lq_weight", "want"),
    [
        ({"cpu": 2000.0}, {}, 1000, 2.0),  # 2 cpus, weight 1
        ({"cpu": 2000.0}, {}, 2000, 1.0),  # weight 2 halves it
        ({"cpu": 2000.0, "memory": 1000.0}, {"cpu": 3000}, 1000, 7.0),  # cpu weighs 3
        ({"cpu": 2000.0}, {"cpu": 0}, 1000, 0.0),  # a resource weighted 0 counts nothing
        ({"cpu": 2000.0}, {}, 0, math.inf),  # LocalQueue weight 0: always last
        ({}, {}, 0, math.inf),
    ],
)
def test_weighted_usage(
    consumed: dict[str, float], weights: dict[str, int], lq_weight: int, want: float
) -> None:
    assert weighted_usage(consumed, weights, lq_weight) == want


# --------------------------------------------------------------------------- the order


def fill_then_queue(d: Driver) -> None:
    """Team a uses the whole queue for two hours; then both teams queue work."""
    d.apply(*[cpu_job("a", f"old{i}", 1, cpu=1) for i in range(4)], at=1.0)
    for i in range(4):
        d.finish(f"a/old{i}", at=2 * HOUR)
    d.tick(at=2 * HOUR + 300)  # a sample: a's history stays, its live usage is gone
    d.apply(
        *[cpu_job("a", f"a{i}", 2 * HOUR + 400 + i, cpu=1) for i in range(4)],
        at=2 * HOUR + 400,
    )
    d.apply(
        *[cpu_job("b", f"b{i}", 2 * HOUR + 500 + i, cpu=1) for i in range(4)],
        at=2 * HOUR + 500,
    )


def test_the_less_used_local_queue_goes_first() -> None:
    d = setup()
    fill_then_queue(d)
    # a's four were admitted at once (the queue was empty); b's four wait
    assert admitted_order(d)[-4:] == ["a/a0", "a/a1", "a/a2", "a/a3"]
    for i in range(4):
        d.finish(f"a/a{i}", at=3 * HOUR + i)
    # b has no history: all of b's go before a's next ones would
    assert admitted_order(d)[-4:] == ["b/b0", "b/b1", "b/b2", "b/b3"]


def pending_order_after_history(*, config: bool, fair: bool) -> list[str]:
    d = setup(config=config, fair=fair)
    d.apply(*[cpu_job("a", f"old{i}", 1, cpu=1) for i in range(4)], at=1.0)
    # older a work queues behind; newer b work too
    d.apply(cpu_job("a", "late", 2.0), at=2.0)
    d.apply(cpu_job("b", "late", 3.0), at=3.0)
    d.tick(at=HOUR)  # a sample: a has an hour of usage
    for i in range(4):
        d.finish(f"a/old{i}", at=HOUR + 1 + i)
    return admitted_order(d)[4:]


@pytest.mark.parametrize(
    ("config", "fair", "want"),
    [
        (True, True, ["b/late", "a/late"]),  # b never used anything: first
        (True, False, ["a/late", "b/late"]),  # the ClusterQueue did not opt in
        (False, True, ["a/late", "b/late"]),  # the configuration did not
    ],
)
def test_only_an_opted_in_cluster_queue_of_a_configured_kuota_reorders(
    config: bool, fair: bool, want: list[str]
) -> None:
    assert pending_order_after_history(config=config, fair=fair) == want


def test_the_entry_penalty_prices_a_burst_before_the_next_sample() -> None:
    d = setup()
    d.apply(cpu_job("a", "first", 1.0, cpu=4), at=1.0)  # a takes everything
    # both queue, a's first (older); no sample happens in between
    d.apply(cpu_job("a", "second", 2.0, cpu=4), cpu_job("b", "first", 3.0, cpu=4), at=3.0)
    d.finish("a/first", at=10.0)
    # a's admission cost it a penalty at once: b goes first though a's is older
    assert admitted_order(d) == ["a/first", "b/first"]
    usage = {name: u for name, u, _ in d.fold.local_queue_usage("cq")}
    assert usage["a/lq"] > 0.0
    assert usage["b/lq"] > 0.0  # b's admission was priced too


def test_a_heavier_local_queue_counts_its_usage_less() -> None:
    d = setup(weight_b="4")
    d.apply(cpu_job("a", "x", 1.0, cpu=1), cpu_job("b", "x", 1.0, cpu=3), at=1.0)
    d.tick(at=HOUR)
    rows = d.fold.local_queue_usage("cq")
    # b used 3 cpus at weight 4 (0.75 per unit of weight), a 1 cpu at weight 1
    assert [name for name, _, _ in rows] == ["b/lq", "a/lq"]
    assert rows[0][1] == pytest.approx(rows[1][1] * 0.75, rel=0.05)


def test_samples_emit_the_local_queue_status() -> None:
    d = setup()
    d.apply(cpu_job("a", "x", 1.0, cpu=2), at=1.0)
    out = d.tick(at=HOUR)
    usage = [x for x in out if x.type == "LocalQueueUsage"]
    assert [x.object for x in usage] == ["LocalQueue a/lq", "LocalQueue b/lq"]
    assert usage[0].cluster_queue == "cq"
    assert usage[0].consumed is not None
    # an hour at 2 cpus with a 1h half-life: about 1 cpu, plus the entry penalty
    assert 1000 < float(usage[0].consumed["cpu"].rstrip("m")) < 1200
    assert usage[1].consumed == {}
    assert usage[1].weighted_usage == 0.0
    assert d.tick(at=HOUR + 1) == []  # no sample before the next grid instant
    out = d.tick(at=2 * HOUR)
    # only a's changed: b's status is not announced again
    assert [x.object for x in out if x.type == "LocalQueueUsage"] == ["LocalQueue a/lq"]


def test_half_life_zero_keeps_no_history() -> None:
    d = Driver()
    d.apply(afs_config(half_life="0s"), flavor("default"), fair_cq(), at=0.0)
    d.apply(weighted_lq("a", "lq"), weighted_lq("b", "lq"), at=0.0)
    d.apply(cpu_job("a", "x", 1.0, cpu=4), at=1.0)
    d.tick(at=HOUR)
    assert all(u == 0.0 for _, u, _ in d.fold.local_queue_usage("cq"))
