"""`python -m benchmarks.pictures`: the README's two pictures, made from the demo.

One command, on a plain clone with Chromium (`make install` installs it): it runs
`langgraph-ctx demo` in a scratch folder (so nothing lands in the repository), then

- `docs/pictures/demo-page.png`: the page `langgraph-ctx view` wrote for the demo's thread
  (`.langgraph_ctx/demo.html`), screenshotted in headless Chromium with the first call that
  edited the most kinds of thing selected, so the picture shows a prompt by part and its edits;
- `docs/pictures/demo-frontier.png`: `langgraph-ctx frontier --db .langgraph_ctx/demo.sqlite
  --window W --plot PNG` on the demo's thread, the settings' cost against next-step recall.

Both commands run as processes, as a user runs them; their output is kept only to be quoted
when one fails. `--out` writes the pictures elsewhere, `PATH` and `--window` are the demo's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.view import CHROMEDRIVER, CHROMIUM, headless_chromium, wait_ready

ROOT = Path(__file__).resolve().parents[1]
PICTURES = ROOT / "docs" / "pictures"
PAGE_PNG = "demo-page.png"
FRONTIER_PNG = "demo-frontier.png"
DEMO_WINDOW = 6_000  # the demo's own default window: the pictures show what `make demo` runs
# The page, its chart and the selected call in one glance, legible at the README's width.
SCREEN = (1000, 860)


class PictureError(RuntimeError):
    """A step of the pictures failed: the message says which and what it printed."""


def _run(argv: Sequence[str], cwd: Path) -> None:
    """Run `langgraph-ctx ARGV` in `cwd`; a failure carries the last line it wrote to stderr.

    Every command ends a failure with one line on stderr saying what was wrong, so that line is
    the one to show; the rest of its output is the run's progress.
    """
    command = [sys.executable, "-m", "langgraph_ctx_tools.cli", *argv]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["-"]
        msg = f"`langgraph-ctx {' '.join(argv)}` exited {done.returncode}: {lines[-1]}"
        raise PictureError(msg)


def _busiest_call(reports: Path) -> int:
    """The index of the first call whose report records the most kinds of edit.

    On the demo that is the call where the window first moved: excerpts, the oldest messages
    summarized and dropped, in one prompt, which shows the most of what the pipeline does.
    """
    calls = json.loads(reports.read_text(encoding="utf-8"))["calls"]
    kinds = [len({d["kind"] for d in c["report"]["decisions"]}) for c in calls]
    return kinds.index(max(kinds))


def screenshot_page(page: Path, png: Path, call: int | None = None) -> None:
    """A headless Chromium screenshot of a `langgraph-ctx view` page, one call selected."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        msg = f"{', '.join(missing)} missing: apt-get install chromium chromium-driver"
        raise PictureError(msg)
    with headless_chromium(*SCREEN) as driver:
        driver.get(page.as_uri())
        wait_ready(driver)
        if call is not None:
            driver.execute_script("showCall(arguments[0]); window.scrollTo(0, 0);", call)
        driver.save_screenshot(str(png))


def make_pictures(
    out: Path = PICTURES, *, tree: Path | None = None, window: int = DEMO_WINDOW
) -> list[Path]:
    """Run the demo in a scratch folder and write its page and frontier plot as PNGs in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    page_png, frontier_png = out / PAGE_PNG, out / FRONTIER_PNG
    with tempfile.TemporaryDirectory(prefix="lgctx-pictures-") as scratch:
        work = Path(scratch)
        demo = ["demo", "--window", str(window)] + ([str(tree.resolve())] if tree else [])
        _run(demo, work)
        home = work / ".langgraph_ctx"
        db = str(home / "demo.sqlite")
        _run(["frontier", "--db", db, "--window", str(window), "--plot", str(frontier_png)], work)
        call = _busiest_call(home / "demo.reports.json")
        screenshot_page(home / "demo.html", page_png, call)
    return [page_png, frontier_png]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m benchmarks.pictures [PATH] [--window N] [--out DIR]`."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pictures",
        description="Run the demo and write the README's pictures: its page and its frontier plot.",
    )
    parser.add_argument("path", nargs="?", type=Path, help="the demo's folder (default: ours)")
    parser.add_argument("--window", type=int, default=DEMO_WINDOW, help="the demo's window")
    parser.add_argument("--out", type=Path, default=PICTURES, help="folder for the two PNGs")
    args = parser.parse_args(argv)
    try:
        written = make_pictures(args.out, tree=args.path, window=args.window)
    except PictureError as error:
        print(f"pictures: {error}", file=sys.stderr)
        return 2
    for png in written:
        print(f"{png} ({png.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
