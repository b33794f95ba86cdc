"""The placement's FitMemo never changes an answer (#17, bench-core with Nodes).

The fold keeps, between searches, which pods fit alone on which nodes
(:class:`~kuota.core.dra.placement.FitMemo`) and touches the nodes of every
device it takes or gives back. Property: along any sequence of devices taken
and given back, ``place_gang`` and ``fits_alone`` answer with the memo exactly
what they answer without it (placements, messages, proofs), on the clusters and
gangs of the placement-rule properties (counters, taints, adminAccess,
matchAttribute, allowed nodes).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dra_placement_rules_properties import Case, Dev, Node, build, cases, dev_id

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.placement import (
    DEFAULT_BUDGET,
    DeviceId,
    FitMemo,
    GangPod,
    NoPlacement,
    device_scope,
    fits_alone,
    place_gang,
)
from kuota.core.fold.node_fit import taken_counters

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def histories(draw: st.DrawFn) -> tuple[Case, list[tuple[int, DeviceId]]]:
    case = draw(cases())
    everything = [dev_id(n.name, d.name) for n in case.nodes for d in n.devices]
    steps: list[tuple[int, DeviceId]] = []
    if everything:
        for _ in range(draw(st.integers(1, 8))):
            steps.append((draw(st.sampled_from([1, -1])), draw(st.sampled_from(everything))))
    return case, steps


@PROPERTY
@given(histories())
def test_the_memo_answers_what_a_fresh_search_answers(
    history: tuple[Case, list[tuple[int, DeviceId]]],
) -> None:
    case, steps = history
    inv = build(case)
    memo = FitMemo()
    taken: set[DeviceId] = set(case.taken)
    names = sorted(n.name for n in case.nodes)

    def check() -> None:
        frozen = frozenset(taken)
        consumed = taken_counters(inv, frozen)
        fresh = place_gang(inventory=inv, pods=case.pods, taken=frozen, consumed=consumed)
        kept = place_gang(inventory=inv, pods=case.pods, taken=frozen, consumed=consumed, memo=memo)
        assert kept == fresh
        for pod in case.pods:
            for node in names:
                with_memo = fits_alone(
                    inventory=inv, pod=pod, nodes=[node], taken=frozen, consumed=consumed, memo=memo
                )
                alone = fits_alone(
                    inventory=inv, pod=pod, nodes=[node], taken=frozen, consumed=consumed
                )
                assert with_memo == alone

    check()
    check()  # the same state again: answers reused
    scope = device_scope(inv)
    for sign, device in steps:
        if sign > 0 and device not in taken:
            taken.add(device)
        elif sign < 0 and device in taken:
            taken.discard(device)
        else:
            continue
        memo.touch(scope.get(device, ()), took=sign > 0, gave=sign < 0)
        check()


# one node with one device of class "gpu"
_ONE_GPU = Case(
    (Node("node-0", None, (Dev("dev-0", "gpu", None, 0, None),)),), (GangPod(),), frozenset(), ()
)


def test_a_node_not_touched_keeps_its_answer_and_a_touched_one_is_asked_again() -> None:
    """The memo is used: with a device taken behind its back (no touch), the
    remembered answer stands; once the node is touched, it is asked again."""
    inv = build(_ONE_GPU)
    pod = GangPod((ExactDeviceRequest("gpu", 1),))
    memo = FitMemo()

    def fits(taken: frozenset[DeviceId]) -> bool:
        return fits_alone(
            inventory=inv, pod=pod, nodes=["node-0"], taken=taken, consumed={}, memo=memo
        )

    assert fits(frozenset())
    gone = frozenset({dev_id("node-0", "dev-0")})
    assert fits(gone)  # remembered: the node was not touched
    memo.touch(device_scope(inv)[dev_id("node-0", "dev-0")])
    assert not fits(gone)


def test_a_gang_failed_with_nothing_touched_since_gets_the_same_answer() -> None:
    """A failed placement is remembered by the gang's shape (each pod's token and
    node set): the same shape asked again, by another gang object, while no node
    was touched gets that answer (here, with the device freed behind the memo's
    back, the remembered failure stands); once a node is touched, it is searched
    again."""
    inv = build(_ONE_GPU)
    requests = (ExactDeviceRequest("gpu", 1),)
    memo = FitMemo()
    device = dev_id("node-0", "dev-0")

    def place(taken: frozenset[DeviceId]) -> object:
        pods = (GangPod(requests), GangPod(requests))  # new objects, the same shape
        return place_gang(inventory=inv, pods=pods, taken=taken, consumed={}, memo=memo)

    failed = place(frozenset({device}))
    assert isinstance(failed, NoPlacement)
    assert place(frozenset()) is failed  # nothing touched: the same answer, not searched
    memo.touch(device_scope(inv)[device])
    again = place(frozenset())
    assert isinstance(again, NoPlacement)  # two pods, one device: still none
    assert again is not failed and "cannot be placed together" in again.message
    assert place(frozenset()) is again


def test_a_remembered_failure_is_used_only_for_the_very_node_sets_it_was_for() -> None:
    """The key holds the ids of the pods' node sets: an entry whose kept pods have
    other sets (ids reused after a copy or pickle of the memo) is not an answer."""
    inv = build(_ONE_GPU)
    requests = (ExactDeviceRequest("gpu", 1),)
    allowed = frozenset({"node-0"})
    pods = (GangPod(requests, allowed),)
    memo = FitMemo()
    assert not isinstance(
        place_gang(inventory=inv, pods=pods, taken=frozenset(), consumed={}, memo=memo),
        NoPlacement,
    )
    token = memo.token(pods[0], inv.generation)
    stale = NoPlacement("remembered for another node set", 0)
    other = (GangPod(requests, frozenset({"node-0"})),)  # equal, not the same set
    memo.failed[(DEFAULT_BUDGET, token, id(allowed))] = (memo.clock, other, stale)
    found = place_gang(inventory=inv, pods=pods, taken=frozenset(), consumed={}, memo=memo)
    assert found is not stale and not isinstance(found, NoPlacement)
    memo.failed[(DEFAULT_BUDGET, token, id(allowed))] = (memo.clock, pods, stale)
    assert place_gang(inventory=inv, pods=pods, taken=frozenset(), consumed={}, memo=memo) is stale
