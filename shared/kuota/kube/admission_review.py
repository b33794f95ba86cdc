"""The mutating webhook's answer to an AdmissionReview (pure: dict in, dict out).

Theory of operation: like Kueue, kuota keeps a Job from starting by creating
it suspended. :func:`mutate_job` answers a review of a ``batch/v1`` Job. A
CREATE or UPDATE of a managed Job (the queue label on the new or the old
object, a managed namespace, or a Job kuota already queued: ``Managed`` tells)
goes through ``RULES``, the one place that decides what a user (anyone but
``trusted_users``) may change: each rule returns field errors; any refuses the
request (403). A CREATE that passes gets ``add /spec/suspend true``; an UPDATE
is never mutated; a malformed review is allowed with a warning. Until the view
is complete (the webhook's first LISTs), an unlabelled Job outside the system
namespaces is possibly managed: the rules apply to it, and its CREATE
unsuspended is refused as retryable (503). Why: docs/design/ingest.md ("The
webhook"), docs/design/webhook-registration.md ("Before the view is complete").

Pods and LeaderWorkerSets (#18) have no suspend field: they are gated, and
:func:`mutate_job` hands their reviews to ``kuota.kube.admission_pods``.

The same owner rule holds for every kind reviewed: the RayCluster and the submitter
Job KubeRay makes for a RayJob carry the RayJob's labels (the queue label too) and
annotations (kuota's among them), and are let through untouched. A RayJob has two
rules of its own: a CREATE without ``spec.shutdownAfterJobFinishes: true`` is
refused (Kueue's rule; KubeRay fails a suspended RayJob that keeps its cluster), and
one with a ``clusterSelector`` is no workload (let through, never suspended).
docs/design/workload-kinds.md.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from kuota.actuation.patch import ANN_DECISION_ID, ANN_DECISION_OFFSET, ANN_ORIGINAL
from kuota.actuation.workloads import SUSPEND_FIELDS
from kuota.api.parse_job import ACTIVE_ANNOTATION, CREATED_AT_ANNOTATION
from kuota.kinds import (
    QUEUE_NAME_LABEL,
    SYSTEM_NAMESPACES,
    Kind,
    get,
    managed_owner,
)

JOB = get("Job")  # the kind this webhook mutates
POD = get("Pod")  # pod groups and single Pods (#18): gated, not suspended
LWS = get("LeaderWorkerSet")  # its templates labelled; its pods gated as pod groups
#: Every kind this webhook mutates: Jobs, and the training kinds wired into the
#: services (#18), labelled ones only (manageJobsWithoutQueueName is for Jobs).
KINDS: tuple[Kind, ...] = (
    JOB,
    get("PyTorchJob"),
    get("RayCluster"),
    get("RayJob"),
    get("JobSet"),
    POD,
    LWS,
)
#: The label Kueue's pod webhook puts on every Pod it gates.
MANAGED_LABEL = "kueue.x-k8s.io/managed"
_BY_GROUP_KIND = {(k.group, k.kind): k for k in KINDS}

SUSPEND_PATCH = [{"op": "add", "path": "/spec/suspend", "value": True}]
KUOTA_PREFIX = "kuota.dev/"
#: ``kuota.dev/`` annotations users may write on their Jobs.
USER_ANNOTATIONS = frozenset({ACTIVE_ANNOTATION})
#: Why a ``kuota.dev/`` annotation is kuota's, for the message (default: bookkeeping).
_WHY = {
    CREATED_AT_ANNOTATION: (
        "queue order comes from metadata.creationTimestamp, which the apiserver sets"
    ),
    ANN_DECISION_ID: "the actuator's record of the decision it applied",
    ANN_DECISION_OFFSET: "the actuator's record of the decision it applied",
    ANN_ORIGINAL: "the actuator's record of the pod template's own scheduling",
}
_SIMULATION = frozenset(
    {"kuota.dev/submit-at", "kuota.dev/run-for", "kuota.dev/ready-after", "kuota.dev/delete-at"}
)

Outcome = Literal["suspended", "gated", "labelled", "unchanged", "refused", "malformed"]


@dataclass(frozen=True, slots=True)
class Answer:
    review: dict[str, Any]  # the AdmissionReview to send back
    outcome: Outcome
    why: str  # for the log


@dataclass(frozen=True, slots=True)
class Change:
    """What the rules read of one CREATE or UPDATE of a Job."""

    operation: str  # "CREATE" or "UPDATE"
    user: str  # request.userInfo.username ("" if absent)
    trusted: bool  # one of kuota's own identities
    old: Mapping[str, Any]  # the stored Job on UPDATE; {} on CREATE
    new: Mapping[str, Any]  # the Job as it would be stored
    namespace: str = ""
    namespace_managed: bool = False  # manageJobsWithoutQueueName covers the namespace
    known: bool = False  # kuota has already queued this Job (same uid)
    unsure: bool = False  # the view is not complete: possibly managed, guarded as if it were


class Managed(Protocol):
    """What the webhook needs to know beyond the review (its view of the cluster)."""

    def namespace_managed(self, namespace: str) -> bool:
        """Unlabelled Jobs in ``namespace`` are kuota's (``manageJobsWithoutQueueName``)."""
        ...

    def known(self, uid: str) -> bool:
        """kuota has queued the Job with this uid (it stays kuota's without its label)."""
        ...

    def complete(self) -> bool:
        """The view has read the Configuration, every Namespace and every Job once
        (until then "not managed" is not an answer)."""
        ...


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    annotations = md.get("annotations") if isinstance(md, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def queued(obj: Mapping[str, Any]) -> bool:
    """The Job carries the ``kueue.x-k8s.io/queue-name`` label."""
    md = obj.get("metadata")
    labels = md.get("labels") if isinstance(md, Mapping) else None
    return isinstance(labels, Mapping) and QUEUE_NAME_LABEL in labels


def queue_of(obj: Mapping[str, Any]) -> str | None:
    """The Job's LocalQueue: the queue-name label's value, None if absent or empty."""
    md = obj.get("metadata")
    labels = md.get("labels") if isinstance(md, Mapping) else None
    value = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) and value else None


def _kind_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    return kind if isinstance(kind, str) and kind in SUSPEND_FIELDS else "Job"


def suspend_field(obj: Mapping[str, Any]) -> str:
    """The object's suspend field, as a message names it (``spec.suspend`` for a Job)."""
    return ".".join(str(step) for step in SUSPEND_FIELDS[_kind_of(obj)])


def suspended(obj: Mapping[str, Any]) -> bool:
    """The object's kind's suspend field is true (an object without ``kind``: a Job's)."""
    node: object = obj
    for step in SUSPEND_FIELDS[_kind_of(obj)]:
        node = node.get(step) if isinstance(node, Mapping) else None
    return node is True


def suspend_patch(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that suspends ``obj`` at creation (its parents added if absent)."""
    path = SUSPEND_FIELDS[_kind_of(obj)]
    if path == ("spec", "suspend"):
        return SUSPEND_PATCH
    node: object = obj
    for i, step in enumerate(path[:-1]):
        node = node.get(step) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            value: object = True
            for inner in reversed(path[i + 1 :]):
                value = {str(inner): value}
            where = "/" + "/".join(map(str, path[: i + 1]))
            return [{"op": "add", "path": where, "value": value}]
    return [{"op": "add", "path": "/" + "/".join(map(str, path)), "value": True}]


def _who(change: Change) -> str:
    return f'user "{change.user}"' if change.user else "an anonymous user"


def _whose(change: Change) -> str:
    """Why the stored Job is kuota's, for the messages."""
    queue = queue_of(change.old) or queue_of(change.new)
    if queue is not None:
        return f'the Job is queued in LocalQueue "{queue}"'
    if change.unsure:
        return (
            "kuota-webhook is starting and does not know yet whether namespace "
            f'"{change.namespace}" is managed (manageJobsWithoutQueueName), so it guards every '
            "Job there as if it were; if the Job is not kuota's, retry in a few seconds"
        )
    if change.namespace_managed:
        return (
            f'namespace "{change.namespace}" is managed by kuota (manageJobsWithoutQueueName): '
            "its Jobs wait for admission, labelled or not"
        )
    return "kuota has queued the Job"


def no_unsuspend(change: Change) -> list[str]:
    """Refuse a user's ``spec.suspend`` true -> false: only kuota starts a managed Job."""
    if change.trusted or change.operation != "UPDATE":
        return []
    if not suspended(change.old) or suspended(change.new):
        return []
    return [
        f"{suspend_field(change.new)}: Forbidden: {_who(change)} may not set it to false: "
        f"{_whose(change)}, and only kuota unsuspends it, when it admits it within its "
        "ClusterQueue's quota; leave it suspended and kuota starts it"
    ]


_LABEL = f"metadata.labels[{QUEUE_NAME_LABEL}]"


def queue_label(change: Change) -> list[str]:
    """Refuse a user's queue-label change while the Job runs, any removal, and an
    addition to a running Job (a suspended Job may move to another LocalQueue)."""
    if change.trusted or change.operation != "UPDATE" or not change.old:
        return []
    before, after = queue_of(change.old), queue_of(change.new)
    if before == after:
        return []
    who = _who(change)
    if after is None:
        return [
            f"{_LABEL}: Forbidden: {who} may not remove it: {_whose(change)} and stays kuota's "
            "without the label (a Job does not leave the queue by losing it); delete the Job, "
            "or, while it is suspended, set the label to another LocalQueue"
        ]
    if suspended(change.new):
        return []  # a suspended Job moves to another LocalQueue (or joins one): re-queued
    if before is None:
        return [
            f"{_LABEL}: Forbidden: {who} may not add it to a Job that is not suspended: kuota "
            "would count a Job it never admitted; suspend the Job first (spec.suspend: true), "
            "then add the label"
        ]
    return [
        f'{_LABEL}: Forbidden: {who} may not change it from "{before}" to "{after}" while the '
        f'Job is not suspended: it was admitted through LocalQueue "{before}" and runs on that '
        "quota; only a suspended Job may move to another LocalQueue"
    ]


_SIZE = ("parallelism", "completions")


def no_resize(change: Change) -> list[str]:
    """Refuse a user's change of ``spec.parallelism`` or ``spec.completions`` while the
    Job is not suspended: the extra pods would run before kuota re-decides its size
    (stricter than Kueue, docs/kueue-differences.md)."""
    if change.trusted or change.operation != "UPDATE" or not change.old:
        return []
    if suspended(change.old) or suspended(change.new):
        return []  # a suspended Job (or one being suspended) is re-read at its new size
    old_spec, new_spec = change.old.get("spec"), change.new.get("spec")
    old_spec = old_spec if isinstance(old_spec, Mapping) else {}
    new_spec = new_spec if isinstance(new_spec, Mapping) else {}
    out: list[str] = []
    for field in _SIZE:
        before, after = old_spec.get(field), new_spec.get(field)
        if before == after:
            continue
        out.append(
            f"spec.{field}: Forbidden: {_who(change)} may not change it from {before} to "
            f"{after} while the Job is not suspended: {_whose(change)} and its admission "
            "covers its current size; suspend the Job first (spec.suspend: true); kuota "
            "re-reads a suspended Job and admits it for its new size"
        )
    return out


def _why(key: str) -> str:
    if key in _WHY:
        return _WHY[key]
    if key in _SIMULATION:
        return "a simulator annotation, meaningless on a cluster"
    return "kuota's own bookkeeping"


def kuota_annotations(change: Change) -> list[str]:
    """Refuse a user's addition, change or removal of a ``kuota.dev/`` annotation."""
    if change.trusted:
        return []
    new = _annotations(change.new)
    old = _annotations(change.old) if change.operation == "UPDATE" and queued(change.old) else {}
    keys = {k for k in (*new, *old) if isinstance(k, str) and k.startswith(KUOTA_PREFIX)}
    who = _who(change)
    out: list[str] = []
    for key in sorted(keys - USER_ANNOTATIONS):
        if key not in old:
            verb, fix = "set", "remove it"
        elif key not in new:
            verb, fix = "remove", "keep it"
        elif new[key] != old[key]:
            verb, fix = "change", "keep the value kuota wrote"
        else:
            continue
        out.append(
            f"metadata.annotations[{key}]: Forbidden: {who} may not {verb} it: only kuota "
            f"writes kuota.dev/ annotations ({_why(key)}); {fix}"
        )
    if out:
        out.append(f"{ACTIVE_ANNOTATION} is the one kuota.dev/ annotation users may set")
    return out


def _cluster_selector(obj: Mapping[str, Any]) -> bool:
    """A RayJob that names an existing RayCluster (``spec.clusterSelector``): that
    cluster is the workload, if any (KubeRay refuses to suspend such a RayJob)."""
    selector = _spec(obj).get("clusterSelector")
    return isinstance(selector, Mapping) and bool(selector)


def ray_job_shutdown(change: Change) -> list[str]:
    """Refuse a RayJob CREATE without ``spec.shutdownAfterJobFinishes: true`` (Kueue's
    rule): KubeRay fails a suspended RayJob that keeps its cluster (validation), so
    kuota could never hold it, and a kept cluster would hold its quota after the end."""
    if change.operation != "CREATE" or change.new.get("kind") != "RayJob":
        return []
    if _spec(change.new).get("shutdownAfterJobFinishes") is True:
        return []
    return [
        "spec.shutdownAfterJobFinishes: Invalid value: a RayJob queued by kuota must delete "
        "its RayCluster when it finishes (set it to true): KubeRay does not suspend a RayJob "
        "that keeps its cluster, and the cluster would hold the quota after the job"
    ]


Rule = Callable[[Change], list[str]]
#: Every rule a CREATE or UPDATE of a managed Job must pass, in order.
RULES: tuple[Rule, ...] = (
    no_unsuspend,
    queue_label,
    no_resize,
    kuota_annotations,
    ray_job_shutdown,
)


def refusals(change: Change, rules: tuple[Rule, ...] = RULES) -> list[str]:
    """Every reason to refuse ``change`` (empty: it may be stored)."""
    return [reason for rule in rules for reason in rule(change)]


def _review(
    uid: str, *, patch: list[dict[str, Any]] | None = None, warning: str = ""
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warning:
        response["warnings"] = [warning]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def starting_message(namespace: str) -> str:
    """Why an unsuspended CREATE of an unlabelled Job waits for the webhook's first LISTs."""
    return (
        f'kuota-webhook is starting and does not know yet whether namespace "{namespace}" is '
        "managed by kuota (manageJobsWithoutQueueName), so it cannot tell whether this Job "
        "must wait for admission; retry in a few seconds, or create it suspended "
        f"(spec.suspend: true) or with a {QUEUE_NAME_LABEL} label"
    )


def _refusal(
    uid: str, message: str, *, code: int = 403, reason: str = "Forbidden"
) -> dict[str, Any]:
    status = {"code": code, "reason": reason, "message": message}
    response = {"uid": uid, "allowed": False, "status": status}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _user(request: Mapping[str, Any]) -> str:
    info = request.get("userInfo")
    name = info.get("username") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else ""


def _uid(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata")
    uid = md.get("uid") if isinstance(md, Mapping) else None
    return uid if isinstance(uid, str) else ""


def mutate_job(
    body: object, *, trusted_users: Collection[str] = frozenset(), managed: Managed | None = None
) -> Answer:
    """The answer to one AdmissionReview body (already decoded from JSON).

    ``trusted_users``: the usernames of kuota's own identities (the rules let
    them write what users may not). ``managed``: which namespaces and Jobs are
    kuota's beyond the queue label (None: only labelled Jobs are)."""
    request = body.get("request") if isinstance(body, Mapping) else None
    if not isinstance(request, Mapping):
        why = "not an AdmissionReview with a request"
        return Answer(_review("", warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    uid = request.get("uid")
    uid = uid if isinstance(uid, str) else ""
    if not uid:
        why = "AdmissionReview request without a uid"
        return Answer(_review("", warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    kind = request.get("kind")
    kind = kind if isinstance(kind, Mapping) else {}
    reviewed = _BY_GROUP_KIND.get((kind.get("group"), kind.get("kind")))  # type: ignore[arg-type]
    if reviewed is None:
        why = f"not a kind kuota queues ({kind.get('group')}/{kind.get('kind')})"
        return Answer(_review(uid), "unchanged", why)
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return Answer(_review(uid), "unchanged", f"operation {operation}")
    if reviewed is POD or reviewed is LWS:
        # imported here: admission_pods builds on this module's answers and rules
        from kuota.kube.admission_pods import mutate_leader_worker_set, mutate_pod

        if reviewed is POD:
            return mutate_pod(request, uid, str(operation), trusted_users)
        return mutate_leader_worker_set(request, uid, str(operation))
    job = request.get("object")
    metadata = job.get("metadata") if isinstance(job, Mapping) else None
    spec = job.get("spec") if isinstance(job, Mapping) else None
    if (
        not isinstance(job, Mapping)
        or not isinstance(metadata, Mapping)
        or (operation == "CREATE" and not isinstance(spec, Mapping))
    ):
        why = f"the {reviewed.kind} has no metadata or spec"
        return Answer(_review(uid, warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    job = {**job, "kind": reviewed.kind}  # the rules read the kind's suspend field
    old = request.get("oldObject") if operation == "UPDATE" else None
    old = {**old, "kind": reviewed.kind} if isinstance(old, Mapping) and old else {}
    # A Job's owner is not trusted (kuota.api.parse_job.read_job): only the other kinds'
    owner = None if reviewed is JOB else managed_owner(job) or managed_owner(old or {})
    if owner is not None:  # KubeRay's RayCluster of a RayJob
        why = f"a {owner}'s {reviewed.kind}: the {owner} is the workload"
        return Answer(_review(uid), "unchanged", why)
    if reviewed.kind == "RayJob" and _cluster_selector(job):
        why = "a RayJob with a clusterSelector runs on a cluster it does not own: not a workload"
        return Answer(_review(uid), "unchanged", why)
    if reviewed is not JOB:
        managed = _LabelsOnly(managed)
    namespace = request.get("namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    ns_managed = managed is not None and managed.namespace_managed(namespace or "default")
    known = bool(old) and (
        ANN_DECISION_ID in _annotations(old) or (managed is not None and managed.known(_uid(old)))
    )
    unsure = (
        managed is not None
        and not managed.complete()
        and (namespace or "default") not in SYSTEM_NAMESPACES
    )
    if not (queued(job) or queued(old) or ns_managed or known or unsure):
        return Answer(_review(uid), "unchanged", f"no {QUEUE_NAME_LABEL} label")
    unsure = unsure and not (queued(job) or queued(old) or ns_managed or known)
    user = _user(request)
    trusted = user in trusted_users
    change = Change(operation, user, trusted, old, job, namespace, ns_managed, known, unsure)
    reasons = refusals(change)
    if reasons:
        return Answer(_refusal(uid, "; ".join(reasons)), "refused", f"{operation} by {user}")
    if operation == "UPDATE":
        return Answer(_review(uid), "unchanged", "update allowed")
    if suspended(job):
        return Answer(_review(uid), "unchanged", "already suspended")
    if unsure:
        message = starting_message(namespace or "default")
        review = _refusal(uid, message, code=503, reason="ServiceUnavailable")
        return Answer(review, "refused", f"CREATE by {user}: the view is not complete")
    queue = queue_of(job)
    why = f"queue {queue}" if queue else f"namespace {namespace} is managed"
    return Answer(_review(uid, patch=suspend_patch(job)), "suspended", why)


class _LabelsOnly:
    """A training kind is kuota's by its queue label (or kuota's record) only: no
    managed namespaces for it, and nothing unsure while the view is incomplete."""

    def __init__(self, view: Managed | None) -> None:
        self._view = view

    def namespace_managed(self, namespace: str) -> bool:
        return False

    def known(self, uid: str) -> bool:
        return self._view is not None and self._view.known(uid)

    def complete(self) -> bool:
        return True


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}
