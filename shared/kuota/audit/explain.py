"""One workload's history: ``kuota explain ns/job``.

Theory of operation: two replayable inputs, the recorded decisions and the
journal. :func:`relevant` picks the decisions that concern the workload (its
own, those naming it as ``preemptor``, the ``Rejected`` of its Job manifest),
in topic order. An :class:`Explainer` re-folds the journal in the services'
mode (``preemption="plans"``) and, right after the event that caused each of
them (``cause_offset``), keeps ``Fold.summary()`` for the decision's
ClusterQueue and the others of its cohort. At the end of the range it asks the
fold where the workload is: ``workload_state`` and, while it waits, its
position (``Fold.pending_workloads``) and the last ``Inadmissible`` reason. A
workload whose last decision is ``Finished`` needs no fold past it
(:attr:`Explainer.needed_until`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kuota.audit.replay import JournalRecord, service_fold
from kuota.core.fold.fold import ClusterQueueSummary, Fold
from kuota.core.quota.rows import row_json
from kuota.events.schema import Decision
from kuota.kinds import workload_ref

__all__ = [
    "Explainer",
    "Explanation",
    "Step",
    "Waiting",
    "relevant",
    "summary_dict",
]

WORKLOAD = "workload"  # the decision is about the workload itself
PREEMPTOR = "preemptor"  # the workload preempted the decision's workload
AHEAD_SHOWN = 5


def relevant(key: str, decisions: Iterable[Decision]) -> list[Decision]:
    """The decisions about ``key``: its own, the preemptions it caused, and the
    rejections of its manifest (``Rejected`` names the object ``Job ns/name``,
    ``PyTorchJob ns/name``; a pod group's are its Pods', not named by the key)."""
    ref = workload_ref(key)
    job = f"{ref.kind} {ref.namespace}/{ref.name}" if ref is not None else f"Job {key}"
    return [d for d in decisions if d.workload == key or d.preemptor == key or d.object == job]


def _preempted_by(d: Decision, key: str) -> bool:
    """Whether ``d`` is about another workload that ``key`` preempted (else it is
    about ``key`` itself: its own decision, or a Rejected of its manifest)."""
    return d.preemptor == key and d.workload != key


def summary_dict(s: ClusterQueueSummary) -> dict[str, Any]:
    return {
        "name": s.name,
        "cohort": s.cohort,
        "admitted": s.admitted,
        "pending": s.pending,
        "resources": [row_json(r) for r in s.resources],
    }


@dataclass(frozen=True, slots=True)
class Step:
    decision: Decision
    role: str  # WORKLOAD | PREEMPTOR
    # After the cause event: the decision's ClusterQueue, then the rest of its cohort.
    quota: tuple[ClusterQueueSummary, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "decision": self.decision.model_dump(mode="json", exclude_none=True),
            "quota": [summary_dict(s) for s in self.quota],
        }


@dataclass(frozen=True, slots=True)
class Waiting:
    """Where and why a workload that is not admitted waits."""

    state: str
    cluster_queue: str | None
    local_queue: str | None
    position: int | None  # 0-based, in its ClusterQueue (Kueue's positionInClusterQueue)
    local_position: int | None  # 0-based, in its LocalQueue (positionInLocalQueue)
    queued: int  # workloads queued in that ClusterQueue
    ahead: tuple[str, ...]  # the (up to 5) workloads just ahead of it
    reason: str | None  # of the last Inadmissible decision
    message: str | None
    reason_at: float | None = None  # that decision's event time
    # admission fair sharing of its ClusterQueue: (LocalQueue, usage, consumed),
    # lowest usage first (the order the LocalQueues' workloads go)
    fair_sharing: tuple[tuple[str, float, dict[str, str]], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "cluster_queue": self.cluster_queue,
            "local_queue": self.local_queue,
            "position_in_cluster_queue": self.position,
            "position_in_local_queue": self.local_position,
            "queued_in_cluster_queue": self.queued,
            "ahead": list(self.ahead),
            "reason": self.reason,
            "message": self.message,
            "reason_at": self.reason_at,
            "admission_fair_sharing": [
                {
                    "local_queue": name,
                    "weighted_usage": None if usage == float("inf") else usage,
                    "consumed": consumed,
                }
                for name, usage, consumed in self.fair_sharing
            ],
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    workload: str
    steps: tuple[Step, ...]
    state: str | None  # the fold's workload_state at the end (None: unknown to the fold)
    waiting: Waiting | None
    as_of_offset: int | None  # last journal offset folded
    as_of: float | None  # its event time

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "state": self.state,
            "as_of_offset": self.as_of_offset,
            "as_of": self.as_of,
            "history": [s.to_dict() for s in self.steps],
            "waiting": self.waiting.to_dict() if self.waiting else None,
        }


@dataclass(slots=True)
class Explainer:
    """Re-fold the journal for one workload's decisions (see the module docstring)."""

    key: str
    decisions: list[Decision]  # from :func:`relevant`, in topic order
    fold: Fold = field(default_factory=service_fold)  # the admission service's mode
    _wanted: dict[int, list[int]] = field(init=False)  # cause offset -> indexes
    _quota: dict[int, tuple[ClusterQueueSummary, ...]] = field(init=False)
    _last_offset: int | None = None

    def __post_init__(self) -> None:
        self._wanted = {}
        for i, d in enumerate(self.decisions):
            if d.cause_offset is not None:
                self._wanted.setdefault(d.cause_offset, []).append(i)
        self._quota = {}

    @property
    def needed_until(self) -> int | None:
        """Fold up to and including this offset; None: the whole range (the
        workload may still be waiting, so its end state matters)."""
        own = [d for d in self.decisions if d.workload == self.key]
        if own and own[-1].type == "Finished" and self._wanted:
            return max(self._wanted)
        return None

    def event(self, record: JournalRecord) -> None:
        offset = record.offset
        self._last_offset = offset
        if record.event is None:
            return
        try:
            self.fold.apply(record.event, offset=offset)
        except Exception:  # admission dead-letters it and goes on; so do we
            return
        indexes = self._wanted.get(offset)
        if not indexes:
            return
        summaries = self.fold.summary()
        by_name = {s.name: s for s in summaries}
        for i in indexes:
            cq = self.decisions[i].cluster_queue
            own = by_name.get(cq) if cq is not None else None
            if own is None:
                continue
            cohort = [
                s for s in summaries if own.cohort and s.cohort == own.cohort and s.name != cq
            ]
            self._quota[i] = (own, *cohort)

    def explain(self) -> Explanation:
        steps = tuple(
            Step(d, PREEMPTOR if _preempted_by(d, self.key) else WORKLOAD, self._quota.get(i, ()))
            for i, d in enumerate(self.decisions)
        )
        state = self.fold.workload_state(self.key)
        waiting = None
        if state is not None and state not in ("Admitted", "Finished"):
            waiting = self._waiting(state)
        return Explanation(
            workload=self.key,
            steps=steps,
            state=state,
            waiting=waiting,
            as_of_offset=self._last_offset,
            as_of=self.fold.now if self._last_offset is not None else None,
        )

    def _waiting(self, state: str) -> Waiting:
        own = [d for d in self.decisions if d.workload == self.key]
        last_inadmissible = next((d for d in reversed(own) if d.type == "Inadmissible"), None)
        for summary in self.fold.summary():
            queue = self.fold.pending_workloads(summary.name)
            keys = [k for k, _ in queue]
            if self.key not in keys:
                continue
            position = keys.index(self.key)
            local = queue[position][1]
            namespace = self.key.split("/", 1)[0]
            local_position = sum(
                1 for k, lq in queue[:position] if lq == local and k.split("/", 1)[0] == namespace
            )
            return Waiting(
                state=state,
                cluster_queue=summary.name,
                local_queue=local,
                position=position,
                local_position=local_position,
                queued=len(keys),
                ahead=tuple(keys[max(0, position - AHEAD_SHOWN) : position]),
                reason=last_inadmissible.reason if last_inadmissible else None,
                message=last_inadmissible.message if last_inadmissible else None,
                reason_at=last_inadmissible.at if last_inadmissible else None,
                fair_sharing=tuple(self.fold.local_queue_usage(summary.name)),
            )
        # Held outside any queue (no LocalQueue, ClusterQueue or priority class).
        return Waiting(
            state=state,
            cluster_queue=last_inadmissible.cluster_queue if last_inadmissible else None,
            local_queue=None,
            position=None,
            local_position=None,
            queued=0,
            ahead=(),
            reason=last_inadmissible.reason if last_inadmissible else None,
            message=last_inadmissible.message if last_inadmissible else None,
            reason_at=last_inadmissible.at if last_inadmissible else None,
        )
