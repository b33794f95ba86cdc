"""What the webhook knows beyond an AdmissionReview: managed namespaces, queued Jobs.

Theory of operation: an AdmissionReview carries the Job, not its Namespace's
labels nor the Configuration, so ingest keeps them here from the objects its
watches already see (``Sources.observe`` hands each change over before
translating it): every Namespace's labels, the latest Configuration (the
file, the named ConfigMap or the operator's ``Kueue``; the last one read wins
and deleting it restores the defaults, as in the fold), and the uids of the
Jobs seen with a queue label or in a managed namespace. ``namespace_managed``
and ``known`` answer ``kuota.kube.admission_review.Managed``. The view is in
memory only: after a restart it is rebuilt by the first LISTs, and until then
an unlabelled Job may pass unsuspended; the backstop re-suspends it
(docs/design/ingest.md, "Managed namespaces").
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

log = logging.getLogger("kuota_ingest.cluster_view")

_CONFIG_KINDS = frozenset(kinds.names("config"))


def _meta(obj: Any) -> dict[str, Any]:
    md = obj.get("metadata") if isinstance(obj, dict) else None
    return md if isinstance(md, dict) else {}


class ClusterView:
    def __init__(self, config: Configuration | None = None) -> None:
        self.config = config or Configuration()
        self._config_source: tuple[str, str] | None = None  # (kind, name) of the last one read
        self._namespaces: dict[str, dict[str, str]] = {}
        self._managed: dict[str, bool] = {}  # namespace -> managed, for the current config
        self._uids: set[str] = set()

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
            return
        labels = md.get("labels")
        namespace = md.get("namespace")
        labelled = isinstance(labels, dict) and bool(labels.get(QUEUE_NAME_LABEL))
        if labelled or (isinstance(namespace, str) and self.namespace_managed(namespace)):
            self._uids.add(uid)

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
