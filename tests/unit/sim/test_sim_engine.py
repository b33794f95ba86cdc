"""The engine's timeline, against a stand-in fold (``sim_fake_fold``)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.manifests import cluster_queue, configuration, flavor, local_queue
from builders.workloads import pytorch_job
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import job, obj
from sim_fake_fold import FakeFold

from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    Decision,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
)
from kuota.sim.engine import SimulationError, Simulator
from kuota.sim.scenario import ScenarioError


def trace(decisions: list[Decision]) -> list[tuple[float, str, str | None]]:
    return [(d.at, d.type, d.workload or d.object) for d in decisions]


def applied(fold: FakeFold) -> list[tuple[float, str, str]]:
    out = []
    for e in fold.events:
        if isinstance(e, ObjectUpserted):
            what = e.object["metadata"]["name"]
        elif isinstance(e, ObjectDeleted | WorkloadFinished | PodsReady):
            what = e.name
        elif isinstance(e, WorkloadStopped):
            what = e.workload.partition("/")[2]
        else:
            what = ""
        out.append((e.at, e.type, what))
    return out


def run(
    manifests: list[Any], fold: FakeFold | None = None, **kw: Any
) -> tuple[FakeFold, list[Decision]]:
    fold = fold or FakeFold(capacity=1)
    decisions = Simulator([m.build() for m in manifests], fold=fold).run(**kw)
    return fold, decisions


def test_file_events_in_time_order_and_ties_in_file_order() -> None:
    fold, _ = run(
        [
            job("b").submit_at("10s"),
            job("a"),
            obj("ClusterQueue", "cq").submit_at("10s"),
            job("c").submit_at("5s").delete_at("10s"),
        ],
        FakeFold(capacity=0),
    )
    assert [(at, kind, name) for at, kind, name in applied(fold)] == [
        (0, "ObjectUpserted", "a"),
        (5, "ObjectUpserted", "c"),
        (10, "ObjectUpserted", "b"),
        (10, "ObjectUpserted", "cq"),
        (10, "ObjectDeleted", "c"),
        (10, "WorkloadStopped", "c"),  # its pods gone, at once (no stop-after)
    ]
    assert [e.id for e in fold.events] == [f"sim-{n}" for n in range(6)]
    assert fold.offsets == [0, 1, 2, 3, 4, 5]


def test_jobs_get_created_at_their_submission_and_the_file_is_not_mutated() -> None:
    manifests = [
        job("a").submit_at("1m30.25s").build(),
        job("b").annotate("kuota.dev/created-at", "7").build(),
        obj("ClusterQueue", "cq").build(),
    ]
    fold = FakeFold(capacity=0)
    Simulator(manifests, fold=fold).run()
    seen = {
        e.object["metadata"]["name"]: e.object for e in fold.events if isinstance(e, ObjectUpserted)
    }
    assert seen["a"]["metadata"]["annotations"]["kuota.dev/created-at"] == "90.25"
    assert seen["b"]["metadata"]["annotations"]["kuota.dev/created-at"] == "7"
    assert "annotations" not in seen["cq"]["metadata"]
    assert "kuota.dev/created-at" not in manifests[0]["metadata"]["annotations"]


def test_run_for_counts_from_admission_and_frees_the_slot() -> None:
    _, decisions = run([job("j1").run_for("100s"), job("j2").run_for("50s")])
    assert trace(decisions) == [
        (0, "Admitted", "team/j1"),
        (100, "Finished", "team/j1"),
        (100, "Admitted", "team/j2"),
        (150, "Finished", "team/j2"),
    ]


def test_file_events_come_before_engine_events_at_the_same_instant() -> None:
    fold, decisions = run([job("j1").run_for("100s"), job("j2").submit_at("100s")])
    at_100 = [(kind, name) for at, kind, name in applied(fold) if at == 100]
    assert at_100 == [("ObjectUpserted", "j2"), ("WorkloadFinished", "j1"), ("PodsReady", "j2")]
    assert (100, "Admitted", "team/j2") in trace(decisions)


def test_job_without_run_for_runs_to_the_end() -> None:
    fold, decisions = run([job("forever"), job("waiting")])
    assert trace(decisions) == [(0, "Admitted", "team/forever")]
    assert not any(isinstance(e, WorkloadFinished) for e in fold.events)


PODS_READY = {
    "at once by default": (job("j"), [0.0]),
    "after a delay": (job("j").ready_after("20s"), [20.0]),
    "never": (job("j").ready_after("never"), []),
}


@pytest.mark.parametrize(("builder", "ready_at"), PODS_READY.values(), ids=PODS_READY.keys())
def test_pods_ready_after_admission(builder: Any, ready_at: list[float]) -> None:
    fold, _ = run([obj("ClusterQueue", "cq"), builder.submit_at("5s")])
    assert [e.at - 5 for e in fold.events if isinstance(e, PodsReady)] == ready_at


def test_timeouts_tick_and_cancel_the_run_of_an_evicted_admission() -> None:
    fold, decisions = run(
        [job("j").ready_after("never").run_for("100s")],
        FakeFold(capacity=1, ready_timeout=30, backoff=10),
        until="115s",
    )
    assert trace(decisions) == [
        (0, "Admitted", "team/j"),
        (30, "Evicted", "team/j"),
        (40, "Requeued", "team/j"),
        (40, "Admitted", "team/j"),
        (70, "Evicted", "team/j"),
        (80, "Requeued", "team/j"),
        (80, "Admitted", "team/j"),
        (110, "Evicted", "team/j"),
    ]
    assert [e.at for e in fold.events if isinstance(e, Tick)] == [30, 40, 70, 80, 110]
    assert not any(isinstance(e, WorkloadFinished) for e in fold.events)


def test_readmission_runs_for_the_full_duration_again() -> None:
    fold, decisions = run(
        [job("j").run_for("100s"), obj("FakeEvict", "x").submit_at("50s").spec(workload="team/j")]
    )
    assert trace(decisions) == [
        (0, "Admitted", "team/j"),
        (50, "Evicted", "team/j"),
        (50, "Requeued", "team/j"),
        (50, "Admitted", "team/j"),
        (150, "Finished", "team/j"),
    ]
    assert [e.at for e in fold.events if isinstance(e, WorkloadFinished)] == [150]


def test_delete_at_deletes_and_cancels_the_run() -> None:
    fold, decisions = run([job("j").run_for("100s").delete_at("20s"), job("next").run_for("5s")])
    deleted = [e for e in fold.events if isinstance(e, ObjectDeleted)]
    assert [(e.at, e.kind, e.namespace, e.name) for e in deleted] == [(20, "Job", "team", "j")]
    assert trace(decisions) == [
        (0, "Admitted", "team/j"),
        (20, "Finished", "team/j"),
        (20, "Admitted", "team/next"),
        (25, "Finished", "team/next"),
    ]


UNTIL = {
    "before everything": ("0s", 1, False),
    "on an instant": ("100s", 3, False),
    "between instants": ("99.999s", 1, False),
    "bare seconds": (149, 3, False),
    "on the last instant": (150, 4, True),
    "after the end": ("1h", 4, True),
}


@pytest.mark.parametrize(("until", "count", "settled"), UNTIL.values(), ids=UNTIL.keys())
def test_until_applies_events_up_to_and_including_it(
    until: object, count: int, settled: bool
) -> None:
    fold = FakeFold(capacity=1)
    sim = Simulator(
        [job("j1").run_for("100s").build(), job("j2").run_for("50s").build()], fold=fold
    )
    decisions = sim.run(until=until)  # type: ignore[arg-type]
    assert len(decisions) == count
    assert sim.settled is settled


def test_unknown_kinds_are_passed_to_the_fold() -> None:
    _, decisions = run([obj("Gadget", "g"), job("j")])
    assert trace(decisions) == [(0, "Rejected", "Gadget g"), (0, "Admitted", "team/j")]


def test_a_fold_whose_timer_never_fires_is_a_runaway() -> None:
    with pytest.raises(SimulationError, match="keeps asking to wake up at 5s"):
        run([job("j")], FakeFold(capacity=1, stuck_wakeup=5.0))


def test_a_scenario_that_never_settles_hits_max_steps() -> None:
    with pytest.raises(SimulationError, match=r"did not settle within 50 events.* --until"):
        run([job("j").ready_after("never")], FakeFold(capacity=1, ready_timeout=30), max_steps=50)


def test_bad_annotations_fail_before_anything_is_applied() -> None:
    fold = FakeFold()
    with pytest.raises(ScenarioError, match=r"Job team/bad .*kuota\.dev/run-for"):
        Simulator([job("ok").build(), job("bad").run_for("later").build()], fold=fold)
    assert fold.events == []


def test_bad_until() -> None:
    with pytest.raises(ScenarioError, match="until"):
        run([job("j")], until="tomorrow")


def test_a_simulator_runs_once() -> None:
    sim = Simulator([job("j").build()], fold=FakeFold())
    sim.run()
    with pytest.raises(SimulationError, match="runs once"):
        sim.run()


jobs = st.lists(
    st.tuples(
        st.integers(0, 20),  # submit-at
        st.one_of(st.none(), st.integers(1, 30)),  # run-for
        st.one_of(st.none(), st.integers(0, 10)),  # ready-after (None = never)
        st.integers(1, 3),  # parallelism
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(jobs, st.integers(0, 4), st.booleans())
def test_timeline_invariants(spec: list[tuple[Any, ...]], capacity: int, timeouts: bool) -> None:
    manifests = []
    for n, (submit, run_for, ready, parallelism) in enumerate(spec):
        b = job(f"j{n}").submit_at(submit).spec(parallelism=parallelism)
        if run_for is not None:
            b.run_for(run_for)
        b.ready_after("never" if ready is None else ready)
        manifests.append(b.build())

    def once() -> tuple[FakeFold, list[Decision]]:
        fold = FakeFold(capacity=capacity, ready_timeout=8 if timeouts else None, backoff=5)
        return fold, Simulator(manifests, fold=fold).run(until="200s")

    fold, decisions = once()
    assert once()[1] == decisions  # deterministic
    times = [e.at for e in fold.events]
    assert times == sorted(times)
    # every applied finish comes exactly run-for after the latest admission
    last_admission: dict[str, float] = {}
    finishes = {e.at: e for e in fold.events if isinstance(e, WorkloadFinished)}
    for d in decisions:
        if d.type == "Admitted":
            assert d.workload is not None
            last_admission[d.workload] = d.at
    for e in fold.events:
        if isinstance(e, WorkloadFinished):
            n = int(e.name[1:])
            assert e.at == last_admission[f"{e.namespace}/{e.name}"] + spec[n][1]
    assert len(finishes) <= len(spec) * 200


class _BrokenFold(FakeFold):
    def apply(self, event: Any, *, offset: int | None = None) -> list[Decision]:
        if isinstance(event, WorkloadFinished):
            raise KeyError("boom")
        return super().apply(event, offset=offset)


def test_a_fold_error_keeps_its_traceback_and_names_the_event() -> None:
    with pytest.raises(KeyError) as info:
        Simulator([job("j").run_for("1m30s").build()], fold=_BrokenFold()).run()
    assert info.value.__notes__ == ["while the fold applied sim-2 WorkloadFinished team/j at 90s"]


def test_a_gangs_pods_ready_and_finish_name_its_key() -> None:
    """A PyTorchJob's PodsReady and WorkloadFinished carry its workload key, and
    the real fold reads them: the gang is ready at 30s, finishes at 1h."""
    ddp = pytorch_job("ddp", workers=1)
    ddp["metadata"]["annotations"] = {
        "kuota.dev/ready-after": "30s",
        "kuota.dev/run-for": "1h",
    }
    stuck = pytorch_job("stuck", workers=1)
    stuck["metadata"]["annotations"] = {"kuota.dev/ready-after": "never"}
    manifests = [
        configuration(waitForPodsReady={"timeout": "5m"}),
        flavor("h100"),
        cluster_queue("cq", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
        ddp,
        stuck,
    ]
    simulator = Simulator(manifests, fold=Fold())
    steps = list(simulator.steps(until=3600.0))
    ready = [s.event for s in steps if s.event.type == "PodsReady"]
    assert [(e.at, getattr(e, "workload", None)) for e in ready] == [(30.0, "ns/pytorchjob/ddp")]
    done = [d for s in steps for d in s.decisions if d.type in ("Finished", "Evicted")]
    got = [(d.at, d.type, d.workload) for d in done]
    assert got[0] == (300.0, "Evicted", "ns/pytorchjob/stuck")  # never ready: the timeout
    assert (3600.0, "Finished", "ns/pytorchjob/ddp") in got  # ready in time: runs its hour
    assert all(w == "ns/pytorchjob/stuck" for _, t, w in got if t == "Evicted")
