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
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import messages_to_dict

from langgraph_ctx.errors import InputError
from langgraph_ctx_tools.cli.page import thread_from_file, write_page
from langgraph_ctx_tools.cli.page_data import page_data
from tests.conftest import make_conversation
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


# The page on a narrow screen, what an edit's message shows, the budget in the header (issue 51,
# item 4). The thread: a recorded run of 20 turns replayed through the default pipeline in a
# 6,000-token window with 500 tokens reserved for the output, as `langgraph-ctx view FILE
# --window 6000 --reserved 500` does: its calls excerpt tool outputs, and one cuts the window.

WINDOW, RESERVED = 6_000, 500


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of the replayed run (written once for the tests below)."""
    folder = tmp_path_factory.mktemp("replayed")
    source = folder / "run.json"
    messages = make_conversation(20, long_output=3_000)
    source.write_text(json.dumps(messages_to_dict(messages)), encoding="utf-8")
    thread = thread_from_file(source, window=WINDOW, reserved=RESERVED)
    return write_page(page_data(thread), folder / "run.html")


def test_the_reserve_is_the_window_less_the_recorded_budget() -> None:
    """One rule (`page_data`): reserved = window - budget; a window under the budget refused."""
    assert page_data({**thread(), "window": 250})["reserved"] == 50  # the budget is 200
    assert page_data(thread())["reserved"] is None  # no window: the report records no reserve
    with pytest.raises(InputError, match=r"the window 150 is less than .* budget 200 .*--window"):
        page_data({**thread(), "window": 150})


def test_a_replayed_files_reserve_is_the_one_it_was_replayed_with(replayed: Path) -> None:
    data = unpack(replayed.read_text(encoding="utf-8"))
    assert (data["window"], data["reserved"]) == (WINDOW, RESERVED)
    assert {call[1] for call in data["calls"]} == {WINDOW - RESERVED}


def open_page(driver: Any, page: Path, width: int, *, phone: bool = False) -> None:
    """Load `page` in a viewport `width` CSS pixels wide (`phone`: as a phone lays it out)."""
    from benchmarks.view import wait_ready

    metrics = {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": phone}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.get(page.as_uri())
    wait_ready(driver, timeout=20)


@pytest.mark.slow
def test_the_header_states_budget_reserve_and_window(browser: Any, replayed: Path) -> None:
    open_page(browser, replayed, 1200)
    totals = text_of(browser, "#totals")
    assert "budget 5,500 tokens (the window 6,000 less the output reserved 500)" in totals
    assert totals.count("6,000") == 1  # the window, stated once
    axis = browser.find_element("id", "axis").text
    assert "budget 5,500" in axis and "window 6,000" in axis
    assert browser_log(browser) == []


@pytest.mark.slow
def test_an_edits_message_shows_what_that_calls_prompt_held(browser: Any, replayed: Path) -> None:
    """Never the stored full text as "as the prompt showed it" when the prompt held other text."""
    data = unpack(replayed.read_text(encoding="utf-8"))
    strings = data["strings"]
    open_page(browser, replayed, 1200)
    # Every message every edit names, clicked at its call: what the reader then shows.
    opened = browser.execute_script(
        """
        const seen = [];
        for (let i = 0; i < CALLS.length; i++) {
          showCall(i);
          for (const chip of document.querySelectorAll('#edits .chip')) {
            chip.click();
            seen.push([i, +chip.dataset.message, $('shown-head').textContent,
                       $('shown').textContent, $('original').textContent]);
          }
        }
        return seen;
        """
    )
    shown_in_prompt = absent = 0
    for call, message, head, shown, original in opened:
        assert head == f"as call {call + 1}'s prompt showed it"
        items = [data["items"][n] for n in data["calls"][call][4]]
        held = [item for item in items if item[2] == message]
        stored = strings[data["messages"][message][3]]
        if held:  # an excerpt, a shortened turn: its text at that call, not the stored one
            assert shown == "\n".join(strings[n] for n in held[0][3])
            shown_in_prompt += shown != stored
        else:  # it had left the window: said so, and the original beside it
            assert shown == "not in this call's prompt"
            ref = data["messages"][message][4]  # an index into strings, -1: not archived
            entry = data["entries"][strings[ref]] if ref >= 0 else None
            whole = "\n".join(strings[n] for n in entry) if entry else stored
            assert original == whole
            absent += 1
    assert shown_in_prompt and absent  # both cases happened in this thread
    assert browser_log(browser) == []


def rects(driver: Any, selector: str) -> list[dict[str, float]]:
    """The bounding boxes of the elements `selector` finds."""
    script = (
        "return [...document.querySelectorAll(arguments[0])].map(e => {"
        " const r = e.getBoundingClientRect();"
        " return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })"
    )
    return list(driver.execute_script(script, selector))


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


def overflowing(driver: Any, selector: str) -> list[str]:
    """The texts of the elements `selector` finds whose text does not fit their box."""
    script = (
        "return [...document.querySelectorAll(arguments[0])]"
        ".filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)"
    )
    return list(driver.execute_script(script, selector))


@pytest.mark.slow
@pytest.mark.parametrize(("width", "phone"), [(600, False), (390, True)])
def test_the_page_holds_on_a_narrow_screen(
    browser: Any, replayed: Path, tmp_path: Path, width: int, phone: bool
) -> None:
    """At 600 px and on a phone: no label on another, none cut, nothing wider than the screen."""
    open_page(browser, replayed, width, phone=phone)
    assert browser.execute_script("return window.innerWidth") == width
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    # The call's scale: "trigger 4,950", "budget 5,500", "window 6,000", apart and in the box.
    labels = rects(browser, "#hscale span")
    assert len(labels) == 3 and text_of(browser, "#hscale").startswith("trigger 4,950")
    box = rects(browser, "#hbar")[0]
    for n, label in enumerate(labels):
        assert box["left"] <= label["left"] and label["right"] <= box["right"]
        assert not any(overlap(label, other) for other in labels[n + 1 :])
    axis = rects(browser, "#axis div")
    assert len(axis) == 4  # 0, trigger, budget, window
    assert not any(overlap(a, b) for n, a in enumerate(axis) for b in axis[n + 1 :])
    # Every bar of the 40 calls on screen, none pushed out of view.
    assert browser.execute_script("return $('timeline').offsetWidth <= $('scroll').clientWidth")
    # The call's parts: a segment's label whole or none; the table's numbers and ids whole.
    assert overflowing(browser, "#hbar .hseg") == []
    assert browser.execute_script(
        "return [...document.querySelectorAll('#hbar .hseg')].some(s => s.textContent)"
    )
    assert overflowing(browser, "#items td.num, #items td.msg") == []
    shot = tmp_path / f"view-{width}.png"
    browser.save_screenshot(str(shot))
    # An excerpt opened: its archive reference (a long unbroken word) wraps, the page stays.
    browser.execute_script("document.querySelector('tr.item[data-kind=\"3\"]').click()")
    assert "restored from the archive (" in text_of(browser, "#original-head")
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    browser.save_screenshot(str(tmp_path / f"view-{width}-excerpt.png"))
    assert shot.stat().st_size > 10_000
    assert browser_log(browser) == []


@pytest.mark.slow
def test_labels_of_lines_a_few_tokens_apart_stay_apart(browser: Any, tmp_path: Path) -> None:
    """A trigger at 99% of the budget and a window 1% above it: three labels, none on another."""
    data = page_data({**thread(calls=3), "window": 202})
    for call in data["calls"]:
        call[2] = 198  # the trigger
    page = write_page(data, tmp_path / "p.html")
    open_page(browser, page, 600)
    for selector in ("#axis div", "#hscale span"):
        labels = rects(browser, selector)
        assert len(labels) >= 3
        assert not any(overlap(a, b) for n, a in enumerate(labels) for b in labels[n + 1 :])
    # The axis's labels stay beside the chart, under its heading.
    [chart] = rects(browser, "#chart")
    assert all(chart["top"] <= a["top"] for a in rects(browser, "#axis div"))
    assert "(the window 202 less the output reserved 2)" in text_of(browser, "#totals")
    browser.save_screenshot(str(tmp_path / "near.png"))
    assert browser_log(browser) == []
