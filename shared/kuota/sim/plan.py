"""Capacity planning: the fewest GPUs that meet a wait-time SLO, per accounting model.

Theory of operation: for each model of ``kuota.sim.models.MODELS`` the trace
becomes a scenario (``ScenarioBuilder``) and runs through the real fold
(``kuota.sim.engine.Simulator`` with ``Fold()``), once per node count tried;
a :class:`Recorder` gives each workload's wait (``kuota.sim.series``). A size
*meets* the SLO when the nearest-rank ``percentile`` of the waits is at most
``max_wait_s`` (a workload never admitted waits forever).

The search (:func:`fewest_nodes`, docs/design/capacity-planning.md): double
the node count from 1 until a size meets the SLO, then bisect between the
largest size known to fail and the smallest known to meet. Waits need not
fall monotonically as nodes are added (priority preemption, a head that fits
sooner and blocks another), so the answer is confirmed: the ``confirm`` sizes
above it must meet too; one that fails becomes the new lower bound and the
bisection goes on above it. Every run is kept (``Search.runs``), so a size is
never simulated twice and the report can show them all.

A model the fold cannot charge on this branch (``probe``: one 10 GiB job
must be admitted charging 10Gi of the model's resource) is skipped with the
reason, printed as ``n/a``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kuota.core.fold.fold import Fold
from kuota.quantity import QuantityError, parse_quantity
from kuota.sim.engine import Simulator
from kuota.sim.models import FLAVOR, AccountingModel, ScenarioBuilder
from kuota.sim.series import Recorder, Series, percentile, waits
from kuota.sim.trace import TraceJob

#: Node counts beyond this are not tried: the trace cannot meet the SLO.
MAX_NODES = 1 << 16
#: Sizes above the bisection's answer that must meet the SLO too.
CONFIRM = 2


class PlanError(RuntimeError):
    """No size meets the SLO (e.g. a job larger than any quota), or a run failed."""


@dataclass(frozen=True, slots=True)
class Slo:
    """``p<percentile>_wait <= <max_wait_s>s``."""

    percentile: float = 95.0
    max_wait_s: float = 300.0

    def __str__(self) -> str:
        return f"p{self.percentile:g}_wait<={self.max_wait_s:g}s"


@dataclass(frozen=True, slots=True)
class Run:
    """One size of one model, simulated."""

    nodes: int
    gpus: int
    wait: float  # the SLO's percentile of the waits (inf: never admitted)
    met: bool
    series: Series


@dataclass(slots=True)
class Search:
    """The search for one model: every run, and the answer."""

    model: AccountingModel
    runs: dict[int, Run] = field(default_factory=dict)
    nodes: int | None = None
    non_monotonic: list[int] = field(default_factory=list)  # sizes that failed above a meeting one

    @property
    def best(self) -> Run | None:
        return self.runs[self.nodes] if self.nodes is not None else None


def simulate(builder: ScenarioBuilder, nodes: int, *, max_steps: int = 5_000_000) -> Series:
    """Run the trace on ``nodes`` nodes; the recorded series."""
    recorder = Recorder()
    simulator = Simulator(builder.manifests(nodes), fold=Fold())
    for step in simulator.steps(max_steps=max_steps):
        recorder.observe(step.event, step.decisions)
    return recorder.series


def run_size(builder: ScenarioBuilder, nodes: int, slo: Slo) -> Run:
    series = simulate(builder, nodes)
    wait = percentile(waits(series), slo.percentile)
    return Run(
        nodes=nodes,
        gpus=nodes * builder.gpus_per_node,
        wait=wait,
        met=wait <= slo.max_wait_s,
        series=series,
    )


def fewest_nodes(
    measure: Callable[[int], bool],
    *,
    confirm: int = CONFIRM,
    max_nodes: int = MAX_NODES,
    non_monotonic: list[int] | None = None,
) -> int:
    """The fewest nodes ``n`` with ``measure(n)`` true and true for the
    ``confirm`` sizes above it too (module docstring). ``measure`` is called at
    most once per size if it memoises; sizes found failing above a meeting
    size are appended to ``non_monotonic``."""
    hi = 1
    while not measure(hi):
        if hi >= max_nodes:
            raise PlanError(f"no size up to {max_nodes} nodes meets the SLO")
        hi = min(hi * 2, max_nodes)
    lo = hi // 2 if hi > 1 else 0  # the largest size known to fail (0: none tried)
    while True:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if measure(mid):
                hi = mid
            else:
                lo = mid
        failed = next((n for n in range(hi + 1, hi + 1 + confirm) if not measure(n)), None)
        if failed is None:
            return hi
        if non_monotonic is not None:
            non_monotonic.append(failed)
        lo = failed
        hi = failed + 1
        while not measure(hi):
            if hi >= max_nodes:
                raise PlanError(f"no size up to {max_nodes} nodes meets the SLO")
            lo, hi = hi, min(hi * 2, max_nodes)


def search(
    trace: Sequence[TraceJob],
    model: AccountingModel,
    *,
    slo: Slo,
    gpus_per_node: int,
    on_run: Callable[[AccountingModel, Run], None] | None = None,
    max_nodes: int = MAX_NODES,
) -> Search:
    """The fewest nodes of ``model`` meeting ``slo`` for ``trace``."""
    builder = ScenarioBuilder(trace, model=model, gpus_per_node=gpus_per_node)
    found = Search(model=model)

    def measure(nodes: int) -> bool:
        run = found.runs.get(nodes)
        if run is None:
            run = run_size(builder, nodes, slo)
            found.runs[nodes] = run
            if on_run is not None:
                on_run(model, run)
        return run.met

    found.nodes = fewest_nodes(measure, non_monotonic=found.non_monotonic, max_nodes=max_nodes)
    return found


def probe(model: AccountingModel, *, gpus_per_node: int = 1) -> str | None:
    """None when the fold charges ``model`` as it means to (a 10 GiB job, or a
    one-GPU job for a device count, admitted charging that much); else why not."""
    job = TraceJob(
        name="probe",
        submit_s=0.0,
        duration_s=1.0,
        gpus=0,
        gpu_memory_gib=10,
        priority=0,
        team="probe",
    )
    builder = ScenarioBuilder([job], model=model, gpus_per_node=gpus_per_node)
    expected = 1000 if model.per_gpu_units == 1 else 10 * 1024**3 * 1000
    decisions = Simulator(builder.manifests(1), fold=Fold()).run(max_steps=10_000)
    for decision in decisions:
        if decision.type == "Rejected":
            return f"the fold rejects it: {decision.message or decision.reason}"
        if decision.type == "Admitted":
            charged = (decision.usage or {}).get(FLAVOR, {}).get(model.resource)
            try:
                amount = parse_quantity(charged) if charged is not None else None
            except QuantityError:
                amount = None
            if amount != expected:
                return f"the fold charged {decision.usage} for a 10Gi share"
            return None
    reasons = [d.message or d.reason or d.type for d in decisions if d.type == "Inadmissible"]
    return f"a 10Gi share is not admitted: {reasons[0] if reasons else 'no decision'}"


def saving_pct(base: int | None, other: int | None) -> float | None:
    if not base or other is None:
        return None
    return round(100 * (1 - other / base), 1)


def plan_line(*, jobs: int, slo: Slo, gpus: dict[str, int | None], saving_mig: float | None) -> str:
    """``jobs=… slo=p95_wait<=300s gpus_whole=… gpus_mig=… gpus_mps=… saving_mig_pct=…``"""

    def text(value: float | None) -> str:
        if value is None:
            return "n/a"
        return str(int(value)) if value == int(value) else f"{value:g}"

    parts = [f"jobs={jobs}", f"slo={slo}"]
    parts += [f"gpus_{name}={text(value)}" for name, value in gpus.items()]
    parts.append(f"saving_mig_pct={text(saving_mig)}")
    return " ".join(parts)


def wait_text(seconds: float) -> str:
    return "never" if math.isinf(seconds) else f"{seconds:.0f}s"


__all__ = [
    "CONFIRM",
    "PlanError",
    "Run",
    "Search",
    "Slo",
    "fewest_nodes",
    "plan_line",
    "probe",
    "run_size",
    "saving_pct",
    "search",
    "simulate",
]
