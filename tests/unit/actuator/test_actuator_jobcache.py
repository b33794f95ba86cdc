"""The actuator's Job cache keeps no ``metadata.managedFields`` (#23 item 6):
neither the copies its watch keeps nor the apiserver's answers to its own
writes (``note``), which are kept as an overlay."""

from __future__ import annotations

import copy
from typing import Any

from kuota_actuator.jobcache import JobCache

MANAGED = [{"manager": "kuota-actuator", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def _job(rv: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "train",
            "namespace": "team",
            "resourceVersion": rv,
            "managedFields": copy.deepcopy(MANAGED),
            "annotations": {"kuota.dev/decision-id": "d1"},
        },
        "spec": {"suspend": False},
    }


def test_an_own_write_is_kept_without_managed_fields() -> None:
    cache = JobCache(None)
    written = _job("12")
    cache.note(written)
    kept = cache.get("team/train")
    assert kept is not None
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {"kuota.dev/decision-id": "d1"}
    assert kept["spec"] == {"suspend": False} and kept["metadata"]["resourceVersion"] == "12"
    assert written["metadata"]["managedFields"] == MANAGED, "the caller's object is not changed"


def test_an_older_answer_does_not_replace_a_newer_copy() -> None:
    cache = JobCache(None)
    cache.note(_job("12"))
    cache.note(_job("11"))
    kept = cache.get("team/train")
    assert kept is not None and kept["metadata"]["resourceVersion"] == "12"
