"""What the actuator does to a training kind for a decision: one pure step (#18).

Theory of operation: the counterpart of :func:`kuota.actuation.patch.plan` for a
workload kind with its own suspend field other than a Job (the kinds of
:data:`WIRED`: a PyTorchJob, a RayCluster, a RayJob, a JobSet). Such an object has no
``startTime`` rule that
freezes its pod templates while it runs, so every decision is ONE write: an
admission unsuspends it with each podset's flavors in its own template, and
each podset placed on nodes pinned to them
(:func:`kuota.actuation.workloads.admit`), a stop suspends it and restores the
templates in the same write (:func:`kuota.actuation.workloads.stop`); the
operator then deletes its pods, which the actuator's drains wait for
(docs/design/quota-until-pods-gone.md). The write records the decision as for a
Job (``kuota.dev/decision-id`` / ``-offset``: a redelivered or older decision is
skipped), and an admission is refused (``JobChanged``) when the object is not at
the decision's generation. docs/design/workload-kinds.md ("Actuation").
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kuota.actuation.patch import (
    ANN_DECISION_ID,
    ANN_DECISION_OFFSET,
    ANN_ORIGINAL,
    SUSPENDED,
    DecisionOrder,
    EventSpec,
    Fail,
    Plan,
    Skip,
    UpdateJob,
    _admitted_message,
    _stop_event,
    _stop_message,
    changed_since,
    precheck,
)
from kuota.actuation.scheduling import Flavors
from kuota.actuation.workloads import PatchError, admit, flavors_by_podset, stop, suspended
from kuota.events.schema import Decision

__all__ = [
    "FINISHED_CONDITIONS",
    "RAY_JOB_FINISHED",
    "WIRED",
    "decision_flavors",
    "finished",
    "plan_workload",
]

#: The kinds beyond Job the services admit and stop (#18).
WIRED = frozenset({"PyTorchJob", "RayCluster", "RayJob", "JobSet"})
#: The status conditions that end each kind's run (True: its operator creates no more pods);
#: a RayCluster runs until it is deleted; a RayJob ends by its deployment status.
FINISHED_CONDITIONS: dict[str, tuple[str, ...]] = {
    "PyTorchJob": ("Succeeded", "Failed"),
    "RayCluster": (),
    "RayJob": (),
    "JobSet": ("Completed", "Failed"),
}
#: KubeRay's final ``status.jobDeploymentStatus`` of a RayJob (Kueue's ``Finished``; a
#: Failed run that KubeRay retries, ``spec.backoffLimit``, is written Retrying instead).
RAY_JOB_FINISHED = ("Complete", "Failed")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def finished(obj: Mapping[str, Any]) -> bool:
    """The object's operator says it succeeded or failed (a RayJob: its
    ``status.jobDeploymentStatus`` is Complete or Failed)."""
    kind = obj.get("kind")
    if kind == "RayJob":
        return _mapping(obj.get("status")).get("jobDeploymentStatus") in RAY_JOB_FINISHED
    types = FINISHED_CONDITIONS.get(kind if isinstance(kind, str) else "", ())
    conditions = _mapping(obj.get("status")).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") in types and c.get("status") == "True":
            return True
    return False


def decision_flavors(decision: Decision) -> list[str]:
    """Every ResourceFlavor an Admitted decision names, over all its podsets."""
    names: list[str] = []
    for _, resources in sorted((decision.flavors or {}).items()):
        for resource in sorted(resources):
            if resources[resource] not in names:
                names.append(resources[resource])
    return names


def _record(new: dict[str, Any], decision: Decision, order: DecisionOrder) -> None:
    md = new.get("metadata")
    if not isinstance(md, dict):
        md = new["metadata"] = {}
    annotations = md.get("annotations")
    if not isinstance(annotations, dict):
        annotations = md["annotations"] = {}
    annotations[ANN_DECISION_ID] = decision.id
    annotations[ANN_DECISION_OFFSET] = str(order)


def plan_workload(
    obj: Mapping[str, Any],
    decision: Decision,
    *,
    order: DecisionOrder,
    flavors: Flavors,
    generation: int | None = None,
) -> Plan:
    """The one write that brings ``obj`` in line with ``decision`` (module docstring);
    ``generation`` as for :func:`kuota.actuation.patch.plan`."""
    kind = str(obj.get("kind") or "object")
    early = precheck(obj, decision, order=order, kind=kind)
    if early is not None:
        return early
    if finished(obj):
        return Skip(f"the {kind} has finished")
    try:
        if decision.type == "Admitted":
            return _admit(obj, decision, order=order, flavors=flavors, generation=generation)
        return _stop(obj, decision, order=order)
    except PatchError as err:
        return Fail(err.reason, err.message)


def _admit(
    obj: Mapping[str, Any],
    decision: Decision,
    *,
    order: DecisionOrder,
    flavors: Flavors,
    generation: int | None,
) -> Plan:
    kind = str(obj.get("kind"))
    stale = changed_since(obj, decision, generation, kind=kind)
    if stale is not None:
        return stale
    missing = [n for n in decision_flavors(decision) if n not in flavors]
    if missing:
        return Fail("FlavorNotFound", f"ResourceFlavor {', '.join(missing)} not found")
    new = admit(obj, flavors_by_podset(decision, flavors), decision.nodes)
    _record(new, decision, order)
    cq = decision.cluster_queue or ""
    events = (
        EventSpec("Admitted", _admitted_message(obj, decision)),
        EventSpec("Started", f"Admitted by clusterQueue {cq}"),
    )
    names = ", ".join(decision_flavors(decision)) or "no flavor"
    return UpdateJob(new, final=True, what=f"unsuspend the {kind} with {names}", events=events)


def _stop(obj: Mapping[str, Any], decision: Decision, *, order: DecisionOrder) -> Plan:
    kind = str(obj.get("kind"))
    injected = ANN_ORIGINAL in _mapping(_mapping(obj.get("metadata")).get("annotations"))
    if decision.type == SUSPENDED and suspended(obj) and not injected:
        return Skip(f"the {kind} is suspended already: nothing runs without admission")
    event: EventSpec = _stop_event(decision, _stop_message(decision))
    if suspended(obj) and not injected:
        return Skip(
            f"the {kind} is suspended without flavors injected: nothing to undo for "
            f"{decision.type}",
            events=(event,),
        )
    new = stop(copy.deepcopy(dict(obj)))
    _record(new, decision, order)
    return UpdateJob(
        new, final=True, what=f"suspend the {kind}, restore its templates", events=(event,)
    )
