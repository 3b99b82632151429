"""The frontier: our cost and next-step recall under neighbouring settings, beside the anchors.

`python -m benchmarks.cost_sweep [--workload NAME ...] [--plot PATH] [--only TEXT ...]
[--halves]` (also the `frontier` section of `python -m benchmarks`, which `make bench` runs).
`--only` replays the defaults and the settings whose label holds one of the texts (the anchors
always run); `--halves` also prints each half of the runs apart, as the cost section splits
them, so that a setting chosen on one half is judged on the other.

The cost section's conditions (same budget, counter, summarizer and runs as
`python -m benchmarks cost`; the summary condition, `--summaries`, in each table's title). Our
system runs once per setting, one setting changed per row from the defaults (and the defaults
of the previous release, for reference); the valid anchors run once each. Each table lists
cost and recall side by side; the plot puts every row of every workload on the plane of
effective cost against next-step recall, so the frontier shows.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import trajectories
from benchmarks._table import fmt_int, print_table
from benchmarks.cost import QUICK, WORKLOADS, WorkloadSpec, _model, our_budget, systems
from benchmarks.pipeline import Aggregate, Ours
from benchmarks.replay import System, condition_note, replay, summaries_of
from langgraph_ctx_tools.replay.settings import SETTINGS, Setting


def _ours(spec: WorkloadSpec, setting: Setting, summaries: str) -> Callable[[], Ours]:
    budget = dataclasses.replace(our_budget(spec), **setting.budget_changes())
    strategies = setting.strategy_list()
    return lambda: Ours(
        f"ours: {setting.label}",
        strategies=strategies,
        archive=True,
        model=_model(spec.limit, summaries),
        budget=budget,
        options=setting.manager_options(),
    )


def _valid(a: Aggregate) -> bool:
    return a.total("invalid") == 0 and a.total("overruns") == 0 and a.total("errors") == 0


def _recall(a: Aggregate, kind: str = "recall") -> float | None:
    total = a.total(f"{kind}_total")
    return a.total(f"{kind}_hits") / total if total else None


def _percent(share: float | None) -> str:
    return f"{100 * share:.1f}%" if share is not None else "-"


def _chosen(only: Sequence[str]) -> list[Setting]:
    """The defaults and the settings whose label holds one of `only` (every one when empty)."""
    if not only:
        return list(SETTINGS)
    return [s for s in SETTINGS if s.is_defaults or any(text in s.label for text in only)]


def sweep(
    spec: WorkloadSpec,
    summaries: str = "same",
    *,
    only: Sequence[str] = (),
    halves: bool = False,
) -> dict[str, Aggregate] | None:
    """Replay ours under each setting and every anchor; print one table; return the rows.

    Every system that summarizes gets a fresh summarizer of the condition `summaries`.
    `only`: replay the defaults and the settings whose label holds one of these texts;
    `halves`: also print each half of the runs apart (`_halves`).
    """
    runs = spec.load()
    if not runs:
        print(f"\n{spec.name}: skipped (no recorded runs in data/trajectories)")
        return None
    aggs: dict[str, Aggregate] = {}
    facts_total = sum(len(facts) for _, _, facts in runs)
    settings = _chosen(only)
    for _, messages, facts in runs:
        makers: list[Callable[[], System]] = [_ours(spec, s, summaries) for s in settings]
        # the anchors, as the cost section runs them
        makers += systems(spec, facts, summaries=summaries)[1:]
        for make in makers:
            result = replay(make(), messages, limit=spec.limit, facts=list(facts), providers=True)
            aggs.setdefault(result.name, Aggregate(result.name)).runs.append(result)
    anchors = [a for name, a in aggs.items() if not name.startswith("ours") and _valid(a)]
    cheapest = min((a.total("effective_cost") for a in anchors), default=None)
    rows = []
    for a in aggs.values():
        cost = a.total("effective_cost")
        recall = _recall(a)
        rows.append(
            [
                a.name,
                fmt_int(round(cost)),
                f"{cost / cheapest:.2f}x" if cheapest else "-",
                _percent(recall),
                _percent(_recall(a, "strict")),
                fmt_int(
                    int(a.total("summarizer_input_tokens") + a.total("summarizer_output_tokens"))
                ),
                f"{int(a.total('facts_visible'))}/{facts_total}" if facts_total else "-",
                f"{a.share():.2f}%",
                "valid" if _valid(a) else "not valid",
            ]
        )
    print_table(
        f"cost and next-step recall: {spec.name}, limit {spec.limit:,};"
        f" {condition_note(summaries)}",
        [
            "system",
            "eff. cost",
            "vs cheapest valid anchor",
            "next-step recall",
            "recall, paths and dotted names",
            "summ. tokens",
            "facts",
            "cache-reusable",
            "validity",
        ],
        rows,
    )
    if halves and len(runs) > 1:
        _halves(spec, aggs, summaries)
    return aggs


def _halves(spec: WorkloadSpec, aggs: dict[str, Aggregate], summaries: str) -> None:
    """Every row on each half of the runs (alternate runs in load order, as the cost section
    splits them), beside that half's cheapest valid anchor: a setting chosen on one half is
    judged on the other."""
    rows = []
    for half, parity in (("A (runs 1, 3, 5, ...)", 0), ("B (runs 2, 4, 6, ...)", 1)):
        parts = [
            Aggregate(a.name, [r for i, r in enumerate(a.runs) if i % 2 == parity])
            for a in aggs.values()
        ]
        cheapest = min(
            (
                p.total("effective_cost")
                for p in parts
                if not p.name.startswith("ours") and _valid(p)
            ),
            default=None,
        )
        for p in parts:
            cost = p.total("effective_cost")
            rows.append(
                [
                    half,
                    p.name,
                    fmt_int(round(cost)),
                    f"{cost / cheapest:.3f}x" if cheapest else "-",
                    _percent(_recall(p)),
                    f"{p.share():.2f}%",
                    "valid" if _valid(p) else "not valid",
                ]
            )
    print_table(
        f"{spec.name}: each half of the runs; {condition_note(summaries)}",
        [
            "runs",
            "system",
            "eff. cost",
            "vs cheapest valid anchor of these runs",
            "next-step recall",
            "cache-reusable",
            "validity",
        ],
        rows,
    )


def plot(results: dict[str, dict[str, Aggregate]], path: Path, summaries: str = "same") -> None:
    """Effective cost against next-step recall, one panel per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 5.5), squeeze=False)
    for ax, (workload, aggs) in zip(axes[0], results.items(), strict=True):
        for name, a in aggs.items():
            recall = _recall(a)
            if recall is None:
                continue
            ours = name.startswith("ours")
            marker = "o" if ours else ("s" if _valid(a) else "x")
            color = "tab:blue" if ours else ("tab:orange" if _valid(a) else "tab:gray")
            size, layer = (90 if ours else 60), 2
            if name == "ours: defaults":  # on top of settings that land on the same point
                color, marker, size, layer = "tab:red", "*", 220, 3
            cost = a.total("effective_cost") / 1e6
            ax.scatter(cost, 100 * recall, marker=marker, color=color, s=size, zorder=layer)
            ax.annotate(
                name.removeprefix("ours: "),
                (cost, 100 * recall),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
        ax.set_title(workload, fontsize=10)
        ax.set_xlabel("effective cost (M tokens), lower is better")
        ax.set_ylabel("next-step recall (%), higher is better")
        ax.grid(alpha=0.3)
    fig.suptitle(
        "langgraph-ctx settings (blue, defaults red) against the anchors "
        f"(orange: valid, grey: not valid); {condition_note(summaries)}",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"frontier plot written to {path}")


DEFAULT_PLOT = Path(__file__).resolve().parent / "results" / "frontier.png"
"""Where `make bench` leaves the plot (a folder git ignores)."""


def run(args: argparse.Namespace) -> None:
    """The `frontier` section: the sweep on the real runs (the synthetic run on a clone)."""
    names: Sequence[str] = getattr(args, "workload", None) or ["real8k", "real32k"]
    specs = [WORKLOADS[name] for name in names]
    if getattr(args, "quick", False) and not getattr(args, "workload", None):
        specs = [QUICK]
    warnings.filterwarnings("ignore", message="Failed to trim messages")
    results, summaries = {}, summaries_of(args)
    only: Sequence[str] = getattr(args, "only", None) or ()
    halves = bool(getattr(args, "halves", False))
    for spec in specs:
        aggs = sweep(spec, summaries, only=only, halves=halves)
        if aggs is None and WORKLOADS["synthetic"].name not in results:
            spec = WORKLOADS["synthetic"]  # a plain clone: the seeded run stands in
            aggs = sweep(spec, summaries, only=only, halves=halves)
        if aggs is not None:
            results[spec.name] = aggs
    if results:
        plot(results, Path(getattr(args, "plot", None) or DEFAULT_PLOT), summaries)
    print("validity: no prompt over the limit, none a provider's converter rejects, no error")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep on the chosen workloads (default the two real ones) and draw the plot."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost_sweep")
    parser.add_argument("--workload", action="append", choices=list(WORKLOADS))
    parser.add_argument("--plot", default=None, help=f"where to write the plot ({DEFAULT_PLOT})")
    parser.add_argument("--quick", action="store_true", help="the synthetic run only")
    parser.add_argument(
        "--summaries", choices=["same", "shape"], default="same", help="every row's summarizer"
    )
    parser.add_argument(
        "--runs",
        choices=list(trajectories.RUN_SETS),
        default="all",
        help="recorded runs: all 45 (default), or shared: the 19 of the figures before issue 53",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="replay the defaults and the settings whose label holds TEXT (repeatable)",
    )
    parser.add_argument(
        "--halves", action="store_true", help="also each half of the runs apart (as cost does)"
    )
    args = parser.parse_args(argv)
    trajectories.use_runs(args.runs)
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
