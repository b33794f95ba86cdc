"""``Search.run``'s shortcut for gangs whose pods each ask for one device (the
commonest) finds what the backtracking levels find, with the same steps, and
runs out of budget where they do (#17).

Each case builds two identical searches; one runs the shortcut (``run``), the
other the general levels (``_run_levels``). Nodes carry a shared counter set
that devices draw on, some devices are taken before the search, some counters
spent; the gang has one to three pods, identical or not, each maybe kept to
some nodes; the budget goes from 1 step up."""

from __future__ import annotations

from typing import Any

from builders.manifests import GPU_DRIVER, device, device_class, resource_slice
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement import GangPod, _search, counter_key
from kuota.core.dra.placement_search import Search
from kuota.core.dra.placement_types import one_device

D = GPU_DRIVER


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[DraInventory, tuple[GangPod, ...], frozenset[Any], dict[str, int]]:
    inv = DraInventory()
    assert inv.upsert(device_class("gpu", cel=[f'device.attributes["{D}"].kind == "gpu"'])) is None
    ids: list[tuple[str, str, str]] = []
    consumed: dict[str, int] = {}
    names = []
    for n in range(draw(st.integers(1, 4))):
        node = f"node-{n}"
        names.append(node)
        cap = draw(st.integers(1, 4))
        devices = []
        for d in range(draw(st.integers(0, 5))):
            amount = draw(st.integers(0, cap))
            devices.append(
                device(
                    f"dev-{d}",
                    attributes={"kind": draw(st.sampled_from(["gpu", "gpu", "mig"]))},
                    consumes={"units": str(amount)} if amount else None,
                    counter_set="cs",
                )
            )
            ids.append((D, node, f"dev-{d}"))
        assert (
            inv.upsert(resource_slice(node, devices=devices, counters={"cs": {"units": str(cap)}}))
            is None
        )
        spent = draw(st.integers(0, cap))
        if spent:
            consumed[counter_key(D, node, "cs", "units")] = spent * 1000
    taken = frozenset(draw(st.lists(st.sampled_from(ids), max_size=4))) if ids else frozenset()
    pods: list[GangPod] = []
    for _ in range(draw(st.integers(1, 3))):
        if pods and draw(st.booleans()):
            pods.append(pods[-1])  # the same pod again (a podset's pods)
            continue
        nodes = draw(st.none() | st.frozensets(st.sampled_from(names)))
        pods.append(GangPod((ExactDeviceRequest("gpu"),), nodes))
    return inv, tuple(pods), taken, consumed


Case = tuple[DraInventory, tuple[GangPod, ...], frozenset[Any], dict[str, int]]


def _searches(case: Case, budget: int, prefilter: bool) -> tuple[Search, Search]:
    inv, pods, taken, consumed = case
    a = _search(inv, pods, taken, consumed, None, budget, prefilter=prefilter)
    b = _search(inv, pods, taken, consumed, None, budget, prefilter=prefilter)
    assert isinstance(a, Search) and isinstance(b, Search)
    return a, b


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(1, 40), st.booleans())
def test_the_shortcut_finds_what_the_levels_find(case: Case, budget: int, pre: bool) -> None:
    assert all(one_device(pod) for pod in case[1])
    short, full = _searches(case, budget, pre)
    found = short.run()
    assert found == full._run_levels()
    assert (short.steps, short.exhausted) == (full.steps, full.exhausted)
    if found is not None:
        assert short.node_of == full.node_of


def test_a_case_where_the_levels_pass_over_spent_devices() -> None:
    """Known answer: node-0's devices are taken or short of counters, so the
    placement is node-1's second device, after the steps both count."""
    inv = DraInventory()
    assert inv.upsert(device_class("gpu")) is None
    for node in ("node-0", "node-1"):
        devices = [device(f"dev-{d}", consumes={"units": "2"}, counter_set="cs") for d in range(3)]
        assert (
            inv.upsert(resource_slice(node, devices=devices, counters={"cs": {"units": "2"}}))
            is None
        )
    taken = frozenset({(D, "node-1", "dev-0")})
    consumed = {counter_key(D, "node-0", "cs", "units"): 1000}  # node-0: 1 unit left
    case = (inv, (GangPod((ExactDeviceRequest("gpu"),)),), taken, consumed)
    short, full = _searches(case, 100, False)
    expected = full._run_levels()
    assert expected is not None and expected[0].node == "node-1"
    assert expected[0].devices == (((D, "node-1", "dev-1"),),)
    assert short.run() == expected
    # node level: node-0, node-1 (2); device level on node-1: dev-1 (dev-0 is taken)
    assert short.steps == full.steps == 3
    # one step short of it: exhausted, as the levels are
    short, full = _searches(case, 2, False)
    assert short.run() is None and full._run_levels() is None
    assert short.exhausted and full.exhausted and short.steps == full.steps


def test_other_gangs_take_the_levels() -> None:
    two = ExactDeviceRequest("gpu", 2)
    admin = ExactDeviceRequest("gpu", admin_access=True)
    assert not one_device(GangPod((two,)))
    assert not one_device(GangPod((admin,)))
    assert not one_device(GangPod((ExactDeviceRequest("gpu"), ExactDeviceRequest("gpu"))))
    assert one_device(GangPod((ExactDeviceRequest("gpu"),), frozenset({"node-0"})))
