"""The dashboard's web server (aiohttp): one read-only page and its feeds.

Theory of operation: every route is a GET (anything else is 405 by aiohttp's
router); nothing reaches Kafka or Redis but through :class:`~kuota.dashboard.live.Live`,
which only reads.

====================================  ==========================================
``/``                                 the page (``static/index.html``)
``/static/app.js``, ``app.css``       its script and style, from this package
``/static/plotly.min.js``             Plotly's bundle, from the installed plotly
                                      package (nothing is loaded from the internet)
``/api/state``                        the whole state as JSON
``/api/events``                       server-sent events: ``state`` (the whole
                                      state, when it changed) and ``decision``
``/workload/{key}``                   the workload page: ``kuota explain``'s
                                      history, rendered by the same code as the
                                      CLI's (:func:`kuota.audit.render.explanation`)
``/api/explain/{key}``                ``kuota explain --json``'s document
``/healthz``                          ``ok`` (no token needed: probes)
====================================  ==========================================

Access: with a ``token`` every route but ``/healthz`` needs ``Authorization:
Bearer <token>`` or, for a browser's first visit, ``?token=<token>``, which
sets an HttpOnly, SameSite=Strict cookie (then a plain URL works; the page
never puts the token in a link). Compared in constant time. TLS is the
caller's ``ssl.SSLContext`` (:mod:`kuota.cli.dashboard`). Why: docs/design/dashboard.md.
"""

from __future__ import annotations

import asyncio
import hmac
import io
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from kuota.audit.explain import Explanation
from kuota.dashboard.live import CLOSE, Live
from kuota.kinds import workload_ref

__all__ = ["COOKIE", "ExplainFn", "make_app", "plotly_js"]

COOKIE = "kuota-dashboard-token"
ExplainFn = Callable[[str], Awaitable[Explanation]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_STATIC = {
    "app.js": "application/javascript",
    "app.css": "text/css",
}
_LIVE: web.AppKey[Live] = web.AppKey("live", Live)
_KEEPALIVE_S = 15.0


def plotly_js() -> Path:
    """plotly.min.js as the plotly package ships it."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the plotly package ships no plotly.min.js")
    return path


def _static(name: str) -> bytes:
    return resources.files("kuota.dashboard").joinpath("static", name).read_bytes()


def _auth(token: str | None) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token is None or request.path == "/healthz":
            return await handler(request)
        header = request.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else None
        via_query = request.query.get("token")
        given = given or via_query or request.cookies.get(COOKIE)
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            return web.Response(
                status=401,
                text="kuota dashboard: a bearer token is required\n",
                headers={"WWW-Authenticate": 'Bearer realm="kuota-dashboard"'},
            )
        response = await handler(request)
        if via_query is not None and not response.prepared:
            response.set_cookie(
                COOKIE, token, httponly=True, samesite="Strict", secure=request.secure
            )
        return response

    return middleware


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if not response.prepared:
        # Only this origin's script and style: the page loads nothing from elsewhere.
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self' 'unsafe-eval'; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:",
        )
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


def make_app(live: Live, explain: ExplainFn, *, token: str | None = None) -> web.Application:
    """The application; the caller runs ``live`` (``Live.run``) beside it."""
    app = web.Application(middlewares=[_headers, _auth(token)])
    app[_LIVE] = live
    plotly_path = plotly_js()

    async def index(_: web.Request) -> web.Response:
        return web.Response(body=_static("index.html"), content_type="text/html")

    async def static(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name == "plotly.min.js":
            return web.FileResponse(plotly_path, headers={"Content-Type": "application/javascript"})
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return web.Response(body=_static(name), content_type=_STATIC[name])

    async def state(_: web.Request) -> web.Response:
        return web.json_response(live.state())

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # an nginx auth proxy must not buffer the stream
            }
        )
        await response.prepare(request)
        q = live.subscribe()
        try:
            await response.write(_sse("state", json.dumps(live.state())))
            while True:
                try:
                    event, data = await asyncio.wait_for(q.get(), _KEEPALIVE_S)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if event == CLOSE:
                    break
                await response.write(_sse(event, data))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            live.unsubscribe(q)
        return response

    async def explained(key: str) -> Explanation:
        from aiokafka.errors import KafkaError

        from kuota.audit.kafka import AuditSourceError

        try:
            return await explain(key)
        except (KafkaError, AuditSourceError, OSError) as err:
            raise web.HTTPServiceUnavailable(
                text=f"kuota dashboard: cannot read the journal for {key}: {err}\n"
            ) from None

    async def workload_page(request: web.Request) -> web.Response:
        from rich.console import Console

        from kuota.audit.render import explanation

        key = _key(request)
        ex = await explained(key)

        console = Console(record=True, width=140, file=io.StringIO(), highlight=False)
        console.print(explanation(ex))
        body = console.export_html(inline_styles=True, code_format=_PAGE)
        return web.Response(text=body.replace("{workload}", _escape(key)), content_type="text/html")

    async def explain_json(request: web.Request) -> web.Response:
        return web.json_response((await explained(_key(request))).to_dict())

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/state", state)
    app.router.add_get("/api/events", events)
    app.router.add_get("/workload/{key:.+}", workload_page)
    app.router.add_get("/api/explain/{key:.+}", explain_json)
    app.router.add_get("/healthz", healthz)
    return app


def _key(request: web.Request) -> str:
    """The canonical workload key of the path (docs/design/workload-identity.md)."""
    ref = workload_ref(request.match_info["key"])
    if ref is None:
        raise web.HTTPBadRequest(
            text="give the workload as /workload/<namespace>/<name> (a Job) "
            "or /workload/<namespace>/<kind>/<name>\n"
        )
    return ref.key


def _sse(event: str, data: str) -> bytes:
    # data is one line of JSON (json.dumps never writes a newline unless asked).
    return f"event: {event}\ndata: {data}\n\n".encode()


def _escape(text: str) -> str:
    import html

    return html.escape(text)


# rich's export_html template: {code}, {stylesheet}, {foreground}, {background}.
_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>kuota explain {{workload}}</title>
<link rel="stylesheet" href="/static/app.css">
</head><body class="explain">
<header><a href="/">&larr; kuota dashboard</a> <h1>kuota explain {{workload}}</h1></header>
<pre id="explain" style="color:{foreground};background-color:{background}"><code>{code}</code></pre>
</body></html>
"""
