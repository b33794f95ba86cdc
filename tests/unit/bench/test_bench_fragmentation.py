"""The fragmentation bench's pure parts: the trace generator, the hardware and queue
objects, and the figures computed from recorded observations (no stack)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from bench_fragmentation_figures import (
    EventObs,
    JobObs,
    PodObs,
    PodState,
    Recording,
    admitted_intervals,
    device_shares,
    dra_pending_intervals,
    dra_reason,
    figures,
    goals,
    gpus_of,
    held_intervals,
    last_line,
    mean_lines,
    pod_state,
    unplaceable_job_seconds,
)
from bench_fragmentation_trace import (
    KWOK_COMPLETE,
    POOL_LABEL,
    RUN_LABEL,
    SHAPES,
    Shape,
    TraceJob,
    generate,
    hardware,
    job_manifest,
    offered_gpu_seconds,
    queue_objects,
)

DRIVER = "kq.gpu.kuota.dev"
DRA_MSG = (
    "0/9 nodes are available: 1 cannot allocate all claims, 8 node(s) didn't match "
    "Pod's node affinity/selector. preemption: 0/9 nodes are available"
)

# ---------------------------------------------------------------- the trace


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    assert generate(7) == generate(7)
    assert generate(7) != generate(8)


def test_trace_is_mixed_sorted_and_within_its_bounds() -> None:
    trace = generate(3, jobs=48, span_s=45.0, run_s=(10, 40))
    assert len(trace) == 48
    assert {j.shape.name for j in trace} == set(SHAPES)
    times = [j.submit_at for j in trace]
    assert times == sorted(times) and times[0] >= 0 and times[-1] <= 45.0
    assert all(10 <= j.run_for <= 40 for j in trace)
    assert [j.name for j in trace] == [f"j-{i:02d}" for i in range(48)]


def test_a_trace_as_long_as_the_shapes_takes_each_once() -> None:
    trace = generate(5, jobs=len(SHAPES))
    assert sorted(j.shape.name for j in trace) == sorted(SHAPES)


def test_weights_choose_the_shapes() -> None:
    trace = generate(1, jobs=30, weights={"mig-1g": 1.0})
    assert {j.shape.name for j in trace} == {"mig-1g"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"jobs": -1},
        {"span_s": -1.0},
        {"run_s": (0, 5)},
        {"run_s": (10, 5)},
        {"weights": {"gpu-8": 1.0}},
        {"weights": {"gpu-1": 0.0}},
    ],
)
def test_bad_parameters_are_refused_with_a_reason(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"trace|weights"):
        generate(1, **kwargs)  # type: ignore[arg-type]


def test_shapes_count_a_slice_as_its_share_of_a_gpu() -> None:
    assert SHAPES["gang-2x2"].gpus == 4.0
    assert SHAPES["gpu-4"].gpus == 4.0
    assert SHAPES["mig-1g"].gpus == 0.125
    assert SHAPES["mig-3g"].gpus == 0.5
    trace = [
        TraceJob("a", SHAPES["gpu-2"], 0.0, 10),
        TraceJob("b", SHAPES["mig-3g"], 1.0, 20),
    ]
    assert offered_gpu_seconds(trace) == 2 * 10 + 0.5 * 20


# ---------------------------------------------------------------- the objects


def test_hardware_nodes_gpus_and_slices_on_shared_counters() -> None:
    hw = hardware("bf1", "bf1", DRIVER, {"x": "y"}, nodes=8)
    nodes = [o for o in hw if o["kind"] == "Node"]
    assert [n["metadata"]["name"] for n in nodes] == [f"bf1-n{i}" for i in range(8)]
    assert all(n["metadata"]["labels"][POOL_LABEL] == "bf1" for n in nodes)
    assert gpus_of(hw) == 32
    shares = device_shares(hw)
    pool = "bf1-n3"
    assert shares[(DRIVER, pool, "gpu-2")] == 1.0
    assert shares[(DRIVER, pool, "gpu-2-mig-1g10gb-6")] == 0.125
    assert shares[(DRIVER, pool, "gpu-2-mig-3g40gb-1")] == 0.5
    per_gpu = [d for (_, p, d) in shares if p == pool and d.startswith("gpu-0-")]
    assert len(per_gpu) == 7 + 2
    assert (DRIVER, pool, "gpu-4") not in shares  # 4 GPUs per node: 0..3


def test_queue_quota_is_the_cluster_memory_and_templates_select_profiles() -> None:
    objs = queue_objects("bf1", "kq", DRIVER, "bf1", {"x": "y"}, nodes=8)
    (cq,) = [o for o in objs if o["kind"] == "ClusterQueue"]
    (res,) = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert res == {"name": "gpu-memory", "nominalQuota": f"{8 * 4 * 80}Gi"}
    (flavor,) = [o for o in objs if o["kind"] == "ResourceFlavor"]
    assert flavor["spec"]["nodeLabels"] == {POOL_LABEL: "bf1"}
    templates = {
        o["metadata"]["name"]: o["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        for o in objs
        if o["kind"] == "ResourceClaimTemplate"
    }
    assert set(templates) == {s.template for s in SHAPES.values()}
    assert templates["gpu-4"] == {"count": 4, "deviceClassName": "gpu-kq"}
    sel = templates["mig-3g"]["selectors"][0]["cel"]["expression"]
    assert templates["mig-3g"]["deviceClassName"] == "mig-kq"
    assert sel == f"device.attributes['{DRIVER}'].profile == '3g.40gb'"


def test_a_gang_job_runs_its_pods_at_once_and_is_not_suspended_by_us() -> None:
    job = TraceJob("j-07", SHAPES["gang-2x2"], 3.0, 25)
    m = job_manifest(job, "ns1", {"run": "r", RUN_LABEL: "r"})
    assert "suspend" not in m["spec"]
    assert m["spec"]["parallelism"] == m["spec"]["completions"] == 2
    assert m["metadata"]["labels"] == {
        "run": "r",
        RUN_LABEL: "r",
        "kueue.x-k8s.io/queue-name": "gpus",
    }
    tpl = m["spec"]["template"]
    assert tpl["metadata"]["labels"] == {RUN_LABEL: "r"}
    assert tpl["metadata"]["annotations"][KWOK_COMPLETE] == "25s"
    assert tpl["spec"]["resourceClaims"] == [{"name": "dev", "resourceClaimTemplateName": "gpu-2"}]
    assert Shape("x", 1, "1g.10gb", 1).template == "mig-1g"


# ---------------------------------------------------------------- the figures


@pytest.mark.parametrize(
    ("message", "dra"),
    [
        (DRA_MSG, True),
        ("0/2 nodes are available: 2 resourceclaim not available on the node.", True),
        ("0/2 nodes are available: 2 Insufficient cpu.", False),
        ('pod "ns/p": ResourceClaim not created yet', False),
        ("resource claim ns/c is in the process of being allocated", False),
        ("", False),
        (None, False),
    ],
)
def test_dra_reason(message: str | None, dra: bool) -> None:
    assert dra_reason(message) is dra


def _pod(node: str | None = None, phase: str = "Pending", msg: str | None = None) -> dict:  # type: ignore[type-arg]
    conds = []
    if msg is not None:
        conds.append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}
        )
    return {
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conds},
    }


def test_pod_state() -> None:
    assert pod_state(_pod(msg=DRA_MSG)) == PodState(None, False, True)
    assert pod_state(_pod(msg="0/2 nodes are available: 2 Insufficient cpu.")).dra_pending is False
    assert pod_state(_pod(node="n1", phase="Running")) == PodState("n1", False, False)
    assert pod_state(_pod(node="n1", phase="Succeeded")).done is True
    assert pod_state({}) == PodState(None, False, False)


def test_admitted_intervals_open_close_and_requeue() -> None:
    obs = [
        JobObs(0.0, "a", True, False),
        JobObs(2.0, "a", False, False),
        JobObs(10.0, "a", False, True),
        JobObs(0.0, "b", True, False),
        JobObs(1.0, "b", False, False),
        JobObs(3.0, "b", True, False),  # stopped, then admitted again
        JobObs(5.0, "b", False, False),
        JobObs(1.0, "c", False, False),  # never finished: to the end
    ]
    assert admitted_intervals(obs, end=20.0) == {
        "a": [(2.0, 10.0)],
        "b": [(1.0, 3.0), (5.0, 20.0)],
        "c": [(1.0, 20.0)],
    }


def _p(at: float, pod: str, state: PodState, job: str = "j") -> PodObs:
    return PodObs(at, pod, job, state)


PENDING = PodState(None, False, False)
DRA = PodState(None, False, True)


def test_dra_pending_from_condition_or_event_until_bound() -> None:
    pods = [
        _p(1.0, "p1", PENDING),
        _p(3.0, "p1", DRA),
        _p(7.0, "p1", PodState("n", False, False)),
        _p(1.0, "p2", DRA),  # never placed: to the end
        _p(1.0, "p3", PENDING),  # pending, but never for DRA
        _p(4.0, "p3", PodState("n", False, False)),
    ]
    events = [
        EventObs(2.5, "p1", DRA_MSG),  # the event came first: from 2.5
        EventObs(9.0, "p1", DRA_MSG),  # after it was bound: ignored
        EventObs(2.0, "p3", "0/2 nodes are available: 2 Insufficient cpu."),
    ]
    assert dra_pending_intervals(pods, events, end=12.0) == {
        "p1": [(2.5, 7.0)],
        "p2": [(1.0, 12.0)],
    }


def test_a_gang_waiting_twice_at_once_counts_once_and_only_while_admitted() -> None:
    rec = Recording(
        created={"g": 0.0, "k": 0.0},
        jobs=[
            JobObs(0.0, "g", True, False),
            JobObs(2.0, "g", False, False),
            JobObs(20.0, "g", False, True),
            JobObs(0.0, "k", False, False),
            JobObs(4.0, "k", True, False),  # stopped at 4, its pod still Pending
        ],
        pods=[
            _p(3.0, "g-0", DRA, "g"),
            _p(7.0, "g-0", PodState("n", False, False), "g"),
            _p(5.0, "g-1", DRA, "g"),
            _p(9.0, "g-1", PodState("n", False, False), "g"),
            _p(1.0, "k-0", DRA, "k"),
            _p(6.0, "k-0", PodState(None, False, False, gone=True), "k"),
        ],
    )
    assert unplaceable_job_seconds(rec) == {"g": 6.0, "k": 3.0}


def test_held_intervals_from_bound_to_done() -> None:
    pods = [
        _p(1.0, "a", PENDING),
        _p(2.0, "a", PodState("n", False, False)),
        _p(3.0, "a", PodState("n", False, False)),
        _p(12.0, "a", PodState("n", True, False)),
        _p(13.0, "a", PodState("n", True, False)),
        _p(5.0, "b", PodState("n", False, False)),  # still running: to the end
    ]
    assert held_intervals(pods, end=30.0) == {"a": (2.0, 12.0), "b": (5.0, 30.0)}


def test_figures_utilisation_counts_slices_by_counters_and_waits() -> None:
    hw = hardware("bf1", "bf1", DRIVER, {}, nodes=1)  # 4 GPUs
    run = PodState("bf1-n0", False, False)
    fin = PodState("bf1-n0", True, False)
    rec = Recording(
        created={"a": 0.0, "b": 0.0, "c": 1.0},
        jobs=[
            JobObs(0.0, "a", False, False),
            JobObs(10.0, "a", False, True),
            JobObs(0.0, "b", True, False),
            JobObs(4.0, "b", False, False),
            JobObs(14.0, "b", False, True),
            JobObs(1.0, "c", False, False),
            JobObs(2.0, "c", False, True),
        ],
        pods=[
            _p(0.0, "a-0", run, "a"),
            _p(10.0, "a-0", fin, "a"),
            _p(4.0, "b-0", run, "b"),
            _p(14.0, "b-0", fin, "b"),
            _p(1.0, "c-0", run, "c"),  # its claim was never seen
            _p(2.0, "c-0", fin, "c"),
        ],
        claims={
            "a-0": {(DRIVER, "bf1-n0", "gpu-0"), (DRIVER, "bf1-n0", "gpu-1")},
            "b-0": {(DRIVER, "bf1-n0", "gpu-2-mig-1g10gb-0")},
        },
    )
    f = figures(rec, device_shares(hw), gpus_of(hw))
    assert f.jobs == 3 and f.admitted == 3
    assert f.gpu_s == pytest.approx(2 * 10 + 0.125 * 10)
    assert f.makespan_s == pytest.approx(14.0)
    assert f.gpu_util_pct == pytest.approx(100 * 21.25 / (4 * 14))
    assert f.pods_without_claims == 1
    assert f.wait_mean_s == pytest.approx(4 / 3)
    assert f.wait_p95_s == 4.0
    assert f.unplaceable_job_s == 0.0 and f.unplaceable_jobs == 0


def test_last_line_means_and_goals() -> None:
    rec = Recording(created={"a": 0.0}, jobs=[JobObs(1.0, "a", False, True)])
    f = figures(rec, {}, 4)
    good = f.__class__(**{**f.__dict__, "gpu_util_pct": 70.0, "wait_p95_s": 12.34})
    bad = f.__class__(
        **{**f.__dict__, "gpu_util_pct": 60.0, "unplaceable_job_s": 41.0, "wait_p95_s": 3.0}
    )
    line = last_line(48, good, bad)
    assert re.fullmatch(
        r"jobs=48 kuota_unplaceable_job_s=0\.0 kueue_unplaceable_job_s=41\.0 "
        r"kuota_gpu_util_pct=70\.0 kueue_gpu_util_pct=60\.0 "
        r"kuota_wait_p95_s=12\.3 kueue_wait_p95_s=3\.0",
        line,
    ), line
    assert mean_lines(good, bad) == ["kuota_wait_mean_s=1.0", "kueue_wait_mean_s=1.0"]
    assert all(g.endswith(": met") for g in goals(good, bad))
    assert all(g.endswith("NOT met") for g in goals(bad, good))
