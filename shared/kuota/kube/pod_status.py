"""A pod group's readiness and end, from its Pods as ingest sees them (pure, #18).

Theory of operation: a PyTorchJob says in its own status whether its pods are
ready and whether it finished (``kuota.kube.translate``); a pod group has no
object of its own, so ingest keeps, per workload key (``ns/podgroup/<group>``,
``ns/pod/<name>``: ``kuota.api.parse_workloads.pod_workload_key``), the last seen
phase and Ready condition of each of its Pods (:class:`PodGroups`), and journals
what Kueue v0.19.2 reads of a pod group as the group's own status:

- ``PodsReady`` on each flip: a single Pod is ready with its ``Ready`` condition
  True; a group once at least ``kueue.x-k8s.io/pod-group-total-count`` Pods
  exist and every one of them is Ready. A ``Succeeded`` Pod counts as ready, as
  a Job's succeeded pods do (Kueue reads the Ready condition alone, so a group
  whose Pods end one by one turns not ready before it finishes:
  docs/kueue-differences.md).
- ``WorkloadFinished`` once per group: a single Pod once it is ``Succeeded``
  (succeeded) or ``Failed``; a group once as many Pods as its count have
  ``Succeeded``, or, when a Pod of it says ``kueue.x-k8s.io/retriable-in-group:
  "false"``, once none of its Pods is still running (a retriable group's failed
  Pod is replaced by its owner instead: the group goes on). Its message is
  Kueue's ``Pods succeeded: n/m.``.

A group is forgotten with its last Pod, so a new group of the same name starts
afresh. After a restart ingest relists every labelled Pod (``kuota_ingest.sources``)
to fill this memory; what was journaled before is not known then, so a group
ready or finished is journaled again once (the fold takes a repeat as a no-op).
No I/O, no clock: ``at`` and the event ids come from the caller's change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kuota.api.parse_workloads import POD_GROUP_TOTAL_COUNT_ANNOTATION, pod_workload_key
from kuota.events.schema import JournalEvent, PodsReady, WorkloadFinished
from kuota.kinds import workload_ref

RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
DONE = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class PodState:
    """What the group's status reads of one Pod."""

    phase: str
    ready: bool
    total: int  # its group's count annotation (1 for a single Pod; 0 unreadable)
    unretriable: bool
    message: str  # status.message or status.reason (a single Pod's end)


@dataclass(slots=True)
class _Group:
    pods: dict[str, PodState] = field(default_factory=dict)
    ready: bool = False  # the last PodsReady journaled
    finished: bool = False  # WorkloadFinished journaled


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def pod_state(pod: Mapping[str, Any]) -> PodState:
    meta = _mapping(pod.get("metadata"))
    annotations = _mapping(meta.get("annotations"))
    status = _mapping(pod.get("status"))
    count = annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION)
    total = int(count) if isinstance(count, str) and count.isdigit() else 0
    phase = status.get("phase")
    message = status.get("message") or status.get("reason") or ""
    return PodState(
        phase=phase if isinstance(phase, str) else "",
        ready=_ready(status),
        total=total,
        unretriable=annotations.get(RETRIABLE_IN_GROUP_ANNOTATION) == "false",
        message=message if isinstance(message, str) else "",
    )


def group_ready(key: str, pods: Mapping[str, PodState]) -> bool:
    """Kueue's PodsReady of a pod group (or a single Pod): see the module docstring."""
    ref = workload_ref(key)
    if ref is None or not pods:
        return False
    done = all(p.ready or p.phase == "Succeeded" for p in pods.values())
    if not ref.pod_group:
        return done
    total = max(p.total for p in pods.values())
    return total > 0 and len(pods) >= total and done


def group_finished(key: str, pods: Mapping[str, PodState]) -> tuple[bool, str] | None:
    """(succeeded, message) once the group (or single Pod) has ended, else None."""
    ref = workload_ref(key)
    if ref is None or not pods:
        return None
    if not ref.pod_group:
        (pod,) = pods.values()
        return (pod.phase == "Succeeded", pod.message) if pod.phase in DONE else None
    total = max(p.total for p in pods.values())
    succeeded = sum(1 for p in pods.values() if p.phase == "Succeeded")
    active = any(p.phase not in DONE for p in pods.values())
    unretriable = any(p.unretriable for p in pods.values())
    if total > 0 and (succeeded >= total or (unretriable and not active)):
        return succeeded >= total, f"Pods succeeded: {succeeded}/{total}."
    return None


class PodGroups:
    """Ingest's memory of each pod group's Pods (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}
        self._key_of: dict[tuple[str, str], str] = {}  # (namespace, Pod) -> its group's key

    def __len__(self) -> int:
        return len(self._groups)

    def upsert(self, pod: Mapping[str, Any], *, at: float) -> list[JournalEvent]:
        """A Pod with the queue label was seen: the group events it causes."""
        key = pod_workload_key(pod)
        where = _where(pod)
        if key is None or where is None:
            return self.delete(pod, at=at)  # not (or no longer) a member
        out: list[JournalEvent] = []
        before = self._key_of.get(where)
        if before is not None and before != key:  # moved to another group
            out += self.delete(pod, at=at)
        self._key_of[where] = key
        group = self._groups.setdefault(key, _Group())
        group.pods[where[1]] = pod_state(pod)
        return out + self._events(key, group, pod, at)

    def delete(self, pod: Mapping[str, Any], *, at: float) -> list[JournalEvent]:
        """A Pod was deleted (or left its group): the group events it causes."""
        where = _where(pod)
        key = self._key_of.pop(where, None) if where is not None else None
        if key is None or where is None:
            return []
        group = self._groups[key]
        group.pods.pop(where[1], None)
        if not group.pods:
            del self._groups[key]  # the last one: a new group of the name starts afresh
            return []
        return self._events(key, group, pod, at)

    def _events(
        self, key: str, group: _Group, pod: Mapping[str, Any], at: float
    ) -> list[JournalEvent]:
        if group.finished:
            return []
        ref = workload_ref(key)
        assert ref is not None  # pod_workload_key made it
        meta = _mapping(pod.get("metadata"))
        cause = f"{meta.get('name')}@{meta.get('resourceVersion') or ''}"
        out: list[JournalEvent] = []
        ready = group_ready(key, group.pods)
        if ready != group.ready:  # readiness first, as for the other kinds
            group.ready = ready
            out.append(
                PodsReady(
                    id=f"podsready/{key}/{str(ready).lower()}/{cause}",
                    at=at,
                    namespace=ref.namespace,
                    name=ref.name,
                    ready=ready,
                    workload=key,
                )
            )
        ended = group_finished(key, group.pods)
        if ended is not None:
            group.finished = True
            succeeded, message = ended
            out.append(
                WorkloadFinished(
                    id=f"finished/{key}/{cause}",
                    at=at,
                    namespace=ref.namespace,
                    name=ref.name,
                    succeeded=succeeded,
                    message=message,
                    workload=key,
                )
            )
        return out


def _where(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = _mapping(pod.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    namespace = meta.get("namespace")
    return (namespace if isinstance(namespace, str) and namespace else "default", name)
