"""The backstop's rules: Jobs that run, or lose their label, outside the queue.

Theory of operation: the webhook (the door) refuses a user's unsuspend or
relabel of a managed Job, but it can be down, bypassed by an admin or missing,
so the fold checks what ingest observes. :func:`runs_without_admission`: a Job
seen not suspended while its workload holds no admission is suspended again
(a ``Suspended`` decision), unless the observation carries the
``kuota.dev/decision-id`` of the workload's latest Admitted decision: the Job
as the actuator started it, seen before the actuator's own stop (once the Job
is seen suspended, that id is forged if it comes back). :func:`observation_only`
tells such a change (``spec.suspend``, the decision id) from one that re-places
a workload; :func:`unlabelled_reason` says why a managed Job without a queue
label waits; :func:`generation_seen` when a Job the actuator refused to start
(``JobChanged``) may be admitted again. The fold (``Fold._upsert_workload``)
applies them.
docs/design/backstop.md.
"""

from __future__ import annotations

from kuota.api.types import WorkloadSpec
from kuota.core.queueing.workload import ADMITTED, WorkloadRecord
from kuota.kinds import QUEUE_NAME_LABEL

NO_LOCAL_QUEUE_NAMED = "NoLocalQueueNamed"
QUEUE_LABEL_REMOVED = "QueueLabelRemoved"
PODSETS_CHANGED = "PodSetsChanged"  # an admitted Job's podsets changed: evicted, requeued
# an admitted Job (its start still on the way: the webhook refuses a running Job's
# relabel) was moved to another LocalQueue: evicted, requeued in the new one
LOCAL_QUEUE_CHANGED = "LocalQueueChanged"
# The actuator found the Job at another generation than its Admitted decision's (it
# changed after the decision): not started; evicted, requeued, admitted again once
# the fold has seen the Job at that generation.
JOB_CHANGED = "JobChanged"


def runs_without_admission(rec: WorkloadRecord, spec: WorkloadSpec) -> bool:
    """Whether ``spec``, the Job as observed, is running with no admission in force."""
    if spec.suspended is not False or rec.state == ADMITTED:
        return False
    return rec.admitted_id is None or spec.decision_id != rec.admitted_id


def observation_only(old: WorkloadSpec, new: WorkloadSpec) -> bool:
    """Whether two specs of one Job differ only in what the backstop observes."""
    return (
        old.podsets == new.podsets
        and old.queue_name == new.queue_name
        and old.priority_class == new.priority_class
        and old.active == new.active
        and old.creation_seconds == new.creation_seconds
        and old.owner_kind == new.owner_kind
    )


def generation_seen(spec: WorkloadSpec, found: int | None) -> bool:
    """Whether ``spec`` is the Job at generation ``found`` or later (unknown: yes)."""
    return found is None or spec.generation is None or spec.generation >= found


def podsets_change(old: WorkloadSpec, new: WorkloadSpec) -> str:
    """The Evicted message for an admitted Job whose podsets changed."""
    changes = []
    for a, b in zip(old.podsets, new.podsets, strict=False):
        if a.count != b.count:
            changes.append(f"podset {a.name}: {a.count} -> {b.count} pods")
        elif a != b:
            changes.append(f"podset {a.name}: its pod template")
    if len(old.podsets) != len(new.podsets):
        changes.append(f"{len(old.podsets)} -> {len(new.podsets)} podsets")
    return (
        f"the Job's podsets changed while admitted ({'; '.join(changes)}); its quota is "
        "released and it is queued again with the new shape"
    )


def unlabelled_reason(rec: WorkloadRecord) -> tuple[str, str]:
    """Why a managed Job without a queue label waits: it never had one (a managed
    namespace, Kueue's manageJobsWithoutQueueName) or its label was removed."""
    if rec.label_removed:
        return (
            QUEUE_LABEL_REMOVED,
            f"the {QUEUE_NAME_LABEL} label was removed from the queued Job: put it back "
            "(or name another LocalQueue) to queue it, or delete the Job",
        )
    return (
        NO_LOCAL_QUEUE_NAMED,
        f"no LocalQueue named: the Job has no {QUEUE_NAME_LABEL} label and namespace "
        f"{rec.spec.namespace} is managed (manageJobsWithoutQueueName); add the label to "
        "queue it",
    )
