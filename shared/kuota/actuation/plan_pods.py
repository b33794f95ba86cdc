"""What the actuator does to a pod group's Pods for a decision: pure planning (#18).

Theory of operation: a pod group (``ns/podgroup/<group>``) or a single Pod
(``ns/pod/<name>``) has no object of its own to suspend: its Pods are held at
creation by the scheduling gate ``kueue.x-k8s.io/admission`` (the webhook), and
a Pod is never gated again. So, as Kueue v0.19.2 does:

- an ``Admitted`` decision ungates every Pod of the group still gated, each
  with its podset's flavors injected into its spec
  (:func:`kuota.actuation.workloads.admit_pod`) and the decision recorded on it
  (``kuota.dev/decision-id`` / ``-offset``): ONE merge patch per Pod, carrying
  the resourceVersion read. A redelivered decision finds no gated Pod (or the
  decision recorded): skipped. The decision names the group by the uid of its
  first Pod (``kuota.api.parse_workloads.pod_group_workload``): when no Pod of
  the group has that uid any more the group was replaced (``JobNotFound``), so an
  old admission never starts a new group's Pods.
- a stop (``Preempted``, ``Evicted``, ``Deactivated``) deletes the group's Pods
  that run: not those still gated, ended (``Succeeded``/``Failed``) or already
  terminating, nor one a later admission started (its recorded decision is not
  older than the stop). The delete carries the Pod's uid as a precondition. A
  redelivered stop finds nothing left to delete: skipped.

The members are the Pods :func:`kuota.api.parse_workloads.pod_workload_key`
gives the decision's key (the queue label, not a Job's pod). docs/design/workload-kinds.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.actuation.patch import (
    ANN_DECISION_ID,
    ANN_DECISION_OFFSET,
    STOPPING,
    DecisionOrder,
    EventSpec,
    Fail,
    Skip,
    _admitted_message,
    _stop_event,
    _stop_message,
)
from kuota.actuation.plan_workloads import decision_flavors
from kuota.actuation.scheduling import Flavors
from kuota.actuation.workloads import PatchError, admit_pod
from kuota.api.parse_workloads import ADMISSION_GATE, pod_workload_key
from kuota.events.schema import Decision

__all__ = ["DeletePod", "PodSteps", "UpdatePod", "members", "plan_pods"]

DONE_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class UpdatePod:
    """One conditional merge patch: ``pod`` as it should be (the shell diffs it
    against the Pod it read and sends that read's resourceVersion)."""

    name: str
    pod: dict[str, Any]
    events: tuple[EventSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class DeletePod:
    """Delete the Pod ``name``, if it is still the one of ``uid``."""

    name: str
    uid: str
    events: tuple[EventSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class PodSteps:
    """Every write the decision needs, one per Pod; final once all succeeded."""

    writes: tuple[UpdatePod | DeletePod, ...]
    what: str


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(pod.get("metadata"))


def _name(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("name") or "")


def _gated(pod: Mapping[str, Any]) -> bool:
    gates = _mapping(pod.get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates
    )


def members(pods: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    """The Pods that are the workload ``key``'s, by name."""
    return sorted((p for p in pods if pod_workload_key(p) == key), key=_name)


def _recorded(pod: Mapping[str, Any], decision: Decision, order: DecisionOrder) -> str | None:
    """Why the decision is already applied to the Pod, or older than what is (None: not)."""
    annotations = _mapping(_meta(pod).get("annotations"))
    if annotations.get(ANN_DECISION_ID) == decision.id:
        return f"decision {decision.id} already applied"
    recorded = DecisionOrder.parse(annotations.get(ANN_DECISION_OFFSET))
    if recorded is not None and order <= recorded:
        return (
            f"decision {decision.id} at {order} is not after the applied "
            f"{annotations.get(ANN_DECISION_ID)} at {recorded}"
        )
    return None


def _record(pod: dict[str, Any], decision: Decision, order: DecisionOrder) -> None:
    md = pod.setdefault("metadata", {})
    annotations = md.get("annotations")
    if not isinstance(annotations, dict):
        annotations = md["annotations"] = {}
    annotations[ANN_DECISION_ID] = decision.id
    annotations[ANN_DECISION_OFFSET] = str(order)


def plan_pods(
    pods: Sequence[Mapping[str, Any]],
    decision: Decision,
    *,
    order: DecisionOrder,
    flavors: Flavors,
) -> Skip | Fail | PodSteps:
    """The writes that bring the Pods of ``decision.workload`` in line with it (the
    module docstring). ``pods``: the Pods listed (others than the group's are left)."""
    key = decision.workload or ""
    group = members(pods, key)
    if decision.type == "Admitted":
        return _admit(group, decision, order=order, flavors=flavors)
    if decision.type in STOPPING:
        return _stop(group, decision, order=order)
    return Skip(f"{decision.type} does not change a Pod: its gate holds it until admission")


def _admit(
    group: list[Mapping[str, Any]],
    decision: Decision,
    *,
    order: DecisionOrder,
    flavors: Flavors,
) -> Skip | Fail | PodSteps:
    what = decision.workload
    if not group:
        return Fail("JobNotFound", f"no Pod of {what} is left")
    uids = {_meta(p).get("uid") for p in group}
    if decision.uid and None not in uids and decision.uid not in uids:
        return Fail(
            "JobNotFound",
            f"{what} was replaced: none of its Pods has uid {decision.uid}, the Pod it was "
            "admitted by",
        )
    missing = [n for n in decision_flavors(decision) if n not in flavors]
    if missing:
        return Fail("FlavorNotFound", f"ResourceFlavor {', '.join(missing)} not found")
    cq = decision.cluster_queue or ""
    writes: list[UpdatePod | DeletePod] = []
    for pod in group:
        if not _gated(pod) or _recorded(pod, decision, order) is not None:
            continue
        try:
            new = admit_pod(pod, decision, flavors)
        except PatchError as err:
            return Fail(err.reason, f"Pod {_name(pod)}: {err.message}")
        _record(new, decision, order)
        events = (
            EventSpec("Admitted", _admitted_message(pod, decision)),
            EventSpec("Started", f"Admitted by clusterQueue {cq}"),
        )
        writes.append(UpdatePod(_name(pod), new, events))
    if not writes:
        return Skip(f"no Pod of {what} is gated any more: applied already")
    names = ", ".join(decision_flavors(decision)) or "no flavor"
    return PodSteps(tuple(writes), f"ungate {len(writes)} Pod(s) with {names}")


def _stop(
    group: list[Mapping[str, Any]], decision: Decision, *, order: DecisionOrder
) -> Skip | PodSteps:
    event = _stop_event(decision, _stop_message(decision))
    writes: list[UpdatePod | DeletePod] = []
    for pod in group:
        meta = _meta(pod)
        phase = _mapping(pod.get("status")).get("phase")
        if meta.get("deletionTimestamp") or phase in DONE_PHASES or _gated(pod):
            continue  # going, ended, or never started: nothing runs
        if _recorded(pod, decision, order) is not None:
            continue  # started by a later admission than this stop
        writes.append(DeletePod(_name(pod), str(meta.get("uid") or ""), (event,)))
    if not writes:
        return Skip(f"no Pod of {decision.workload} runs: nothing to stop for {decision.type}")
    return PodSteps(tuple(writes), f"delete {len(writes)} running Pod(s)")
