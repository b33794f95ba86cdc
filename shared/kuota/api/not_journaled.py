"""The stand-in ingest journals for an object too large for the journal.

Theory of operation: a journal record is one Kafka record, and Kafka refuses a
record over its size limit. Ingest journals only what the fold reads of a Job
(``kuota.kube.translate.journal_object``); an object still too large (a huge
node selector, thousands of tolerations, a ResourceClaimTemplate with huge
selectors) is journaled as a stand-in: the object's identity and the
annotation :data:`NOT_JOURNALED_ANNOTATION`, whose value says why. The readers
(``kuota.api.parse``, ``kuota.api.dra``) read such a stand-in as invalid, with
that reason, so the fold answers ``Rejected`` (reason ``InvalidObject``) and
keeps the object's previous version, as for any invalid object
(docs/design/bad-input.md). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

NOT_JOURNALED_ANNOTATION = "kuota.dev/not-journaled"


def not_journaled(manifest: Mapping[str, object]) -> str | None:
    """Why ``manifest`` is ingest's stand-in for an object it could not journal, or None."""
    meta = manifest.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    reason = annotations.get(NOT_JOURNALED_ANNOTATION)
    return None if reason is None else f"not journaled: {reason}"
