"""``kuota.kube.watch.Watcher`` with a fake apiserver: no object it hands over or
keeps carries ``metadata.managedFields`` (#23 item 6), and with ``remember`` its
memory holds only what names each object, which still diffs a relist and
reports a delete."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kuota.kube.watch import Change, Resource, Watcher, identity

MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def _job(name: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "resourceVersion": rv,
            "labels": {"team": "a"},
            "managedFields": list(MANAGED),
        },
        "spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


class _Response:
    def __init__(self, body: dict[str, Any] | None = None, lines: list[bytes] | None = None):
        self._body = body
        self.content = self._lines(lines or [])

    async def _lines(self, lines: list[bytes]) -> Any:
        for line in lines:
            yield line
        await asyncio.sleep(3600)  # a watch that stays open

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()

    def release(self) -> None:
        pass


class FakeApi:
    """LIST answers ``items``; the first WATCH sends ``events``, later ones nothing."""

    def __init__(self, items: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
        self.items = items
        self.events = events

    async def call_api(self, path: str, method: str, **kw: Any) -> _Response:
        if dict(kw.get("query_params") or []).get("watch") == "true":
            lines = [json.dumps(e).encode() + b"\n" for e in self.events]
            self.events = []
            return _Response(lines=lines)
        body = {"items": json.loads(json.dumps(self.items)), "metadata": {"resourceVersion": "9"}}
        return _Response(body)


async def _take(w: Watcher, n: int) -> list[Change]:
    out: list[Change] = []
    async with asyncio.timeout(5):
        async for c in w.changes():
            out.append(c)
            if len(out) == n:
                return out
    return out


async def test_no_change_and_no_kept_object_carries_managed_fields() -> None:
    api = FakeApi([_job("a", "5")], [{"type": "MODIFIED", "object": _job("b", "7")}])
    w = Watcher(api, Resource("Job", "/apis/batch/v1/jobs"))  # type: ignore[arg-type]
    changes = await _take(w, 2)
    assert [(c.type, c.object["metadata"]["name"]) for c in changes] == [
        ("UPSERT", "a"),
        ("UPSERT", "b"),
    ]
    for c in changes:
        assert "managedFields" not in c.object["metadata"], c.object["metadata"]["name"]
        assert c.object["spec"]["parallelism"] == 1, "the rest is handed over whole"
    assert set(w.known) == {("ns", "a"), ("ns", "b")}
    for obj in w.known.values():
        assert "managedFields" not in obj["metadata"]
        assert "spec" in obj, "without remember, the whole object is kept"


async def test_remember_identity_keeps_names_and_still_reports_deletes() -> None:
    api = FakeApi([_job("a", "5"), _job("gone", "6")], [])
    w = Watcher(api, Resource("Job", "/apis/batch/v1/jobs"), remember=identity)  # type: ignore[arg-type]
    first = await _take(w, 2)
    assert "spec" in first[0].object, "the change itself is the whole object"
    assert w.known[("ns", "a")] == {
        "kind": "Job",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u-a", "resourceVersion": "5"},
    }
    # A relist (after a 410) without "gone" and with "a" unchanged: only the delete.
    api.items = [_job("a", "5")]
    again = await w._relist()
    assert [(c.type, c.object["metadata"]["name"]) for c in again] == [("DELETE", "gone")]
    assert again[0].object["metadata"] == {
        "name": "gone",
        "namespace": "ns",
        "uid": "u-gone",
        "resourceVersion": "6",
    }, "a delete names the object, its uid and last resourceVersion"
