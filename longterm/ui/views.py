"""The HTML of every page: plain strings, every stored value through ``text()`` or ``attr()``.

The seam: one function per page (``overview``, ``memories``, ``search``, ``memory``,
``session``, ``facts``, ``fact``, ``confirm``, ``done``, ``login``, ``problem``), each taking
the data ``data.Inspector`` returned and a ``Frame`` (who is looking, the CSRF token, whether
erasing is on) and returning the page's HTML; ``url(*segments)`` builds the links.

Why strings and no template engine: no dependency for six pages, and one rule is easy to
check: nothing from the store reaches the page but through ``text()`` (HTML-escaped, control
and bidi formatting characters shown as visible escapes, isolated in ``<bdi>`` so right-to-left
text cannot reorder the page) or ``url()`` (every id percent-encoded). No script: the
Content-Security-Policy forbids any.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

#: Characters a list shows of a memory; the rest is on the memory's own page.
CUT = 500
#: Shown as visible escapes: C0 and C1 controls (but tab and newline), DEL, and the invisible
#: formatting characters that reorder or hide text (bidi embeddings, overrides, isolates, marks,
#: zero-width characters).
_HIDDEN = [
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    0x061C,
    *range(0x200B, 0x2010),
    *range(0x202A, 0x202F),
    *range(0x2060, 0x2070),
    0xFEFF,
]
_VISIBLE = {c: '<span class="esc">' + (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") + "</span>" for c in _HIDDEN}


def _escaped(value: str) -> str:
    safe = value.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate, visibly
    return html.escape(safe, quote=True).translate(_VISIBLE)


def text(value: Any, *, cut: int | None = None) -> str:
    """A stored value as page text: escaped, hidden characters visible, isolated (``<bdi>``)."""
    s = "" if value is None else str(value)
    if cut is not None and len(s) > cut:
        s = s[:cut]
    return f"<bdi>{_escaped(s)}</bdi>"


def attr(value: Any) -> str:
    """A value inside a quoted attribute."""
    return html.escape(str(value).encode("utf-8", "backslashreplace").decode("utf-8"), quote=True)


def segment(value: str) -> str:
    """One id as a path segment: percent-encoded; ``.`` and ``..`` (which a browser would resolve
    away) behind an encoded NUL, which no id can hold (``app.route`` strips it)."""
    if value in (".", ".."):
        return "%00" + value
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def url(*parts: str, **query: str | None) -> str:
    path = "/" + "/".join(segment(p) if i % 2 else p for i, p in enumerate(parts))
    q = {k: v for k, v in query.items() if v}
    return path + ("?" + urlencode(q) if q else "")


def user_url(app: str, user: str, *more: str, **query: str | None) -> str:
    """``/apps/{app}/users/{user}/...``: the literal words at even places, ids at odd ones."""
    return url("apps", app, "users", user, *more, **query)


@dataclass
class Frame:
    """What every page needs beside its data."""

    who: str
    csrf: str
    allow_erase: bool
    logged_in: bool = False


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1f3a5f;color:#fff;padding:10px 24px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}header .who{margin-left:auto;opacity:.85}
header form{margin:0}main{padding:16px 24px;max-width:1200px}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:18px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 2px #0001}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e5e8ec;vertical-align:top}
th{background:#eef1f5;font-weight:600;font-size:13px}td.t{white-space:pre-wrap;word-break:break-word;max-width:640px}
td.n{text-align:right;font-variant-numeric:tabular-nums}.mono{font-family:ui-monospace,monospace;font-size:12px}
.esc{background:#fde7c7;color:#7a3b00;border-radius:3px;padding:0 2px;font-family:ui-monospace,monospace;font-size:12px}
.kind-fact{background:#dcf2e3;color:#14532d;border-radius:3px;padding:1px 6px}.kind-evidence{color:#555}
.arm{display:inline-block;background:#e8eefc;border-radius:3px;padding:0 5px;margin:1px;font-size:12px}
.nav a{margin-right:14px}.pager{margin:12px 0}.muted{color:#6b7280}.cut{color:#6b7280;font-style:italic}
.box{background:#fff;padding:12px 16px;box-shadow:0 1px 2px #0001;margin:10px 0}
.warn{background:#fff4f4;border-left:4px solid #c0392b}.ok{border-left:4px solid #2e7d32}
pre{white-space:pre-wrap;word-break:break-word;margin:0}
button,input[type=submit]{background:#1f3a5f;color:#fff;border:0;padding:6px 14px;border-radius:4px;cursor:pointer}
button.danger,input.danger{background:#b42318}input[type=search],input[type=password]{padding:6px;width:320px}
.superseded{opacity:.7}.superseded td.t{text-decoration:line-through}
"""


def page(title: str, body: str, frame: Frame | None) -> str:
    who = ""
    if frame is not None:
        who = f'<span class="who">{text(frame.who)}</span>'
        if frame.logged_in:
            who += (
                f'<form method="post" action="/logout"><input type="hidden" name="csrf" value="{attr(frame.csrf)}">'
                '<button type="submit">log out</button></form>'
            )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<title>{attr(title)} · longterm</title><link rel="stylesheet" href="/ui.css"></head>'
        f'<body><header><a href="/">longterm</a>{who}</header><main>{body}</main></body></html>'
    )


def _table(head: Iterable[str], rows: Iterable[str]) -> str:
    ths = "".join(f"<th>{h}</th>" for h in head)
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _when(iso: str | None) -> str:
    return "" if not iso else f'<span class="mono">{attr(iso[:19].replace("T", " "))}</span>'


def _nav(app: str, user: str, frame: Frame, here: str, query: str = "", filters: str = "") -> str:
    links = [
        ("memories", user_url(app, user)),
        ("facts", user_url(app, user, "facts")),
        ("export", user_url(app, user, "export")),
    ]
    if frame.allow_erase:
        links.append(("erase this user", user_url(app, user, "erase")))
    items = "".join(f'<a href="{attr(h)}">{"<b>" + n + "</b>" if n == here else n}</a>' for n, h in links)
    search = (
        f'<form method="get" action="{attr(user_url(app, user))}" role="search">'
        '<input type="search" name="q" placeholder="search this user\'s memories" aria-label="search"'
        f' value="{attr(query)}">'
        ' <input type="text" name="filter" placeholder=\'filter, e.g. {"topic": "travel"}\' aria-label="filter"'
        f' value="{attr(filters)}">'
        ' <input type="submit" value="search"></form>'
    )
    return f'<div class="nav">{items}</div><div class="box">{search}</div>'


def _title(app: str, user: str, what: str) -> str:
    return f"<h1>{what} of user {text(user)} in app {text(app)}</h1>"


def overview(rows: list[dict[str, Any]], frame: Frame) -> str:
    trs = [
        f'<tr><td>{text(r["app"])}</td><td><a href="{attr(user_url(r["app"], r["user"]))}">{text(r["user"])}</a>'
        f'</td><td class="n">{r["memories"]}</td><td>{text(r["index"])}</td></tr>'
        for r in rows
    ]
    body = _table(["app", "user", "memories", "index"], trs) if rows else '<p class="muted">no memories yet</p>'
    return page("apps and users", f"<h1>Apps and users</h1>{body}", frame)


def _memory_text(app: str, user: str, m: dict[str, Any]) -> str:
    s = m["text"] or ""
    if len(s) <= CUT:
        return text(s)
    more = user_url(app, user, "memories", m["id"])
    return f'{text(s, cut=CUT)}<a class="cut" href="{attr(more)}"> … whole memory ({len(s):,} characters)</a>'


def _session_cell(app: str, user: str, m: dict[str, Any]) -> str:
    sid = m.get("session_id")
    if sid is None:
        return '<span class="muted">(fact)</span>'
    return f'<a href="{attr(user_url(app, user, "sessions", sid))}">{text(sid, cut=60)}</a>'


def _kind(m: dict[str, Any]) -> str:
    label = m["kind"] if m.get("current", True) else "fact (superseded)"
    return f'<span class="kind-{attr(m["kind"])}">{attr(label)}</span>'


def _erase_link(app: str, user: str, m: dict[str, Any], frame: Frame) -> str:
    if not frame.allow_erase:
        return ""
    return f'<a href="{attr(user_url(app, user, "erase", memory=m["id"]))}">erase</a>'


def memories(data: dict[str, Any], frame: Frame) -> str:
    app, user = data["app"], data["user"]
    trs = [
        f"<tr><td>{_when(m['timestamp'])}</td><td>{_session_cell(app, user, m)}</td><td>{text(m['author'])}</td>"
        f'<td>{_kind(m)}</td><td class="t">{_memory_text(app, user, m)}</td>'
        f"<td>{_erase_link(app, user, m, frame)}</td></tr>"
        for m in data["memories"]
    ]
    pager = f'<a href="{attr(user_url(app, user))}">newest</a>'
    if data["next_cursor"]:
        pager += f' · <a rel="next" href="{attr(user_url(app, user, cursor=data["next_cursor"]))}">older →</a>'
    body = (
        _title(app, user, "Memories")
        + _nav(app, user, frame, "memories")
        + _table(["time (UTC)", "session", "author", "kind", "text", ""], trs)
        + f'<div class="pager">{pager}</div>'
    )
    return page(f"memories of {user}", body, frame)


def _arms(arms: dict[str, float]) -> str:
    return "".join(f'<span class="arm">{attr(a)} {v:.2f}</span>' for a, v in arms.items())


def search(data: dict[str, Any], frame: Frame) -> str:
    app, user = data["app"], data["user"]
    trs = [
        f'<tr><td class="n score">{m["score"]:.2f}</td><td class="arms">{_arms(m["arms"])}</td><td>{_kind(m)}</td>'
        f'<td class="t">{_memory_text(app, user, m)}</td><td>{_when(m["timestamp"])}</td>'
        f"<td>{_session_cell(app, user, m)}</td><td>{_context(m)}</td></tr>"
        for m in data["hits"]
    ]
    found = _table(["score", "found by", "kind", "text", "time (UTC)", "session", "context"], trs)
    body = (
        _title(app, user, "Search")
        + _nav(app, user, frame, "", data["query"], data.get("filter", ""))
        + f"<h2>{len(data['hits'])} matches for {text(data['query'])}</h2>"
        + (found if data["hits"] else '<p class="muted">nothing matched</p>')
    )
    return page(f"search {user}", body, frame)


def _context(m: dict[str, Any]) -> str:
    turns = m.get("context") or []
    return "".join(f"<div>{text(t.get('author'))}: {text(t.get('text'), cut=200)}</div>" for t in turns) or (
        '<span class="muted">—</span>'
    )


def memory(data: dict[str, Any], frame: Frame) -> str:
    app, user, m = data["app"], data["user"], data["memory"]
    rows = [
        ("id", f'<span class="mono">{text(m["id"])}</span>'),
        ("time (UTC)", _when(m["timestamp"])),
        ("session", _session_cell(app, user, m)),
        ("author", text(m["author"])),
        ("role", text(m["role"])),
        ("kind", _kind(m)),
        ("characters", f"{len(m['text'] or ''):,}"),
    ]
    meta = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    erase = f"<p>{_erase_link(app, user, m, frame)}</p>" if frame.allow_erase else ""
    body = (
        _title(app, user, "A memory")
        + _nav(app, user, frame, "")
        + f'<table class="meta">{meta}</table><h2>text</h2><div class="box"><pre>{text(m["text"])}</pre></div>'
        + f"<h2>metadata</h2>{_metadata(m.get('metadata'))}{erase}"
    )
    return page("memory", body, frame)


def _metadata(given: dict[str, Any] | None) -> str:
    """A memory's own metadata as indented JSON text (user input: through ``text()`` like any)."""
    if not given:
        return '<p class="muted">none</p>'
    shown = json.dumps(given, ensure_ascii=False, indent=2, default=str)
    return f'<div class="box"><pre class="metadata">{text(shown)}</pre></div>'


def session(data: dict[str, Any], frame: Frame) -> str:
    app, user, sid = data["app"], data["user"], data["session"]
    trs = [
        f"<tr><td>{_when(m['timestamp'])}</td><td>{text(m['author'])}</td><td>{text(m['role'])}</td>"
        f'<td class="t">{_memory_text(app, user, m)}</td><td>{_erase_link(app, user, m, frame)}</td></tr>'
        for m in data["memories"]
    ]
    erase = ""
    if frame.allow_erase:
        erase = f'<p><a href="{attr(user_url(app, user, "erase", session=sid))}">erase this session</a></p>'
    body = (
        f"<h1>Session {text(sid)} of user {text(user)} in app {text(app)}</h1>"
        + _nav(app, user, frame, "")
        + _table(["time (UTC)", "author", "role", "text", ""], trs)
        + erase
    )
    return page(f"session {sid}", body, frame)


def _evidence(app: str, user: str, f: dict[str, Any]) -> str:
    items = []
    for e in f["evidence"]:
        if "text" not in e:
            items.append(f'<li class="muted">erased ({text(e["id"], cut=16)})</li>')
            continue
        where = f'<a href="{attr(user_url(app, user, "sessions", e["session_id"]))}">{text(e["session_id"])}</a>'
        items.append(f'<li>{text(e["text"], cut=300)} <span class="muted">in session</span> {where}</li>')
    return f"<ul>{''.join(items)}</ul>" if items else '<span class="muted">none left</span>'


def _fact_row(app: str, user: str, f: dict[str, Any]) -> str:
    cls = "" if f["valid_until"] is None else ' class="superseded"'
    link = f'<a href="{attr(user_url(app, user, "facts", f["id"]))}">history</a>'
    return (
        f'<tr{cls}><td class="t">{text(f["text"])}</td><td>{text(f["subject"])}</td>'
        f"<td>{_when(f['valid_from'])}</td><td>{_when(f['valid_until']) or 'now'}</td>"
        f"<td>{_evidence(app, user, f)}</td><td>{link}</td></tr>"
    )


def facts(data: dict[str, Any], frame: Frame) -> str:
    app, user = data["app"], data["user"]
    profile = (
        f"<pre>{text(data['profile'])}</pre>"
        if data["profile"]
        else '<span class="muted">no profile (no fact model configured in this process, or no facts yet)</span>'
    )
    table = _table(
        ["fact", "about", "valid from", "until", "evidence", ""], [_fact_row(app, user, f) for f in data["facts"]]
    )
    body = (
        _title(app, user, "Facts")
        + _nav(app, user, frame, "facts")
        + f'<h2>profile</h2><div class="box">{profile}</div><h2>facts</h2>'
        + (table if data["facts"] else '<p class="muted">no facts</p>')
    )
    return page(f"facts of {user}", body, frame)


def _history(entries: list[dict[str, Any]]) -> str:
    items = []
    for h in entries:
        by = f" by {text(h['by'], cut=16)}" if h.get("by") else ""
        why = f" ({text(h['because'])})" if h.get("because") else ""
        items.append(f"<li>{_when(h.get('at'))} <b>{text(h.get('op'))}</b>{by}{why}</li>")
    return f"<ol>{''.join(items)}</ol>"


def fact(data: dict[str, Any], frame: Frame) -> str:
    app, user = data["app"], data["user"]
    parts = []
    for f in data["trail"]:
        me = " (this fact)" if f["id"] == data["fact"] else ""
        state = "current" if f["valid_until"] is None else f"superseded {f['valid_until'][:19].replace('T', ' ')}"
        by = ""
        if f.get("superseded_by"):
            by = f' by <a href="#f-{attr(f["superseded_by"])}">{text(f["superseded_by"], cut=16)}</a>'
        parts.append(
            f'<div class="box fact" id="f-{attr(f["id"])}"><h2>{text(f["text"])}{me}</h2>'
            f"<p>{attr(state)}{by}; valid from {_when(f['valid_from'])}</p>"
            f"<h3>evidence</h3>{_evidence(app, user, f)}<h3>history</h3>{_history(f['history'])}</div>"
        )
    body = _title(app, user, "A fact's history") + _nav(app, user, frame, "") + "".join(parts)
    return page("fact history", body, frame)


def confirm(what: str, items: list[str], action: str, fields: dict[str, str], frame: Frame) -> str:
    hidden = "".join(f'<input type="hidden" name="{attr(k)}" value="{attr(v)}">' for k, v in fields.items())
    listed = "".join(f"<li>{i}</li>" for i in items)
    body = (
        f'<h1>Erase?</h1><div class="box warn"><p>This erases {what}:</p><ul class="going">{listed}</ul>'
        "<p>What is erased stays erased; it cannot be undone.</p>"
        f'<form method="post" action="{attr(action)}"><input type="hidden" name="csrf" value="{attr(frame.csrf)}">'
        f'{hidden}<input class="danger" type="submit" value="erase"></form></div>'
    )
    return page("erase", body, frame)


def done(message: str, back: str, frame: Frame) -> str:
    body = f'<div class="box ok"><p id="done">{text(message)}</p><p><a href="{attr(back)}">back</a></p></div>'
    return page("done", body, frame)


def login(csrf: str, next_url: str, error: str = "") -> str:
    err = f'<p class="box warn">{text(error)}</p>' if error else ""
    body = (
        f'<h1>Log in</h1>{err}<div class="box"><form method="post" action="/login">'
        f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
        f'<input type="hidden" name="next" value="{attr(next_url)}">'
        '<label>token <input type="password" name="token" autocomplete="current-password" autofocus></label> '
        '<input type="submit" value="log in"></form></div>'
    )
    return page("log in", body, None)


def problem(status: int, message: str, frame: Frame | None) -> str:
    return page(
        f"error {status}", f'<h1>Error {status}</h1><p class="box warn" id="problem">{text(message)}</p>', frame
    )
