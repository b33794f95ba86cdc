"""What the webhook knows beyond an AdmissionReview: managed namespaces, queued Jobs.

Theory of operation: an AdmissionReview carries the Job, not its Namespace's
labels nor the Configuration, so the webhook (``kuota_webhook.feed``) keeps
them here from its own list+watches: every Namespace's labels, the latest
Configuration (the file or the named ConfigMap; the last one read wins and
deleting it restores the defaults, as in the fold), and the uids of the Jobs
seen with a queue label or in a managed namespace (once kuota's, always: a
later Configuration does not take a Job back). The other Jobs' namespaces are
kept too, so a Configuration or a Namespace's labels that change make their
Jobs known at once. ``namespace_managed``, ``known`` and ``complete`` answer
``kuota.kube.admission_review.Managed``. The view is in memory only: after a
start it is built by the first LISTs, and until ``mark_complete`` the webhook
guards every unlabelled Job as possibly managed
(docs/design/webhook-registration.md, "Before the view is complete").
"""

from __future__ import annotations

import logging
from typing import Any

from kuota import kinds
from kuota.api.managed import namespace_managed
from kuota.api.parse import parse_object
from kuota.api.types import Configuration, ValidationError
from kuota.kinds import QUEUE_NAME_LABEL, SYSTEM_NAMESPACES
from kuota.kube.translate import journal_object

log = logging.getLogger(__name__)

_CONFIG_KINDS = frozenset(kinds.names("config"))


def _meta(obj: Any) -> dict[str, Any]:
    md = obj.get("metadata") if isinstance(obj, dict) else None
    return md if isinstance(md, dict) else {}


class ClusterView:
    def __init__(self, config: Configuration | None = None, *, complete: bool = False) -> None:
        self.config = config or Configuration()
        self._complete = complete
        self._config_source: tuple[str, str] | None = None  # (kind, name) of the last one read
        self._namespaces: dict[str, dict[str, str]] = {}
        self._managed: dict[str, bool] = {}  # namespace -> managed, for the current config
        self._uids: set[str] = set()  # the Jobs known to be kuota's
        self._others: dict[str, set[str]] = {}  # namespace -> uids of Jobs not (yet) kuota's

    # ------------------------------------------------------------------ answers

    def namespace_managed(self, namespace: str) -> bool:
        if namespace in SYSTEM_NAMESPACES:
            return False
        hit = self._managed.get(namespace)
        if hit is None:
            labels = self._namespaces.get(namespace, {})
            hit = namespace_managed(self.config, namespace, labels)
            self._managed[namespace] = hit
        return hit

    def known(self, uid: str) -> bool:
        return bool(uid) and uid in self._uids

    def complete(self) -> bool:
        return self._complete

    def mark_complete(self) -> None:
        """The first LISTs (Configuration source, Namespaces, Jobs) are done."""
        self._rescan(None)
        self._complete = True

    # ------------------------------------------------------------------ changes

    def observe(self, kind: str, change_type: str, obj: Any) -> None:
        md = _meta(obj)
        name = md.get("name")
        if not isinstance(name, str):
            return
        deleted = change_type == "DELETE"
        if kind == "Namespace":
            labels = md.get("labels")
            if deleted:
                self._namespaces.pop(name, None)
            else:
                self._namespaces[name] = dict(labels) if isinstance(labels, dict) else {}
            self._managed.pop(name, None)
            self._rescan(name)
        elif kind == "Job":
            self._job(md, deleted)
        elif kind in _CONFIG_KINDS:
            self._configuration(kind, name, obj, deleted)

    def _job(self, md: dict[str, Any], deleted: bool) -> None:
        uid = md.get("uid")
        if not isinstance(uid, str) or not uid:
            return
        if deleted:
            self._uids.discard(uid)
            ns = md.get("namespace")
            self._forget(ns if isinstance(ns, str) else "", uid)
            return
        if uid in self._uids:
            return
        labels = md.get("labels")
        namespace = md.get("namespace")
        namespace = namespace if isinstance(namespace, str) else ""
        labelled = isinstance(labels, dict) and bool(labels.get(QUEUE_NAME_LABEL))
        if labelled or self.namespace_managed(namespace):
            self._uids.add(uid)
            self._forget(namespace, uid)
        else:
            self._others.setdefault(namespace, set()).add(uid)

    def _forget(self, namespace: str, uid: str) -> None:
        held = self._others.get(namespace)
        if held is not None:
            held.discard(uid)
            if not held:
                del self._others[namespace]

    def _rescan(self, namespace: str | None) -> None:
        """Make known the held Jobs (of ``namespace``, or all) whose namespace is managed now."""
        names = list(self._others) if namespace is None else [namespace]
        for ns in names:
            if ns in self._others and self.namespace_managed(ns):
                self._uids.update(self._others.pop(ns))

    def _configuration(self, kind: str, name: str, obj: Any, deleted: bool) -> None:
        if deleted:
            if self._config_source == (kind, name):
                self._set(Configuration(), None)
            return
        parsed = parse_object(journal_object(kind, obj))  # kind and apiVersion filled in
        if isinstance(parsed, ValidationError):
            log.warning(
                "Configuration %s/%s unreadable, keeping the last one: %s", kind, name, parsed
            )
        elif isinstance(parsed, Configuration):
            self._set(parsed, (kind, name))

    def _set(self, config: Configuration, source: tuple[str, str] | None) -> None:
        self._config_source = source
        if config != self.config:
            self.config = config
            self._managed.clear()
            self._rescan(None)
