"""The fold's timers, and the WaitForPodsReady memory they read.

Theory of operation: :class:`Timers` is a component the fold holds (not a
layer of it). One heap of ``(instant, kind, key)`` holds every timer: a
PodsReady timeout (``TIMEOUT``), the end of a requeue backoff (``BACKOFF``) and
the preemption layer's plan-wait notices (``PLAN_WAIT``). Entries are never
removed early: one is *live* only if the state it was armed for still holds
(:meth:`Timers.live`), and stale ones are dropped when they surface. Per
workload it keeps the :class:`~kuota.core.preemption.podsready.ReadyState`
that the pure rules of :mod:`kuota.core.preemption.podsready` advance, which
admitted workloads' pods are not ready (for ``blockAdmission``), which wait out
a backoff outside any queue, and which the requeue limit deactivated. The
fold acts on what fires (releases, decisions, placement): ``Cycles._timed_out``
and ``Cycles._end_backoff``; ``Preempting._fire_timers`` pops them in order.
"""

from __future__ import annotations

import heapq

from kuota.api.types import Configuration, WaitForPodsReady, WorkloadSpec
from kuota.core.preemption.podsready import (
    Deactivate,
    ReadyState,
    Requeue,
    admission_blocked,
    admitted,
    deadline,
    on_timeout,
    pods_ready,
    queue_time,
    released,
    requeued,
)
from kuota.core.queueing.workload import ADMITTED, WorkloadRecord

TIMEOUT = 0
BACKOFF = 1
PLAN_WAIT = 2
# Event-time seconds after which a head still awaiting a plan is announced again.
PLAN_WAIT_NOTICES = (5.0, 30.0, 120.0, 600.0)

Timer = tuple[float, int, str]  # (instant, kind, workload key)


class Timers:
    """The timer heap and WaitForPodsReady's state (see the module docstring)."""

    def __init__(self) -> None:
        self.heap: list[Timer] = []
        self.pods: dict[str, ReadyState] = {}  # WaitForPodsReady state per workload
        self.not_ready: dict[str, None] = {}  # admitted workloads whose pods are not ready
        self.backoff: dict[str, float] = {}  # workload -> requeue instant
        self.limit_deactivated: dict[str, None] = {}

    def push(self, when: float, kind: int, key: str) -> None:
        heapq.heappush(self.heap, (when, kind, key))

    # ------------------------------------------------------------------ WaitForPodsReady

    def blocks_admission(self, config: Configuration) -> bool:
        """blockAdmission: whether no admission may happen now."""
        not_ready = self.not_ready  # empty unless WaitForPodsReady is on
        return bool(not_ready) and admission_blocked(
            config.wait_for_pods_ready, not_ready=len(not_ready)
        )

    def admitted(self, config: Configuration, key: str, at: float) -> None:
        """An admission starts the PodsReady timer (if WaitForPodsReady is on)."""
        cfg = config.wait_for_pods_ready
        if cfg.enable:
            state = admitted(self.pods.get(key, ReadyState()), at=at)
            self.pods[key] = state
            self.not_ready[key] = None
            self._arm(cfg, key, state)

    def released(self, key: str) -> None:
        """The admission ended (finished, evicted, preempted): no timer runs."""
        if self.pods:
            self.not_ready.pop(key, None)
            state = self.pods.get(key)
            if state is not None:
                self.pods[key] = released(state)

    def pods_ready(
        self, config: Configuration, rec: WorkloadRecord | None, ready: bool, at: float
    ) -> None:
        """A PodsReady event: stop the timer, or restart it."""
        if rec is None:
            return
        rec.pods_ready = ready
        key = rec.key
        state = self.pods.get(key)
        if state is None or rec.state != ADMITTED:
            return
        state = pods_ready(state, ready=ready, at=at)
        self.pods[key] = state
        if ready:
            self.not_ready.pop(key, None)
        else:
            self.not_ready[key] = None
            self._arm(config.wait_for_pods_ready, key, state)

    def _arm(self, cfg: WaitForPodsReady, key: str, state: ReadyState) -> None:
        when = deadline(cfg, state)
        if when is not None:
            self.push(when, TIMEOUT, key)

    def requeue_time(self, config: Configuration, rec: WorkloadRecord) -> float | None:
        """The queue time that replaces creation after a PodsReady timeout, if any."""
        state = self.pods.get(rec.key) if self.pods else None
        if state is None or state.evicted_at is None:
            return None
        return queue_time(
            config.wait_for_pods_ready, creation=rec.spec.creation_seconds, state=state
        )

    def spec_changed(self, rec: WorkloadRecord, spec: WorkloadSpec) -> bool:
        """A pending workload's Job changed. True if it keeps waiting out its
        backoff (with the new spec); one deactivated by the requeue limit
        starts afresh (False: the fold places it again)."""
        key = rec.key
        if key in self.backoff:
            rec.spec = spec
            return True
        if key in self.limit_deactivated:
            del self.limit_deactivated[key]
            self.pods.pop(key, None)
        return False

    def forget(self, key: str) -> None:
        """The workload finished or its Job is gone."""
        # Mostly all empty (no WaitForPodsReady): test before popping.
        if self.pods:
            self.pods.pop(key, None)
        if self.not_ready:
            self.not_ready.pop(key, None)
        if self.backoff:
            self.backoff.pop(key, None)
        if self.limit_deactivated:
            self.limit_deactivated.pop(key, None)

    def timeout(
        self, config: Configuration, rec: WorkloadRecord, when: float
    ) -> Requeue | Deactivate:
        """What the PodsReady timer of ``rec`` firing at ``when`` leads to
        (nothing changes until :meth:`timed_out`)."""
        return on_timeout(config.wait_for_pods_ready, self.pods[rec.key], at=when, uid=rec.spec.uid)

    def timed_out(self, key: str, outcome: Requeue | Deactivate) -> None:
        """Record a timeout's outcome (after the fold released the admission)."""
        self.pods[key] = outcome.state
        if isinstance(outcome, Deactivate):
            self.limit_deactivated[key] = None
            return
        self.backoff[key] = outcome.at
        self.push(outcome.at, BACKOFF, key)

    def end_backoff(self, key: str) -> None:
        del self.backoff[key]
        self.pods[key] = requeued(self.pods[key])

    # ------------------------------------------------------------------ firing

    def live(
        self,
        timer: Timer,
        config: Configuration,
        workloads: dict[str, WorkloadRecord],
        awaiting_plan: dict[str, float],
    ) -> bool:
        """Whether the state ``timer`` was armed for still holds."""
        when, kind, key = timer
        if kind == BACKOFF:
            return self.backoff.get(key) == when and key in workloads
        if kind == PLAN_WAIT:
            since = awaiting_plan.get(key)
            return since is not None and any(since + a == when for a in PLAN_WAIT_NOTICES)
        rec = workloads.get(key)
        state = self.pods.get(key)
        return (
            rec is not None
            and rec.state == ADMITTED
            and state is not None
            and deadline(config.wait_for_pods_ready, state) == when
        )

    def next_wakeup(
        self,
        config: Configuration,
        workloads: dict[str, WorkloadRecord],
        awaiting_plan: dict[str, float],
    ) -> float | None:
        """The earliest live timer's instant (stale ones above it are dropped)."""
        heap = self.heap
        while heap and not self.live(heap[0], config, workloads, awaiting_plan):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(
        self,
        now: float,
        inclusive: bool,
        config: Configuration,
        workloads: dict[str, WorkloadRecord],
        awaiting_plan: dict[str, float],
    ) -> Timer | None:
        """The next live timer due before ``now`` (or at ``now`` if
        ``inclusive``), taken off the heap; None when there is none."""
        heap = self.heap
        while heap:
            timer = heap[0]
            when = timer[0]
            if when > now or (when == now and not inclusive):
                return None
            heapq.heappop(heap)
            if self.live(timer, config, workloads, awaiting_plan):
                return timer
        return None
