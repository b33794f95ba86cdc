"""examples/scenarios/first-available.yaml through the real fold: firstAvailable
and allocationMode All are charged what the scheduler allocates on the node
chosen (#17)."""

from __future__ import annotations

from pathlib import Path

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision
from kuota.sim.engine import Simulator
from kuota.sim.scenario import load_scenario

FILE = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "first-available.yaml"


def test_the_alternative_charged_is_the_one_placed_and_all_takes_a_whole_node() -> None:
    simulator = Simulator(
        load_scenario(FILE.read_text(encoding="utf-8"), source=FILE.name), fold=Fold()
    )
    decisions: list[Decision] = simulator.run(max_steps=10_000)
    assert simulator.settled
    admitted = [(d.at, d.workload, d.usage, d.nodes) for d in decisions if d.type == "Admitted"]
    gpus = {"a100": {"nvidia-gpu": "4"}}
    assert admitted == [
        (0, "research/sweep", gpus, {"main": ["a100-a"]}),
        (120, "research/small", {"a100": {"nvidia-gpu": "1"}}, {"main": ["a100-b"]}),
        (600, "research/flex", gpus, {"main": ["a100-a"]}),
    ]
    (wait,) = [d for d in decisions if d.type == "Inadmissible"]
    assert (wait.at, wait.workload, wait.reason) == (60, "research/flex", "NoNodePlacement")
    assert wait.message.endswith(
        "needs 4 devices of class gpu.nvidia.com; a100-a has 0 free, a100-b has 2 free"
    )
