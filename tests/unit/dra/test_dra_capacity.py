"""Consumable capacity (KEP-5075): charging a share of a device, rule by rule.

Kueue's rules (docs/design/consumable-capacity.md): the request rounded per the
device's requestPolicy, the policy default or else the whole capacity when the
claim names no amount, the largest over the matching devices; and the reasons
a request cannot be charged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.manifests import device_class
from dra_builders import (
    GPU_CLASS,
    GPU_SHARES,
    MIG_CLASS,
    MPS_CLASS,
    WHOLE_DEVICES,
    config,
    h100_mps_node,
    mapping,
    milli,
    podset,
    share,
    slice_,
    template,
)
from dra_cases import NODES, Case, check, run
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.api.dra import CapacityRequestPolicy, parse_dra_object
from kuota.api.types import ValidationError
from kuota.core.dra.capacity import CapacityProblem, consumed
from kuota.core.dra.charging import Charge, NotChargeable, Reason
from kuota.core.fold.fold import Fold
from kuota.sim.engine import Simulator
from kuota.sim.scenario import load_scenario

MPS = h100_mps_node().build()
PLAIN = slice_("node-plain").shared_device("gpu-0", capacity={"memory": "80Gi"}).build()
VALUES = h100_mps_node("node-values", default="10Gi", validValues=["10Gi", "40Gi", "80Gi"]).build()
MPS_EXT = device_class(
    "mps.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.allowMultipleAllocations"],
    extended="nvidia.com/gpu-share",
)

CAPACITY_CASES = [
    Case(
        "a 20Gi share of an MPS H100 charges 20Gi",
        (MPS_CLASS, MPS, share("t", "20Gi")),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "20Gi"},
    ),
    Case(
        "15Gi against a 10Gi step charges 20Gi",
        (MPS_CLASS, MPS, share("t", "15Gi")),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "20Gi"},
    ),
    Case(
        "below the range's min charges the min",
        (MPS_CLASS, MPS, share("t", "1Gi")),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "10Gi"},
    ),
    Case(
        "no amount named: the policy default",
        (MPS_CLASS, MPS, share("t", None)),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "10Gi"},
    ),
    Case(
        "no amount and no policy: the whole capacity",
        (MPS_CLASS, PLAIN, share("t", None)),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "80Gi"},
    ),
    Case(
        "no policy: the request as it is",
        (MPS_CLASS, PLAIN, share("t", "7Gi")),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "7Gi"},
    ),
    Case(
        "validValues: the smallest valid value not below the request",
        (MPS_CLASS, VALUES, share("t", "20Gi")),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "40Gi"},
    ),
    Case(
        "the largest charge across the devices the request could match",
        (
            MPS_CLASS,
            MPS,
            h100_mps_node("node-b", default="16Gi", validValues=["16Gi", "32Gi"]).build(),
            share("t", "15Gi"),
        ),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "20Gi"},
    ),
    Case(
        "a device whose policy refuses the request is not a candidate",
        (
            MPS_CLASS,
            MPS,
            h100_mps_node("node-b", default="16Gi", validValues=["16Gi", "32Gi"]).build(),
            share("t", "50Gi"),
        ),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "50Gi"},
    ),
    Case(
        "count 2 charges twice, and pods multiply in the fold",
        (MPS_CLASS, MPS, h100_mps_node("node-b").build(), share("t", "20Gi", count=2)),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "40Gi"},
    ),
    Case(
        "other capacities requested must be given, only the mapped one is charged",
        (
            MPS_CLASS,
            slice_("n").shared_device("gpu-0", capacity={"memory": "80Gi", "cores": "100"}).build(),
            share("t", "20Gi", cores="30"),
        ),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "20Gi"},
    ),
    Case(
        "a domain-qualified name is the driver's own name",
        (MPS_CLASS, MPS, share("t", None, **{"gpu.nvidia.com/memory": "30Gi"})),
        GPU_SHARES,
        podset({}, "t"),
        want={"gpu-memory": "30Gi"},
    ),
    Case(
        "a device that cannot be shared is charged whole",
        (
            MPS_CLASS,
            GPU_CLASS,
            slice_("n")
            .shared_device("gpu-0", capacity={"memory": "80Gi"}, multi=False, type="gpu")
            .build(),
            template("t").request("gpu", "gpu.nvidia.com", capacity={"memory": "20Gi"}).build(),
        ),
        config(mapping("gpu-memory", "gpu.nvidia.com", capacity="memory")),
        podset({}, "t"),
        want={"gpu-memory": "80Gi"},
    ),
    Case(
        "the mapping's deviceSelector narrows the devices",
        (
            MPS_CLASS,
            MPS,
            h100_mps_node("node-b", default="16Gi", validValues=["16Gi", "32Gi"]).build(),
            share("t", "15Gi"),
        ),
        config(
            mapping(
                "gpu-memory",
                "mps.nvidia.com",
                capacity="memory",
                device_selector="device.capacity['gpu.nvidia.com'].memory.compareTo("
                "quantity('80Gi')) == 0 && !has(device.attributes['gpu.nvidia.com'].x)",
            )
        ),
        podset({}, "t"),
        want={"gpu-memory": "20Gi"},
    ),
    Case(
        "the mapping's driver filters the slices",
        (MPS_CLASS, MPS, share("t", "20Gi")),
        config(mapping("gpu-memory", "mps.nvidia.com", capacity="memory", driver="other.com")),
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message='0 device(s) of driver "other.com"',
    ),
    Case(
        "an extended resource of a shared class charges the default",
        (MPS_EXT, MPS),
        GPU_SHARES,
        podset({"nvidia.com/gpu-share": "1"}),
        want={"gpu-memory": "10Gi"},
    ),
    Case(
        "plain resources pass through beside the share",
        (MPS_CLASS, MPS, share("t", "20Gi")),
        GPU_SHARES,
        podset({"cpu": "2"}, "t"),
        want={"cpu": "2", "gpu-memory": "20Gi"},
    ),
]

REASON_CASES = [
    Case(
        "above the range's max",
        (MPS_CLASS, MPS, share("t", "90Gi")),
        GPU_SHARES,
        podset({}, "t"),
        reason=Reason.CAPACITY_OUT_OF_RANGE,
        retryable=False,
        message="90Gi is above the valid range's max 80Gi",
    ),
    Case(
        "rounded up above the range's max",
        (
            MPS_CLASS,
            h100_mps_node(
                default="16Gi", validRange={"min": "16Gi", "max": "72Gi", "step": "16Gi"}
            ).build(),
            share("t", "70Gi"),
        ),
        GPU_SHARES,
        podset({}, "t"),
        reason=Reason.CAPACITY_OUT_OF_RANGE,
        retryable=False,
        message="70Gi (rounded up to 80Gi) is above the valid range's max 72Gi",
    ),
    Case(
        "no policy: more than the device has",
        (MPS_CLASS, PLAIN, share("t", "81Gi")),
        GPU_SHARES,
        podset({}, "t"),
        reason=Reason.CAPACITY_OUT_OF_RANGE,
        retryable=False,
        message="81Gi is more than the device's 80Gi",
    ),
    Case(
        "validValues that nothing satisfies",
        (MPS_CLASS, VALUES, share("t", "90Gi")),
        GPU_SHARES,
        podset({}, "t"),
        reason=Reason.NO_VALID_CAPACITY_VALUE,
        retryable=False,
        message="90Gi is more than every valid value (10Gi, 40Gi, 80Gi)",
    ),
    Case(
        "a capacity the device does not publish",
        (MPS_CLASS, MPS, share("t", "20Gi", cores="10")),
        GPU_SHARES,
        podset({}, "t"),
        reason=Reason.UNKNOWN_CAPACITY,
        retryable=True,
        message='publishes capacity "cores"',
    ),
    Case(
        "the mapped capacity not published by any matching device",
        (MPS_CLASS, MPS, share("t", None)),
        config(mapping("gpu-cores", "mps.nvidia.com", capacity="cores")),
        podset({}, "t"),
        reason=Reason.UNKNOWN_CAPACITY,
        retryable=True,
        message='capacity "cores"',
    ),
    Case(
        "capacity.requests on a device-count mapping is refused, not charged a whole device",
        (
            GPU_CLASS,
            *NODES,
            template("t").request("gpu", "gpu.nvidia.com", capacity={"memory": "20Gi"}).build(),
        ),
        WHOLE_DEVICES,
        podset({}, "t"),
        reason=Reason.CAPACITY_NOT_MAPPED,
        retryable=False,
        message='requests capacity "memory"',
    ),
    Case(
        "capacity.requests on a counter mapping is refused",
        (
            MIG_CLASS,
            *NODES,
            template("t").request("gpu", "mig.nvidia.com", capacity={"memory": "5Gi"}).build(),
        ),
        config(mapping("gpu-memory", "mig.nvidia.com", counter="memory")),
        podset({}, "t"),
        reason=Reason.CAPACITY_NOT_MAPPED,
        retryable=False,
        message='mapping "gpu-memory"',
    ),
    Case(
        "more devices than can give the share",
        (
            MPS_CLASS,
            MPS,
            h100_mps_node("node-b", default="16Gi", validValues=["16Gi", "32Gi"]).build(),
            share("t", "40Gi", count=2),
        ),
        GPU_SHARES,
        podset({}, "t"),
        reason=Reason.INSUFFICIENT_DEVICES,
        retryable=True,
        message="1 device(s)",
    ),
    Case(
        "a deviceSelector that does not compile",
        (MPS_CLASS, MPS, share("t", "20Gi")),
        config(mapping("gpu-memory", "mps.nvidia.com", capacity="memory", device_selector="((")),
        podset({}, "t"),
        reason=Reason.INVALID_CEL,
        retryable=False,
        message='deviceClassMappings "gpu-memory" deviceSelector',
    ),
]


@pytest.mark.parametrize("case", CAPACITY_CASES, ids=lambda c: c.name)
def test_capacity_charges(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("case", REASON_CASES, ids=lambda c: c.name)
def test_capacity_not_chargeable(case: Case) -> None:
    check(case)


# --------------------------------------------------------------------------- parsing


def _slice_with(policy: dict[str, Any], *, multi: bool = True) -> object:
    return parse_dra_object(
        slice_("n")
        .shared_device(
            "gpu-0", capacity={"memory": "80Gi"}, policies={"memory": policy}, multi=multi
        )
        .build()
    )


def test_request_policy_is_read() -> None:
    got = _slice_with(
        GI_RANGE := {
            "default": "10Gi",
            "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"},
        }
    )
    assert not isinstance(got, ValidationError), (got, GI_RANGE)
    device = got.devices[0]  # type: ignore[attr-defined]
    assert device.request_policies == (
        (
            "memory",
            CapacityRequestPolicy(milli("10Gi"), (), milli("10Gi"), milli("80Gi"), milli("10Gi")),
        ),
    )


@pytest.mark.parametrize(
    ("policy", "multi", "fragment"),
    [
        ({"default": "10Gi"}, False, "requires allowMultipleAllocations"),
        (
            {"default": "10Gi", "validValues": ["10Gi"], "validRange": {"min": "1Gi"}},
            True,
            "mutually exclusive",
        ),
        ({"validValues": ["10Gi"]}, True, "default: required"),
        ({"default": "10Gi", "validValues": ["20Gi", "10Gi"]}, True, "ascending"),
        ({"default": "10Gi", "validValues": [f"{i}Gi" for i in range(1, 12)]}, True, "at most 10"),
        (
            {"default": "15Gi", "validRange": {"min": "10Gi", "step": "10Gi"}},
            True,
            "within validRange",
        ),
        ({"default": "10Gi", "validRange": {"min": "10Gi", "max": "5Gi"}}, True, "less than min"),
        ({"default": "10Gi", "validRange": {"min": "10Gi", "step": "0"}}, True, "positive"),
        ({"default": "10Gi", "validRange": {"step": "1Gi"}}, True, "validRange.min"),
    ],
)
def test_bad_request_policy_names_its_field(
    policy: dict[str, Any], multi: bool, fragment: str
) -> None:
    got = _slice_with(policy, multi=multi)
    assert isinstance(got, ValidationError), got
    assert got.field.startswith("spec.devices[0].capacity[memory].requestPolicy"), got
    assert fragment in f"{got.field}: {got.message}", got


@pytest.mark.parametrize(
    ("amounts", "fragment"),
    [
        ({"memory": "0"}, "positive"),
        ({"memory": "-1Gi"}, "negative"),
        ({"memory": "lots"}, "requests[memory]"),
        ({"/x": "1"}, "qualified name"),
    ],
)
def test_bad_capacity_request_is_a_validation_error(amounts: dict[str, str], fragment: str) -> None:
    manifest = template("t").request("gpu", "mps.nvidia.com", capacity=amounts).build()
    got = parse_dra_object(manifest)
    assert isinstance(got, ValidationError), got
    assert got.field.startswith("spec.spec.devices.requests[0].exactly.capacity.requests[")
    assert fragment in f"{got.field}: {got.message}", got


# --------------------------------------------------------------------------- properties

GI = 1024**3 * 1000  # one Gi in milli-units

amounts = st.integers(min_value=1, max_value=200).map(lambda n: n * GI // 4)


@st.composite
def policies(draw: st.DrawFn) -> CapacityRequestPolicy | None:
    kind = draw(st.sampled_from(["none", "default", "values", "range"]))
    if kind == "none":
        return None
    if kind == "default":
        return CapacityRequestPolicy(default=draw(amounts))
    if kind == "values":
        values = tuple(sorted(set(draw(st.lists(amounts, min_size=1, max_size=10)))))
        return CapacityRequestPolicy(default=draw(st.sampled_from(values)), valid_values=values)
    lo = draw(amounts)
    step = draw(st.none() | amounts)
    hi = draw(
        st.none() | st.integers(min_value=0, max_value=20).map(lambda n: lo + n * (step or GI))
    )
    return CapacityRequestPolicy(default=lo, range_min=lo, range_max=hi, step=step)


@settings(max_examples=400, deadline=None)
@given(value=amounts, policy=policies(), request=st.none() | amounts)
def test_rounding_never_undercharges(
    value: int, policy: CapacityRequestPolicy | None, request: int | None
) -> None:
    got = consumed(value=value, policy=policy, request=request)
    if isinstance(got, CapacityProblem):
        return
    base = (
        request
        if request is not None
        else (policy.default if policy and policy.default is not None else value)
    )
    assert base <= got <= value
    if policy and policy.valid_values:
        assert got in policy.valid_values
        assert all(v < base for v in policy.valid_values if v < got)  # the smallest that fits
    if policy and policy.range_min is not None:
        assert got >= policy.range_min
        assert policy.range_max is None or got <= policy.range_max
        if policy.step:
            assert (got - policy.range_min) % policy.step == 0
            assert got - policy.step < max(base, policy.range_min)  # not rounded past need
    # What a device would consume of a request is stable: charging it again is the same.
    assert consumed(value=value, policy=policy, request=got) == got


@settings(max_examples=100, deadline=None)
@given(
    value=st.integers(min_value=1, max_value=16).map(lambda n: f"{10 * n}Gi"),
    step=st.integers(min_value=1, max_value=8).map(lambda n: f"{n}Gi"),
    request=st.none() | st.integers(min_value=1, max_value=200).map(lambda n: f"{n}Gi"),
    count=st.integers(min_value=1, max_value=3),
)
def test_a_charge_covers_what_the_scheduler_would_allocate(
    value: str, step: str, request: str | None, count: int
) -> None:
    """End to end through charge_podset: a charge is per device at least the request
    and within the device; otherwise the verdict is a capacity reason."""
    policy = {"default": step, "validRange": {"min": step, "max": value, "step": step}}
    nodes = [
        slice_(f"n{i}")
        .shared_device("gpu-0", capacity={"memory": value}, policies={"memory": policy})
        .build()
        for i in range(3)
    ]
    case = Case(
        "p", (MPS_CLASS, *nodes, share("t", request, count=count)), GPU_SHARES, podset({}, "t")
    )
    got = run(case)
    if isinstance(got, NotChargeable):
        assert got.reason == Reason.CAPACITY_OUT_OF_RANGE, got
        assert request is not None
        rounded = -(-milli(request) // milli(step)) * milli(step)  # up to a step
        assert rounded > milli(value)
        return
    assert isinstance(got, Charge)
    ((name, charged),) = got.per_pod
    assert name == "gpu-memory"
    per_device = charged // count
    assert charged == per_device * count
    assert milli(request or step) <= per_device <= milli(value)
    assert (per_device - milli(step)) % milli(step) == 0


# --------------------------------------------------------------------------- through the fold

SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "gpu-shares.yaml"


def _share_job(i: int, template: str, at: int, run_for: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"share-{i}",
            "namespace": "inference",
            "labels": {"kueue.x-k8s.io/queue-name": "inference-queue"},
            "annotations": {"kuota.dev/submit-at": f"{at}s", "kuota.dev/run-for": f"{run_for}s"},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "s", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                }
            },
        },
    }


def _simulate(asks: list[tuple[int, int, int]]) -> list[Any]:
    """gpu-shares.yaml's cluster (one 80Gi MPS H100, quota 80Gi) with Jobs asking
    ``(Gi, submit second, run seconds)`` instead of its own."""
    docs = [
        d
        for d in yaml.safe_load_all(SCENARIO.read_text(encoding="utf-8"))
        if isinstance(d, dict) and d.get("kind") not in ("Job", "ResourceClaimTemplate")
    ]
    for i, (gi, at, run_for) in enumerate(asks):
        docs.append(share(f"ask-{i}", f"{gi}Gi"))
        docs[-1]["metadata"]["namespace"] = "inference"
        docs.append(_share_job(i, f"ask-{i}", at, run_for))
    simulator = Simulator(load_scenario(yaml.safe_dump_all(docs), source="p"), fold=Fold())
    out = simulator.run(max_steps=20_000)
    assert simulator.settled
    return out


@settings(max_examples=40, deadline=None)
@given(
    asks=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=90),
            st.integers(min_value=0, max_value=30),
            st.integers(min_value=1, max_value=40),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_the_shared_device_is_never_over_allocated_and_replay_is_identical(
    asks: list[tuple[int, int, int]],
) -> None:
    """What the admitted shares would consume of the one device (each request
    rounded by its policy, as the scheduler does) never passes its 80Gi, every
    admitted share is charged exactly that, a share the device cannot give is
    Inadmissible with the reason, and the same events decide the same again."""
    decisions = _simulate(asks)
    assert [d.model_dump_json() for d in decisions] == [
        d.model_dump_json() for d in _simulate(asks)
    ]
    policy = CapacityRequestPolicy(milli("10Gi"), (), milli("10Gi"), milli("80Gi"), milli("10Gi"))
    holding: dict[str, int] = {}
    for d in decisions:
        if d.workload is None:
            continue
        gi = asks[int(d.workload.rsplit("-", 1)[1])][0]
        takes = consumed(value=milli("80Gi"), policy=policy, request=milli(f"{gi}Gi"))
        if d.type == "Admitted":
            assert not isinstance(takes, CapacityProblem), d
            charged = sum(milli(q) for per in (d.usage or {}).values() for q in per.values())
            assert charged == takes, (gi, d.usage)
            holding[d.workload] = takes
            assert sum(holding.values()) <= milli("80Gi"), holding
        elif d.type == "Finished":
            holding.pop(d.workload, None)
        elif d.type == "Inadmissible" and isinstance(takes, CapacityProblem):
            assert d.reason == Reason.CAPACITY_OUT_OF_RANGE, d
    admitted = {d.workload for d in decisions if d.type == "Admitted"}
    for i, (gi, _, _) in enumerate(asks):
        assert (f"inference/share-{i}" in admitted) == (gi <= 80), (i, gi)
