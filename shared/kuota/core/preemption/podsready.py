"""WaitForPodsReady: timeouts, requeue backoff, deactivation, blockAdmission.

Theory of operation: Kueue's ``waitForPodsReady`` as pure functions over a
per-workload :class:`ReadyState` and the configuration; every instant is an
argument (event time). :func:`deadline`: admission + ``timeout``, or, once
readiness was lost, + ``recoveryTimeout``. :func:`on_timeout`: evict with
``PodsReadyTimeout`` and requeue after ``backoffBaseSeconds × 2^(n-1)`` plus a
jitter, capped by ``backoffMaxSeconds``, or deactivate once requeued
``backoffLimitCount`` times. Kueue draws the jitter at random; here it comes
from a hash of the uid and n (:func:`jitter_fraction`), so replays agree bit
for bit. :func:`queue_time`: the eviction time under the ``Eviction``
requeuing timestamp (the default), else the creation time.
:func:`admission_blocked`: blockAdmission. The requeue count survives
re-admission and is forgotten on finish or deactivation. Rules:
docs/design/preemption.md ("WaitForPodsReady").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from kuota.api.types import WaitForPodsReady

__all__ = [
    "JITTER",
    "PODS_READY_TIMEOUT",
    "REQUEUING_LIMIT_EXCEEDED",
    "Deactivate",
    "ReadyState",
    "Requeue",
    "admission_blocked",
    "admitted",
    "backoff_seconds",
    "deadline",
    "jitter_fraction",
    "on_timeout",
    "pods_ready",
    "queue_time",
    "released",
    "requeued",
]

PODS_READY_TIMEOUT = "PodsReadyTimeout"  # Evicted reason
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"  # Deactivated reason
JITTER = 0.0001  # Kueue's wait.Backoff jitter factor for the requeue delay


@dataclass(frozen=True, slots=True)
class ReadyState:
    """What WaitForPodsReady remembers of one workload."""

    admitted_at: float | None = None  # the current admission; None while not admitted
    ready: bool = False  # the pods are ready now
    ever_ready: bool = False  # the pods were ready at some point of this admission
    not_ready_since: float | None = None  # when a ready workload stopped being ready
    requeue_count: int = 0  # PodsReadyTimeout evictions so far
    requeue_at: float | None = None  # not queued again before this instant
    evicted_at: float | None = None  # the last PodsReadyTimeout eviction


@dataclass(frozen=True, slots=True)
class Requeue:
    """Evict (PodsReadyTimeout) and queue again at ``at``."""

    state: ReadyState
    at: float
    delay: float


@dataclass(frozen=True, slots=True)
class Deactivate:
    """Evict and deactivate: the requeue limit is reached."""

    state: ReadyState
    count: int  # requeues done


# --------------------------------------------------------------------------- transitions


def admitted(state: ReadyState, *, at: float) -> ReadyState:
    """A (re-)admission starts the timeout; the backoff is over."""
    return replace(
        state, admitted_at=at, ready=False, ever_ready=False, not_ready_since=None, requeue_at=None
    )


def pods_ready(state: ReadyState, *, ready: bool, at: float) -> ReadyState:
    """A PodsReady event. Ignored while not admitted."""
    if state.admitted_at is None or ready == state.ready:
        return state
    if ready:
        return replace(state, ready=True, ever_ready=True, not_ready_since=None)
    return replace(state, ready=False, not_ready_since=at if state.ever_ready else None)


def requeued(state: ReadyState) -> ReadyState:
    """The backoff elapsed and the workload is queued again."""
    return replace(state, requeue_at=None)


def released(state: ReadyState) -> ReadyState:
    """The admission ended for another cause (preempted, evicted): no timer runs."""
    return replace(state, admitted_at=None, ready=False, ever_ready=False, not_ready_since=None)


# --------------------------------------------------------------------------- timers


def deadline(config: WaitForPodsReady, state: ReadyState) -> float | None:
    """When the PodsReady timer of an admitted workload fires, or None."""
    if not config.enable or state.admitted_at is None or state.ready:
        return None
    if not state.ever_ready:
        return state.admitted_at + config.timeout_seconds
    if config.recovery_timeout_seconds is None or state.not_ready_since is None:
        return None
    return state.not_ready_since + config.recovery_timeout_seconds


def jitter_fraction(uid: str, count: int) -> float:
    """A number in [0, 1) fixed by the workload's uid and requeue count."""
    digest = hashlib.sha256(f"{uid}\x00{count}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def backoff_seconds(config: WaitForPodsReady, *, count: int, uid: str) -> float:
    """Delay before the ``count``-th requeue (1-based): base × 2^(count-1) plus
    the deterministic jitter, capped by the maximum, in whole microseconds."""
    base = float(config.backoff_base_seconds) * 2.0 ** max(0, count - 1)
    delay = base * (1.0 + JITTER * jitter_fraction(uid, count))
    return round(min(delay, float(config.backoff_max_seconds)), 6)


def on_timeout(
    config: WaitForPodsReady, state: ReadyState, *, at: float, uid: str
) -> Requeue | Deactivate:
    """The timer fired at ``at``: requeue with backoff, or deactivate."""
    limit = config.backoff_limit_count
    gone = released(state)
    if limit is not None and state.requeue_count + 1 > limit:
        return Deactivate(replace(gone, requeue_at=None), state.requeue_count)
    count = state.requeue_count + 1
    delay = backoff_seconds(config, count=count, uid=uid)
    when = round(at + delay, 6)
    return Requeue(replace(gone, requeue_count=count, requeue_at=when, evicted_at=at), when, delay)


def queue_time(config: WaitForPodsReady, *, creation: float, state: ReadyState) -> float:
    """The time that orders the workload in its queue."""
    if config.requeuing_timestamp == "Eviction" and state.evicted_at is not None:
        return state.evicted_at
    return creation


def admission_blocked(config: WaitForPodsReady, *, not_ready: int) -> bool:
    """blockAdmission: no admission while ``not_ready`` admitted workloads wait for their pods."""
    return config.enable and config.block_admission and not_ready > 0
