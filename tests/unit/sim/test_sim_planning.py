"""``kuota simulate --preemption plans``: the services' two folds in one process.

The engine hands every event to the simulated preemption service
(``kuota.sim.planning``) and applies the plans it writes right after, at the
same instant. Every reference scenario (``examples/scenarios``) and every e2e
scenario (``tests/e2e/scenarios``, with the e2e run's hardware) is run in both
modes: the decisions agree, except in the one way docs/design/plans-mode.md
describes (a preemptor, and a requeued victim that could preempt, is first
announced ``WaitingForPreemptionPlan``, and the plan settles it at the same
instant).
"""

from __future__ import annotations

import importlib.util
import json
import re
import string
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kuota.cli import app
from kuota.core.fold.draining import WAITING_FOR_STOP
from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import INLINE, PLANS, WAITING_FOR_PLAN
from kuota.events.schema import Decision, PreemptionPlan, WorkloadStopped
from kuota.sim.engine import Simulator
from kuota.sim.planning import PlanCounts, PreemptionService
from kuota.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "scenarios"
E2E = REPO / "tests" / "e2e" / "scenarios"
E2E_RUN = "e2e-sim"  # the ${run} of an e2e scenario, simulated
E2E_DRIVER = f"{E2E_RUN}.gpu.kuota.dev"

SCENARIOS = sorted(
    [f"examples/{p.stem}" for p in EXAMPLES.glob("*.yaml")]
    + [f"e2e/{p.stem}" for p in E2E.glob("*.yaml")]
)
#: The scenarios in which something waits for a preemption plan.
PREEMPTING = {
    "examples/borrow-within-cohort",
    "examples/cohort-reclaim",
    "examples/fair-sharing",
    "examples/fair-sharing-history",
    "examples/priority-preemption",
    "e2e/cohort-priority-tiers",
    "e2e/parked-head-reclaims",
    "e2e/cohort-reclaim",
    "e2e/priority-preemption",
    "e2e/training-preemption",
}
#: Every field of a decision but its ids (which name the causing event).
# stop_id names a decision by its id, which depends on the events (plans are events)
OUTCOME = set(Decision.model_fields) - {"id", "cause", "cause_offset", "stop_id"}


def _e2e_infra() -> list[dict[str, Any]]:
    """The e2e run's DeviceClasses, ResourceSlices and Configuration (no Nodes),
    as tests/e2e/e2e_pipeline.py gives them to its own simulation."""
    spec = importlib.util.spec_from_file_location(
        "e2e_hardware", REPO / "tests" / "e2e" / "e2e_hardware.py"
    )
    assert spec is not None and spec.loader is not None
    hw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hw)
    objs: list[dict[str, Any]] = hw.hardware(E2E_RUN, E2E_DRIVER)
    config: dict[str, Any] = hw.configuration(E2E_RUN, E2E_DRIVER)
    return [o for o in objs if o["kind"] != "Node"] + [
        {**config, "metadata": {"name": "kuota-config-file"}}
    ]


def manifests(name: str) -> list[dict[str, Any]]:
    where, _, stem = name.partition("/")
    if where == "examples":
        return load_scenario((EXAMPLES / f"{stem}.yaml").read_text(), source=name)
    text = string.Template((E2E / f"{stem}.yaml").read_text()).substitute(
        run=E2E_RUN, driver=E2E_DRIVER, pool=E2E_RUN
    )
    return _e2e_infra() + load_scenario(text, source=name)


@cache
def run(name: str, mode: str) -> tuple[tuple[Decision, ...], PlanCounts | None]:
    service = PreemptionService() if mode == PLANS else None
    simulator = Simulator(manifests(name), fold=Fold(preemption=mode), planning=service)
    decisions = simulator.run(max_steps=100_000)
    assert simulator.settled
    return tuple(decisions), service.counts if service is not None else None


def outcome(d: Decision) -> dict[str, Any]:
    return d.model_dump(include=OUTCOME)


def waiting(d: Decision) -> bool:
    return d.type == "Inadmissible" and d.reason == WAITING_FOR_PLAN


def stop_wait(d: Decision) -> bool:
    """A preemptor waiting for its victims' pods: announced again in plans mode
    when a plan wait came between (its last verdict changed meanwhile)."""
    return d.type == "Inadmissible" and d.reason == WAITING_FOR_STOP


@pytest.mark.parametrize("name", SCENARIOS)
def test_both_modes_decide_the_same(name: str) -> None:
    inline, _ = run(name, INLINE)
    plans, counts = run(name, PLANS)
    assert counts is not None
    assert not any(waiting(d) for d in inline)
    # The one documented difference: the WaitingForPreemptionPlan announcements.
    # Without them, the same decisions in the same order, field for field.
    assert [outcome(d) for d in plans if not waiting(d) and not stop_wait(d)] == [
        outcome(d) for d in inline if not stop_wait(d)
    ]
    assert any(stop_wait(d) for d in plans) == any(stop_wait(d) for d in inline)
    # Each announcement is settled by the plan at the same instant: the preemptor
    # admitted, or (an empty plan) told the quota reason, as inline mode says it.
    for i, d in enumerate(plans):
        if waiting(d):
            settled = next(
                x
                for x in plans[i + 1 :]
                if x.workload == d.workload and (x.type == "Admitted" or x.type == "Inadmissible")
            )
            assert settled.at == d.at and not waiting(settled), (d, settled)
    assert (counts.written > 0) == (name in PREEMPTING), counts
    assert counts.stale == 0  # both folds fold the same journal: every plan is valid
    # Each plan with victims admitted its preemptor (inline: one admission with victims).
    preemptions = sum(1 for d in inline if d.type == "Admitted" and d.victims)
    assert counts.written - counts.empty == preemptions


def test_the_list_of_preempting_scenarios_names_scenarios() -> None:
    assert set(SCENARIOS) >= PREEMPTING
    assert {n.partition("/")[0] for n in SCENARIOS} == {"examples", "e2e"}


def test_plans_are_applied_right_after_the_event_at_its_instant() -> None:
    service = PreemptionService()
    admission = Fold(preemption=PLANS)
    simulator = Simulator(
        manifests("examples/priority-preemption"), fold=admission, planning=service
    )
    steps = list(simulator.steps(max_steps=10_000))
    offsets = [s.decisions[0].cause_offset for s in steps if s.decisions]
    assert offsets == sorted(offsets)
    plan_steps = [i for i, s in enumerate(steps) if isinstance(s.event, PreemptionPlan)]
    # 2 with victims; 5 empty: each requeued victim's first search, high-3's,
    # and low-1's and low-2's searches again when high-1 and high-2 finish
    # (a release in the tree: Kueue requeues them; announced by neither mode)
    assert len(plan_steps) == service.counts.written == 7
    for i in plan_steps:
        plan = steps[i].event
        assert isinstance(plan, PreemptionPlan)
        before = steps[i - 1].event
        assert plan.based_on == before.id and plan.id == f"plan/{plan.preemptor}/{before.id}"
        assert plan.at == before.at
    first = steps[plan_steps[0]]
    assert [(d.type, d.workload) for d in first.decisions][:3] == [
        ("Preempted", "research/low-2"),
        ("Requeued", "research/low-2"),
        ("Inadmissible", "research/high-1"),  # waits for low-2's pods
    ]
    stopped = steps[plan_steps[0] + 1]  # the engine's pods-gone report, next at the instant
    assert isinstance(stopped.event, WorkloadStopped) and stopped.event.at == first.event.at
    assert [(d.type, d.workload) for d in stopped.decisions][:2] == [
        ("QuotaReleased", "research/low-2"),
        ("Admitted", "research/high-1"),
    ]
    # The preemption service's fold saw the same journal, plans included.
    assert service.fold.now == simulator.now
    assert service.fold.summary() == admission.summary()
    assert service.planner.in_flight() == 0


def test_the_preemption_service_folds_in_plans_mode() -> None:
    with pytest.raises(ValueError, match="plans mode"):
        PreemptionService(Fold())


def simulate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_says_which_preemptions_a_plan_decided() -> None:
    path = str(EXAMPLES / "priority-preemption.yaml")
    code, out, err = simulate(path, "--preemption", "plans")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    preempted = [r for r in records if r["type"] == "Preempted"]
    assert len(preempted) == 2
    for r in preempted:
        pattern = rf"the preemption service \(plan/{re.escape(r['preemptor'])}/sim-\d+\)"
        assert re.fullmatch(pattern, r["plannedBy"]), r
    assert all("plannedBy" not in r for r in records if r["type"] == "Finished")
    assert any(r.get("reason") == WAITING_FOR_PLAN for r in records)
    assert "preemption plans: 7 written (5 empty, 0 stale); 2 preemptions planned by the " in err
    inline_code, inline_out, inline_err = simulate(path)
    assert inline_code == 0
    assert "plannedBy" not in inline_out and "preemption plans" not in inline_err
    assert WAITING_FOR_PLAN not in inline_out


def test_cli_refuses_an_unknown_mode() -> None:
    code, _, err = simulate(str(EXAMPLES / "whole-gpu.yaml"), "--preemption", "later")
    assert code == 2
    assert "--preemption" in err and "'inline'" in err and "'plans'" in err
