"""The fault runs' seeded plans: the same seed gives the same workload and schedule."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from chaos_faults import SERVICES, plan_faults
from chaos_workload import GI, draw_jobs, plan_bursts


def plan(seed: int) -> tuple[object, ...]:
    rng = random.Random(seed)
    jobs = draw_jobs(rng, 300)
    bursts = plan_bursts(rng, jobs, 4.0)
    faults = plan_faults(rng, bursts[-1][0], 3, ("kafka", "apiserver", "redis", "partition"))
    return jobs, [(at, [j.key for j in js]) for at, js in bursts], faults


def test_same_seed_same_plan_other_seed_other_plan() -> None:
    assert plan(3) == plan(3)
    assert plan(3) != plan(4)


def test_schedule_has_every_kind_and_each_service_several_times() -> None:
    _, bursts, faults = plan(5)
    kinds = [f.kind for f in faults]  # type: ignore[attr-defined]
    for s in SERVICES:
        assert kinds.count(f"kill:{s}") >= 3, kinds
    for k in ("kafka", "apiserver", "redis", "partition"):
        assert kinds.count(k) == 1, kinds
    assert any(f.after_burst for f in faults), "some kills land right after a burst"  # type: ignore[attr-defined]
    triggered = sorted((f.kind, f.trigger) for f in faults if f.trigger)  # type: ignore[attr-defined]
    assert triggered == [("kill:admission", "plan"), ("kill:preemption", "waiting")]
    window = bursts[-1][0]
    assert all(0 < f.at <= 0.85 * window + 6 for f in faults), faults  # type: ignore[attr-defined]


def test_charges_come_from_the_generators_table() -> None:
    jobs = draw_jobs(random.Random(9), 200)
    kinds = {j.kind for j in jobs}
    assert kinds == {"whole", "mig", "wgpu"}
    for j in jobs:
        if j.kind == "whole":
            assert j.charge == {"gpu-memory": 80 * GI}
        elif j.kind == "mig":
            assert j.charge == {"gpu-memory": 10 * GI * j.pods} and 1 <= j.pods <= 2
        else:
            assert j.charge == {"whole-gpus": 1000} and j.cluster_queue == "chaos-c"
