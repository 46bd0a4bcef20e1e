"""``longterm ui`` over plain HTTP: each page's JSON twin, the refusals, the headers, export.

A script reads what the pages show under ``/api/...`` (the same paths); erases are POSTs of the
server's own pages only (same origin and the session's CSRF token); off loopback the server
does not start without a token file, and a token reaches the user it names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import httpx

from tests.ui.conftest import (
    ADMIN_TOKEN,
    ALICE_COUNT,
    ALICE_TOKEN,
    APP,
    BIG,
    HOSTILE_META,
    HOSTILE_SESSION,
    OTHER,
    SCRIPT,
    USER,
    UIServer,
    run_ui,
    token_file,
)

ALICE = f"/apps/{APP}/users/{USER}"


def get(url: str, **kw: object) -> httpx.Response:
    return httpx.get(url, timeout=15, **kw)  # type: ignore[arg-type]


def test_each_page_has_a_json_twin(readonly: UIServer) -> None:
    base = readonly.url
    overview = get(base + "/api/").json()
    assert {"index": APP, "app": APP, "user": OTHER, "memories": 1} in overview
    # Memories, newest first, paged by cursor.
    ids, cursor = [], None
    for _ in range(5):
        page = get(base + "/api" + ALICE, params={"cursor": cursor} if cursor else None).json()
        ids += [m["id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(ids) == len(set(ids)) == ALICE_COUNT
    first = get(base + "/api" + ALICE).json()["memories"]
    assert [m["timestamp"] for m in first] == sorted((m["timestamp"] for m in first), reverse=True)
    assert {m["kind"] for m in get(base + "/api" + ALICE, params={"cursor": cursor or ""}).json()["memories"]}
    # Search: score in [0, 1], the arm, the kind.
    hits = get(base + "/api" + ALICE, params={"q": "script hello"}).json()["hits"]
    assert hits[0]["text"] == SCRIPT and 0 < hits[0]["score"] <= 1 and "fulltext" in hits[0]["arms"]
    assert hits[0]["kind"] == "evidence"
    # Facts, one fact's history, a session (a hostile id), one memory whole, the other user.
    facts = get(base + "/api" + ALICE + "/facts").json()["facts"]
    paris = next(f for f in facts if "Paris" in f["text"])
    assert paris["valid_until"] and paris["superseded_by"] == next(f["id"] for f in facts if "Lisbon" in f["text"])
    trail = get(base + "/api" + ALICE + "/facts/" + quote(paris["id"])).json()["trail"]
    assert [f["text"] for f in trail] == ["The user lives in Paris", "The user lives in Lisbon"]
    session = get(base + "/api" + ALICE + "/sessions/" + quote(HOSTILE_SESSION, safe="")).json()
    assert session["session"] == HOSTILE_SESSION and [m["text"] for m in session["memories"]] == [SCRIPT]
    dots = get(base + "/api" + ALICE + "/sessions/%00..").json()  # '..': a browser would resolve it away
    assert [m["text"] for m in dots["memories"]] == ["dots session"]
    big = next(m for m in first if m["text"].startswith("big-text"))
    assert get(base + "/api" + ALICE + "/memories/" + big["id"]).json()["memory"]["text"] == BIG
    other = get(base + f"/api/apps/{APP}/users/{quote(OTHER, safe='')}").json()
    assert [m["text"] for m in other["memories"]] == ["bob's own secret"]
    # And every twin is a page too.
    for path in ("/", ALICE, ALICE + "?q=Lisbon", ALICE + "/facts", ALICE + "/sessions/trip-0"):
        page = get(base + path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), path
    assert get(base + "/api" + ALICE + "/sessions/nope").status_code == 404


def test_one_memory_whole_shows_its_metadata_as_given_and_inert(readonly: UIServer) -> None:
    hit = get(readonly.url + "/api" + ALICE, params={"q": "script hello"}).json()["hits"][0]
    path = ALICE + "/memories/" + quote(hit["id"], safe="")
    assert get(readonly.url + "/api" + path).json()["memory"]["metadata"] == HOSTILE_META  # as `get`, export
    page = get(readonly.url + path).text
    assert "<img" not in page and "</script>" not in page
    assert "&quot;note&quot;: &quot;&lt;/script&gt;&lt;img src=x onerror=alert(3)&gt;&quot;" in page
    assert "&quot;backend&quot;: &quot;mine&quot;" in page


def test_headers_forbid_scripts_and_framing(readonly: UIServer) -> None:
    headers = get(readonly.url + ALICE).headers
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp and headers["x-content-type-options"] == "nosniff"


def test_another_host_name_is_refused_on_loopback(readonly: UIServer) -> None:
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 must not read memories."""
    refused = get(readonly.url + "/api/", headers={"Host": "evil.example"})
    assert refused.status_code == 421 and USER not in refused.text


def test_export_downloads_the_users_records(readonly: UIServer) -> None:
    got = get(readonly.url + ALICE + "/export")
    assert got.headers["content-disposition"].startswith("attachment;")
    lines = [json.loads(line) for line in got.text.split("\n") if line]  # not splitlines: \x85 is in a text
    assert len(lines) == ALICE_COUNT and {r["user_id"] for r in lines} == {USER}


def _csrf(server: UIServer, **cookies: str) -> str:
    page = get(server.url + ALICE + "/erase", cookies=cookies).text
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, page
    return found.group(1)


def test_a_post_needs_the_same_origin_and_the_csrf_token(erasable: UIServer) -> None:
    url, csrf = erasable.url + ALICE + "/erase", _csrf(erasable)
    own = erasable.url
    for headers, data in [
        ({"Origin": "http://evil.example"}, {"csrf": csrf}),
        ({"Sec-Fetch-Site": "cross-site"}, {"csrf": csrf}),
        ({"Origin": own}, {}),
        ({"Origin": own}, {"csrf": "0" * 64}),
    ]:
        refused = httpx.post(url, headers=headers, data=data, timeout=15)
        assert refused.status_code == 403, (headers, data)
    same = {"Origin": own, "Sec-Fetch-Site": "same-origin"}
    # A POST that names nothing in its form (the id only in the URL, or empty) erased the whole user.
    some_id = get(erasable.url + "/api" + ALICE).json()["memories"][0]["id"]
    for where, data in [(f"?memory={some_id}", {"csrf": csrf}), ("", {"csrf": csrf, "memory": ""})]:
        unnamed = httpx.post(url + where, headers=same, data=data, timeout=15)
        assert unnamed.status_code == 400 and "all=1 for the whole user" in unnamed.text, where
    assert len(get(erasable.url + "/api" + ALICE).json()["memories"]) > 1  # nothing went
    done = httpx.post(url, headers=same, data={"csrf": csrf, "all": "1"}, timeout=15)
    assert done.status_code == 200 and f"erased {ALICE_COUNT} memories" in done.text


def test_off_loopback_without_tokens_it_refuses_to_start(tmp_path: Path) -> None:
    done = run_ui(tmp_path, "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --host 0.0.0.0 is not a loopback address"), done.stderr


def test_a_token_reaches_only_its_user(tmp_path: Path, store: Path) -> None:
    tokens = token_file(tmp_path / "tokens.json")
    server = UIServer(store, tmp_path / "home", "--host", "0.0.0.0", "--tokens", str(tokens))
    try:
        base = server.url.replace("0.0.0.0", "127.0.0.1")
        assert get(base + "/api/").status_code == 401
        page = get(base + ALICE, follow_redirects=True)
        assert page.status_code == 200 and "/login" in str(page.url)  # a browser goes to the login page
        alice = {"Authorization": f"Bearer {ALICE_TOKEN}"}
        assert [r["user"] for r in get(base + "/api/", headers=alice).json()] == [USER]
        assert get(base + "/api" + ALICE, headers=alice).status_code == 200
        assert get(base + f"/api/apps/{APP}/users/{quote(OTHER, safe='')}", headers=alice).status_code == 403
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert sorted(r["user"] for r in get(base + "/api/", headers=admin).json()) == sorted([USER, OTHER])
        # A login from another origin is refused; the cookie of a real one is HttpOnly and SameSite=Strict.
        login = get(base + "/login").text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', login).group(1)  # type: ignore[union-attr]
        form = {"csrf": csrf, "token": ALICE_TOKEN, "next": "/"}
        evil = httpx.post(base + "/login", data=form, headers={"Origin": "http://evil.example"}, timeout=15)
        assert evil.status_code == 403 and "set-cookie" not in evil.headers
        ok = httpx.post(base + "/login", data=form, timeout=15)
        cookie = ok.headers["set-cookie"].lower()
        assert ok.status_code == 303 and "httponly" in cookie and "samesite=strict" in cookie
    finally:
        server.stop()
