"""`python -m benchmarks.cost_sweep [--workload NAME ...]`: our cost under other settings.

The cost section's conditions (same budget, counter, summarizer and runs as
`python -m benchmarks cost`), our system alone, with one setting changed per row: the budget's
trigger, the on-arrival compaction floor, `protect_turns`. It shows where the defaults sit
among their neighbours; the anchors' figures are in the cost section's tables, and "vs default"
compares each row with our default row of the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._table import fmt_int, print_table
from benchmarks.cost import WORKLOADS, WorkloadSpec, _model, our_budget
from benchmarks.pipeline import Aggregate, Ours
from benchmarks.replay import replay
from langgraph_ctx.strategies import default_strategies

Setting = tuple[str, dict[str, Any], dict[str, Any]]
"""A row: its label, the budget's keyword arguments, the strategies' keyword arguments."""

SETTINGS: list[Setting] = [
    ("defaults", {}, {}),
    ("trigger 0.7", {"trigger": 0.7}, {}),
    ("trigger 0.5", {"trigger": 0.5}, {}),
    ("trigger 0.35", {"trigger": 0.35}, {}),
    ("on-arrival floor 1,000 tokens", {}, {"arrival_min_tokens": 1_000}),
    ("no on-arrival floor", {}, {"arrival_min_tokens": 0}),
    ("protect_turns=0", {}, {"protect_turns": 0}),
]


def _strategies(**changes: Any) -> list[Any]:
    """`default_strategies()` with `changes` made to the strategies that have those fields."""
    out = []
    for strategy in default_strategies():
        names = {f.name for f in dataclasses.fields(strategy)}
        mine = {k: v for k, v in changes.items() if k in names}
        out.append(dataclasses.replace(strategy, **mine) if mine else strategy)
    return out


def _ours(spec: WorkloadSpec, setting: Setting, facts: dict[str, str]) -> Callable[[], Ours]:
    label, budget_kw, strategy_kw = setting
    budget = our_budget(spec, trigger=budget_kw.get("trigger"))
    return lambda: Ours(
        label,
        strategies=_strategies(**strategy_kw),
        archive=True,
        model=_model(spec.limit, facts),
        budget=budget,
    )


def sweep(spec: WorkloadSpec) -> None:
    """Replay our system under each setting on the workload's runs; print one table."""
    runs = spec.load()
    if not runs:
        print(f"\n{spec.name}: skipped (no ../shared/data/trajectories)")
        return
    aggs = {label: Aggregate(label) for label, _, _ in SETTINGS}
    facts_total = sum(len(facts) for _, _, facts in runs)
    for _, messages, facts in runs:
        for setting in SETTINGS:
            result = replay(
                _ours(spec, setting, facts)(),
                messages,
                limit=spec.limit,
                facts=list(facts),
                providers=True,
            )
            aggs[setting[0]].runs.append(result)
    default = aggs["defaults"].total("effective_cost")
    rows = [
        [
            a.name,
            fmt_int(round(a.total("effective_cost"))),
            f"{a.total('effective_cost') / default:.2f}x",
            fmt_int(int(a.total("summarizer_input_tokens"))),
            str(int(a.total("summarizer_calls"))),
            f"{int(a.total('facts_visible'))}/{facts_total}" if facts_total else "-",
            str(int(a.total("errors") + a.total("overruns") + a.total("invalid"))),
        ]
        for a in aggs.values()
    ]
    print_table(
        f"ours under other settings: {spec.name}, limit {spec.limit:,}",
        ["setting", "eff. cost", "vs default", "summ. input", "summ. calls", "facts", "problems"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep on the chosen workloads (default all)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost_sweep")
    parser.add_argument("--workload", action="append", choices=list(WORKLOADS))
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="Failed to trim messages")
    for name in args.workload or list(WORKLOADS):
        sweep(WORKLOADS[name])
    print("problems = errors + prompts over the limit + prompts a provider's converter rejects")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
