"""Plain pod groups: Pods collected into one workload once they all exist (#18).

Theory of operation: a Pod with the queue label is a member of the pod group
its ``kueue.x-k8s.io/pod-group-name`` label names (a single Pod: a group of
one, podset ``main``). The fold keeps each group's members
(``_pod_groups``: workload key -> Pod name -> :class:`PodMember`, and
``_pod_of``: (namespace, Pod) -> workload key). While fewer than
``kueue.x-k8s.io/pod-group-total-count`` members exist (a Failed Pod does not
count) the group is no workload: it is announced ``Inadmissible``
``PodGroupIncomplete`` (``2 of 3 pods of pod group g exist …``), again only when
that count changes. Once all exist it is upserted as a workload whose podsets
are its roles (``kuota.api.parse_workloads.pod_group_workload``) and queued as
any other. Before admission a change of its members re-reads it (a Pod lost
takes it out of its queue, back to waiting); once admitted, members may come
and go (their pods run and end) and the admission stays, until the last Pod is
deleted: then it is ``Finished`` (``Deleted``), unless ingest said before that it
ended (``WorkloadFinished`` from its Pods' phases: ``kuota.kube.pod_status``); a
finished group stays finished, without a word, while its Pods go, and its name
is free once the last is gone. docs/design/workload-kinds.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kuota.api.parse_workloads import pod_group_workload
from kuota.api.types import PodMember
from kuota.core.fold.decisions import inadmissible
from kuota.core.queueing.workload import ADMITTED
from kuota.kinds import workload_key

if TYPE_CHECKING:
    from kuota.core.fold.fold import Fold

POD_GROUP_INCOMPLETE = "PodGroupIncomplete"


def upsert_pod(fold: Fold, member: PodMember) -> None:
    """A Pod with the queue label was seen (created or changed)."""
    key = workload_key("Pod", member.namespace, member.group, pod_group=member.pod_group)
    where = (member.namespace, member.pod)
    before = fold._pod_of.get(where)
    if before is not None and before != key:  # it moved to another group
        remove_pod(fold, member.namespace, member.pod)
    fold._pod_of[where] = key
    fold._pod_groups.setdefault(key, {})[member.pod] = member
    _changed(fold, key)


def remove_pod(fold: Fold, namespace: str, pod: str) -> None:
    """A Pod was deleted."""
    key = fold._pod_of.pop((namespace, pod), None)
    if key is None:
        return
    members = fold._pod_groups.get(key, {})
    members.pop(pod, None)
    _changed(fold, key)


def _changed(fold: Fold, key: str) -> None:
    members = fold._pod_groups.get(key)
    rec = fold._workloads.get(key)
    if not members:  # the last Pod is gone
        fold._pod_groups.pop(key, None)
        fold._pod_waiting.pop(key, None)
        fold._delete_workload(key)  # a finished group's name is free again too
        return
    if rec is not None and rec.state == ADMITTED:
        return  # its pods run and end; the admission stays until the last is deleted
    if rec is None and key in fold._finished_uids:
        return  # finished (WorkloadFinished): its done Pods go one by one, quietly
    live = [m for m in members.values() if not m.failed]
    first = min(members.values(), key=lambda m: (m.creation_seconds, m.pod))
    total = first.total
    if len(live) >= total:
        fold._pod_waiting.pop(key, None)
        fold._upsert_workload(pod_group_workload(live))
        return
    if rec is not None:  # it lost a pod before admission: out of its queue, waiting again
        fold._workloads.pop(key, None)
        fold._forget(key)
        fold._detach(rec)
    if fold._pod_waiting.get(key) == len(live):
        return
    fold._pod_waiting[key] = len(live)
    fold._out.append(
        inadmissible(
            workload=key,
            uid=first.uid or key,
            cluster_queue=None,
            reason=POD_GROUP_INCOMPLETE,
            message=(
                f"{len(live)} of {total} pods of pod group {first.group} exist; "
                "the group is admitted once all of them exist"
            ),
        )
    )
