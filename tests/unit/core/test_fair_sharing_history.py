"""History-aware fair sharing (kuota's, beyond Kueue): a ClusterQueue's DRS
counts its decayed share when the root Cohort opts in; weight 0 is exactly
plain DRS. docs/design/fair-sharing-history.md."""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction
from typing import Any

import pytest
from builders import manifests
from core_builders import Driver, cohort, cq, flavor, job, lq, manifest
from hypothesis import given
from hypothesis import strategies as st
from test_afs_properties import run as run_with_stops
from test_fold_properties import SETTINGS, events, ops, topologies

from kuota.core.fold.fold import Fold
from kuota.core.quota.fairshare import Share, Weights, dominant_resource_share
from kuota.core.quota.tree import QuotaTree
from kuota.events.schema import Decision, JournalEvent, ObjectUpserted

HOUR = 3600.0
HALF_LIFE = "kuota.dev/fair-sharing-history-half-life"
WEIGHT = "kuota.dev/fair-sharing-history-weight"


def annotated(m: dict[str, Any], half_life: str | None, weight: str | None) -> dict[str, Any]:
    notes = m["metadata"].setdefault("annotations", {})
    if half_life is not None:
        notes[HALF_LIFE] = half_life
    if weight is not None:
        notes[WEIGHT] = weight
    return m


# --------------------------------------------------------------------------- the annotations


@pytest.mark.parametrize(
    ("half_life", "weight", "want"),
    [
        (None, None, (0, 0)),  # not asked: plain DRS
        ("2h", "4", (7200, 4000)),
        ("30m", None, (1800, 4000)),  # weight defaults to 4
        (None, "1", (3600, 1000)),  # half-life defaults to 1h
        ("1h", "0", (3600, 0)),  # weight 0: plain DRS
    ],
)
def test_the_root_cohort_opts_in_by_annotation(
    half_life: str | None, weight: str | None, want: tuple[int, int]
) -> None:
    d = Driver()
    d.apply(annotated(manifest(cohort("pool")), half_life, weight))
    c = d.fold._cohorts["pool"]
    assert (c.history_half_life_seconds, c.history_weight) == want


@pytest.mark.parametrize(
    ("half_life", "weight", "says"),
    [
        ("soon", None, HALF_LIFE),
        ("0s", None, "between 1s and 366 days"),
        (None, "-1", WEIGHT),
        (None, "101", "between 0 and 100"),
        (None, "lots", WEIGHT),
    ],
)
def test_a_bad_annotation_is_rejected_with_its_name(
    half_life: str | None, weight: str | None, says: str
) -> None:
    d = Driver()
    out = d.apply(annotated(manifest(cohort("pool")), half_life, weight))
    assert [x.type for x in out] == ["Rejected"]
    assert says in (out[0].message or "")
    assert "pool" not in d.fold._cohorts


# --------------------------------------------------------------------------- the rule


def test_weight_zero_or_no_history_is_the_plain_share() -> None:
    tree = QuotaTree()
    tree.set_cohort("pool", parent=None, groups=())
    tree.set_queue("a", cohort="pool", groups=())
    node = tree.queues["a"]
    plain = dominant_resource_share(node, Weights())
    assert dominant_resource_share(node, Weights(history={"a": 5000}, history_weight={})) == plain
    with_history = dominant_resource_share(
        node, Weights(history={"a": 5000}, history_weight={"a": 2000})
    )
    assert with_history == Share(False, plain.value + Fraction(10))  # 2 x 5.0


def burst_then_compete(*, history: bool) -> list[str]:
    """team-a borrows all of team-b's quota for two hours; then each team runs
    within its quota, both queue a Job and one GPU frees: team-a's Job would
    stay within its nominal quota, team-b's would borrow. Who gets it?"""
    pool = manifest(cohort("pool"))
    if history:
        annotated(pool, "1h", "4")
    d = Driver()
    d.apply(
        manifests.configuration(fairSharing={"enable": True}),
        flavor("f"),
        pool,
        cq("team-a").cohort("pool").flavor("f", cpu=2),
        cq("team-b").cohort("pool").flavor("f", cpu=2),
        lq("a", "lq", "team-a"),
        lq("b", "lq", "team-b"),
        at=0.0,
    )
    d.apply(*[job("a", f"burst{i}").queue("lq").requests(cpu=1) for i in range(4)], at=1.0)
    d.apply(*[job("b", f"own{i}").queue("lq").requests(cpu=1) for i in range(2)], at=2 * HOUR)
    d.finish("a/burst0", at=2 * HOUR + 1)
    d.finish("a/burst1", at=2 * HOUR + 1)  # team-b takes its own quota back
    d.apply(job("a", "next").queue("lq").requests(cpu=1).created(2 * HOUR + 3), at=2 * HOUR + 3)
    d.apply(job("b", "next").queue("lq").requests(cpu=1).created(2 * HOUR + 4), at=2 * HOUR + 4)
    d.finish("a/burst2", at=2 * HOUR + 5)  # one GPU for two heads
    return [x.workload or "" for x in d.decisions if x.type == "Admitted"][6:]


def test_with_history_the_team_that_borrowed_yields() -> None:
    # plain DRS: team-a's share stays 0 within its quota, team-b's would not
    assert burst_then_compete(history=False) == ["a/next"]
    # history: team-a's decayed share (it borrowed half the cohort for two hours,
    # weighted 4) is above team-b's share for borrowing one GPU
    assert burst_then_compete(history=True) == ["b/next"]


# --------------------------------------------------------------------------- properties


def fair_events(data: st.DataObject, half_life: str | None, weight: str | None) -> list[Any]:
    topology = data.draw(topologies())
    steps = data.draw(ops(topology.queues))
    evs = events(topology, steps, quota_changes=False)
    out: list[JournalEvent] = [
        ObjectUpserted(
            id="config", at=0.0, object=manifests.configuration(fairSharing={"enable": True})
        )
    ]
    for ev in evs:
        if isinstance(ev, ObjectUpserted) and ev.object.get("kind") == "Cohort":
            ev = ev.model_copy(
                update={"object": annotated(copy.deepcopy(ev.object), half_life, weight)}
            )
        # spread the events over hours, so history is sampled many times
        out.append(ev.model_copy(update={"at": ev.at * 211.0}))
    return out


def run(fold: Fold, evs: list[JournalEvent]) -> list[Decision]:
    return run_with_stops(fold, evs)


@given(st.data())
@SETTINGS
def test_history_weight_zero_decides_exactly_as_plain_drs(data: st.DataObject) -> None:
    plain = fair_events(data, None, None)
    zero = [
        ev.model_copy(update={"object": annotated(copy.deepcopy(ev.object), "30m", "0")})
        if isinstance(ev, ObjectUpserted) and ev.object.get("kind") == "Cohort"
        else ev
        for ev in plain
    ]
    assert zero != plain  # the root cohort is annotated
    assert run(Fold(), zero) == run(Fold(), plain)


@given(st.data())
@SETTINGS
def test_history_replays_and_snapshots_identically(data: st.DataObject) -> None:
    evs = fair_events(data, "20m", data.draw(st.sampled_from(["1", "4"])))
    first = run(Fold(), evs)
    assert run(Fold(), evs) == first
    cut = data.draw(st.integers(0, len(evs)))
    fold = Fold()
    before = run(fold, evs[:cut])
    restored: Fold = pickle.loads(pickle.dumps(fold))
    assert before + run(restored, evs[cut:]) == first
