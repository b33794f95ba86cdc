"""Journal-event builders shared by the unit and the integration tests.

A Job of the kind the audit and admission tests queue (``gpu_job``: suspended,
one container asking for whole ``nvidia.com/gpu``, named in a LocalQueue) and
the ``ObjectUpserted`` event ingest would journal for an object (``upserted``).
This folder is on ``sys.path`` in every test run (``tests/conftest.py`` lives
here), so any test module can import it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kuota.events.schema import ObjectUpserted

GPU = "nvidia.com/gpu"


def gpu_job(namespace: str, name: str, queue: str, *, gpus: int, created: float) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": stamp,
            "labels": {"kueue.x-k8s.io/queue-name": queue},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {GPU: str(gpus)}},
                        }
                    ],
                }
            },
        },
    }


def upserted(obj: dict[str, Any], at: float) -> ObjectUpserted:
    meta = obj["metadata"]
    ns = meta.get("namespace", "")
    return ObjectUpserted(
        id=f"{obj['kind']}/{ns}/{meta['name']}@{meta['resourceVersion']}", at=at, object=obj
    )
