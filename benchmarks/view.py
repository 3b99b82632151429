"""`langgraph-ctx view` on a long thread (issue 42 item 1): the page's size and time to ready.

A seeded synthetic coding-agent run of 5,000 messages (`benchmarks.synthetic`) is written as a
message file and turned into a page as `langgraph-ctx view FILE --html OUT` does (replayed
through the default pipeline in a 32,000-token window). Printed: the model calls, the file's
size against the 5 MB goal, and the page's time to ready in headless Chromium (the system
browser, `/usr/bin/chromium` through `/usr/bin/chromedriver`): `performance.now()` when the
page's script has drawn every bar and the newest call (`window.viewReady`), the median of a few
loads, against the 2 s goal. Also the time to answer one search over the thread.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._table import print_table

MESSAGES = 5_000
QUICK_MESSAGES = 1_000
WINDOW = 32_000
LOADS = 3
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SIZE_GOAL = 5_000_000
READY_GOAL_MS = 2_000


@contextmanager
def headless_chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """Selenium's Chrome driver on the system Chromium, headless, with no network use.

    The driver is named (`Service`), so Selenium Manager never looks one up.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_ready(driver: Any, timeout: float = 30.0) -> float:
    """Wait for the page's ready flag; the page's own `performance.now()` at ready, in ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = driver.execute_script("return window.viewReady || null")
        if ready is not None:
            return float(ready)
        time.sleep(0.02)
    msg = "the page never set window.viewReady"
    raise TimeoutError(msg)


def write_long_page(folder: Path, messages: int) -> tuple[Path, int, float]:
    """The page of a synthetic thread of `messages` messages: path, calls, seconds to write.

    Written by `langgraph-ctx view FILE --html OUT` run as a process, as a user runs it: the
    seconds are the whole command's, the interpreter's start included.
    """
    from langchain_core.messages import messages_to_dict

    from benchmarks.synthetic import generate_run

    run = generate_run(messages, seed=42)
    source, out = folder / "thread.json", folder / "thread.html"
    source.write_text(json.dumps(messages_to_dict(run.messages)), encoding="utf-8")
    command = shutil.which("langgraph-ctx", path=str(Path(sys.executable).parent)) or shutil.which(
        "langgraph-ctx"
    )
    if command is None:
        msg = "the langgraph-ctx command is not installed: run make install"
        raise RuntimeError(msg)
    started = time.perf_counter()
    done = subprocess.run(
        [command, "view", str(source), "--html", str(out), "--window", str(WINDOW)],
        capture_output=True,
        text=True,
        check=True,
    )
    took = time.perf_counter() - started
    said = re.search(r"([\d,]+) model calls", done.stdout)
    if said is None:
        msg = f"langgraph-ctx view did not say how many model calls it drew: {done.stdout!r}"
        raise RuntimeError(msg)
    return out, int(said.group(1).replace(",", "")), took


def run(args: argparse.Namespace) -> None:
    count = QUICK_MESSAGES if args.quick else MESSAGES
    with tempfile.TemporaryDirectory() as tmp:
        page, calls, took = write_long_page(Path(tmp), count)
        size = page.stat().st_size
        ready, searched = [], []
        with headless_chromium() as driver:
            for _ in range(LOADS):
                driver.get(page.as_uri())
                ready.append(wait_ready(driver))
                searched.append(
                    driver.execute_script(
                        "const t = performance.now(); const n = search('token count').length;"
                        "return [performance.now() - t, n];"
                    )
                )
        median = statistics.median(ready)
        search_ms = statistics.median(s[0] for s in searched)
        print_table(
            f"langgraph-ctx view: a synthetic thread of {count:,} messages, window {WINDOW:,}",
            ["what", "measured", "goal"],
            [
                ["model calls (bars)", f"{calls:,}", ""],
                ["page file size", f"{size:,} bytes", f"< {SIZE_GOAL:,} bytes"],
                [
                    f"page ready in headless Chromium (median of {LOADS})",
                    f"{median:,.0f} ms",
                    f"< {READY_GOAL_MS:,} ms",
                ],
                ["one search ('token count') in the page", f"{search_ms:,.0f} ms", ""],
                [
                    "the command `langgraph-ctx view FILE --html OUT`, as a process",
                    f"{took:.1f} s",
                    "",
                ],
            ],
        )
