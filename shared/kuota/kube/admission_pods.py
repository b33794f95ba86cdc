"""The webhook's answer for Pods and LeaderWorkerSets (#18; pure: dict in, dict out).

Theory of operation: A Pod has no suspend field (#18, pod groups): a labelled Pod's CREATE gets the
scheduling gate ``kueue.x-k8s.io/admission`` (once) and the label
``kueue.x-k8s.io/managed: "true"``, as Kueue's pod webhook does; only kuota
removes the gate, at admission, so a user's UPDATE that removes it is refused,
as is a change of its queue label while it runs (not gated) and of its group
label; a group label without a count annotation (or the reverse, or a count that
is not a whole number of pods) is refused at once rather than rejected later. A
Pod whose controller owner is a workload kind admitted itself (a Job's pod with
the label copied: ``kuota.kinds.managed_owner``) is let through untouched.

A LeaderWorkerSet is admitted through its pods, as Kueue does: its CREATE or
UPDATE (labelled ones only) gets its queue and priority-class labels copied into
both pod templates (:func:`template_labels_patch`; the object's values win over a
template's own), so the pods its controller makes are labelled; a pod with the
``leaderworkerset.sigs.k8s.io/name`` and ``group-index`` labels then has its group
label and count written from them (``leaderworkerset-<name>-<index>`` and the
``leaderworkerset.sigs.k8s.io/size`` annotation: ``kuota.api.parse_workloads.
leader_worker_group``) over whatever its template said, and is gated as any
labelled Pod; one without a usable size is refused. A labelled LeaderWorkerSet with
``startupPolicy: LeaderReady`` is refused (Kueue's rule): its workers would wait
for a leader that waits for them.

:func:`kuota.kube.admission_review.mutate_job` hands these reviews here; the
answers, the ``Change`` the rules read and the refusals are that module's.
docs/design/workload-kinds.md.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kuota.api.fields import FieldError
from kuota.api.parse_job import MAX_PODS
from kuota.api.parse_workloads import (
    ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    ROLE_HASH_ANNOTATION,
    LeaderWorkerGroup,
    leader_worker_group,
    whole_number,
)
from kuota.kinds import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, managed_owner
from kuota.kube.admission_review import (
    _LABEL,
    MANAGED_LABEL,
    Answer,
    Change,
    Rule,
    _refusal,
    _review,
    _spec,
    _user,
    _who,
    kuota_annotations,
    queue_of,
    queued,
    refusals,
)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    labels = md.get("labels") if isinstance(md, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def gated(pod: Mapping[str, Any]) -> bool:
    """The Pod still carries kuota's (Kueue's) admission gate."""
    gates = _spec(pod).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates
    )


def _escape(key: str) -> str:
    """A map key as one JSON-pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def gate_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that holds a Pod until admission: the admission gate added to
    ``spec.schedulingGates`` (once), the ``kueue.x-k8s.io/managed: "true"`` label."""
    ops: list[dict[str, Any]] = []
    gates = _spec(pod).get("schedulingGates")
    gate = {"name": ADMISSION_GATE}
    if not isinstance(gates, list) or not gates:
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
    elif not gated(pod):
        ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
    if _labels(pod).get(MANAGED_LABEL) != "true":
        path = f"/metadata/labels/{_escape(MANAGED_LABEL)}"  # labels exist: the queue label
        ops.append({"op": "add", "path": path, "value": "true"})
    return ops


def _pod_whose(change: Change) -> str:
    queue = queue_of(change.old) or queue_of(change.new)
    group = _labels(change.old).get(POD_GROUP_NAME_LABEL) or _labels(change.new).get(
        POD_GROUP_NAME_LABEL
    )
    where = f' (pod group "{group}")' if isinstance(group, str) and group else ""
    return f'the Pod is queued in LocalQueue "{queue}"{where}'


def no_ungate(change: Change) -> list[str]:
    """Refuse a user's removal of the admission gate: only kuota starts a queued Pod."""
    if change.trusted or change.operation != "UPDATE":
        return []
    if not gated(change.old) or gated(change.new):
        return []
    return [
        f"spec.schedulingGates: Forbidden: {_who(change)} may not remove the "
        f"{ADMISSION_GATE} gate: {_pod_whose(change)}, and only kuota removes it, when it "
        "admits the Pod's group within its ClusterQueue's quota; leave it and kuota starts "
        "the Pod"
    ]


def _ended(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def pod_queue_label(change: Change) -> list[str]:
    """Refuse a user's change (or removal, or addition) of a Pod's queue label while
    it runs: neither gated nor ended (Kueue holds it immutable then too)."""
    if change.trusted or change.operation != "UPDATE" or not change.old:
        return []
    before, after = queue_of(change.old), queue_of(change.new)
    if before == after or gated(change.old) or _ended(change.old):
        return []
    verb = "remove" if after is None else "add" if before is None else "change"
    return [
        f"{_LABEL}: Forbidden: {_who(change)} may not {verb} it while the Pod runs (its "
        f"{ADMISSION_GATE} gate is gone): it was admitted through LocalQueue "
        f'"{before}" and runs on that quota'
        if before is not None
        else f"{_LABEL}: Forbidden: {_who(change)} may not add it to a Pod that runs: kuota "
        "would count a Pod it never admitted; create a new Pod with the label instead"
    ]


_GROUP_LABEL = f"metadata.labels[{POD_GROUP_NAME_LABEL}]"
_COUNT = f"metadata.annotations[{POD_GROUP_TOTAL_COUNT_ANNOTATION}]"


def group_name(change: Change) -> list[str]:
    """Refuse a user's change or removal of a Pod's group label once set (immutable,
    as Kueue holds it): a Pod does not move between groups."""
    if change.trusted or change.operation != "UPDATE" or not change.old:
        return []
    before = _labels(change.old).get(POD_GROUP_NAME_LABEL)
    after = _labels(change.new).get(POD_GROUP_NAME_LABEL)
    if before is None or before == after:
        return []
    return [
        f'{_GROUP_LABEL}: Forbidden: {_who(change)} may not change it from "{before}" to '
        f'"{after}" or remove it: a Pod does not move between pod groups; create a new Pod'
        if after is not None
        else f'{_GROUP_LABEL}: Forbidden: {_who(change)} may not remove it ("{before}"): '
        "a Pod does not leave its pod group; delete the Pod"
    ]


def _group_of(pod: Mapping[str, Any]) -> tuple[object, object]:
    """The Pod's group label and count annotation (None where absent)."""
    md = pod.get("metadata")
    annotations = md.get("annotations") if isinstance(md, Mapping) else None
    count = (
        annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION)
        if isinstance(annotations, Mapping)
        else None
    )
    return _labels(pod).get(POD_GROUP_NAME_LABEL), count


def group_metadata(change: Change) -> list[str]:
    """Refuse a Pod whose group label and count annotation do not go together, or whose
    count is not a whole number of pods (from 1 to the most kuota reads): the group
    would never be read (the fold would reject it)."""
    group, count = _group_of(change.new)
    if change.operation == "UPDATE" and (group, count) == _group_of(change.old):
        return []  # as it was stored: an update of something else goes through
    if group is None and count is None:
        return []
    if group is None:
        return [
            f"{_GROUP_LABEL}: Required: a Pod that says how many pods its group has "
            f"({_COUNT}) names its group too"
        ]
    if count is None:
        return [
            f"{_COUNT}: Required: a Pod of pod group {group!r} says how many pods the "
            "group has; kuota admits the group once they all exist"
        ]
    if (whole_number(count, MAX_PODS) or 0) < 1:
        return [f"{_COUNT}: Invalid value {count!r}: a whole number of pods from 1 to {MAX_PODS}"]
    return []


#: Every rule a CREATE or UPDATE of a labelled Pod must pass, in order.
POD_RULES: tuple[Rule, ...] = (
    no_ungate,
    pod_queue_label,
    group_name,
    group_metadata,
    kuota_annotations,
)


def mutate_pod(
    request: Mapping[str, Any], uid: str, operation: str, trusted_users: Collection[str]
) -> Answer:
    """The answer for a Pod (see the module docstring)."""
    pod = request.get("object")
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    if (
        not isinstance(pod, Mapping)
        or not isinstance(metadata, Mapping)
        or (operation == "CREATE" and not isinstance(pod.get("spec"), Mapping))
    ):
        why = "the Pod has no metadata or spec"
        return Answer(_review(uid, warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    old = request.get("oldObject") if operation == "UPDATE" else None
    old = old if isinstance(old, Mapping) else {}
    owner = managed_owner(pod) or (managed_owner(old) if old else None)
    if owner is not None:
        return Answer(_review(uid), "unchanged", f"a {owner}'s pod: the {owner} is the workload")
    if not (queued(pod) or queued(old)):
        return Answer(_review(uid), "unchanged", f"no {QUEUE_NAME_LABEL} label")
    namespace = request.get("namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    user = _user(request)
    trusted = user in trusted_users
    group: LeaderWorkerGroup | None = None
    if operation == "CREATE" and queued(pod):
        try:
            where = namespace or str(metadata.get("namespace") or "") or "default"
            group = leader_worker_group(pod, where)
        except FieldError as err:
            message = f"{err.field}: {err.message}"
            return Answer(_refusal(uid, message), "refused", f"{operation} by {user}")
    # A LeaderWorkerSet's pod is judged as it will be stored: in its group
    stored = pod if group is None else in_leader_worker_group(pod, group)
    change = Change(operation, user, trusted, old, stored, namespace)
    reasons = refusals(change, POD_RULES)
    if reasons:
        return Answer(_refusal(uid, "; ".join(reasons)), "refused", f"{operation} by {user}")
    if operation == "UPDATE" or not queued(pod):
        return Answer(_review(uid), "unchanged", "update allowed")
    patch = gate_patch(pod) if group is None else [*group_patch(pod, group), *gate_patch(pod)]
    if not patch:
        return Answer(_review(uid), "unchanged", "already gated")
    note = "" if group is None else f", LeaderWorkerSet pod group {group.name}"
    return Answer(_review(uid, patch=patch), "gated", f"queue {queue_of(pod)}{note}")


# --------------------------------------------------------------------------- LeaderWorkerSets


def _annotation_map(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    md = obj.get("metadata")
    annotations = md.get("annotations") if isinstance(md, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else None


def group_patch(pod: Mapping[str, Any], group: LeaderWorkerGroup) -> list[dict[str, Any]]:
    """The JSON patch that puts a LeaderWorkerSet's pod in its group: the group label
    and count written over the pod's own (a user may not move the pod into another
    group), and any ``kueue.x-k8s.io/role-hash`` annotation removed.

    The role: Kueue names an LWS group's podsets by the pod's role (leader,
    worker). kuota writes no role hash: the fold names a pod group's podsets by
    the pods' shape (``kuota.api.parse_workloads.role_of``), so the leader and
    the workers are two podsets when their pods differ and one when they are
    alike (an LWS without a leaderTemplate: ``main`` in the simulator's reading).
    A role hash from the template would let pods of different shapes share a
    podset, charged as one of them, so it is removed."""
    ops: list[dict[str, Any]] = []
    if _labels(pod).get(POD_GROUP_NAME_LABEL) != group.name:
        path = f"/metadata/labels/{_escape(POD_GROUP_NAME_LABEL)}"  # labels exist: the queue's
        ops.append({"op": "add", "path": path, "value": group.name})
    annotations = _annotation_map(pod)
    count = str(group.total)
    if annotations is None:  # not so for an LWS pod (its size is an annotation); still
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        annotations = {}
    if annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION) != count:
        path = f"/metadata/annotations/{_escape(POD_GROUP_TOTAL_COUNT_ANNOTATION)}"
        ops.append({"op": "add", "path": path, "value": count})
    if ROLE_HASH_ANNOTATION in annotations:
        path = f"/metadata/annotations/{_escape(ROLE_HASH_ANNOTATION)}"
        ops.append({"op": "remove", "path": path})
    return ops


def in_leader_worker_group(pod: Mapping[str, Any], group: LeaderWorkerGroup) -> dict[str, Any]:
    """``pod`` as :func:`group_patch` leaves it (its metadata copied, the rest shared)."""
    md = pod.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    labels = {**_labels(pod), POD_GROUP_NAME_LABEL: group.name}
    annotations = dict(_annotation_map(pod) or {})
    annotations[POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(group.total)
    annotations.pop(ROLE_HASH_ANNOTATION, None)
    return {**pod, "metadata": {**md, "labels": labels, "annotations": annotations}}


#: The labels a LeaderWorkerSet's pods get from it (Kueue's LWS webhook copies these).
LWS_TEMPLATE_LABELS = (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL)
LWS_TEMPLATES = ("leaderTemplate", "workerTemplate")


def template_labels_patch(lws: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that copies the LeaderWorkerSet's queue and priority-class
    labels (those it has, not empty) into ``spec.leaderWorkerTemplate``'s
    ``leaderTemplate`` (when present) and ``workerTemplate`` labels, over a
    template's own values: the object's labels decide."""
    labels = _labels(lws)
    wanted = {k: labels[k] for k in LWS_TEMPLATE_LABELS if isinstance(labels.get(k), str)}
    wanted = {k: v for k, v in wanted.items() if v}
    lwt = _spec(lws).get("leaderWorkerTemplate")
    if not wanted or not isinstance(lwt, Mapping):
        return []
    ops: list[dict[str, Any]] = []
    for name in LWS_TEMPLATES:
        template = lwt.get(name)
        if not isinstance(template, Mapping):
            continue  # no leaderTemplate; a workerTemplate is required (the CRD says so)
        base = f"/spec/leaderWorkerTemplate/{name}/metadata"
        md = template.get("metadata")
        own = md.get("labels") if isinstance(md, Mapping) else None
        if not isinstance(md, Mapping):
            ops.append({"op": "add", "path": base, "value": {"labels": dict(wanted)}})
        elif not isinstance(own, Mapping):
            ops.append({"op": "add", "path": f"{base}/labels", "value": dict(wanted)})
        else:
            for key, value in wanted.items():
                if own.get(key) != value:
                    path = f"{base}/labels/{_escape(key)}"
                    ops.append({"op": "add", "path": path, "value": value})
    return ops


LEADER_READY = "LeaderReady"


def lws_startup_policy(change: Change) -> list[str]:
    """Refuse a queued LeaderWorkerSet with ``spec.startupPolicy: LeaderReady``
    (Kueue's rule): its workers are made only once its leader is ready, and the
    leader stays gated until the whole group exists."""
    if _spec(change.new).get("startupPolicy") != LEADER_READY:
        return []
    return [
        f'spec.startupPolicy: Invalid value "{LEADER_READY}": a LeaderWorkerSet queued by '
        "kuota must use LeaderCreated: kuota admits a group once all its pods exist, and "
        "with LeaderReady the workers are created only after the leader runs"
    ]


def mutate_leader_worker_set(request: Mapping[str, Any], uid: str, operation: str) -> Answer:
    """The answer for a LeaderWorkerSet (see the module docstring)."""
    lws = request.get("object")
    if not isinstance(lws, Mapping) or not isinstance(lws.get("metadata"), Mapping):
        why = "the LeaderWorkerSet has no metadata"
        return Answer(_review(uid, warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    old = request.get("oldObject") if operation == "UPDATE" else None
    old = old if isinstance(old, Mapping) else {}
    owner = managed_owner(lws) or (managed_owner(old) if old else None)
    if owner is not None:
        why = f"a {owner}'s LeaderWorkerSet: the {owner} is the workload"
        return Answer(_review(uid), "unchanged", why)
    queue = queue_of(lws)
    if queue is None:  # its pods are left alone too: they get no queue label from it
        return Answer(_review(uid), "unchanged", f"no {QUEUE_NAME_LABEL} label")
    user = _user(request)
    change = Change(operation, user, False, old, lws, str(request.get("namespace") or ""))
    reasons = refusals(change, (lws_startup_policy,))
    if reasons:
        return Answer(_refusal(uid, "; ".join(reasons)), "refused", f"{operation} by {user}")
    patch = template_labels_patch(lws)
    if not patch:
        return Answer(_review(uid), "unchanged", "templates labelled already")
    return Answer(_review(uid, patch=patch), "labelled", f"queue {queue}")
