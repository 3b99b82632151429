"""`langgraph-ctx view`'s page in a real browser: Debian's Chromium, headless, through Selenium.

`make test` installs `chromium` and `chromium-driver` when they are missing (as root, with
apt-get); under CI (`CI` set) a missing browser fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.view import CHROMEDRIVER, CHROMIUM, headless_chromium, wait_ready
from langgraph_ctx.archive.matching import parse_query
from langgraph_ctx_tools.cli import main
from langgraph_ctx_tools.cli.checkpoints import read_checkpoints
from langgraph_ctx_tools.cli.threads import readable_entry, restore_entry
from tests.unit import test_demo

tree = test_demo.tree  # the demo's small project (a fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def browser() -> Any:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        why = f"{', '.join(missing)} missing: apt-get install chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    with headless_chromium(1400, 1100) as driver:
        yield driver


def model_calls(db: Path, thread: str) -> int:
    """The AI messages carrying a `context_cost` report in the thread's checkpoints."""
    with read_checkpoints(db) as opened:
        found = set()
        for item in opened.saver.list({"configurable": {"thread_id": thread}}):
            for message in item.checkpoint["channel_values"].get("messages") or []:
                if message.type == "ai" and message.response_metadata.get("context_cost"):
                    found.add(message.id)
    return len(found)


def text_of(driver: Any, selector: str) -> str:
    return str(driver.execute_script(f"return document.querySelector('{selector}').textContent"))


def test_the_demo_page_in_chromium(
    tree: Path,
    browser: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", str(tree), "--window", "3000"]) == 0
    capsys.readouterr()
    page = tmp_path / "page.html"
    db = Path(".langgraph_ctx/demo.sqlite")
    argv = ["view", "--db", str(db), "--thread", "demo", "--window", "3500", "--html", str(page)]
    assert main(argv) == 0
    capsys.readouterr()
    browser.get(page.as_uri())
    wait_ready(browser)
    assert browser.execute_script("return document.body.dataset.ready") == "1"

    # One bar per model call the thread recorded, against the budget and the window.
    bars = browser.find_elements("css selector", "#timeline .bar")
    assert len(bars) == model_calls(db, "demo") > 10
    assert browser.find_elements("css selector", "#timeline .rule.limit")
    assert browser.find_elements("css selector", "#timeline .rule.window")
    assert "window 3,500" in browser.find_element("id", "axis").text
    # The demo ran in a 3,000-token window with no reserve; --window says 3,500: the header
    # states the three numbers so that they add up (the budget is what the reports recorded).
    totals = text_of(browser, "#totals")
    assert "budget 3,000 tokens (the window 3,500 less the output reserved 500)" in totals

    # A click on a call, then on one of its excerpts: the original, byte for byte as
    # `langgraph-ctx restore REF` prints it.
    excerpt = "tr.item[data-kind='3']"
    for bar in reversed(bars):
        bar.click()
        if browser.find_elements("css selector", excerpt):
            break
    row = browser.find_element("css selector", excerpt)
    row.click()
    head = text_of(browser, "#original-head")
    ref = head[head.index("(") + 1 : -1]
    archive = Path(".langgraph_ctx/archive")
    expected = readable_entry(restore_entry(ref, thread="demo", archive_dir=archive))
    assert text_of(browser, "#original") == expected
    assert main(["restore", ref, "--thread", "demo"]) == 0
    assert capsys.readouterr().out == expected + "\n"
    assert "[compacted tool output" in text_of(browser, "#shown")
    browser.save_screenshot(str(tmp_path / "view-call.png"))

    # The search box: every line holding the word, as the archive search's query rule says.
    browser.find_element("css selector", "#q").send_keys("archive")
    # Typing schedules a search 150 ms later, which draws the hits anew: on a slow machine it
    # fell between finding a hit and clicking it. Let it run, then search and click in-page.
    time.sleep(0.5)
    browser.execute_script("runSearch()")
    hits = browser.execute_script(
        "return [...document.querySelectorAll('.hit')]"
        ".map(h => [+h.dataset.message, +h.dataset.line])"
    )
    data_lines = browser.execute_script("return lines()")
    query = parse_query("archive")
    expected_hits = {
        (m, n + 1)
        for m, lines in enumerate(data_lines)
        for n, line in enumerate(lines)
        if any(w in line.casefold() for w in query.words)
    }
    assert hits and {tuple(h) for h in hits} <= expected_hits
    assert len(hits) == min(200, len(expected_hits))
    browser.execute_script("document.querySelector('.hit').click()")
    assert text_of(browser, "#shown")
    browser.save_screenshot(str(tmp_path / "view-search.png"))
    assert (tmp_path / "view-call.png").stat().st_size > 10_000
    # The page's own script and style ran under its policy: nothing refused, nothing thrown.
    assert [e["message"] for e in browser.get_log("browser") if e["level"] != "INFO"] == []

    # At 600 px and on a phone: the call's scale labels apart, no label cut, the page no wider
    # than the screen (tests/reliability/test_view_page.py checks each rule on its own).
    for width, phone in ((600, False), (390, True)):
        metrics = {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": phone}
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        browser.get(page.as_uri())
        wait_ready(browser)
        browser.execute_script("document.querySelector('tr.item').click()")
        fits = browser.execute_script(
            "const boxes = [...document.querySelectorAll('#hscale span, #axis div')]"
            "  .map(e => e.getBoundingClientRect());"
            "const apart = (a, b) => a.right <= b.left || b.right <= a.left"
            "  || a.bottom <= b.top || b.bottom <= a.top;"
            "return [document.documentElement.scrollWidth <= innerWidth,"
            "  boxes.every((a, n) => boxes.slice(n + 1).every((b) => apart(a, b))),"
            "  [...document.querySelectorAll('.hseg')].every(s => s.scrollWidth <= s.clientWidth)]"
        )
        assert fits == [True, True, True], width
        browser.save_screenshot(str(tmp_path / f"view-{width}.png"))
        assert (tmp_path / f"view-{width}.png").stat().st_size > 10_000
