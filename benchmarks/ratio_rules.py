"""`python -m benchmarks.ratio_rules RECORD.json`: calibration rules replayed on recorded calls.

`python -m benchmarks.llama_cpp --replay --record RECORD.json` writes every model call of the
recorded agent runs replayed against llama.cpp: the raw estimate of the prompt by part, the
server's count and the limit. This replays those calls through calibration rules, each
learning from the calls before, thread by thread: the package's ratios per part
(`tokens._ratios`: `fit` then `applied`, with the margin of its own misses), and the one
ratio for the whole prompt it used before (the median of the newest three observations, each
clamped to 0.5-2, not under 1 before the third), and prints, after 10 calls of each
thread, the share of calls within 5% of the server's count, the median and mean error, the
largest under-count, and over all calls the prompts the rule counted within the limit while
the server counted them over it. The prompts are the run's own (a rule that counted them
otherwise would have cut elsewhere, which a replay cannot show), so the figures are close to,
not the same as, a run with that rule; the package's rule on its own run's record gives that
run's figures.

    python -m benchmarks.llama_cpp --count-only --replay --record run.json
    python -m benchmarks.ratio_rules run.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks._table import print_table
from benchmarks.llama_replay import Record
from langgraph_ctx.tokens._ratios import applied, fit
from langgraph_ctx.tokens.approximate import PARTS

Rule = Callable[[list[dict[str, Any]]], Mapping[str, float]]
"""The ratio of each part to count the next prompt with, from the observations so far."""


def one_ratio(seen: list[dict[str, Any]]) -> Mapping[str, float]:
    """The rule before ratios per part: the median of the newest three observations."""
    samples = [min(max(s["reported"] / sum(s["parts"].values()), 0.5), 2.0) for s in seen]
    ratio = statistics.median(samples[-3:]) if samples else 1.0
    return dict.fromkeys(PARTS, 1.0 if ratio < 1 and len(samples) < 3 else ratio)


def per_part(seen: list[dict[str, Any]]) -> Mapping[str, float]:
    """The package's rule."""
    return applied(fit(seen), seen)


RULES: dict[str, Rule] = {
    "one ratio (median of the newest 3; before)": one_ratio,
    "ratios per part (the package's)": per_part,
}


def replayed(rule: Rule, records: Sequence[Record]) -> list[Record]:
    """`records` with each call's `tokens` as `rule` would have counted the prompt."""
    out: list[Record] = []
    seen: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        thread = seen.setdefault(r["run"], [])
        ratios = rule(thread)
        tokens = math.ceil(sum(ratios[p] * r["parts"].get(p, 0.0) for p in PARTS) - 1e-9)
        out.append(Record(**{**r, "tokens": tokens}))  # type: ignore[typeddict-item]
        thread.append({"parts": r["parts"], "reported": r["reported"], "estimated": tokens})
    return out


def row(name: str, records: Sequence[Record], after: int = 10) -> list[str]:
    """One line of the table."""
    later = [r for r in records if r["call"] >= after]
    errors = [abs(r["tokens"] - r["reported"]) / r["reported"] for r in later]
    under = max(later, key=lambda r: r["reported"] - r["tokens"])
    passed = sum(r["tokens"] <= r["limit"] < r["reported"] for r in records)
    within = sum(e <= 0.05 for e in errors)
    gap = under["reported"] - under["tokens"]
    return [
        name,
        f"{within}/{len(later)} ({within / len(later):.1%})",
        f"{statistics.median(errors):.1%} / {statistics.fmean(errors):.1%}",
        f"{gap} ({gap / under['reported']:.1%})",
        str(passed),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print one row per rule."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ratio_rules")
    parser.add_argument("record", type=Path, help="the --record file of a --replay run")
    args = parser.parse_args(argv)
    records: list[Record] = json.loads(args.record.read_text())
    if not records or not records[0]["parts"]:
        msg = "no calls with parts: pass the --record file of `benchmarks.llama_cpp --replay`"
        raise SystemExit(msg)
    print_table(
        f"Calibration rules replayed on {len(records)} calls (after 10 calls of each thread)",
        ["rule", "within 5%", "median / mean error", "largest under-count", "over the limit"],
        [row(name, replayed(rule, records)) for name, rule in RULES.items()],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
