"""The page of `langgraph-ctx view` treats its data as untrusted (issue 50, item 5).

Everything the page shows came from a handed database, a model or a tool. The page's policy
lets only its own script and style run (hashes, no 'unsafe-inline', no HTML from strings), its
numbers are checked before they are drawn, and a thread of any length draws. The browser tests
run the page in Debian's Chromium, headless (`make browser`), as
tests/integration/test_view_browser.py does.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from pathlib import Path
from typing import Any

import pytest

from langgraph_ctx.cli.view import write_page
from langgraph_ctx.cli.view_data import page_data
from tests.integration import test_view_browser
from tests.integration.test_view_browser import text_of
from tests.unit.test_view import unpack

browser = test_view_browser.browser  # headless Chromium (a fixture)

ATTACK = "<img src=x onerror=\"window.pwned=1;document.title='pwned'\">"


def policy_of(html: str) -> dict[str, list[str]]:
    """The page's Content-Security-Policy, directive by directive."""
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert found, "the page declares its policy"
    directives = (d.split() for d in found[1].split(";") if d.strip())
    return {name: values for name, *values in directives}


def sha256_source(body: str) -> str:
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode() + "'"
    )


def thread(calls: int = 2, text: str = "hello") -> dict[str, Any]:
    """A thread's plain data (as `thread_from_db` gives it): a message, `calls` model calls."""
    report = {"tokens": 90, "limit": 200, "trigger": 150, "decisions": []}
    part = {"kind": "message", "id": "m1", "tokens": 60, "lines": ["[human]", text], "ref": None}
    return {
        "title": "a thread",
        "messages": [{"id": "m1", "type": "human", "name": "", "text": text, "ref": None}],
        "calls": [{"report": report, "parts": [part], "tools": 10} for _ in range(calls)],
        "entries": {},
    }


def test_the_policy_runs_only_the_pages_own_script_and_style(tmp_path: Path) -> None:
    html = write_page(page_data(thread()), tmp_path / "p.html").read_text(encoding="utf-8")
    policy = policy_of(html)
    [script] = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    [style] = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == [sha256_source(script)]
    assert policy["style-src"] == [sha256_source(style)]
    assert "'unsafe-inline'" not in html and "'unsafe-eval'" not in html
    # No HTML from a string, even if a later edit slips one in: Chromium refuses it.
    assert policy["require-trusted-types-for"] == ["'script'"]
    assert policy["trusted-types"] == ["'none'"]
    assert policy["base-uri"] == policy["form-action"] == ["'none'"]
    sinks = re.findall(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", script)
    assert not sinks
    assert ' style="' not in html  # an inline style attribute the policy would block


def test_a_non_finite_number_leaves_the_page_valid_json(tmp_path: Path) -> None:
    """Python writes inf and NaN as `Infinity` / `NaN`, which `JSON.parse` refuses."""
    data = page_data(thread())
    data["calls"][0][2] = float("nan")
    data["calls"][1][2] = float("inf")
    html = write_page(data, tmp_path / "p.html").read_text(encoding="utf-8")
    assert [c[2] for c in unpack(html)["calls"]] == ["nan", "inf"]


def browser_log(driver: Any) -> list[str]:
    """Chromium's console messages of warning level and above (a policy violation is one)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] != "INFO"]


@pytest.mark.slow
def test_a_crafted_report_shows_as_text_and_runs_nothing(browser: Any, tmp_path: Path) -> None:
    from benchmarks.view import wait_ready

    data = page_data(thread(calls=4, text=f"look: {ATTACK}"))
    data["title"] = ATTACK
    data["strings"] = [ATTACK if s == "m1" else s for s in data["strings"]]  # the message's id
    data["calls"][0][2] = ATTACK  # a report's trigger, as a handed database may hold it
    data["calls"][1][2] = float("nan")
    data["calls"][2][0] = "12<b>"
    page = write_page(data, tmp_path / "p.html")
    browser.get(page.as_uri())
    wait_ready(browser, timeout=20)
    assert len(browser.find_elements("css selector", "#timeline .bar")) == 4
    assert text_of(browser, "#title") == ATTACK  # as text
    browser.execute_script("showCall(0)")
    head = text_of(browser, "#call-head")
    assert "not numbers in its report, not drawn: trigger " in head and "<img src=x" in head
    assert "trigger" not in text_of(browser, "#hscale")  # nothing drawn from it
    browser.execute_script("showCall(1)")
    assert 'trigger "nan"' in text_of(browser, "#call-head")
    browser.execute_script("showCall(2)")
    assert 'tokens "12<b>"' in text_of(browser, "#call-head")
    browser.execute_script("document.querySelector('tr.item').click()")
    assert text_of(browser, "#shown") == f"[human]\nlook: {ATTACK}"
    browser.execute_script("openMessage(0)")  # its heading names the message by its id
    assert text_of(browser, "#reader-head") == f"message 1: human ({ATTACK})"
    browser.execute_script("document.getElementById('q').value = 'onerror'; runSearch()")
    assert ATTACK in text_of(browser, ".hit")
    # Nothing of it became an element, and nothing ran.
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.title == "langgraph-ctx view"
    assert browser_log(browser) == []  # no policy violation: its own script and style ran


@pytest.mark.slow
def test_a_page_of_150_000_calls_draws(browser: Any, tmp_path: Path) -> None:
    """A spread over the calls (`Math.max(...calls)`) threw from about 125,000: a blank page."""
    from benchmarks.view import wait_ready

    calls = 150_000
    data = page_data(thread(calls=1))
    data["calls"] = data["calls"] * calls  # one item shown by every call: a small file
    page = write_page(data, tmp_path / "p.html")
    browser.get(page.as_uri())
    wait_ready(browser, timeout=60)
    assert text_of(browser, "#call-head").startswith("Call 150,000 of 150,000: 90 of 200 tokens")
    assert "150,000 model calls" in text_of(browser, "#totals")
    assert browser.find_elements("css selector", "#timeline .rule.trigger")

    def drawn() -> list[int]:
        return list(
            browser.execute_script(
                "return [...document.querySelectorAll('#timeline .bar')].map(b => +b.dataset.call)"
            )
        )

    # The bars around the newest call are drawn, at their place on a timeline of every call.
    near = drawn()
    assert calls - 1 in near and 0 < len(near) < 2_000
    selected = browser.find_element("css selector", "#timeline .bar.sel")
    assert selected.get_attribute("data-call") == str(calls - 1)
    assert selected.size["height"] > 100  # 90 of 200 tokens, drawn
    timeline = browser.find_element("id", "timeline").size["width"]
    assert timeline == calls * (selected.size["width"] + 1) + 8
    # Scrolled to the start, the first calls are drawn; a click opens one.
    browser.execute_script("document.getElementById('scroll').scrollLeft = 0")
    deadline = time.monotonic() + 10  # the scroll event draws them at the next frame
    while 0 not in drawn() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 0 in drawn()
    browser.find_element("css selector", "#timeline .bar[data-call='2']").click()
    assert text_of(browser, "#call-head").startswith("Call 3 of 150,000")
    assert browser_log(browser) == []
