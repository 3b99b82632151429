"""`python -m benchmarks [section ...] [--quick]`: run benchmark sections, print tables.

To add a section, write a module with `run(args: argparse.Namespace) -> None` and add it to
`SECTIONS` below.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from benchmarks import (
    cost,
    cost_sweep,
    latency,
    load,
    pipeline,
    scale,
    search,
    search_floor,
    tokens,
    trajectories,
    view,
)
from benchmarks._progress import progress

Section = Callable[[argparse.Namespace], None]

SECTIONS: dict[str, Section] = {
    "tokens": tokens.run,
    "pipeline": pipeline.run,
    "compaction": pipeline.run_compaction,
    "summarization": pipeline.run_summarization,
    "cost": cost.run,
    "frontier": cost_sweep.run,
    "scale": scale.run,
    "latency": latency.run,
    "load": load.run,
    "search": search.run,
    "search_floor": search_floor.run,
    "view": view.run,
}
"""Section name -> its `run(args)`; sections run in this order when none are named."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Run langgraph_ctx benchmarks and print tables."
    )
    parser.add_argument(
        "sections",
        nargs="*",
        metavar="section",
        help=f"sections to run (default: all): {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer repetitions and sizes, for a fast check"
    )
    parser.add_argument(
        "--workload",
        action="append",
        choices=list(cost.WORKLOADS),
        help="cost section: run only this workload (repeatable; default all)",
    )
    parser.add_argument(
        "--trigger",
        type=float,
        default=None,
        help="cost section: our row's ContextBudget trigger (share of the limit; default 0.9)",
    )
    parser.add_argument(
        "--summaries",
        choices=["same", "shape", "reads"],
        default="same",
        help="sections comparing systems: every system's summarizer; same = the deterministic"
        " summary (default), shape = the conversation's shape only, no line of any tool output;"
        " reads (cost section) = a summarizer writing the planted facts it read",
    )
    parser.add_argument(
        "--runs",
        choices=list(trajectories.RUN_SETS),
        default="all",
        help="recorded runs to replay: all 45 (default), or shared: the 19 the figures before"
        " issue 53 were measured on",
    )
    parser.add_argument(
        "--plot",
        default=None,
        help="frontier section: where to write the cost/recall plot"
        " (default benchmarks/results/frontier.png)",
    )
    args = parser.parse_args(argv)
    trajectories.use_runs(args.runs)
    unknown = [name for name in args.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    names = args.sections or list(SECTIONS)
    if args.summaries == "reads" and names != ["cost"]:
        parser.error("--summaries reads is a condition of the cost section: run `cost` alone")
    for n, name in enumerate(names, 1):
        started = time.perf_counter()
        progress(f"section {n}/{len(names)}: {name}{' (quick)' if args.quick else ''}")
        print(f"\n### {name}{' (quick)' if args.quick else ''}", flush=True)
        SECTIONS[name](args)
        took = time.perf_counter() - started
        print(f"\n[{name}: {took:.1f} s]", flush=True)
        progress(f"section {name} done in {took:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
