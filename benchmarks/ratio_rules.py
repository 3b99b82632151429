"""`python -m benchmarks.ratio_rules RUN_OUTPUT`: other calibration rules on a recorded run.

`make llama_cpp` (and `make llama_server`) print, on stderr, every call's `(estimate, the
server's count, the ratio applied)`. This replays those calls through calibration rules: the
package's own (`_calibration.ratio_of`: the median of the newest `RECENT` observations), the
median of the last nine (the rule before it), and the latest observation alone, and prints how
far each rule's estimate is from the server's count on the first call, after 5 calls and after
10. The raw estimate of
a call is its estimate divided by the ratio applied; the prompts are the run's own (a rule
that shrank or grew them would have cut elsewhere, which a replay cannot show).

    make llama_cpp 2> run.txt && python -m benchmarks.ratio_rules run.txt
"""

from __future__ import annotations

import argparse
import ast
import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks._table import print_table
from langgraph_ctx._calibration import MAX_RATIO, MIN_RATIO, RECENT, WINDOW, ratio_of

Rule = Callable[[list[float]], float]
"""The ratio to apply next, from the observations so far (each clamped), oldest first."""

RULES: dict[str, Rule] = {
    f"package: ratio_of (median of the last {RECENT})": lambda seen: ratio_of(seen[-WINDOW:]),
    "median of the last 9 (before stop 22)": lambda seen: statistics.median(seen[-9:]),
    "latest observation": lambda seen: seen[-1],
}


def calls_of(text: str) -> list[tuple[float, int]]:
    """`(raw estimate, the server's count)` of every call the run printed (a list of triples)."""
    line = next((m.group(0) for m in re.finditer(r"^\[\(.*\)\]$", text, re.MULTILINE)), None)
    if line is None:
        msg = "no '[(estimate, reported, ratio), ...]' line: pass the run's stderr"
        raise SystemExit(msg)
    triples = ast.literal_eval(line)
    return [(tokens / ratio, reported) for tokens, reported, ratio in triples if reported]


def errors_under(rule: Rule, calls: Sequence[tuple[float, int]]) -> list[float]:
    """Each call's relative error when the ratio follows `rule`."""
    seen: list[float] = []
    ratio, errors = 1.0, []
    for raw, reported in calls:
        errors.append(abs(ratio * raw - reported) / reported)
        seen.append(min(max(reported / raw, MIN_RATIO), MAX_RATIO))
        ratio = min(max(rule(seen), MIN_RATIO), MAX_RATIO)
    return errors


def _after(errors: Sequence[float], calls: int) -> str:
    later = errors[calls:]
    if not later:
        return "-"
    within = sum(e <= 0.05 for e in later)
    return f"{sum(later) / len(later):.1%} / {max(later):.1%} / {within} of {len(later)}"


def main(argv: Sequence[str] | None = None) -> int:
    """Print one row per rule."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ratio_rules")
    parser.add_argument("run_output", type=Path, help="the stderr of a `make llama_cpp` run")
    args = parser.parse_args(argv)
    calls = calls_of(args.run_output.read_text())
    rows = []
    for name, rule in RULES.items():
        errors = errors_under(rule, calls)
        rows.append([name, f"{errors[0]:.1%}", _after(errors, 5), _after(errors, 10)])
    print_table(
        f"Calibration rules replayed on {len(calls)} calls (mean / max error / within 5%)",
        ["rule", "first call", "after 5 calls", "after 10 calls"],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
