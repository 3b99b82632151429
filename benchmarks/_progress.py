"""Progress lines on stderr, so a long benchmark is never silent and stdout keeps the tables."""

from __future__ import annotations

import sys
import time

_STARTED = time.perf_counter()
EVERY_SECONDS = 15.0
"""A replay that runs longer than this prints a line at least this often."""


def progress(text: str) -> None:
    """One line on stderr, stamped with the seconds since the benchmarks started."""
    print(f"[{time.perf_counter() - _STARTED:6.1f} s] {text}", file=sys.stderr, flush=True)
