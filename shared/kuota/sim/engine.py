"""The simulation engine: a scenario timeline folded through the real core.

Theory of operation: the engine turns manifests (in file order) into journal
events on a virtual clock and feeds them one at a time to a fold (the one the
admission service runs); no clock, no randomness, so the same manifests give
the same decisions bit for bit. Time is an ``int`` of microseconds. Events are
taken in ``(instant, origin, sequence)`` order: at one instant file events
(``submit-at``, ``delete-at``) come first, then engine events (``PodsReady``
at admission + ``ready-after``, ``WorkloadFinished`` at admission +
``run-for``, each tagged with the workload's admission generation so a
cut-short run never finishes later; ``WorkloadStopped`` at a stop +
``stop-after``, what the actuator reports once a stopped Job's pods are
gone). A timer of the fold (``next_wakeup``) due before the next event gets a
``Tick``. With a planning side (``--preemption
plans``) every event is handed to it too, and the plans it answers are applied
next, at the same instant. Rules in full: docs/design/simulate.md ("Time and order").
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kuota.events.schema import (
    Decision,
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    PreemptionPlan,
    WorkloadFinished,
    WorkloadStopped,
    trusted_deleted,
    trusted_finished,
    trusted_pods_ready,
    trusted_tick,
    trusted_upserted,
)
from kuota.kinds import names, workload_ref
from kuota.kinds import workload_key as kinds_workload_key
from kuota.sim.duration import (
    DurationError,
    exact_seconds,
    format_seconds,
    micros_to_seconds,
    parse_duration,
    seconds_to_micros_ceil,
)
from kuota.sim.scenario import (
    CREATED_AT,
    ScenarioError,
    SimulationError,
    Timing,
    describe,
    timing_of,
)

#: Kinds the engine treats as workloads (timing of runs, ``created-at``): kuota.kinds'.
WORKLOAD_KINDS = names("workload")
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
#: Decisions after which a workload no longer holds its admission.
ENDS_ADMISSION = frozenset({"Preempted", "Evicted", "Finished", "Deactivated"})
#: Stops the actuator answers with WorkloadStopped once the Job's pods are gone
#: (and ``Finished`` with reason ``Deleted``).
STOPS = frozenset({"Preempted", "Evicted", "Deactivated"})
#: Ticks the fold may ask for at one and the same instant before the engine
#: calls it a runaway (a fold whose wakeup does not move after a Tick).
MAX_TICKS_PER_INSTANT = 64

_FILE = 0
_ENGINE = 1
_NO_TIMING = Timing()  # the defaults, for a workload the engine did not submit

# The engine builds every event from values it computed itself (an id, a float
# instant, a manifest copy), so it uses the schema's trusted constructors: the
# same events as validation gives, without validating them at every step.
_UPSERT = 0
_DELETE = 1
_PODS_READY = 0
_FINISHED = 1
_STOPPED = 2


class FoldLike(Protocol):
    """What the engine needs of a fold (``kuota.core.fold.fold.Fold`` fits)."""

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]: ...

    def next_wakeup(self) -> float | None: ...


class PlanningLike(Protocol):
    """The preemption service's side of plans mode (``kuota.sim.planning``)."""

    def after(self, event: JournalEvent, *, offset: int) -> list[JournalEvent]: ...


@dataclass(slots=True, init=False)
class Step:
    """One applied event and the decisions it caused. Read-only (``Final``, which
    mypy enforces) rather than frozen: a frozen dataclass sets each field through
    ``object.__setattr__``, which costs more than the rest of a step's bookkeeping."""

    event: Final[JournalEvent]
    decisions: Final[list[Decision]]

    def __init__(self, event: JournalEvent, decisions: list[Decision]) -> None:
        self.event = event
        self.decisions = decisions


def workload_key(manifest: Mapping[str, Any]) -> str | None:
    """The workload key of a workload manifest (namespace defaults to
    ``default``, as ``kubectl`` does), or None for other kinds:
    ``namespace/name`` for a Job, ``namespace/<kind>/name`` for another kind
    (docs/design/workload-identity.md); a Pod's is its pod group's
    (``namespace/podgroup/<group>``), a LeaderWorkerSet's the object's, whose
    groups' keys extend it (:func:`timing_key`)."""
    kind = manifest.get("kind")
    if kind not in WORKLOAD_KINDS:
        return None
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    namespace = metadata.get("namespace") or "default"
    if kind == "Job":
        return f"{namespace}/{name}"
    if kind == "Pod":
        labels = metadata.get("labels")
        group = labels.get(POD_GROUP_LABEL) if isinstance(labels, Mapping) else None
        if isinstance(group, str) and group:
            return kinds_workload_key("Pod", namespace, group, pod_group=True)
    return kinds_workload_key(str(kind), namespace, name)


def timing_key(key: str) -> str:
    """The key whose manifest times the workload ``key``: its own, or for a
    LeaderWorkerSet group (``ns/leaderworkerset/<name>/<i>``) its object's."""
    if key.count("/") == 3:
        return key.rpartition("/")[0]
    return key


class Simulator:
    """Runs one scenario through a fold. Single use: ``run`` or ``steps`` once."""

    def __init__(
        self,
        manifests: Sequence[Mapping[str, Any]],
        *,
        fold: FoldLike,
        planning: PlanningLike | None = None,
    ) -> None:
        self._fold = fold
        self._planning = planning
        self._plans: list[JournalEvent] = []  # written by the planning side, not yet applied
        self._manifests = list(manifests)
        for position, manifest in enumerate(self._manifests):
            # What validating ObjectUpserted.object (a dict[str, Any]) would refuse.
            # The keys are read as objects: compiled (``make native``), a ``str``
            # loop variable would be checked, and fail, before isinstance could say.
            keys: Iterable[object] = manifest
            if not all(isinstance(key, str) for key in keys):
                raise ScenarioError(
                    f"{describe(manifest, index=position)}: every top-level key must be a string"
                )
        # Read every timing first: a bad annotation fails before anything runs.
        self._timings: list[Timing] = [
            timing_of(manifest, index=index) for index, manifest in enumerate(self._manifests)
        ]
        self._keys: list[str | None] = [workload_key(m) for m in self._manifests]
        # File events are all known up front: one sorted list read in order (a
        # cursor), merged with the heap of engine events, which stays small (a
        # heap of every Job would cost a log-n pop per step).
        files: list[tuple[int, int, int, tuple[Any, ...]]] = []
        for index, timing in enumerate(self._timings):
            files.append((timing.submit_at, _FILE, 2 * index, (_UPSERT, index)))
            if timing.delete_at is not None:
                files.append((timing.delete_at, _FILE, 2 * index + 1, (_DELETE, index)))
        files.sort()
        self._files = files
        self._next_file = 0
        self._queue: list[tuple[int, int, int, tuple[Any, ...]]] = []  # engine events
        self._engine_seq = 0
        self._applied = 0
        self._now = 0
        self._started = False
        self._settled = False
        # set by _start: the run's bounds (an instant in micros, a count of events)
        self._limit: int | None = None
        self._max_steps: int | None = None
        # Ticks asked for at one instant (a runaway fold's guard) and the last
        # wakeup converted to micros (the same wakeup is asked step after step)
        self._tick_instant = -1
        self._ticks_here = 0
        self._last_wakeup: float | None = None
        self._last_micros = 0
        # workload key -> timing of the manifest last submitted for it
        self._workload_timing: dict[str, Timing] = {}
        # workload key -> admission generation
        self._generation: dict[str, int] = {}

    @property
    def fold(self) -> FoldLike:
        return self._fold

    @property
    def now(self) -> float:
        """Instant (seconds) of the last applied event."""
        return micros_to_seconds(self._now)

    @property
    def applied(self) -> int:
        """Events applied so far (ticks included)."""
        return self._applied

    @property
    def settled(self) -> bool:
        """True once the run ended because nothing could change any more."""
        return self._settled

    def run(
        self, *, until: str | float | None = None, max_steps: int | None = None
    ) -> list[Decision]:
        """Apply events until settled (or ``until``); return every decision in order."""
        self._start(until, max_steps)
        decisions: list[Decision] = []
        while (step := self._advance()) is not None:
            decisions.extend(step.decisions)
        return decisions

    def steps(
        self, *, until: str | float | None = None, max_steps: int | None = None
    ) -> Iterator[Step]:
        """Apply events one by one, yielding each with its decisions.

        ``until`` is a duration (``"90s"``) or seconds; events after it are not
        applied. ``max_steps`` bounds the number of applied events; exceeding it
        raises ``SimulationError`` (a scenario that never settles, e.g. a job
        that is never ready and is requeued forever, needs ``until``).
        """
        self._start(until, max_steps)
        return self._stepping()

    def _stepping(self) -> Iterator[Step]:
        # ``run`` calls _advance itself rather than iterating this generator: a
        # compiled generator consumed by compiled code leaves a traceback entry
        # without a line number, on which pytest's failure report crashes.
        while (step := self._advance()) is not None:
            yield step

    def _start(self, until: str | float | None, max_steps: int | None) -> None:
        if self._started:
            raise SimulationError("a Simulator runs once; make a new one")
        self._started = True
        if until is not None:
            try:
                self._limit = parse_duration(until)
            except DurationError as err:
                raise ScenarioError(f"until: {err}") from None
        self._max_steps = max_steps

    def _advance(self) -> Step | None:
        """Apply the next event; None when the run is over (settled or ``until``)."""
        queue = self._queue
        files = self._files
        fold = self._fold
        if self._plans:  # plans written after the last event: next, at its instant
            return self._apply(self._plans.pop(0), self._now)
        while True:
            # The next queued event: the earlier of the next file event and the
            # top of the engine heap (their origins differ, so keys never tie).
            cursor = self._next_file
            nxt = files[cursor] if cursor < len(files) else None
            from_heap = bool(queue) and (nxt is None or queue[0] < nxt)
            if from_heap:
                nxt = queue[0]
            wakeup = fold.next_wakeup()
            tick_at: int | None = None
            if wakeup is not None:
                if wakeup != self._last_wakeup:  # the same wakeup is asked step after step
                    self._last_wakeup = wakeup
                    self._last_micros = seconds_to_micros_ceil(wakeup)
                wake = max(self._last_micros, self._now)
                if nxt is None or wake < nxt[0]:
                    tick_at = wake
            if tick_at is not None:
                at = tick_at
            elif nxt is not None:
                at = nxt[0]
            else:
                self._settled = True
                return None
            if self._limit is not None and at > self._limit:
                return None
            event: JournalEvent | None
            if tick_at is not None:
                if tick_at == self._tick_instant:
                    self._ticks_here += 1
                    if self._ticks_here > MAX_TICKS_PER_INSTANT:
                        raise SimulationError(
                            f"the fold keeps asking to wake up at "
                            f"{format_seconds(micros_to_seconds(tick_at))}s after Ticks at that "
                            f"instant ({wakeup!r}); its timers do not fire"
                        )
                else:
                    self._tick_instant, self._ticks_here = tick_at, 1
                event = trusted_tick(f"sim-{self._applied}", micros_to_seconds(tick_at))
            else:
                if from_heap:
                    _, origin, _, payload = heapq.heappop(queue)
                else:
                    _, origin, _, payload = files[cursor]
                    self._next_file = cursor + 1
                if origin == _FILE:
                    event = self._file_event(at, payload)
                else:
                    event = self._engine_event(at, payload)
                if event is None:
                    continue  # an engine event cancelled by a later preemption/eviction
            return self._apply(event, at)

    def _apply(self, event: JournalEvent, at: int) -> Step:
        """Apply one event at ``at`` (micros) to the fold (and the planning side)."""
        if self._max_steps is not None and self._applied >= self._max_steps:
            raise SimulationError(
                f"the scenario did not settle within {self._max_steps} events "
                f"(simulated time {format_seconds(micros_to_seconds(at))}s); give the run an "
                f"end with --until (e.g. --until 1h), or more events with --max-events"
            )
        offset = self._applied
        try:
            decisions = self._fold.apply(event, offset=offset)
        except Exception as err:  # a fold bug: say which event, keep the traceback
            err.add_note(f"while the fold applied {describe_event(event)}")
            raise
        self._applied = offset + 1
        self._now = at
        if decisions:
            self._observe(at, decisions)
        planning = self._planning
        if planning is not None:
            try:
                self._plans.extend(planning.after(event, offset=offset))
            except Exception as err:  # a planning bug: say which event, keep the traceback
                err.add_note(f"while the preemption service folded {describe_event(event)}")
                raise
        return Step(event, decisions)

    # ------------------------------------------------------------------ events

    def _file_event(self, at: int, payload: tuple[Any, ...]) -> JournalEvent:
        action, index = payload
        manifest = self._manifests[index]
        key = self._keys[index]
        seconds = micros_to_seconds(at)
        if action == _DELETE:
            if key is not None:
                self._end_admission(key)
            metadata = manifest.get("metadata")
            metadata = metadata if isinstance(metadata, Mapping) else {}
            return trusted_deleted(
                f"sim-{self._applied}",
                seconds,
                str(manifest.get("kind") or ""),
                str(metadata.get("name") or ""),
                str(metadata.get("namespace") or ""),
            )
        obj: dict[str, Any] = dict(manifest)
        if key is not None:
            self._workload_timing[key] = self._timings[index]
            obj = _with_created_at(obj, at)
        return trusted_upserted(f"sim-{self._applied}", seconds, obj)

    def _engine_event(self, at: int, payload: tuple[Any, ...]) -> JournalEvent | None:
        action, key, generation, namespace, name = payload
        if action == _STOPPED:  # (action, key, stop decision id, uid, None): never cancelled
            return WorkloadStopped(
                id=f"sim-{self._applied}",
                at=micros_to_seconds(at),
                workload=key,
                uid=namespace,
                decision_id=generation,
            )
        if self._generation.get(key) != generation:
            return None
        if name is None:  # a kind other than a Job: the event names its key
            ref = workload_ref(key)
            ns, obj = (ref.namespace, ref.name) if ref is not None else ("", key)
            if action == _PODS_READY:
                return PodsReady(
                    id=f"sim-{self._applied}",
                    at=micros_to_seconds(at),
                    namespace=ns,
                    name=obj,
                    workload=key,
                )
            return WorkloadFinished(
                id=f"sim-{self._applied}",
                at=micros_to_seconds(at),
                namespace=ns,
                name=obj,
                workload=key,
            )
        if action == _PODS_READY:
            return trusted_pods_ready(
                f"sim-{self._applied}", micros_to_seconds(at), namespace, name
            )
        return trusted_finished(f"sim-{self._applied}", micros_to_seconds(at), namespace, name)

    def _schedule(self, at: int, payload: tuple[Any, ...]) -> None:
        heapq.heappush(self._queue, (at, _ENGINE, self._engine_seq, payload))
        self._engine_seq += 1

    def _end_admission(self, key: str) -> None:
        self._generation[key] = self._generation.get(key, 0) + 1

    def _observe(self, at: int, decisions: list[Decision]) -> None:
        queue = self._queue
        for decision in decisions:
            key = decision.workload
            if key is None:
                continue
            if decision.type == "Admitted":
                generation = self._generation.get(key, 0) + 1
                self._generation[key] = generation
                timing = self._workload_timing.get(key)
                if timing is None:
                    timing = self._workload_timing.get(timing_key(key), _NO_TIMING)
                namespace, _, job_name = key.partition("/")
                # not a Job: its events carry the key (name None)
                name: str | None = None if "/" in job_name else job_name
                # self._schedule(...), inlined: two per admission
                if timing.ready_after is not None:
                    seq = self._engine_seq
                    self._engine_seq = seq + 1
                    payload = (_PODS_READY, key, generation, namespace, name)
                    heapq.heappush(queue, (at + timing.ready_after, _ENGINE, seq, payload))
                if timing.run_for is not None:
                    seq = self._engine_seq
                    self._engine_seq = seq + 1
                    payload = (_FINISHED, key, generation, namespace, name)
                    heapq.heappush(queue, (at + timing.run_for, _ENGINE, seq, payload))
            elif decision.type in ENDS_ADMISSION:
                self._end_admission(key)
                if decision.type in STOPS or decision.reason == "Deleted":
                    timing = self._workload_timing.get(key)
                    if timing is None:
                        timing = self._workload_timing.get(timing_key(key), _NO_TIMING)
                    stop_after = timing.stop_after
                    seq = self._engine_seq
                    self._engine_seq = seq + 1
                    uid = decision.uid or ""
                    stopped: tuple[Any, ...] = (_STOPPED, key, decision.id, uid, None)
                    heapq.heappush(queue, (at + stop_after, _ENGINE, seq, stopped))


def describe_event(event: JournalEvent) -> str:
    """``sim-12 ObjectUpserted Job team/train-1 at 30s``, for error messages."""
    what = ""
    if isinstance(event, ObjectUpserted):
        metadata = event.object.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        namespace = metadata.get("namespace")
        name = f"{namespace}/{metadata.get('name')}" if namespace else metadata.get("name")
        what = f" {event.object.get('kind')} {name}"
    elif isinstance(event, ObjectDeleted):
        what = f" {event.kind} {event.namespace + '/' if event.namespace else ''}{event.name}"
    elif isinstance(event, WorkloadFinished | PodsReady):
        what = f" {event.namespace}/{event.name}"
    elif isinstance(event, PreemptionPlan):
        what = f" {event.preemptor} preempting {', '.join(event.victims) or 'nothing'}"
    return f"{event.id} {event.type}{what} at {format_seconds(event.at)}s"


def _with_created_at(obj: dict[str, Any], at: int) -> dict[str, Any]:
    metadata = obj.get("metadata")
    # type() first: isinstance against the Mapping ABC is slow, and this runs per Job
    if type(metadata) is not dict and not isinstance(metadata, Mapping):
        return obj
    annotations = metadata.get("annotations")
    annotations = (
        dict(annotations) if type(annotations) is dict or isinstance(annotations, Mapping) else {}
    )
    if CREATED_AT in annotations:
        return obj
    annotations[CREATED_AT] = exact_seconds(at)
    obj["metadata"] = {**metadata, "annotations": annotations}
    return obj


def simulate(
    manifests: Sequence[Mapping[str, Any]],
    *,
    fold: FoldLike,
    planning: PlanningLike | None = None,
    until: str | float | None = None,
    max_steps: int | None = None,
) -> list[Decision]:
    """Convenience: every decision of one scenario run."""
    return Simulator(manifests, fold=fold, planning=planning).run(until=until, max_steps=max_steps)


__all__ = [
    "ENDS_ADMISSION",
    "WORKLOAD_KINDS",
    "FoldLike",
    "PlanningLike",
    "ScenarioError",
    "SimulationError",
    "Simulator",
    "Step",
    "simulate",
    "timing_key",
    "workload_key",
]
