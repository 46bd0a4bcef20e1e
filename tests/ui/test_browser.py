"""``longterm ui`` in a real headless Chromium: what an operator sees and clicks.

Lists, pages, searches, a fact's history, erasing with a confirmation (and refused when
read-only), a cross-origin form refused, hostile memories shown as inert text, and the login
a token file requires off loopback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.ui.conftest import (
    ADMIN_TOKEN,
    ALICE_COUNT,
    ALICE_TOKEN,
    APP,
    CONTROLS,
    OTHER,
    RTL,
    SCRIPT,
    USER,
    UIServer,
    token_file,
)

ALICE = f"/apps/{APP}/users/{USER}"


def navigate(browser: Any, element: Any, *, submit: bool = False) -> None:
    """Click ``element`` (or submit its form) and wait until the browser left the page: chromedriver
    does not always wait for the navigation a click starts (a form POST under load, a page of
    another origin), and reading right away reads the old page, or a stale one."""
    page = browser.find_element(By.TAG_NAME, "html")
    element.submit() if submit else element.click()
    WebDriverWait(browser, 30).until(lambda _: left(page))


def left(page: Any) -> bool:
    """True once ``page`` (the old ``<html>``) is gone. Selenium's ``staleness_of`` knows only
    ``StaleElementReferenceException``; asked mid-navigation, chromedriver may instead answer
    "unhandled inspector error: Node with given id does not belong to the document" (seen in
    a run under load): that, too, says the old page is gone."""
    try:
        page.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in (exc.msg or ""):
            return True
        raise
    return False


def test_the_navigation_wait_takes_chromedrivers_other_answer_for_a_page_that_is_gone() -> None:
    class Gone:
        def __init__(self, exc: Exception | None) -> None:
            self.exc = exc

        def is_enabled(self) -> bool:
            if self.exc:
                raise self.exc
            return True

    inspector = (
        'unknown error: unhandled inspector error: {"code":-32000,'
        '"message":"Node with given id does not belong to the document"}'
    )
    assert left(Gone(WebDriverException(inspector)))
    assert left(Gone(StaleElementReferenceException("stale")))
    assert not left(Gone(None))


def texts(driver: Any, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def no_alert(driver: Any) -> None:
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    raise AssertionError(f"a stored text ran as script: alert {alert.text!r}")


def test_lists_apps_and_users_with_counts(readonly: UIServer, browser: Any) -> None:
    browser.get(readonly.url + "/")
    rows = [r.split() for r in texts(browser, "tbody tr")]
    assert [APP, USER, str(ALICE_COUNT), APP] in rows
    assert any(OTHER.split()[0] in r for r in rows)  # the hostile user id, shown as text
    navigate(browser, browser.find_element(By.LINK_TEXT, OTHER))  # a link holding '/', '%', a space and Chinese
    assert "bob's own secret" in browser.find_element(By.TAG_NAME, "main").text
    assert browser.current_url.endswith("/users/" + quote(OTHER, safe=""))


def test_pages_through_every_memory_newest_first(readonly: UIServer, browser: Any) -> None:
    browser.get(readonly.url + ALICE)
    seen: list[str] = []
    for _ in range(5):
        seen += texts(browser, "tbody tr td:first-child")
        older = browser.find_elements(By.CSS_SELECTOR, "a[rel=next]")
        if not older:
            break
        navigate(browser, older[0])
    assert len(seen) == ALICE_COUNT  # every memory once, facts included, over three pages
    assert seen == sorted(seen, reverse=True)  # newest first, across the pages


def test_search_shows_score_and_arm(readonly: UIServer, browser: Any) -> None:
    browser.get(readonly.url + ALICE)
    box = browser.find_element(By.CSS_SELECTOR, "input[type=search]")
    box.send_keys("ordinary memory number 7")
    navigate(browser, box, submit=True)
    assert "?q=" in browser.current_url
    first = browser.find_element(By.CSS_SELECTOR, "tbody tr")
    assert "ordinary memory number 7 about Lisbon" in first.text
    score = float(first.find_element(By.CSS_SELECTOR, "td.score").text)
    assert 0.0 < score <= 1.0
    assert "fulltext" in first.find_element(By.CSS_SELECTOR, "td.arms").text


def test_a_facts_history_names_what_replaced_it_and_its_evidence(readonly: UIServer, browser: Any) -> None:
    browser.get(readonly.url + ALICE + "/facts")
    paris = browser.find_element(By.XPATH, "//tr[contains(., 'lives in Paris')]")
    assert "superseded" in paris.get_attribute("class")
    assert "ordinary memory number 0 about Lisbon" in paris.text  # the evidence it came from
    navigate(browser, paris.find_element(By.LINK_TEXT, "history"))
    boxes = texts(browser, "div.fact")
    assert len(boxes) == 2 and "lives in Paris (this fact)" in boxes[0] and "lives in Lisbon" in boxes[1]
    assert "superseded" in boxes[0] and "updated" in boxes[0] and "current" in boxes[1]
    assert "ordinary memory number 5 about Lisbon" in boxes[1]
    navigate(
        browser, browser.find_element(By.CSS_SELECTOR, "div.fact a[href*='/sessions/']")
    )  # to the evidence's session
    times = texts(browser, "tbody tr td:first-child")
    assert len(times) == 40 and times == sorted(times)  # a session's timeline, in the order said


def test_hostile_memories_are_shown_as_text(readonly: UIServer, browser: Any) -> None:
    browser.get(readonly.url + ALICE)
    no_alert(browser)
    assert browser.find_elements(By.TAG_NAME, "script") == []
    assert browser.find_elements(By.TAG_NAME, "img") == []
    main = browser.find_element(By.TAG_NAME, "main").text
    assert SCRIPT in main  # the markup, visible as the characters it is
    # A right-to-left override shown as a visible escape, the text isolated from the page.
    rtl = browser.find_element(By.XPATH, "//bdi[contains(., 'RTL-MARKER')]")
    assert rtl.text == RTL.replace("\u202e", "\\u202e")
    assert "\u202e" not in browser.page_source
    # Control characters visible, none of them raw in the page.
    ctl = browser.find_element(By.XPATH, "//bdi[contains(., 'CTL-MARKER')]").text
    assert ctl == "bell\\x07 esc\\x1b[31m red\\x7f del\\x85 CTL-MARKER", ctl
    assert not any(c in browser.page_source for c in CONTROLS if not c.isprintable())
    # The 1 MB text: cut in the list, whole on its own page.
    row = browser.find_element(By.XPATH, "//tr[contains(., 'big-text')]")
    assert len(row.text) < 2000
    navigate(browser, row.find_element(By.PARTIAL_LINK_TEXT, "whole memory (1,000,009 characters)"))
    assert len(browser.find_element(By.TAG_NAME, "pre").text) == 1_000_009


def test_erase_asks_first_and_names_what_goes(erasable: UIServer, browser: Any) -> None:
    browser.get(erasable.url + ALICE + "/sessions/trip-1")
    navigate(browser, browser.find_element(By.LINK_TEXT, "erase this session"))
    going = browser.find_element(By.CSS_SELECTOR, "div.warn").text
    assert "the 40 memories of session trip-1" in going and "ordinary memory number 1 about Lisbon" in going
    navigate(browser, browser.find_element(By.CSS_SELECTOR, "input.danger"))
    assert browser.find_element(By.ID, "done").text == "erased 40 memories"
    gone = httpx.get(erasable.url + "/api" + ALICE + "/sessions/trip-1", timeout=10)
    assert gone.status_code == 404
    # One memory, from its row.
    browser.get(erasable.url + ALICE + "/sessions/trip-2")
    navigate(
        browser,
        browser.find_element(By.XPATH, "//tr[contains(., 'number 2 about')]").find_element(By.LINK_TEXT, "erase"),
    )
    assert "one memory" in browser.find_element(By.CSS_SELECTOR, "div.warn").text
    navigate(browser, browser.find_element(By.CSS_SELECTOR, "input.danger"))
    assert browser.find_element(By.ID, "done").text == "erased 1 memories"
    # The whole user.
    browser.get(erasable.url + ALICE)
    navigate(browser, browser.find_element(By.LINK_TEXT, "erase this user"))
    assert f"ALL {ALICE_COUNT - 41} memories of user {USER}" in browser.find_element(By.CSS_SELECTOR, "div.warn").text
    navigate(browser, browser.find_element(By.CSS_SELECTOR, "input.danger"))
    browser.get(erasable.url + "/")
    assert USER not in texts(browser, "tbody tr td:nth-child(2)")


def test_read_only_without_allow_erase(readonly: UIServer, browser: Any) -> None:
    browser.get(readonly.url + ALICE)
    assert browser.find_elements(By.PARTIAL_LINK_TEXT, "erase") == []
    browser.get(readonly.url + ALICE + "/erase")
    assert "read-only" in browser.find_element(By.ID, "problem").text
    posted = httpx.post(readonly.url + ALICE + "/erase", data={"csrf": "x"}, timeout=10)
    assert posted.status_code == 403 and "read-only" in posted.text
    count = httpx.get(readonly.url + "/api/", timeout=10).json()
    assert {"index": APP, "app": APP, "user": USER, "memories": ALICE_COUNT} in count


def test_a_cross_origin_form_is_refused(erasable: UIServer, browser: Any) -> None:
    browser.get(erasable.url + ALICE + "/erase")  # a real token, read from the real page
    csrf = browser.find_element(By.NAME, "csrf").get_attribute("value")
    form = (
        f'<form method="post" action="{erasable.url}{ALICE}/erase">'
        f'<input name="csrf" value="{csrf}"><input type="submit" id="go"></form>'
    )
    browser.get("data:text/html," + quote(form))  # another origin's page
    navigate(browser, browser.find_element(By.ID, "go"))  # from a data: page: another origin's form
    assert "cross-origin request refused" in browser.find_element(By.TAG_NAME, "body").text
    count = httpx.get(erasable.url + "/api/", timeout=10).json()
    assert {"index": APP, "app": APP, "user": USER, "memories": ALICE_COUNT} in count


def test_off_loopback_a_token_logs_in_and_sees_its_own_user(tmp_path: Path, store: Path, browser: Any) -> None:
    tokens = token_file(tmp_path / "tokens.json")
    server = UIServer(store, tmp_path / "home", "--host", "0.0.0.0", "--tokens", str(tokens))
    try:
        base = server.url.replace("0.0.0.0", "127.0.0.1")
        browser.delete_all_cookies()
        browser.get(base + ALICE)
        assert "/login" in browser.current_url
        box = browser.find_element(By.NAME, "token")
        box.send_keys("not-a-token-of-this-file-xx")
        navigate(browser, box, submit=True)
        assert "not in the token file" in browser.find_element(By.TAG_NAME, "main").text
        box = browser.find_element(By.NAME, "token")
        box.send_keys(ALICE_TOKEN)
        navigate(browser, box, submit=True)
        assert browser.current_url == base + ALICE  # back where it was going
        cookie = browser.get_cookies()[0]
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert ALICE_TOKEN not in cookie["value"]
        browser.get(base + "/")
        assert texts(browser, "tbody tr td:nth-child(2)") == [USER]  # not the other user
        browser.get(base + f"/apps/{APP}/users/{quote(OTHER, safe='')}")
        assert "reaches user 'alice' only" in browser.find_element(By.ID, "problem").text
        navigate(browser, browser.find_element(By.CSS_SELECTOR, "header button"))  # log out
        browser.get(base + "/")
        assert "/login" in browser.current_url
        box = browser.find_element(By.NAME, "token")
        box.send_keys(ADMIN_TOKEN)
        navigate(browser, box, submit=True)
        assert sorted(texts(browser, "tbody tr td:nth-child(2)")) == sorted([USER, OTHER])
    finally:
        server.stop()
        browser.delete_all_cookies()


def test_the_page_source_escapes_every_stored_text(readonly: UIServer) -> None:
    """The HTML as sent: no stored markup survives as markup (what a browser would run)."""
    page = httpx.get(readonly.url + ALICE, timeout=10).text
    assert "<script" not in page and "<img" not in page
    assert re.search(r"&lt;script&gt;alert\(&quot;x&quot;\)&lt;/script&gt;", page)
