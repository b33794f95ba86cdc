"""The few Kubernetes calls the actuator makes, on plain JSON dicts.

Objects stay the apiserver's JSON (no generated models), so a Job read and
written back loses no field this client does not know. Errors are sorted into
what the caller does about them:

- :class:`Conflict` (409): the resourceVersion precondition failed, or the
  object already exists; GET again and recompute.
- :class:`Transient` (429, 5xx, timeouts, connection errors): retry with backoff.
- :class:`Permanent` (other 4xx: invalid, forbidden ...): report, do not retry.

``get`` returns None for 404. :class:`Mirror` keeps a list+watch copy of one
cluster-scoped kind (ResourceFlavors, ClusterQueues) through
``kuota.kube.watch.Watcher``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.kube.watch import Resource, Watcher

log = logging.getLogger("kuota.actuator")

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT = 15.0

_TIMEOUT = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)

Observe = Callable[[str, float], None]  # (HTTP method, seconds) of every request


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class Conflict(ApiError):
    pass


class Transient(ApiError):
    pass


class Permanent(ApiError):
    pass


async def api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from KUBECONFIG, or the in-cluster service account."""
    cfg = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(cfg)


def _error(status: int, body: bytes) -> ApiError:
    message = body.decode("utf-8", "replace")[:500]
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("message"):
            message = str(data["message"])
    except ValueError:
        pass
    if status == 409:
        return Conflict(status, message)
    if status == 429 or status >= 500:
        return Transient(status, message)
    return Permanent(status, message)


def _session(cfg: client.Configuration, limit: int) -> aiohttp.ClientSession:
    """An aiohttp session with the ApiClient's TLS settings but ``trust_env=False``:
    kubernetes-asyncio's own session trusts the environment, so aiohttp looks up
    netrc and proxy variables in a thread on EVERY request — two thread hops per
    call, which under CPU contention cost more than the request itself."""
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ctx, limit=limit), trust_env=False
    )


class Kube:
    def __init__(
        self, api: client.ApiClient, observe: Observe | None = None, *, connections: int = 100
    ) -> None:
        self.api = api
        self._observe = observe
        self._connections = connections
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        started = time.monotonic()
        try:
            return await self._request(method, path, body, content_type)
        finally:
            if self._observe is not None:
                self._observe(method, time.monotonic() - started)

    async def _request(
        self, method: str, path: str, body: Any, content_type: str
    ) -> tuple[int, Any]:
        # Plain aiohttp with the ApiClient's TLS and credentials, without call_api's
        # generic parameter sanitizing: half the client CPU per request.
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            await self.api.update_params_for_auth(headers, None, ["BearerToken"])
            if self._http is None:
                self._http = _session(self.api.configuration, self._connections)
            resp = await self._http.request(
                method,
                self.api.configuration.host + path,
                data=None if body is None else json.dumps(body, separators=(",", ":")),
                headers=headers,
                proxy=self.api.configuration.proxy or None,
                timeout=_TIMEOUT,
            )
        except ApiException as err:  # raised before a response (e.g. auth refresh)
            raise Transient(err.status or 0, str(err.reason)) from err
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise Transient(0, f"{type(err).__name__}: {err}") from err
        try:
            raw = await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise Transient(0, f"{type(err).__name__}: {err}") from err
        finally:
            resp.release()
        status = int(resp.status)
        if status == 404:
            return status, None
        if not 200 <= status <= 299:
            raise _error(status, raw)
        return status, json.loads(raw) if raw else None

    async def get(self, path: str) -> dict[str, Any] | None:
        _, data = await self._call("GET", path)
        return data if isinstance(data, dict) else None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        _, data = await self._call("POST", path, body)
        return data if isinstance(data, dict) else None

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        _, data = await self._call("PATCH", path, body, content_type=MERGE_PATCH)
        return data if isinstance(data, dict) else None

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """DELETE ``path`` (``body``: DeleteOptions, its preconditions a 409 when they
        fail); None when it was gone already (404)."""
        _, data = await self._call("DELETE", path, body)
        return data if isinstance(data, dict) else None


class Mirror:
    """A list+watch copy of one cluster-scoped kind, by name.

    ``synced`` is set once the first list is in. A watcher that fails (the CRD
    missing, the apiserver gone) is replaced after a backoff; its replacement
    lists again.
    """

    def __init__(self, api: client.ApiClient, resource: Resource) -> None:
        self._api = api
        self.resource = resource
        self._watcher: Watcher | None = None
        self.synced = asyncio.Event()
        self.version = 0  # bumped on every change, so readers can cache derived data
        self.changed = asyncio.Event()

    @property
    def objects(self) -> dict[str, dict[str, Any]]:
        w = self._watcher
        if w is None:
            return {}
        return {name: obj for (_, name), obj in w.known.items()}

    async def run(self) -> None:
        backoff = 0.5
        while True:
            watcher = Watcher(self._api, self.resource)
            self._watcher = watcher
            poll = asyncio.create_task(self._mark_synced(watcher))
            try:
                async for _change in watcher.changes():
                    self.version += 1
                    self.changed.set()
                    backoff = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure: list and watch again
                log.warning(
                    "%s: list/watch failed (%s); retrying in %.1fs",
                    self.resource.kind,
                    err,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 15.0)
            finally:
                poll.cancel()

    async def _mark_synced(self, watcher: Watcher) -> None:
        # The Watcher fills ``known`` and then sets ``resource_version`` in one
        # step of its first list, before yielding anything.
        while watcher.resource_version is None:
            await asyncio.sleep(0.02)
        self.version += 1
        self.synced.set()
