"""Who may see what: tokens, login cookies, CSRF tokens, same-origin and Host checks.

The seam: ``Access.open()`` (loopback, no token file: this machine's user sees everything) or
``Access.load(path)`` (the MCP token file, ``longterm.mcp.auth``; an entry may add
``"admin": true`` to see every user). ``access.login(token)`` gives a session id for the
cookie (``COOKIE``); ``access.who(request)`` is the ``Principal`` of a request (cookie, or
``Authorization: Bearer`` for scripts), or None; ``access.csrf(principal)`` the token every
form carries; ``refusal(request, ...)`` says why a POST is refused, or None.

Why server-side sessions: the cookie holds a random id, never the token, and a restart logs
everyone out. Why a Host check: bound to loopback without tokens, a page of another site
whose name resolves to 127.0.0.1 (DNS rebinding) would otherwise read every memory; a request
naming another host is refused. Why the CSRF token is an HMAC of the session: a form of
another origin cannot read it, and nothing is stored per form.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

from ..errors import ConfigurationError
from ..mcp.auth import Tokens, digest

#: The login cookie's name.
COOKIE = "longterm_ui"
#: Addresses only this machine reaches.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Principal:
    """Who is asking: one user, or (``admin``) every user."""

    user: str | None
    admin: bool = False
    session: str = ""

    def sees(self, user: str) -> bool:
        return self.admin or self.user == user


class Access:
    """The tokens the UI accepts, and the sessions of browsers that logged in."""

    def __init__(self, tokens: Tokens | None, admins: set[str], *, open_: bool) -> None:
        self.tokens, self.admins, self.open = tokens, admins, open_
        self._sessions: dict[str, Principal] = {}
        self._secret = secrets.token_bytes(32)

    @classmethod
    def open_local(cls) -> Access:
        """No tokens: whoever reaches the loopback address sees every user."""
        return cls(None, set(), open_=True)

    @classmethod
    def load(cls, path: str | Path) -> Access:
        """The MCP token file (``Tokens.load`` checks it), plus its ``"admin": true`` entries."""
        tokens = Tokens.load(path)
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
        admins = set()
        for i, entry in enumerate(data["tokens"]):
            flag = entry.get("admin", False)
            if not isinstance(flag, bool):
                raise ConfigurationError(f'token file {path}: entry {i}: "admin" must be true or false.')
            if flag:
                admins.add(digest(entry["token"]) if "token" in entry else entry["token_sha256"])
        return cls(tokens, admins, open_=False)

    def principal(self, token: str) -> Principal | None:
        """Who ``token`` is, or None."""
        if self.tokens is None:
            return None
        user = self.tokens.user(f"Bearer {token}")
        return None if user is None else Principal(user, digest(token.strip()) in self.admins)

    def login(self, token: str) -> str | None:
        """A new session id for the cookie, or None: the token is unknown."""
        who = self.principal(token)
        if who is None:
            return None
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = Principal(who.user, who.admin, sid)
        return sid

    def logout(self, sid: str | None) -> None:
        self._sessions.pop(sid or "", None)

    def who(self, request: Request) -> Principal | None:
        """The caller: everyone is admin when open; else the login cookie's, or a bearer token's."""
        if self.open:
            return Principal(None, admin=True)
        sid = request.cookies.get(COOKIE)
        if sid and sid in self._sessions:
            return self._sessions[sid]
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return self.principal(auth[7:])
        return None

    def csrf(self, who: Principal) -> str:
        """The form token of ``who``'s session (one per session; the open UI has one)."""
        return hmac.new(self._secret, f"csrf\x00{who.session}".encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, who: Principal, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf(who), str(token))


def host_ok(request: Request, bound: str) -> bool:
    """Bound to loopback, only loopback names may be asked for (DNS rebinding)."""
    if bound not in LOOPBACK:
        return True
    host = request.headers.get("host", "")
    name = urlsplit(f"//{host}").hostname or ""
    return name in LOOPBACK


def cross_origin(request: Request) -> str | None:
    """Why a state-changing request comes from another site, or None (same origin)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"Sec-Fetch-Site is {site!r}"
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != own:
            return f"Origin {origin!r} is not this server ({own!r})"
    return None
