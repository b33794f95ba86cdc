"""What the actuator does to a Job for a decision: pure patch computation.

Theory of operation: like Kueue's job reconciler, without a Workload object.
What must be remembered lives on the Job, written in the same update as the
change: the last decision applied and its :class:`DecisionOrder`
(``kuota.dev/decision-id`` / ``-offset``: a redelivered or older decision is
skipped) and the template's own ``nodeSelector`` / ``tolerations``, and its own
``affinity`` once a podset is pinned to nodes
(``kuota.dev/original-pod-template-scheduling``, so a stop restores them).
:func:`plan` looks at the Job as it is now and returns ONE step (update,
reset ``startTime``, wait, skip, fail); the shell executes it and asks again,
so a crash between steps is harmless. Admitted injects the flavors as Kueue's
``podset.Merge`` does, pins the podset to the nodes its DRA pods were placed on
when the decision names them (the template's scheduling fields:
``kuota.actuation.scheduling``, docs/design/dra-placement.md) and fails as
``JobChanged`` if the Job is not at the decision's generation; a stop suspends,
waits for the pods, resets ``startTime``, restores the template;
``Suspended`` (the backstop) suspends a Job started without an admission.
Why steps, what the apiserver allows: docs/design/actuator.md.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from kuota.actuation.scheduling import (
    Flavors,
    InjectionConflict,
    SchedulingFields,
    inject,
    own_fields,
)
from kuota.api.parse_job import DECISION_ID_ANNOTATION
from kuota.api.types import ResourceFlavor, ValidationError
from kuota.events.schema import Decision

__all__ = [
    "ANN_DECISION_ID",
    "ANN_DECISION_OFFSET",
    "ANN_ORIGINAL",
    "JOB_CHANGED",
    "JOB_MUTATING",
    "STOPPING",
    "SUSPENDED",
    "DecisionOrder",
    "EventSpec",
    "Fail",
    "Plan",
    "ResetStartTime",
    "Skip",
    "UpdateJob",
    "Wait",
    "assigned_flavors",
    "feedback_events",
    "plan",
]

ANN_DECISION_ID = DECISION_ID_ANNOTATION  # the fold reads it (docs/design/backstop.md)
ANN_DECISION_OFFSET = "kuota.dev/decision-offset"
ANN_ORIGINAL = "kuota.dev/original-pod-template-scheduling"

MAIN_PODSET = "main"  # a Job's only podset
STOPPING = frozenset({"Preempted", "Evicted", "Deactivated"})
SUSPENDED = "Suspended"  # the backstop: no admission to end, the Job just must not run
JOB_CHANGED = "JobChanged"  # an Admitted decision's Job is no longer at its generation
JOB_MUTATING = frozenset({"Admitted", SUSPENDED}) | STOPPING

# Kueue truncates event messages to this many characters (api.TruncateEventMessage).
MAX_EVENT_MESSAGE = 1024

# Kueue's HumanReadablePreemptionReasons.
_PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True, order=True)
class DecisionOrder:
    """Where a decision sits in the decision stream, comparable across restarts.

    ``cause_offset`` is the journal offset of the event that caused it (-1 when
    the decision carries none); ``record_offset`` is the decision record's own
    offset in its partition of the decision topic, which orders the several
    decisions one event can cause for the same workload (Evicted, Requeued,
    Admitted). A workload's decisions share one key, hence one partition.
    """

    cause_offset: int
    record_offset: int

    def __str__(self) -> str:
        return f"{self.cause_offset}/{self.record_offset}"

    @classmethod
    def of(cls, decision: Decision, record_offset: int) -> DecisionOrder:
        cause = decision.cause_offset
        return cls(-1 if cause is None else cause, record_offset)

    @classmethod
    def parse(cls, text: object) -> DecisionOrder | None:
        if not isinstance(text, str):
            return None
        cause, sep, record = text.partition("/")
        if not sep:
            return None
        try:
            return cls(int(cause), int(record))
        except ValueError:
            return None


_T = TypeVar("_T")


def _main_podset(by_podset: Mapping[str, _T] | None) -> _T | None:
    """A Job's entry of a decision's per-podset map: ``main``, else the only one."""
    podsets = by_podset or {}
    entry = podsets.get(MAIN_PODSET)
    if entry is None and len(podsets) == 1:
        entry = next(iter(podsets.values()))
    return entry


def assigned_flavors(decision: Decision) -> list[str]:
    """The flavors assigned to the Job's podset, deduplicated, in resource-name order."""
    podset = _main_podset(decision.flavors)
    names: list[str] = []
    for resource in sorted(podset or {}):
        flavor = (podset or {})[resource]
        if flavor not in names:
            names.append(flavor)
    return names


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True, slots=True)
class EventSpec:
    """A Kubernetes Event to record on the decision's object."""

    reason: str
    message: str
    type: str = "Normal"  # Normal | Warning


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to write; ``why`` is for the log, ``events`` are still recorded."""

    why: str
    events: tuple[EventSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Fail:
    """The decision cannot be applied; reported to the journal as ActuationFailed."""

    reason: str
    message: str
    generation: int | None = None  # JobChanged: the Job's generation found


@dataclass(frozen=True, slots=True)
class UpdateJob:
    """PUT this Job (it carries the resourceVersion it was computed from)."""

    job: dict[str, Any]
    final: bool  # True: the decision is applied once this succeeds
    what: str
    events: tuple[EventSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class ResetStartTime:
    """PUT this Job to ``/status``: ``status.startTime`` removed, so the pod
    template's scheduling fields become mutable again."""

    job: dict[str, Any]
    what: str = "reset status.startTime"


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to write yet: GET the Job again after a pause (the Job
    controller must first take the pods of a suspended Job down)."""

    why: str


Plan = Skip | Fail | UpdateJob | ResetStartTime | Wait


def precheck(
    obj: Mapping[str, Any], decision: Decision, *, order: DecisionOrder, kind: str
) -> Skip | Fail | None:
    """What every kind's plan answers before looking at its spec: a decision that
    changes nothing, an object replaced since (another uid), a decision already
    applied or older than the one applied (the annotations the actuator writes).
    None: go on."""
    if decision.type not in JOB_MUTATING:
        return Skip(f"{decision.type} does not change the {kind}")
    meta = _mapping(obj.get("metadata"))
    uid = meta.get("uid")
    if decision.uid and uid and uid != decision.uid:
        return Fail(
            "JobNotFound",
            f"{kind} {decision.workload} was replaced (uid {uid}); the decision was for uid "
            f"{decision.uid}",
        )
    annotations = _mapping(meta.get("annotations"))
    if annotations.get(ANN_DECISION_ID) == decision.id:
        return Skip(f"decision {decision.id} already applied")
    recorded = DecisionOrder.parse(annotations.get(ANN_DECISION_OFFSET))
    if recorded is not None and order <= recorded:
        return Skip(
            f"decision {decision.id} at {order} is not after the applied "
            f"{annotations.get(ANN_DECISION_ID)} at {recorded}"
        )
    return None


def plan(
    job: Mapping[str, Any],
    decision: Decision,
    *,
    order: DecisionOrder,
    flavors: Flavors,
    generation: int | None = None,
) -> Plan:
    """The next step to bring ``job`` in line with ``decision`` (see module docstring).
    ``generation``: the Job's generation an admission may start at, once the shell's
    own writes for it moved it on from the decision's ``generation``."""
    early = precheck(job, decision, order=order, kind="Job")
    if early is not None:
        return early
    if _finished(job):
        return Skip("the Job has finished")
    if decision.type == "Admitted":
        return _plan_admit(job, decision, order=order, flavors=flavors, generation=generation)
    if decision.type == SUSPENDED:
        return _plan_suspend(job, decision, order=order)
    return _plan_stop(job, decision, order=order)


def _plan_suspend(job: Mapping[str, Any], decision: Decision, *, order: DecisionOrder) -> Plan:
    """Suspend a Job that started without an admission: one merge patch, or the
    stop's steps when kuota's flavors are still injected (the template can only
    be restored once the Job is suspended and its pods are gone)."""
    annotations = _mapping(_mapping(job.get("metadata")).get("annotations"))
    if ANN_ORIGINAL in annotations:
        return _plan_stop(job, decision, order=order)
    if _suspended(job):
        return Skip("the Job is suspended already: nothing runs without admission")
    new = _copy(job)
    new["spec"]["suspend"] = True
    ann = _annotations(new)
    ann[ANN_DECISION_ID] = decision.id
    ann[ANN_DECISION_OFFSET] = str(order)
    return UpdateJob(
        new,
        final=True,
        what="suspend: started without admission",
        events=(_suspended_event(decision),),
    )


def _suspended_event(decision: Decision) -> EventSpec:
    return EventSpec(
        "Suspended", _truncate(decision.message or "started without admission"), "Warning"
    )


def changed_since(
    obj: Mapping[str, Any], decision: Decision, generation: int | None, *, kind: str
) -> Fail | None:
    """``JobChanged`` when the object is not at the generation its admission may
    start at (``generation``, else the decision's). Kueue starts a Job only while
    it matches its Workload: one changed after the fold decided (e.g. grown while
    suspended) makes the decision stale."""
    want = decision.generation if generation is None else generation
    found = _mapping(obj.get("metadata")).get("generation")
    if want is None or found == want:
        return None
    return Fail(
        JOB_CHANGED,
        f"the {kind} changed after it was admitted (metadata.generation {found}, admitted "
        f"at {decision.generation}): not started with that admission",
        found if isinstance(found, int) and not isinstance(found, bool) else None,
    )


def _plan_admit(
    job: Mapping[str, Any],
    decision: Decision,
    *,
    order: DecisionOrder,
    flavors: Flavors,
    generation: int | None,
) -> Plan:
    stale = changed_since(job, decision, generation, kind="Job")
    if stale is not None:
        return stale
    names = assigned_flavors(decision)
    missing = [n for n in names if n not in flavors]
    if missing:
        return Fail("FlavorNotFound", f"ResourceFlavor {', '.join(missing)} not found")
    chosen: list[ResourceFlavor] = []
    for name in names:
        fl = flavors[name]
        if isinstance(fl, ValidationError):
            where = f"{fl.field}: " if fl.field else ""
            return Fail(
                "InvalidFlavor",
                f"ResourceFlavor {name} is not valid, so its nodeLabels and tolerations "
                f"cannot be added: {where}{fl.message}",
            )
        chosen.append(fl)
    nodes = _main_podset(decision.nodes) or []
    current = SchedulingFields.read(_pod_spec(job))
    annotations = _mapping(_mapping(job.get("metadata")).get("annotations"))
    recorded = SchedulingFields.from_json(annotations.get(ANN_ORIGINAL))
    original = own_fields(recorded, current, pinning=bool(nodes))
    try:
        desired = inject(original, chosen, nodes)
    except InjectionConflict as err:
        return Fail("FailedToStart", str(err))
    cq = decision.cluster_queue or ""
    events = (
        EventSpec("Admitted", _admitted_message(job, decision)),
        EventSpec("Started", f"Admitted by clusterQueue {cq}"),
    )
    suspended = _suspended(job)
    changes_template = not desired.same_as(current)
    if not suspended and changes_template:
        # Running with another placement (a stop that never got applied):
        # stop it first; the template is immutable while it runs.
        new = _copy(job)
        new["spec"]["suspend"] = True
        _annotations(new)[ANN_ORIGINAL] = original.to_json()
        return UpdateJob(new, final=False, what="suspend to re-admit with new flavors")
    if suspended and changes_template:
        blocked = _template_blocked(job)
        if blocked is not None:
            return blocked
    new = _copy(job)
    new["spec"]["suspend"] = False
    _set_scheduling(new, desired)
    ann = _annotations(new)
    ann[ANN_ORIGINAL] = original.to_json()
    ann[ANN_DECISION_ID] = decision.id
    ann[ANN_DECISION_OFFSET] = str(order)
    flavor_text = ", ".join(names) if names else "no flavor"
    if nodes:
        flavor_text += f", pinned to {len(nodes)} node(s)"
    return UpdateJob(new, final=True, what=f"unsuspend with {flavor_text}", events=events)


def _admitted_message(job: Mapping[str, Any], decision: Decision) -> str:
    """Kueue's Admitted text, with the wait kuota knows: from the Job's creation
    (``metadata.creationTimestamp``) to the admission decision's ``at``."""
    text = f"Admitted by ClusterQueue {decision.cluster_queue or ''}"
    created = _timestamp(_mapping(job.get("metadata")).get("creationTimestamp"))
    if created is None:
        return text
    return f"{text}, wait time since creation was {max(0.0, decision.at - created):.0f}s"


def _timestamp(value: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as the apiserver writes it, or None."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _plan_stop(job: Mapping[str, Any], decision: Decision, *, order: DecisionOrder) -> Plan:
    message = _stop_message(decision)
    annotations = _mapping(_mapping(job.get("metadata")).get("annotations"))
    if _suspended(job) and ANN_ORIGINAL not in annotations:
        # Nothing of an admission is on the Job (kuota never started it, e.g. a
        # failed start, or a stop already restored it): nothing to write. The
        # Event still says why (its name derives from the decision id: once).
        return Skip(
            f"the Job is suspended without flavors injected: nothing to undo for {decision.type}",
            events=(_stop_event(decision, message),),
        )
    if not _suspended(job):
        new = _copy(job)
        new["spec"]["suspend"] = True
        return UpdateJob(
            new, final=False, what="suspend", events=(EventSpec("Stopped", _truncate(message)),)
        )
    original = SchedulingFields.from_json(annotations.get(ANN_ORIGINAL))
    current = SchedulingFields.read(_pod_spec(job))
    restores = original is not None and not original.same_as(current)
    if restores:
        blocked = _template_blocked(job)
        if blocked is not None:
            return blocked
    new = _copy(job)
    if original is not None and restores:
        _set_scheduling(new, original)
    ann = _annotations(new)
    ann.pop(ANN_ORIGINAL, None)
    ann[ANN_DECISION_ID] = decision.id
    ann[ANN_DECISION_OFFSET] = str(order)
    return UpdateJob(
        new,
        final=True,
        what="restore the pod template" if restores else "record the stop",
        events=(_stop_event(decision, message),),
    )


def _stop_message(decision: Decision) -> str:
    if decision.message:
        return decision.message
    if decision.type == "Preempted":
        human = _PREEMPTION_REASONS.get(decision.reason or "", "UNKNOWN")
        preemptor = decision.preemptor or "UNKNOWN"
        return f"Preempted to accommodate a workload ({preemptor}) due to {human}"
    if decision.type == "Deactivated":
        return "The workload is deactivated"
    return f"The workload was evicted ({decision.reason or 'unknown reason'})"


def _stop_event(decision: Decision, message: str) -> EventSpec:
    if decision.type == SUSPENDED:
        return _suspended_event(decision)
    if decision.type == "Preempted":
        return EventSpec("Preempted", _truncate(message))
    if decision.type == "Evicted":
        return EventSpec(f"EvictedDueTo{decision.reason or 'Unknown'}", _truncate(message))
    return EventSpec("Deactivated", _truncate(message))


def feedback_events(decision: Decision) -> tuple[EventSpec, ...]:
    """Events for decisions that do not change the Job (Kueue's wording)."""
    if decision.type == "Inadmissible":
        text = decision.message or decision.reason or ""
        return (EventSpec("Pending", _truncate(text), "Warning"),)
    if decision.type == "Rejected":
        text = decision.message or "the object is invalid"
        return (EventSpec(decision.reason or "InvalidObject", _truncate(text), "Warning"),)
    return ()


# --------------------------------------------------------------------------- Job fields


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _copy(job: Mapping[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(dict(job))
    new.setdefault("spec", {})
    return new


def _annotations(job: dict[str, Any]) -> dict[str, str]:
    meta = job.setdefault("metadata", {})
    ann = meta.get("annotations")
    if not isinstance(ann, dict):
        ann = meta["annotations"] = {}
    out: dict[str, str] = ann
    return out


def _pod_spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(_mapping(job.get("spec")).get("template")).get("spec"))


def _set_scheduling(job: dict[str, Any], fields: SchedulingFields) -> None:
    spec = job.setdefault("spec", {})
    template = spec.setdefault("template", {})
    fields.write(template.setdefault("spec", {}))


def _suspended(job: Mapping[str, Any]) -> bool:
    return _mapping(job.get("spec")).get("suspend") is True


def _start_time(job: Mapping[str, Any]) -> object:
    return _mapping(job.get("status")).get("startTime")


def _active(job: Mapping[str, Any]) -> int:
    active = _mapping(job.get("status")).get("active")
    return active if isinstance(active, int) else 0


def _template_blocked(job: Mapping[str, Any]) -> Wait | ResetStartTime | None:
    """What stands between a suspended Job and a pod-template change."""
    active = _active(job)
    if active:
        return Wait(f"{active} active pod(s) of the suspended Job")
    if _start_time(job):
        return ResetStartTime(_without_start_time(job))
    return None


def _without_start_time(job: Mapping[str, Any]) -> dict[str, Any]:
    new = _copy(job)
    status = new.get("status")
    if isinstance(status, dict):
        status.pop("startTime", None)
    return new


def _finished(job: Mapping[str, Any]) -> bool:
    conditions = _mapping(job.get("status")).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(c, Mapping)
            and c.get("type") in ("Complete", "Failed")
            and c.get("status") == "True"
        ):
            return True
    return False


def _truncate(text: str) -> str:
    if len(text) <= MAX_EVENT_MESSAGE:
        return text
    return text[: MAX_EVENT_MESSAGE - 3] + "..."
