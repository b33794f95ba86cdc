"""AdmissionReview requests as the apiserver sends them to kuota's webhook, and the
JSON patch of an answer (the webhook unit tests of each kind)."""

from __future__ import annotations

import base64
import copy
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


def apply_patch(obj: dict[str, Any], ops: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``obj`` after the JSON patch (RFC 6902 ``add`` and ``remove``), as the apiserver
    applies the webhook's answer; ``obj`` itself is left as it was."""
    out = copy.deepcopy(obj)
    for op in ops or []:
        *parents, last = [
            t.replace("~1", "/").replace("~0", "~") for t in op["path"][1:].split("/")
        ]
        node: Any = out
        for token in parents:
            node = node[int(token)] if isinstance(node, list) else node[token]
        if op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        elif op["op"] == "add" and last == "-":
            node.append(op["value"])
        elif op["op"] == "add" and isinstance(node, list):
            node.insert(int(last), op["value"])
        elif op["op"] == "add":
            node[last] = op["value"]
        else:
            raise AssertionError(f"not a patch the webhook writes: {op}")
    return out
