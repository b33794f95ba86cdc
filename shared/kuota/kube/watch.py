"""List, then watch, one resource, without losing or repeating an update.

Theory of operation: the watcher keeps, per object, the last resourceVersion it
reported. It starts with a paginated LIST, reporting every object as an upsert,
then WATCHes from the list's resourceVersion with bookmarks on, so a quiet
watch still advances its position. A watch that ends (server timeout, dropped
connection) is resumed from the last position. A ``410 Gone`` (position too old,
e.g. after an etcd compaction or an apiserver restart) triggers a fresh LIST,
diffed against what was reported: objects with a new resourceVersion become
upserts, objects no longer listed become deletes, unchanged ones are not
reported again. The result is the stream of changes a consumer needs to keep an
exact mirror.

Objects are plain dicts (the apiserver's JSON) without ``metadata.managedFields``
(dropped on the way in: often most of an object's bytes, and no reader needs
them). What ``known`` keeps of each object is the object itself unless a
``remember`` function says less (ingest keeps only :func:`identity`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str
    path: str  # collection path, e.g. "/apis/batch/v1/jobs"
    label_selector: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    type: Literal["UPSERT", "DELETE"]
    kind: str
    object: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        md = self.object.get("metadata") or {}
        return (md.get("namespace") or "", md.get("name") or "")


class Gone(Exception):
    """The watch position is too old (HTTP 410)."""


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``metadata.managedFields`` removed (in place: the watcher's own copy)."""
    md = obj.get("metadata")
    if isinstance(md, dict):
        md.pop("managedFields", None)
    return obj


IDENTITY = ("name", "namespace", "uid", "resourceVersion")


def identity(obj: dict[str, Any]) -> dict[str, Any]:
    """What names one version of ``obj``: its kind and metadata name, namespace, uid
    and resourceVersion (enough to diff a relist and to report a delete)."""
    md = obj.get("metadata")
    md = md if isinstance(md, dict) else {}
    out: dict[str, Any] = {"metadata": {k: md[k] for k in IDENTITY if k in md}}
    if "kind" in obj:
        out["kind"] = obj["kind"]
    return out


class Watcher:
    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        *,
        timeout_seconds: int = 300,
        page_size: int = 500,
        remember: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._api = api
        self.resource = resource
        self._timeout = timeout_seconds
        self._page = page_size
        self._remember = remember  # what ``known`` keeps of an object; None: all of it
        self.known: dict[tuple[str, str], dict[str, Any]] = {}
        self.resource_version: str | None = None
        self.relists = 0

    async def _get(self, query: list[tuple[str, Any]]) -> Any:
        resp = await self._api.call_api(
            self.resource.path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        status = getattr(resp, "status", 200)
        if status >= 400:
            # Without preloading the client does not raise for HTTP errors itself.
            body = (await resp.read())[:500]
            resp.release()
            raise ApiException(status=status, reason=body.decode(errors="replace"))
        return resp

    def _selector(self) -> list[tuple[str, Any]]:
        return (
            [("labelSelector", self.resource.label_selector)]
            if self.resource.label_selector
            else []
        )

    async def list_once(self) -> list[dict[str, Any]]:
        """One paged LIST now, without a watch or ``known``: the objects (an
        ``ApiException`` for an HTTP error)."""
        return (await self._list())[0]

    async def _list(self) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        cont: str | None = None
        while True:
            q = [*self._selector(), ("limit", self._page)]
            if cont:
                q.append(("continue", cont))
            resp = await self._get(q)
            body = json.loads(await resp.read())
            for it in body.get("items") or []:
                it.setdefault("kind", self.resource.kind)
                items.append(without_managed_fields(it))
            meta = body.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    async def _relist(self) -> list[Change]:
        items, rv = await self._list()
        self.relists += 1
        changes: list[Change] = []
        seen: set[tuple[str, str]] = set()
        for obj in items:
            k = _key(obj)
            seen.add(k)
            old = self.known.get(k)
            new_rv = (obj.get("metadata") or {}).get("resourceVersion")
            if old is None or (old.get("metadata") or {}).get("resourceVersion") != new_rv:
                self.known[k] = obj if self._remember is None else self._remember(obj)
                changes.append(Change("UPSERT", self.resource.kind, obj))
        for k in sorted(set(self.known) - seen):
            changes.append(Change("DELETE", self.resource.kind, self.known.pop(k)))
        self.resource_version = rv
        return changes

    async def _watch_once(self) -> AsyncIterator[Change]:
        q = [
            *self._selector(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version or ""),
            ("timeoutSeconds", self._timeout),
        ]
        try:
            resp = await self._get(q)
        except ApiException as err:
            if err.status == 410:
                raise Gone() from err
            raise
        try:
            async for line in resp.content:
                if not line.strip():
                    continue
                ev = json.loads(line)
                etype, obj = ev.get("type"), ev.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone()
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if etype == "BOOKMARK":
                    self.resource_version = rv
                    continue
                obj.setdefault("kind", self.resource.kind)
                without_managed_fields(obj)
                k = _key(obj)
                if rv:
                    self.resource_version = rv
                if etype == "DELETED":
                    self.known.pop(k, None)
                    yield Change("DELETE", self.resource.kind, obj)
                elif etype in ("ADDED", "MODIFIED"):
                    old = self.known.get(k)
                    if old is not None and (old.get("metadata") or {}).get("resourceVersion") == rv:
                        continue  # already reported (e.g. by a relist)
                    self.known[k] = obj if self._remember is None else self._remember(obj)
                    yield Change("UPSERT", self.resource.kind, obj)
        finally:
            resp.release()

    async def changes(self) -> AsyncIterator[Change]:
        """Every change, forever: the initial list, then the watch."""
        for c in await self._relist():
            yield c
        backoff = 0.2
        while True:
            try:
                async for c in self._watch_once():
                    backoff = 0.2
                    yield c
            except Gone:
                log.info(
                    "%s: watch position %s gone; relisting",
                    self.resource.kind,
                    self.resource_version,
                )
                for c in await self._relist():
                    yield c
            except (TimeoutError, ApiException, OSError, aiohttp.ClientError) as err:
                log.warning(
                    "%s: watch failed (%s); retrying in %.1fs", self.resource.kind, err, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                try:
                    for c in await self._relist():
                        yield c
                except (TimeoutError, ApiException, OSError, aiohttp.ClientError) as err2:
                    log.warning("%s: relist failed (%s)", self.resource.kind, err2)
