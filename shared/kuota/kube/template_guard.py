"""The webhook's answer to deleting a ResourceClaimTemplate (pure: dicts in, dict out).

Theory of operation: a pod's claim is made from its namespace's
ResourceClaimTemplate when the pod is created, and a template's spec cannot be
updated, so a user swaps one by deleting and recreating it. Deleting the
template of a Job kuota admitted and started would let the Job's next pods
claim devices its admission never charged: the fold stops such a Job once it
sees the new template (``ClaimTemplateChanged``, docs/design/claim-templates.md),
but a pod made in between holds the new devices until then. So a DELETE by a
user (anyone but ``trusted_users``) of a template that a running Job of the
namespace names is refused (403), like Kubernetes' own in-use protection of a
PersistentVolumeClaim. "Running" is: the Job carries the actuator's
``kuota.dev/decision-id`` (kuota started it; users may not write it), is not
suspended and has not finished. :func:`template_delete` reads the review;
the server lists the namespace's Jobs (a quorum read, not the webhook's
view, which may lag the actuator's unsuspension) and :func:`answer_delete`
decides. docs/design/template-guard.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kuota.actuation.patch import ANN_DECISION_ID, _finished
from kuota.kinds import SYSTEM_NAMESPACES
from kuota.kube.admission_review import Answer, _refusal, _review, _user

GROUP = "resource.k8s.io"
KIND = "ResourceClaimTemplate"
PATH = "/validate-resource-k8s-io-resourceclaimtemplate"
NAMED = 3  # Jobs named in a refusal


@dataclass(frozen=True, slots=True)
class TemplateDelete:
    """A user's DELETE of ResourceClaimTemplate ``namespace/name``: the Jobs must be read."""

    uid: str
    namespace: str
    name: str
    user: str


def template_delete(
    body: object, *, trusted_users: Collection[str] = frozenset()
) -> TemplateDelete | Answer:
    """The DELETE to check, or the answer when there is nothing to check (another
    operation or kind, a trusted user, a system namespace, a malformed review)."""
    request = body.get("request") if isinstance(body, Mapping) else None
    if not isinstance(request, Mapping):
        why = "not an AdmissionReview with a request"
        return Answer(_review("", warning=f"kuota: {why}; allowed"), "malformed", why)
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        why = "AdmissionReview request without a uid"
        return Answer(_review("", warning=f"kuota: {why}; allowed"), "malformed", why)
    kind = request.get("kind")
    kind = kind if isinstance(kind, Mapping) else {}
    if (kind.get("group"), kind.get("kind")) != (GROUP, KIND):
        return Answer(_review(uid), "unchanged", f"not a {KIND} ({kind.get('kind')})")
    operation = request.get("operation")
    if operation != "DELETE":
        return Answer(_review(uid), "unchanged", f"operation {operation}")
    namespace, name = request.get("namespace"), request.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        why = f"a {KIND} DELETE without a namespace and name"
        return Answer(_review(uid, warning=f"kuota: {why}; allowed"), "malformed", why)
    user = _user(request)
    if user in trusted_users:
        return Answer(_review(uid), "unchanged", f"DELETE by {user} (trusted)")
    if namespace in SYSTEM_NAMESPACES:
        return Answer(_review(uid), "unchanged", f"namespace {namespace} is not kuota's")
    return TemplateDelete(uid, namespace, name, user)


def _running_under_kuota(job: Mapping[str, Any]) -> bool:
    md = job.get("metadata")
    annotations = md.get("annotations") if isinstance(md, Mapping) else None
    if not isinstance(annotations, Mapping) or not annotations.get(ANN_DECISION_ID):
        return False
    spec = job.get("spec")
    if not isinstance(spec, Mapping) or spec.get("suspend") is True:
        return False
    return not _finished(job)


def _names(job: Mapping[str, Any], template: str) -> bool:
    spec = job.get("spec")
    pod = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = pod.get("spec") if isinstance(pod, Mapping) else None
    claims = pod_spec.get("resourceClaims") if isinstance(pod_spec, Mapping) else None
    return any(
        isinstance(c, Mapping) and c.get("resourceClaimTemplateName") == template
        for c in (claims if isinstance(claims, list) else ())
    )


def users(template: str, jobs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the Jobs kuota started that run and name ``template``, sorted."""
    out = []
    for job in jobs:
        if _names(job, template) and _running_under_kuota(job):
            md = job.get("metadata")
            out.append(str(md.get("name") if isinstance(md, Mapping) else ""))
    return sorted(out)


def answer_delete(check: TemplateDelete, jobs: Iterable[Mapping[str, Any]] | str) -> Answer:
    """Allow the DELETE unless a running Job kuota started names the template.
    ``jobs``: the namespace's Jobs, or why they could not be read (then refused as
    retryable: the webhook cannot tell whether the template is in use)."""
    where = f'ResourceClaimTemplate "{check.namespace}/{check.name}"'
    if isinstance(jobs, str):
        message = (
            f"kuota-webhook cannot read the Jobs of namespace {check.namespace} to check "
            f"whether {where} is in use ({jobs}); retry in a few seconds"
        )
        review = _refusal(check.uid, message, code=503, reason="ServiceUnavailable")
        return Answer(review, "refused", f"DELETE by {check.user}: the Jobs are not readable")
    found = users(check.name, jobs)
    if not found:
        return Answer(_review(check.uid), "unchanged", f"{where} is not in use")
    more = len(found) - NAMED
    shown = ", ".join(found[:NAMED]) + (f" and {more} more" if more > 0 else "")
    job_word = "Job" if len(found) == 1 else "Jobs"
    message = (
        f'user "{check.user}" may not delete {where}: it is in use by the running {job_word} '
        f"{shown}, which kuota admitted charged for the devices this template asks for; "
        f"a template recreated under a running Job would give its next pods devices its "
        f"quota does not cover. Delete the Job or let it finish first, or give the new "
        f"template another name"
    )
    return Answer(_refusal(check.uid, message), "refused", f"DELETE by {check.user}: in use")
