"""Journal events as ingest writes them, for the tests that build journals.

``upserted`` wraps a manifest in the ``ObjectUpserted`` ingest would journal
for it (its id names the kind, the object and its resourceVersion);
``journaled_job`` is a Job as ingest reads it from the apiserver: suspended,
uid ``uid-<name>``, resourceVersion 1, the apiserver's creationTimestamp and
no ``kuota.dev/created-at`` annotation (the fold reads the timestamp).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders.manifests import job
from kuota.events.schema import ObjectUpserted


def timestamp(at: float) -> str:
    """``at`` (seconds since the epoch) as an apiserver timestamp."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def journaled_job(
    name: str, *, namespace: str, gpus: int, created: float, queue: str = "lq", **options: Any
) -> dict[str, Any]:
    """A suspended Job of ``gpus`` GPUs created at ``created``, as ingest reads it."""
    return job(
        name,
        namespace=namespace,
        gpus=str(gpus),
        queue=queue,
        created=None,
        creation_timestamp=timestamp(created),
        uid=f"uid-{name}",
        resource_version="1",
        suspend=True,
        **options,
    )


def upserted(obj: dict[str, Any], at: float) -> ObjectUpserted:
    meta = obj["metadata"]
    ns = meta.get("namespace", "")
    return ObjectUpserted(
        id=f"{obj['kind']}/{ns}/{meta['name']}@{meta['resourceVersion']}", at=at, object=obj
    )
