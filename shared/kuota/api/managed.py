"""Which Jobs are kuota's: Kueue's queue label and its managed namespaces.

Theory of operation: a Job is managed when it carries the queue-name label, or
when the Configuration sets ``manageJobsWithoutQueueName`` and its namespace is
managed, or when kuota has already queued it (same uid: a Job does not stop
being managed because its label was dropped; the caller knows that). A
namespace is managed when ``managedJobsNamespaceSelector`` matches its labels;
without a selector Kueue's default applies, which leaves out ``kube-system``
and Kueue's own namespace (the Configuration's ``namespace``). The selector
is matched against the Namespace's labels plus ``kubernetes.io/metadata.name``,
which the apiserver sets on every Namespace. Pure: no I/O.
See docs/design/ingest.md ("Managed namespaces").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kuota.api.types import Configuration, LabelSelector, NodeSelectorRequirement
from kuota.kinds import NAMESPACE_NAME_LABEL, QUEUE_NAME_LABEL

#: Namespaces Kueue's default selector always leaves out (besides its own).
DEFAULT_UNMANAGED = ("kube-system",)


def default_selector(config: Configuration) -> LabelSelector:
    """Kueue's default ``managedJobsNamespaceSelector``: not kube-system, not Kueue's own."""
    names = tuple(dict.fromkeys((*DEFAULT_UNMANAGED, config.namespace)))
    return LabelSelector(
        match_expressions=(NodeSelectorRequirement(NAMESPACE_NAME_LABEL, "NotIn", names),)
    )


def label_selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics (an empty selector matches everything)."""
    if any(labels.get(k) != v for k, v in selector.match_labels):
        return False
    for req in selector.match_expressions:
        value = labels.get(req.key)
        if req.operator == "In":
            ok = value is not None and value in req.values
        elif req.operator == "NotIn":
            ok = value is None or value not in req.values
        elif req.operator == "Exists":
            ok = value is not None
        elif req.operator == "DoesNotExist":
            ok = value is None
        else:
            ok = False
        if not ok:
            return False
    return True


def namespace_managed(
    config: Configuration, namespace: str, labels: Mapping[str, str] | Iterable[tuple[str, str]]
) -> bool:
    """Whether unlabelled Jobs in ``namespace`` (with these labels) are kuota's."""
    if not config.manage_jobs_without_queue_name:
        return False
    seen = dict(labels.items() if isinstance(labels, Mapping) else labels)
    seen.setdefault(NAMESPACE_NAME_LABEL, namespace)
    selector = config.managed_jobs_namespace_selector
    return label_selector_matches(selector or default_selector(config), seen)


def queue_name(job: Mapping[str, object]) -> str | None:
    """The Job manifest's queue-name label, None without one (an empty value counts as none)."""
    metadata = job.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    value = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) and value else None


def job_managed(job: Mapping[str, object], *, namespace_is_managed: bool) -> bool:
    """Whether a Job manifest is kuota's by its label or by its namespace.

    A Job kuota already queued stays managed whatever its labels; that takes
    the workload's history, so the caller adds it."""
    return queue_name(job) is not None or namespace_is_managed
