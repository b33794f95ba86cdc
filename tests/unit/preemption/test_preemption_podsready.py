"""WaitForPodsReady: timers, backoff with deterministic jitter, deactivation,
queue position and blockAdmission."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuota.api.types import WaitForPodsReady
from kuota.core.preemption.podsready import (
    JITTER,
    Deactivate,
    ReadyState,
    Requeue,
    admission_blocked,
    admitted,
    backoff_seconds,
    deadline,
    jitter_fraction,
    on_timeout,
    pods_ready,
    queue_time,
    requeued,
)

ON = WaitForPodsReady(enable=True, timeout_seconds=300, backoff_base_seconds=60)


def config(**kw: object) -> WaitForPodsReady:
    return replace(ON, **kw)  # type: ignore[arg-type]


@dataclass
class TimerCase:
    name: str
    config: WaitForPodsReady
    events: list[tuple[str, float]]  # ("admitted"|"ready"|"unready", at)
    deadline: float | None


TIMER_CASES = [
    TimerCase("disabled: no timer", WaitForPodsReady(), [("admitted", 10)], None),
    TimerCase("not admitted: no timer", ON, [], None),
    TimerCase("admitted: timeout from admission", ON, [("admitted", 10)], 310),
    TimerCase("ready: the timer stops", ON, [("admitted", 10), ("ready", 20)], None),
    TimerCase(
        "ready then not ready: the recovery timeout runs from then",
        config(recovery_timeout_seconds=30),
        [("admitted", 10), ("ready", 20), ("unready", 100)],
        130,
    ),
    TimerCase(
        "no recovery timeout configured: no timer after a loss of readiness",
        ON,
        [("admitted", 10), ("ready", 20), ("unready", 100)],
        None,
    ),
    TimerCase(
        "not ready before ever being ready keeps the admission timer",
        config(recovery_timeout_seconds=30),
        [("admitted", 10), ("unready", 50)],
        310,
    ),
    TimerCase(
        "a re-admission starts afresh",
        ON,
        [("admitted", 10), ("ready", 20), ("admitted", 500)],
        800,
    ),
]


@pytest.mark.parametrize("case", TIMER_CASES, ids=[c.name for c in TIMER_CASES])
def test_deadline(case: TimerCase) -> None:
    state = ReadyState()
    for what, at in case.events:
        if what == "admitted":
            state = admitted(state, at=at)
        else:
            state = pods_ready(state, ready=what == "ready", at=at)
    assert deadline(case.config, state) == case.deadline


def test_pods_ready_is_ignored_while_not_admitted() -> None:
    assert pods_ready(ReadyState(), ready=True, at=5) == ReadyState()


@pytest.mark.parametrize(
    ("count", "nominal"),
    [(1, 10), (2, 20), (3, 40), (4, 80), (5, 100), (9, 100)],
)
def test_backoff_doubles_up_to_the_maximum(count: int, nominal: float) -> None:
    cfg = config(backoff_base_seconds=10, backoff_max_seconds=100)
    got = backoff_seconds(cfg, count=count, uid="u-1")
    assert nominal <= got <= nominal * (1 + JITTER)
    if nominal == 100:
        assert got == 100


@given(uid=st.text(max_size=20), count=st.integers(1, 30))
def test_jitter_is_deterministic_and_small(uid: str, count: int) -> None:
    f = jitter_fraction(uid, count)
    assert 0 <= f < 1
    assert f == jitter_fraction(uid, count)
    delay = backoff_seconds(ON, count=count, uid=uid)
    assert delay == backoff_seconds(ON, count=count, uid=uid)
    assert delay <= ON.backoff_max_seconds


def test_jitter_differs_between_workloads() -> None:
    assert len({jitter_fraction(f"uid-{i}", 1) for i in range(50)}) == 50


def test_requeues_then_deactivation_at_the_limit() -> None:
    cfg = config(backoff_limit_count=2, backoff_base_seconds=10, backoff_max_seconds=1000)
    state = admitted(ReadyState(), at=0)
    outcomes: list[Requeue | Deactivate] = []
    at = 0.0
    for _ in range(3):
        fired = deadline(cfg, state)
        assert fired is not None
        at = fired
        outcome = on_timeout(cfg, state, at=at, uid="u")
        outcomes.append(outcome)
        if isinstance(outcome, Deactivate):
            break
        assert outcome.state.admitted_at is None and deadline(cfg, outcome.state) is None
        state = admitted(requeued(outcome.state), at=outcome.at)
    first, second, third = outcomes
    assert isinstance(first, Requeue) and isinstance(second, Requeue)
    assert first.state.requeue_count == 1 and 10 <= first.delay < 10.01
    assert second.state.requeue_count == 2 and 20 <= second.delay < 20.01
    assert first.at == pytest.approx(300 + first.delay)
    assert isinstance(third, Deactivate) and third.count == 2


def test_no_limit_requeues_forever() -> None:
    state = ReadyState(requeue_count=500)
    outcome = on_timeout(config(backoff_limit_count=None), admitted(state, at=0), at=300, uid="u")
    assert isinstance(outcome, Requeue) and outcome.state.requeue_count == 501


def test_limit_zero_deactivates_on_the_first_timeout() -> None:
    outcome = on_timeout(config(backoff_limit_count=0), admitted(ReadyState(), at=0), at=1, uid="u")
    assert isinstance(outcome, Deactivate) and outcome.count == 0


@pytest.mark.parametrize(
    ("timestamp", "evicted_at", "expected"),
    [("Eviction", 400.0, 400.0), ("Creation", 400.0, 5.0), ("Eviction", None, 5.0)],
)
def test_queue_time(timestamp: str, evicted_at: float | None, expected: float) -> None:
    cfg = config(requeuing_timestamp=timestamp)
    state = ReadyState(evicted_at=evicted_at)
    assert queue_time(cfg, creation=5.0, state=state) == expected


def test_the_eviction_time_is_recorded_on_timeout() -> None:
    outcome = on_timeout(ON, admitted(ReadyState(), at=0), at=300, uid="u")
    assert isinstance(outcome, Requeue) and outcome.state.evicted_at == 300


@pytest.mark.parametrize(
    ("cfg", "not_ready", "blocked"),
    [
        (config(block_admission=True), 1, True),
        (config(block_admission=True), 0, False),
        (config(block_admission=False), 3, False),
        (WaitForPodsReady(enable=False, block_admission=True), 3, False),
    ],
)
def test_block_admission(cfg: WaitForPodsReady, not_ready: int, blocked: bool) -> None:
    assert admission_blocked(cfg, not_ready=not_ready) is blocked
