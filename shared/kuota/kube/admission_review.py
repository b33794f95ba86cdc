"""The mutating webhook's answer to an AdmissionReview (pure: dict in, dict out).

Theory of operation: Kueue keeps a Job from starting by creating it suspended;
kuota does the same. :func:`mutate_job` answers an ``admission.k8s.io/v1``
review of a ``batch/v1`` Job. A CREATE or UPDATE of a queued Job (the
``kueue.x-k8s.io/queue-name`` label on the new or the old object) first goes
through ``RULES``, the one place that decides what a user may change: each rule
reads a :class:`Change` and returns Kubernetes-style field errors, and any one
refuses the request (``allowed: false``, 403 ``Forbidden``). The rule today,
:func:`kuota_annotations`: only kuota's identities (``trusted_users``) may add,
change or remove a ``kuota.dev/`` annotation other than ``kuota.dev/active``.
A CREATE that passes and is not suspended yet gets the JSONPatch
``add /spec/suspend true``; an UPDATE is never mutated. A malformed review is
``allowed: true`` with a warning, never an error. Why, and the messages:
docs/design/ingest.md (the webhook).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kuota.actuation.patch import ANN_DECISION_ID, ANN_DECISION_OFFSET, ANN_ORIGINAL
from kuota.api.parse_job import ACTIVE_ANNOTATION, CREATED_AT_ANNOTATION
from kuota.kinds import QUEUE_NAME_LABEL, get

JOB = get("Job")  # the kind this webhook mutates

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

Outcome = Literal["suspended", "unchanged", "refused", "malformed"]


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


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    annotations = md.get("annotations") if isinstance(md, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def queued(obj: Mapping[str, Any]) -> bool:
    """The Job carries the ``kueue.x-k8s.io/queue-name`` label."""
    md = obj.get("metadata")
    labels = md.get("labels") if isinstance(md, Mapping) else None
    return isinstance(labels, Mapping) and QUEUE_NAME_LABEL in labels


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
    who = f'user "{change.user}"' if change.user else "an anonymous user"
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


Rule = Callable[[Change], list[str]]
#: Every rule a CREATE or UPDATE of a queued Job must pass, in order.
RULES: tuple[Rule, ...] = (kuota_annotations,)


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


def _refusal(uid: str, message: str) -> dict[str, Any]:
    status = {"code": 403, "reason": "Forbidden", "message": message}
    response = {"uid": uid, "allowed": False, "status": status}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _user(request: Mapping[str, Any]) -> str:
    info = request.get("userInfo")
    name = info.get("username") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else ""


def mutate_job(body: object, *, trusted_users: Collection[str] = frozenset()) -> Answer:
    """The answer to one AdmissionReview body (already decoded from JSON).

    ``trusted_users``: the usernames of kuota's own identities (the rules let
    them write what users may not)."""
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
    if (kind.get("group"), kind.get("kind")) != (JOB.group, JOB.kind):
        why = f"not a batch Job ({kind.get('group')}/{kind.get('kind')})"
        return Answer(_review(uid), "unchanged", why)
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return Answer(_review(uid), "unchanged", f"operation {operation}")
    job = request.get("object")
    metadata = job.get("metadata") if isinstance(job, Mapping) else None
    spec = job.get("spec") if isinstance(job, Mapping) else None
    if (
        not isinstance(job, Mapping)
        or not isinstance(metadata, Mapping)
        or (operation == "CREATE" and not isinstance(spec, Mapping))
    ):
        why = "the Job has no metadata or spec"
        return Answer(_review(uid, warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    old = request.get("oldObject") if operation == "UPDATE" else None
    old = old if isinstance(old, Mapping) else {}
    if not queued(job) and not queued(old):
        return Answer(_review(uid), "unchanged", f"no {QUEUE_NAME_LABEL} label")
    user = _user(request)
    change = Change(operation, user, user in trusted_users, old, job)
    reasons = refusals(change)
    if reasons:
        return Answer(_refusal(uid, "; ".join(reasons)), "refused", f"{operation} by {user}")
    if operation == "UPDATE":
        return Answer(_review(uid), "unchanged", "update allowed")
    assert isinstance(spec, Mapping)
    if spec.get("suspend") is True:
        return Answer(_review(uid), "unchanged", "already suspended")
    labels = metadata.get("labels")
    queue = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return Answer(_review(uid, patch=SUSPEND_PATCH), "suspended", f"queue {queue}")
