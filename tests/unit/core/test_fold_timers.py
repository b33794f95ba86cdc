"""The fold's timer heap (``kuota.core.fold.timers``) and cycle order
(``kuota.core.fold.ordering``), on their own.

Timers fire in (instant, kind, key) order, those at ``now`` only when asked
(after the event), and a timer whose state moved on is dropped, not fired.
Through the fold: tests/unit/preemption (WaitForPodsReady, plan waits).
"""

from __future__ import annotations

from typing import Any, cast

from kuota.api.types import Configuration
from kuota.core.fold.ordering import cycle_order
from kuota.core.fold.timers import BACKOFF, PLAN_WAIT, PLAN_WAIT_NOTICES, Timers
from kuota.core.queueing.workload import WorkloadRecord
from kuota.core.quota.tree import QuotaTree

CONFIG = Configuration()


def _workloads(*keys: str) -> dict[str, WorkloadRecord]:
    return cast("dict[str, WorkloadRecord]", dict.fromkeys(keys))


def test_due_timers_fire_in_order_and_those_at_now_only_when_inclusive() -> None:
    timers = Timers()
    for when, key in ((20.0, "ns/c"), (10.0, "ns/b"), (10.0, "ns/a")):
        timers.backoff[key] = when
        timers.push(when, BACKOFF, key)
    workloads = _workloads("ns/a", "ns/b", "ns/c")
    assert timers.pop_due(10.0, False, CONFIG, workloads, {}) is None
    assert timers.pop_due(10.0, True, CONFIG, workloads, {}) == (10.0, BACKOFF, "ns/a")
    assert timers.pop_due(10.0, True, CONFIG, workloads, {}) == (10.0, BACKOFF, "ns/b")
    assert timers.pop_due(10.0, True, CONFIG, workloads, {}) is None
    assert timers.next_wakeup(CONFIG, workloads, {}) == 20.0


def test_a_stale_timer_is_dropped_not_fired() -> None:
    timers = Timers()
    timers.push(5.0, BACKOFF, "ns/gone")  # its workload is gone
    timers.backoff["ns/moved"] = 9.0
    timers.push(6.0, BACKOFF, "ns/moved")  # re-armed for 9.0 since
    since = 100.0
    timers.push(since + PLAN_WAIT_NOTICES[0], PLAN_WAIT, "ns/head")
    workloads = _workloads("ns/moved", "ns/head")
    awaiting = {"ns/head": since}
    assert timers.pop_due(200.0, True, CONFIG, workloads, awaiting) == (
        since + PLAN_WAIT_NOTICES[0],
        PLAN_WAIT,
        "ns/head",
    )
    assert timers.heap == []
    timers.push(since + PLAN_WAIT_NOTICES[1], PLAN_WAIT, "ns/head")
    assert timers.next_wakeup(CONFIG, workloads, {}) is None  # no longer awaiting


def test_without_pods_ready_nothing_blocks_and_nothing_is_remembered() -> None:
    timers = Timers()
    timers.admitted(CONFIG, "ns/a", at=1.0)  # WaitForPodsReady is off by default
    assert not timers.blocks_admission(CONFIG)
    assert timers.pods == {} and timers.heap == []


def test_the_classical_order_is_borrowing_then_priority_creation_and_key() -> None:
    entries: list[Any] = [
        (1, (0, 1.0, "ns/a"), "cq", None, None, None),
        (0, (-5, 3.0, "ns/b"), "cq", None, None, None),
        (0, (0, 2.0, "ns/c"), "cq", None, None, None),
        (0, (-5, 1.0, "ns/d"), "cq", None, None, None),
    ]
    ordered = cycle_order(entries, fair_sharing=False, tree=QuotaTree(), cqs={}, cohorts={})
    assert [e[1][2] for e in ordered] == ["ns/d", "ns/b", "ns/c", "ns/a"]
