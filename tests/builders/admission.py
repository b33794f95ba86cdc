"""AdmissionReview requests as the apiserver sends them to kuota's webhook, and the
JSON patch of an answer (the webhook unit tests of each kind)."""

from __future__ import annotations

import base64
import json
from typing import Any


def admission_review(
    obj: dict[str, Any], kind: dict[str, str], *, old: dict[str, Any] | None, user: str
) -> dict[str, Any]:
    """A CREATE of ``obj`` (an UPDATE from ``old`` when given) by ``user`` in team-a."""
    request: dict[str, Any] = {
        "uid": "rev-1",
        "kind": kind,
        "operation": "UPDATE" if old is not None else "CREATE",
        "namespace": "team-a",
        "userInfo": {"username": user},
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The answer's JSON patch, decoded; None when it has none."""
    response = answer["response"]
    if "patch" not in response:
        return None
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch
