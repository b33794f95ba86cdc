"""The mutating webhook's HTTPS server: ``POST /mutate-batch-v1-job`` (and one path
per training kind kuota queues, ``/mutate-kubeflow-org-v1-pytorchjob``,
``/mutate-ray-io-v1-raycluster``, ``/mutate-ray-io-v1-rayjob``, ..., Kueue's
pod path ``/mutate--v1-pod`` for labelled Pods, gated at creation: #18, and
``/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset``, whose pod templates get
the LeaderWorkerSet's queue label: its pods are then pod groups).

The answer itself is ``kuota.kube.admission_review.mutate_job`` (CREATE: the
rules, then suspend; UPDATE: the rules); this module reads the body, writes
one log line and counts the outcome. ``POST /validate-resource-k8s-io-resourceclaimtemplate``
answers a user's DELETE of a ResourceClaimTemplate: refused while a running Job
kuota started names it (``kuota.kube.template_guard``; the namespace's Jobs
are read live through ``jobs_of``). ``trusted_users`` are kuota's own
identities (``KUOTA_WEBHOOK_TRUSTED_USERS``); ``view`` is the webhook's
``ClusterView`` (managed namespaces, Jobs kuota queued). ``GET /healthz``
answers while the server serves; ``GET /readyz`` only once the view is
complete (the Deployment's readiness: a replica whose first LISTs are not
done yet gets no reviews while another one is ready).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from aiohttp import web

from kuota.kube.admission_review import JOB, KINDS, Answer, mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota.kube.template_guard import PATH as TEMPLATE_PATH
from kuota.kube.template_guard import answer_delete, template_delete
from kuota_webhook import metrics

log = logging.getLogger("kuota_webhook.server")

PATH = JOB.mutate_path()  # /mutate-batch-v1-job, as deploy/base/webhook.yaml calls it
PATHS = tuple(k.mutate_path() for k in KINDS)  # the same answer for each
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own request limit is 3 MiB
TRUSTED = web.AppKey("trusted_users", frozenset[str])
VIEW = web.AppKey("view", ClusterView)
#: a namespace's Jobs, read live (or why they could not be read)
JobsOf = Callable[[str], Awaitable[Sequence[Mapping[str, Any]] | str]]
JOBS_OF: web.AppKey[JobsOf] = web.AppKey("jobs_of")


async def _body(request: web.Request) -> object:
    """The review as JSON (None when it is not: the answer allows it with a warning)."""
    try:
        body: object = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        body = None
    return body


def _respond(answer: Answer, body: object, what: str) -> web.Response:
    """Count the answer, log one line, and send it."""
    metrics.REQUESTS.labels(answer.outcome).inc()
    level = logging.WARNING if answer.outcome == "malformed" else logging.INFO
    why = answer.why
    if answer.outcome == "refused":
        why += ": " + str(answer.review["response"]["status"]["message"])
    log.log(level, "%s %s %s: %s", what, answer.outcome, _who(body), why)
    return web.json_response(answer.review)


async def _mutate(request: web.Request) -> web.Response:
    body = await _body(request)
    trusted: frozenset[str] = request.app[TRUSTED]
    return _respond(
        mutate_job(body, trusted_users=trusted, managed=request.app[VIEW]), body, "webhook"
    )


async def _guard_template(request: web.Request) -> web.Response:
    body = await _body(request)
    trusted: frozenset[str] = request.app[TRUSTED]
    check = template_delete(body, trusted_users=trusted)
    if isinstance(check, Answer):
        return _respond(check, body, "webhook template")
    answer = answer_delete(check, await request.app[JOBS_OF](check.namespace))
    return _respond(answer, body, "webhook template")


async def _no_jobs(_namespace: str) -> Sequence[Mapping[str, Any]] | str:
    return "no apiserver client"


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
    trusted_users: Collection[str] = frozenset(),
    view: ClusterView | None = None,
    jobs_of: JobsOf = _no_jobs,
) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[TRUSTED] = frozenset(trusted_users)
    app[JOBS_OF] = jobs_of
    app[VIEW] = view if view is not None else ClusterView(complete=True)  # labels only
    for path in PATHS:
        app.router.add_post(path, _mutate)
    app.router.add_post(TEMPLATE_PATH, _guard_template)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    return app
