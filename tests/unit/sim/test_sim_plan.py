"""``kuota.sim.plan``: the search finds the minimum known by hand; models charge as they say."""

from __future__ import annotations

import math

import pytest

from kuota.sim.models import MIG, MPS, WHOLE, ScenarioBuilder, mig_profile
from kuota.sim.plan import PlanError, Slo, fewest_nodes, plan_line, probe, search
from kuota.sim.series import waits
from kuota.sim.trace import TraceJob


def job(name: str, *, gpus: int = 0, gib: int = 0, at: float = 0, run: float = 1000) -> TraceJob:
    return TraceJob(
        name=name, submit_s=at, duration_s=run, gpus=gpus, gpu_memory_gib=gib, priority=0, team="a"
    )


#: Four 10 GiB inference jobs and one two-GPU training job, all at 0 s for 1000 s.
#: Whole GPUs: 4 x 1 + 2 = 6 GPUs, or someone waits 1000 s (p95 of 5 jobs is the max).
#: MIG: 4 x 10Gi (1g.10gb) + 2 x 80Gi = 200Gi -> 3 GPUs (240Gi); 2 GPUs (160Gi) make
#: the training job or two slices wait.
TINY = [job(f"infer-{i}", gib=10) for i in range(4)] + [job("train", gpus=2)]


@pytest.mark.parametrize(("model", "gpus"), [(WHOLE, 6), (MIG, 3)], ids=["whole", "mig"])
def test_bisection_finds_the_minimum_known_by_hand(model: object, gpus: int) -> None:
    found = search(TINY, model, slo=Slo(95, 300), gpus_per_node=1)  # type: ignore[arg-type]
    assert found.nodes == gpus
    assert found.runs[gpus].met and found.runs[gpus].wait == 0
    assert not found.runs[gpus - 1].met and found.runs[gpus - 1].wait == 1000
    assert found.non_monotonic == []


def test_a_looser_slo_needs_fewer_gpus() -> None:
    # waiting one run (1000 s) is allowed: the whole-GPU cluster can be half as large
    found = search(TINY, WHOLE, slo=Slo(95, 1000), gpus_per_node=1)
    assert found.nodes == 3
    assert max(waits(found.runs[3].series)) == 1000


def test_nodes_of_several_gpus() -> None:
    found = search(TINY, WHOLE, slo=Slo(95, 300), gpus_per_node=4)
    assert found.nodes == 2 and found.best is not None and found.best.gpus == 8


def test_mps_is_sized_when_the_fold_charges_capacity_else_reported_why_not() -> None:
    why = probe(MPS)
    if why is None:  # consumable capacity charged by the core (issue #19)
        assert search(TINY, MPS, slo=Slo(95, 300), gpus_per_node=1).nodes == 3
    else:
        assert "capacity" in why
    assert probe(WHOLE) is None and probe(MIG) is None


def test_fewest_nodes_on_a_monotone_threshold() -> None:
    for threshold in range(1, 70):
        calls: list[int] = []

        def measure(n: int, t: int = threshold, log: list[int] = calls) -> bool:
            log.append(n)
            return n >= t

        assert fewest_nodes(measure) == threshold
        assert len(calls) <= 2 * math.ceil(math.log2(threshold + 1)) + 3


def test_fewest_nodes_steps_over_a_failing_size_above_the_first_answer() -> None:
    meets = {n: n >= 5 and n != 7 for n in range(1, 40)}
    seen: list[int] = []
    assert fewest_nodes(lambda n: meets[n], non_monotonic=seen) == 8
    assert seen == [7]


def test_fewest_nodes_gives_up() -> None:
    with pytest.raises(PlanError, match="no size up to 16 nodes"):
        fewest_nodes(lambda n: False, max_nodes=16)


def test_a_job_larger_than_any_size_tried_fails_the_plan() -> None:
    with pytest.raises(PlanError):
        search([job("big", gpus=8)], WHOLE, slo=Slo(), gpus_per_node=1, max_nodes=4)


def test_plan_line() -> None:
    line = plan_line(
        jobs=5, slo=Slo(95, 300), gpus={"whole": 6, "mig": 3, "mps": None}, saving_mig=50.0
    )
    assert (
        line == "jobs=5 slo=p95_wait<=300s gpus_whole=6 gpus_mig=3 gpus_mps=n/a saving_mig_pct=50"
    )


def test_mig_profiles_take_the_smallest_that_holds_the_memory() -> None:
    assert [mig_profile(g)[0] for g in (1, 10, 11, 20, 21, 40, 41, 80)] == [
        "1g.10gb", "1g.10gb", "1g.20gb", "1g.20gb", "3g.40gb", "3g.40gb", "7g.80gb", "7g.80gb",
    ]  # fmt: skip


def test_only_the_quota_changes_with_the_size() -> None:
    builder = ScenarioBuilder(TINY, model=MIG, gpus_per_node=8)
    small, large = builder.manifests(1), builder.manifests(5)
    differ = [a for a, b in zip(small, large, strict=True) if a != b]
    assert [m["kind"] for m in differ] == ["ClusterQueue"]
    assert builder.quota(5) == "3200Gi"
