"""The mutating webhook's HTTPS server: ``POST /mutate-batch-v1-job``.

The answer itself is ``kuota.kube.admission_review.mutate_job`` (CREATE: the
rules, then suspend; UPDATE: the rules); this module reads the body, writes
one log line and counts the outcome. ``trusted_users`` are kuota's own
identities (``KUOTA_WEBHOOK_TRUSTED_USERS``); ``view`` is the webhook's
``ClusterView`` (managed namespaces, Jobs kuota queued). ``GET /healthz``
answers while the server serves; ``GET /readyz`` only once the view is
complete (the Deployment's readiness: a replica whose first LISTs are not
done yet gets no reviews while another one is ready).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection

from aiohttp import web

from kuota.kube.admission_review import JOB, mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota_webhook import metrics

log = logging.getLogger("kuota_webhook.server")

PATH = JOB.mutate_path()  # /mutate-batch-v1-job, as deploy/base/webhook.yaml calls it
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own request limit is 3 MiB
TRUSTED = web.AppKey("trusted_users", frozenset[str])
VIEW = web.AppKey("view", ClusterView)


async def _mutate(request: web.Request) -> web.Response:
    try:
        body: object = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        body = None
    trusted: frozenset[str] = request.app[TRUSTED]
    answer = mutate_job(body, trusted_users=trusted, managed=request.app[VIEW])
    metrics.REQUESTS.labels(answer.outcome).inc()
    level = logging.WARNING if answer.outcome == "malformed" else logging.INFO
    why = answer.why
    if answer.outcome == "refused":
        why += ": " + str(answer.review["response"]["status"]["message"])
    log.log(level, "webhook %s %s: %s", answer.outcome, _who(body), why)
    return web.json_response(answer.review)


def _who(body: object) -> str:
    """``namespace/name`` of the reviewed object, for the log (``?`` if unknown)."""
    req = body.get("request") if isinstance(body, dict) else None
    if not isinstance(req, dict):
        return "?"
    obj = req.get("object")
    md = obj.get("metadata") if isinstance(obj, dict) else None
    md = md if isinstance(md, dict) else {}
    name = req.get("name") or md.get("name") or md.get("generateName") or "?"
    return f"{req.get('namespace') or ''}/{name}"


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    if request.app[VIEW].complete():
        return web.Response(text="ok")
    return web.Response(status=503, text="the view's first LISTs are not done yet")


def webhook_app(
    trusted_users: Collection[str] = frozenset(), view: ClusterView | None = None
) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[TRUSTED] = frozenset(trusted_users)
    app[VIEW] = view if view is not None else ClusterView(complete=True)  # labels only
    app.router.add_post(PATH, _mutate)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    return app
