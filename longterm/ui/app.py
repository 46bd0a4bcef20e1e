"""The routes of ``longterm ui``: every page, its JSON twin under ``/api``, erase, export, login.

The seam: ``ui_app(inspector, access, host=, allow_erase=) -> Starlette`` (an ASGI app; the
CLI serves it with uvicorn, tests too). The URL contract::

    /                                          apps and users        (/api/)
    /apps/{app}/users/{user}[?q=|?cursor=]     memories, newest first; search   (/api/apps/...)
    /apps/{app}/users/{user}/facts[/{fact}]    facts; one fact's history
    /apps/{app}/users/{user}/sessions/{session}   a session's timeline
    /apps/{app}/users/{user}/memories/{memory} one memory whole
    /apps/{app}/users/{user}/erase[?memory=|?session=]   GET: what goes; POST: erase what its form names
    /apps/{app}/users/{user}/export            JSON Lines download (``longterm import`` restores it)
    /login, /logout, /ui.css

Why routes are matched on the raw path: ids are percent-encoded one segment each (``/``,
``%``, spaces, any script); the decoded path would split an id holding ``/``.
Why every answer carries the same headers: a Content-Security-Policy that allows no script
at all (the pages have none), no framing, no referrer, no sniffing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import BackendUnavailableError, InvalidInputError, LongTermMemoryError
from . import views
from .data import Ambiguous, Inspector, NotFound
from .security import COOKIE, Access, Principal, cross_origin, host_ok

log = logging.getLogger(__name__)

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer makes a browser send Origin: null on its own forms
    "Cache-Control": "no-store",
}
#: Largest form body read (bytes): a login or an erase is a few hundred.
MAX_FORM = 64 * 1024


class Refused(Exception):
    """An answer other than the page: ``status`` and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def segments(request: Request) -> list[str]:
    """The path's segments, each percent-decoded on its own (``views.segment``'s NUL marker dropped)."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    parts = raw.decode("latin-1").split("?", 1)[0].strip("/").split("/")
    out = []
    for p in parts:
        s = unquote(p, encoding="utf-8", errors="strict")
        out.append(s[1:] if s[:1] == "\x00" and s[1:] in (".", "..") else s)
    return [] if out == [""] else out


class UI:
    """The handlers, over one inspector and one access policy."""

    def __init__(self, inspector: Inspector, access: Access, *, host: str, allow_erase: bool) -> None:
        self.data, self.access, self.host, self.allow_erase = inspector, access, host, allow_erase

    # -- plumbing ---------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        api = request.url.path.startswith("/api/") or request.url.path == "/api"
        who: Principal | None = None
        try:
            if not host_ok(request, self.host):
                raise Refused(421, "this server answers to its loopback address only (127.0.0.1, localhost)")
            parts = segments(request)
            if parts[:1] == ["ui.css"]:
                return self._headers(Response(views.CSS, media_type="text/css"))
            if parts[:1] in (["login"], ["logout"]):
                return self._headers(await self.login(request, parts[0]))
            who = self.access.who(request)
            if who is None:
                if api:
                    raise Refused(401, "log in first: send Authorization: Bearer <token>")
                nxt = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return self._headers(RedirectResponse(views.url("login", next=nxt), status_code=303))
            if request.method == "POST":
                if not self.allow_erase:  # every POST but login and logout is an erase
                    raise Refused(403, "this UI is read-only: start it with --allow-erase to erase")
                await self._check_post(request, who)
            return self._headers(await self.route(request, parts[1:] if api else parts, who, api))
        except Refused as exc:
            return self._headers(self._problem(exc.status, str(exc), who, api))
        except NotFound as exc:
            return self._headers(self._problem(404, str(exc), who, api))
        except Ambiguous as exc:
            return self._headers(self._problem(409, str(exc), who, api))
        except UnicodeDecodeError:
            return self._headers(self._problem(400, "the path is not percent-encoded UTF-8", who, api))
        except InvalidInputError as exc:
            return self._headers(self._problem(400, str(exc), who, api))
        except BackendUnavailableError as exc:
            return self._headers(self._problem(503, str(exc), who, api))
        except LongTermMemoryError as exc:
            return self._headers(self._problem(500, str(exc), who, api))
        except Exception as exc:
            log.exception("longterm ui: internal error")
            return self._headers(self._problem(500, f"internal error: {type(exc).__name__} (please report)", who, api))

    @staticmethod
    def _headers(response: Response) -> Response:
        response.headers.update(HEADERS)
        return response

    def _frame(self, who: Principal | None) -> views.Frame | None:
        if who is None:
            return None
        name = "local (every user)" if self.access.open else f"{who.user}" + (" (admin)" if who.admin else "")
        return views.Frame(name, self.access.csrf(who), self.allow_erase, logged_in=not self.access.open)

    def _problem(self, status: int, message: str, who: Principal | None, api: bool) -> Response:
        if api:
            return JSONResponse({"error": message}, status_code=status)
        return HTMLResponse(views.problem(status, message, self._frame(who)), status_code=status)

    async def _form(self, request: Request) -> dict[str, str]:
        body = await request.body()
        if len(body) > MAX_FORM:
            raise Refused(413, "the form is too large")
        form = await request.form()
        return {k: v for k, v in form.items() if isinstance(v, str)}

    async def _check_post(self, request: Request, who: Principal) -> None:
        """A POST comes from this server's own page: same origin, and the session's CSRF token."""
        why = cross_origin(request)
        if why:
            raise Refused(403, f"cross-origin request refused: {why}")
        form = await self._form(request)
        if not self.access.csrf_ok(who, form.get("csrf")):
            raise Refused(403, "the form's CSRF token is missing or stale: reload the page and try again")

    # -- login --------------------------------------------------------------------------------

    async def login(self, request: Request, what: str) -> Response:
        anonymous = Principal(None)
        if what == "logout":
            if request.method != "POST":
                raise Refused(405, "log out with the page's button")
            who = self.access.who(request)
            if who is not None:
                await self._check_post(request, who)
                self.access.logout(who.session)
            response = RedirectResponse("/login", status_code=303)
            response.delete_cookie(COOKIE, path="/")
            return response
        if self.access.open:
            return RedirectResponse("/", status_code=303)
        if request.method == "GET":
            return HTMLResponse(views.login(self.access.csrf(anonymous), _local(request.query_params.get("next"))))
        why = cross_origin(request)
        if why:
            raise Refused(403, f"cross-origin request refused: {why}")
        form = await self._form(request)
        nxt = _local(form.get("next"))
        if not self.access.csrf_ok(anonymous, form.get("csrf")):
            raise Refused(403, "the form's CSRF token is missing or stale: reload the page and try again")
        sid = self.access.login(form.get("token", ""))
        if sid is None:
            page = views.login(self.access.csrf(anonymous), nxt, "that token is not in the token file")
            return HTMLResponse(page, status_code=401)
        response = RedirectResponse(nxt, status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", secure=secure, path="/")
        return response

    # -- pages --------------------------------------------------------------------------------

    async def route(self, request: Request, parts: list[str], who: Principal, api: bool) -> Response:
        if not parts:
            return self._get(request, await self.overview(who), views.overview, who, api)
        if len(parts) < 4 or parts[0] != "apps" or parts[2] != "users":
            raise NotFound("no such page")
        app, user, rest = parts[1], parts[3], parts[4:]
        if not who.sees(user):
            raise Refused(403, f"your token reaches user {who.user!r} only")
        q = request.query_params
        if rest == ["erase"]:
            return await self.erase(request, app, user, who)
        if request.method != "GET":
            raise Refused(405, "this page is read with GET")
        if rest == ["export"]:
            return await self.export(app, user)
        pages: dict[tuple[str, int], tuple[Callable[..., Awaitable[dict[str, Any]]], Callable[..., str]]] = {
            ("facts", 1): (lambda: self.data.facts(app, user), views.facts),
            ("facts", 2): (lambda: self.fact(app, user, rest[1]), views.fact),
            ("sessions", 2): (lambda: self.data.session(app, user, rest[1]), views.session),
            ("memories", 2): (lambda: self.data.one(app, user, rest[1]), views.memory),
        }
        if not rest:
            if q.get("q"):
                hits = await self.data.search(app, user, q["q"], filters=q.get("filter", ""))
                return self._get(request, hits, views.search, who, api)
            data = await self.data.page(app, user, cursor=q.get("cursor"))
            return self._get(request, data, views.memories, who, api)
        found = pages.get((rest[0], len(rest)))
        if found is None:
            raise NotFound("no such page")
        return self._get(request, await found[0](), found[1], who, api)

    def _get(self, request: Request, data: object, view: Callable[..., str], who: Principal, api: bool) -> Response:
        if api:
            return JSONResponse(data)
        frame = self._frame(who)
        assert frame is not None
        return HTMLResponse(view(data, frame))

    async def overview(self, who: Principal) -> list[dict[str, Any]]:
        rows = await self.data.overview()
        return [r for r in rows if who.sees(r["user"])]

    async def fact(self, app: str, user: str, fact_id: str) -> dict[str, Any]:
        every = await self.data.facts(app, user)
        by_id = {f["id"]: f for f in every["facts"]}
        if fact_id not in by_id:
            raise NotFound(f"no fact {fact_id!r} of user {user!r} in app {app!r}")
        return {**every, "fact": fact_id, "trail": [by_id[i] for i in by_id[fact_id]["trail"]]}

    async def export(self, app: str, user: str) -> Response:
        lines = await self.data.export(app, user)
        name = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in f"{app}-{user}")[:80]
        return Response(
            "".join(line + "\n" for line in lines),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="longterm-{name}.jsonl"'},
        )

    async def erase(self, request: Request, app: str, user: str, who: Principal) -> Response:
        """GET: a page naming what goes; POST (same origin, CSRF token checked): erase it."""
        if not self.allow_erase:
            raise Refused(403, "this UI is read-only: start it with --allow-erase to erase")
        args = (await self._form(request)) if request.method == "POST" else dict(request.query_params)
        memory_id, session_id = args.get("memory") or None, args.get("session") or None
        if memory_id and session_id:
            raise Refused(400, "erase a memory or a session, not both")
        frame = self._frame(who)
        assert frame is not None
        back = views.user_url(app, user)
        if request.method == "POST":  # what goes is named in the form, the whole user explicitly
            if not memory_id and not session_id and args.get("all") != "1":
                raise Refused(400, "name what to erase in the form: memory=ID, session=ID, or all=1 for the whole user")
            n = await self.data.erase(app, user, memory_id=memory_id, session_id=session_id)
            return HTMLResponse(views.done(f"erased {n} memories", back, frame))
        what, items, fields = await self._going(app, user, memory_id, session_id)
        return HTMLResponse(views.confirm(what, items, views.user_url(app, user, "erase"), fields, frame))

    async def _going(
        self, app: str, user: str, memory_id: str | None, session_id: str | None
    ) -> tuple[str, list[str], dict[str, str]]:
        """What an erase takes, as the confirmation names it."""
        t = views.text
        if memory_id:
            m = (await self.data.one(app, user, memory_id))["memory"]
            return (
                "one memory",
                [f'{t(m["text"], cut=500)} <span class="mono">{t(m["id"])}</span>'],
                {"memory": memory_id},
            )
        if session_id:
            s = await self.data.session(app, user, session_id)
            items = [t(m["text"], cut=200) for m in s["memories"]]
            return f"the {len(items)} memories of session {t(session_id)}", items, {"session": session_id}
        n = sum(r["memories"] for r in await self.data.overview() if r["app"] == app and r["user"] == user)
        return f"ALL {n} memories of user {t(user)} in app {t(app)}", [f"{n} memories, facts included"], {"all": "1"}


def _local(target: str | None) -> str:
    """Where to go after logging in: a path of this server only (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return "/" if parts.scheme or parts.netloc else target


def ui_app(inspector: Inspector, access: Access, *, host: str = "127.0.0.1", allow_erase: bool = False) -> Starlette:
    """The ASGI app; closes the inspector's memories when it shuts down."""
    import contextlib
    from collections.abc import AsyncIterator

    ui = UI(inspector, access, host=host, allow_erase=allow_erase)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await inspector.close()

    routes = [Route("/{path:path}", endpoint=ui.handle, methods=["GET", "POST"])]
    return Starlette(routes=routes, lifespan=lifespan)
