"""The mutating webhook's answer to an AdmissionReview (pure: dict in, dict out).

Theory of operation: Kueue keeps a Job from starting by creating it suspended
(its Job webhook sets ``spec.suspend: true`` on CREATE); quota admission later
unsuspends it. kuota does the same with ``mutate_job``: for an
``admission.k8s.io/v1`` AdmissionReview of a CREATE of a ``batch/v1`` Job that
carries the ``kueue.x-k8s.io/queue-name`` label and is not already suspended,
the answer is ``allowed: true`` with a JSONPatch ``add /spec/suspend true``
(``add`` replaces an existing member, so one operation covers ``false`` and
absent). Everything else is allowed unchanged.

A malformed review is answered ``allowed: true`` with a warning, never an
error: whether an unreadable request may pass is the
MutatingWebhookConfiguration's ``failurePolicy`` to decide (the apiserver
only sends well-formed reviews; anything else is a test or a probe), and an
exception here would turn into an opaque 500.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kuota.api.parse_job import QUEUE_NAME_LABEL

SUSPEND_PATCH = [{"op": "add", "path": "/spec/suspend", "value": True}]

Outcome = Literal["suspended", "unchanged", "malformed"]


@dataclass(frozen=True, slots=True)
class Answer:
    review: dict[str, Any]  # the AdmissionReview to send back
    outcome: Outcome
    why: str  # for the log


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


def mutate_job(body: object) -> Answer:
    """The answer to one AdmissionReview body (already decoded from JSON)."""
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
    if (kind.get("group"), kind.get("kind")) != ("batch", "Job"):
        why = f"not a batch Job ({kind.get('group')}/{kind.get('kind')})"
        return Answer(_review(uid), "unchanged", why)
    if request.get("operation") != "CREATE":
        return Answer(_review(uid), "unchanged", f"operation {request.get('operation')}")
    job = request.get("object")
    metadata = job.get("metadata") if isinstance(job, Mapping) else None
    spec = job.get("spec") if isinstance(job, Mapping) else None
    if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
        why = "the Job has no metadata or spec"
        return Answer(_review(uid, warning=f"kuota: {why}; allowed unchanged"), "malformed", why)
    labels = metadata.get("labels")
    if not isinstance(labels, Mapping) or QUEUE_NAME_LABEL not in labels:
        return Answer(_review(uid), "unchanged", f"no {QUEUE_NAME_LABEL} label")
    if spec.get("suspend") is True:
        return Answer(_review(uid), "unchanged", "already suspended")
    return Answer(
        _review(uid, patch=SUSPEND_PATCH), "suspended", f"queue {labels.get(QUEUE_NAME_LABEL)}"
    )
