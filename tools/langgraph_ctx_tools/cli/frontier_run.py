"""The `langgraph-ctx frontier` command: read the input, replay every setting, report.

Everything the input can get wrong is checked before the first replay (the files, the
database, the window, the output folders), so bad input gets one line and nothing written.
The table goes to stdout with a line defining the measures; `--json` writes the rows,
`--plot` draws cost against recall; the last line recommends a change only when it buys
something over the defaults, else keeps them and the line before names the runner-up
(`recommend`, `runner_up`), and says how to apply it (`apply_code`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import SystemMessage

from langgraph_ctx.errors import InputError
from langgraph_ctx_tools.cli.frontier_plot import plot_frontier
from langgraph_ctx_tools.cli.inputs import load_setting, read_text
from langgraph_ctx_tools.cli.output import Output, existing_folder, inert, plot_target
from langgraph_ctx_tools.cli.sources import (
    Thread,
    check_room,
    model_terms,
    recorded_files,
    threads_from_db,
    threads_from_files,
)
from langgraph_ctx_tools.replay.engine import RunNeeds
from langgraph_ctx_tools.replay.settings import (
    SETTINGS,
    Setting,
    apply_code,
    strategy_config,
)
from langgraph_ctx_tools.replay.summary_models import SUMMARY_CONDITIONS
from langgraph_ctx_tools.replay.tally import (
    ALTERNATIVES,
    MIN_COST_SAVING,
    MIN_RECALL_GAIN,
    Tally,
    Terms,
    recommend,
    replay_row,
    runner_up,
)

__all__ = ["run_frontier", "rows_of"]


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # too long for a file name, a NUL: it is the text itself
        return False


def _threads(args: argparse.Namespace, notes: list[str]) -> list[Thread]:
    if args.thread and not args.db:
        msg = "--thread names a thread of --db; pass --db PATH too"
        raise InputError(msg)
    if not args.inputs and not args.db:
        msg = "pass message JSON files or folders of them, or --db PATH (a checkpoint database)"
        raise InputError(msg)
    threads = threads_from_files(args.inputs) if args.inputs else []
    if args.db:
        threads += threads_from_db(str(args.db), args.thread, args.archive, notes)
    if args.system_prompt:
        text = args.system_prompt
        if _is_file(text):
            text = read_text(text, "system prompt")
        for thread in threads:
            if not any(isinstance(m, SystemMessage) for m in thread.messages):
                thread.messages.insert(0, SystemMessage(text, id="frontier-system"))
    return threads


def run_frontier(args: argparse.Namespace) -> int:
    """Run `langgraph-ctx frontier` (see `langgraph_ctx_tools.cli.commands` for the arguments)."""
    if args.plot is not None:
        plot_target(args.plot)
    if args.json is not None:
        existing_folder(args.json, "--json")
    settings: list[Setting] = [SETTINGS[0]] if args.no_neighbours else list(SETTINGS)
    settings += [load_setting(path) for path in args.setting or ()]
    notes: list[str] = []
    window, counter = model_terms(args.model, args.window)
    files = [f for p in args.inputs for f in (recorded_files(p) if p.is_dir() else [p])]
    size = sum(f.stat().st_size for f in files if f.is_file())
    if size > LARGE_INPUT_BYTES:  # a read that takes a while says so; bad input stays one line
        _say(f"reading {size / (1 << 20):,.0f} MB of input")
    threads = _threads(args, notes)
    if args.summarizer and args.summaries:
        msg = (
            f"--summaries {args.summaries} and --summarizer {args.summarizer} both choose the "
            "summarizer; pass one (--summarizer gives its model to every row)"
        )
        raise InputError(msg)
    summarizer = None
    if args.summarizer:
        from langgraph_ctx_tools.cli.playback import init_model

        summarizer = init_model(args.summarizer)
    terms = Terms(
        window, args.reserved, counter, summarizer, args.cache_price, args.summaries or "same"
    )
    check_room(threads, terms.limit, counter)
    for setting in settings:  # a budget field of a user's setting that this window refuses
        setting.budget_for(window, args.reserved)
    calls = sum(t.calls for t in threads)
    tallies = [Tally(s) for s in settings]
    if not args.no_alternatives:
        tallies += [Tally(None, alternative=a) for a in ALTERNATIVES]
    ready = [t for t in tallies if t.alternative is None or t.alternative.missing is None]
    others = (
        f" and {len(ready) - len(settings)} alternative(s)" if len(ready) > len(settings) else ""
    )
    _say(  # after every check of the input: an error is still the only line
        f"{len(threads)} thread(s), {calls:,} model calls; finding the names each next step "
        f"uses, then replaying {len(settings)} setting(s){others}"
    )
    needs = [RunNeeds.of(t.messages) for t in threads]
    with _progress(len(ready) * calls) as advance:
        for n, tally in enumerate(ready, 1):
            for thread, need in zip(threads, needs, strict=True):
                replay_row(tally, thread.messages, terms, needs=need, on_call=advance)
            advance(0, f"setting {n}/{len(ready)} done: {tally.label}")
    best = recommend(tallies, terms.cache_price, args.max_cost)
    model = f"{args.model}'s" if args.model else "the gpt-4o"
    summary = (
        f"every row's summarizer: {args.summarizer}"
        if args.summarizer
        else f"{SUMMARY_CONDITIONS[terms.summaries]} (no model called)"
    )
    out = Output()
    title = (
        f"frontier: {len(threads)} thread(s), {calls:,} model calls; window {window:,}, "
        f"reserved {args.reserved:,}; {model} counter; {summary}; cache price {terms.cache_price}"
    )
    rows = rows_of(tallies, best, terms, args.model)
    out.grid(title, _HEADER, [_cells(row) for row in rows])
    print(
        f"effective cost = uncached prompt tokens + {terms.cache_price} x cache-reusable ones + "
        "summarizer tokens; next-step recall = share of the names each next step used (from "
        "earlier tool output) whose lines the prompt still showed; one search = of those it no "
        "longer showed, the share one search_history call with the name finds (3 hits); "
        "restorable = share of what "
        "left the prompt given back byte for byte; * = recommended"
    )
    raised: dict[str, list[str]] = {}  # the first error of each setting, settings grouped
    for tally in tallies:
        for error, times in tally.errors.most_common(1):
            raised.setdefault(error, []).append(f"{tally.label} ({times} call(s))")
    for error, labels in raised.items():
        more = f" and {len(labels) - 1} more setting(s)" if len(labels) > 1 else ""
        notes.append(f"{labels[0]}{more} raised {error}")
    notes += [f"{r['setting']}: {r['missing']}" for r in rows if r["missing"]]
    notes += _fallback_notes(tallies, terms)
    for note in notes:
        out.note(note)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        out.note(f"rows written to {args.json}")
    if args.plot is not None:
        plot_frontier(rows, args.plot, title)
        out.note(f"plot written to {args.plot}")
    gaps = [t for t in threads if t.unreadable]
    for thread in gaps:
        out.note(f"thread {thread.name}: part of its history is unreadable: {thread.unreadable[0]}")
    if gaps:  # a replay of part of a thread measures another thread: nothing to recommend
        print(
            f"recommended: none: {len(gaps)} thread(s) could not be read whole, so the replay "
            "measured less than they hold; pass --archive DIR where their archive is",
            flush=True,
        )
        return 1
    print(_recommendation(best, tallies, terms, args), flush=True)
    return 0 if best is not None else 1


_HEADER = [
    "setting",
    "eff. cost",
    "vs defaults",
    "recall",
    "one search",
    "over budget",
    "invalid",
    "restorable",
]


def rows_of(
    tallies: Sequence[Tally], best: Tally | None, terms: Terms, model: str | None
) -> list[dict[str, Any]]:
    """The `--json` rows: one per setting, with how to apply it."""
    base = next((t for t in tallies if t.is_defaults), tallies[0])
    base_cost = base.cost(terms.cache_price)
    rows = []
    for tally in tallies:
        setting, cost = tally.setting, tally.cost(terms.cache_price)
        missing = tally.alternative.missing if tally.alternative is not None else None
        rows.append(
            {
                "setting": tally.label,
                "summaries": terms.condition,
                "alternative": tally.alternative is not None,
                "missing": missing,
                "cost": round(cost, 1),
                "cost_ratio": round(cost / base_cost, 4) if base_cost else None,
                "recall": None if tally.recall is None else round(tally.recall, 4),
                "one_search": None if tally.one_search is None else round(tally.one_search, 4),
                "search_hits": tally.search_hits,
                "search_total": tally.search_total,
                "over_budget": tally.over_budget,
                "refused": tally.refused,
                "invalid": tally.invalid,
                "restorable": None
                if tally.restorable_share is None
                else round(tally.restorable_share, 4),
                "removed": tally.removed,
                "calls": tally.calls,
                "tokens": tally.tokens,
                "reusable_tokens": tally.reusable,
                "summarizer_tokens": tally.summarizer_tokens,
                "summarizer_calls": tally.summarizer_calls,
                "summary_fallbacks": tally.summary_fallbacks,
                "recall_hits": tally.recall_hits,
                "recall_total": tally.recall_total,
                "strict_recall": None
                if not tally.strict_total
                else round(tally.strict_hits / tally.strict_total, 4),
                "defaults": tally.is_defaults,
                "recommended": tally is best,
                "budget": None if setting is None else setting.budget_changes(),
                "strategies": None if setting is None else strategy_config(setting.strategy_list()),
                "options": None if setting is None else setting.manager_options(),
                "apply": None
                if setting is None
                else apply_code(setting, window=terms.window, reserved=terms.reserved, model=model),
            }
        )
    return rows


def _fallback_notes(tallies: Sequence[Tally], terms: Terms) -> list[str]:
    """Rows of ours whose summaries our fallback wrote instead of the summarizer, grouped."""
    fell = [t for t in tallies if t.summary_fallbacks]
    if not fell:
        return []
    first = fell[0]
    more = f" and {len(fell) - 1} more setting(s)" if len(fell) > 1 else ""
    same = (
        "; under --summaries same the fallback is that summary itself, so only its source differs"
        if terms.condition == "same"
        else ""
    )
    return [
        f"{first.label}{more}: {first.summary_fallbacks} summary(ies) written by our deterministic "
        f"fallback after our validation rejected the summarizer's answer ({first.fallback_reason})"
        f"{same}"
    ]


def _tokens(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{round(value):,}"


def _cells(row: dict[str, Any]) -> list[str]:
    recall = row["recall"]
    if row["missing"]:  # the note under the table says how to install it
        return [row["setting"], "not installed", *["-"] * (len(_HEADER) - 2)]
    return [
        ("* " if row["recommended"] else "") + row["setting"],
        _tokens(row["cost"]),
        "-" if row["cost_ratio"] is None else f"{row['cost_ratio']:.3f}x",  # 0.997x, 1.002x
        "-" if recall is None else f"{100 * recall:.1f}%",
        "-" if row["one_search"] is None else f"{100 * row['one_search']:.1f}%",
        str(row["over_budget"]),
        str(row["invalid"]),
        "-" if row["restorable"] is None else f"{100 * row['restorable']:.0f}%",
    ]


def _recommendation(
    best: Tally | None, tallies: Sequence[Tally], terms: Terms, args: argparse.Namespace
) -> str:
    """The last line (and the runner-up's line before it when the defaults are kept)."""
    price = terms.cache_price
    base = next((t for t in tallies if t.is_defaults), None)
    if best is None and base is not None and base.within_budget:
        return (
            f"recommended: none within --max-cost {args.max_cost:g}x the defaults' cost "
            "(see the table); raise --max-cost"
        )
    if best is None:
        return (
            "recommended: none: every setting sent prompts over the budget or invalid ones "
            "(see the table); give the agent a larger --window or a smaller --reserved"
        )
    recall = (
        "-" if best.recall is None else f"{100 * best.recall:.1f}% of {best.recall_total:,} names"
    )
    fitting = [t.recall for t in tallies if t.within_budget and t.recall is not None and t.setting]
    top = f" (best {100 * max(fitting):.1f}%)" if fitting else ""
    assert best.setting is not None  # only a setting of ours is recommended
    code = apply_code(best.setting, window=terms.window, reserved=terms.reserved, model=args.model)
    others = [t for t in tallies if t.setting is not None and t is not base]
    if best is base and not others:  # --no-neighbours and no --setting: nothing to compare
        return (
            f"recommended: keep the defaults: cost {_tokens(base.cost(price))}, next-step recall "
            f"{recall}, no prompt over the budget; no other setting of ours was replayed (drop "
            f"--no-neighbours or add --setting FILE to compare); apply it: {code}"
        )
    if best is base:
        second = runner_up(tallies, base, price, args.max_cost)
        why = (
            f"runner-up: {second.label}: {_versus(second, base, price)}; not recommended: "
            f"{_shortfall(second, base, price, args.max_cost)}\n"
            if second is not None
            else "runner-up: none: every other setting shows less recall, or as much for no less\n"
        )
        return (
            f"{why}recommended: keep the defaults: cost {_tokens(base.cost(price))}, next-step "
            f"recall {recall}{top}, no prompt over the budget; no setting gains {_LEAST_GAIN} "
            f"within --max-cost {args.max_cost:g}x; apply it: {code}"
        )
    gain = "" if base is None else f" ({_versus(best, base, price)})"
    return (
        f"recommended: {best.label}: cost {_tokens(best.cost(price))}{gain}, next-step recall "
        f"{recall}{top}, no prompt over the budget{_reason(best, base, price, args.max_cost)}; "
        f"apply it: {code}"
    )


_LEAST_GAIN = (
    f"+{100 * MIN_RECALL_GAIN:g} point of recall or {100 * MIN_COST_SAVING:g}% of cost at no "
    "less recall"
)
"""The least gain `recommend` asks of a change (`buys_something`), as a line says it."""


def _versus(tally: Tally, base: Tally, price: float) -> str:
    """`tally` against the defaults: points of recall and the cost ratio, to 3 decimals."""
    points = 100 * ((tally.recall or 0.0) - (base.recall or 0.0))
    base_cost = base.cost(price)
    ratio = f"{tally.cost(price) / base_cost:.3f}x" if base_cost else "-"
    return f"{points:+.2f} points of recall at {ratio} the defaults' cost"


def _shortfall(tally: Tally, base: Tally, price: float, max_cost: float) -> str:
    """Why `tally` was not picked over the defaults (the rule is `recommend`'s)."""
    if tally.cost(price) > max_cost * base.cost(price) + 1e-9:
        return f"over --max-cost {max_cost:g}x (raise it to pick it)"
    return f"under the least gain ({_LEAST_GAIN})"


def _reason(best: Tally, base: Tally | None, price: float, max_cost: float) -> str:
    """Why the pick, and what a point of recall over the defaults costs."""
    if base is None or not base.within_budget or max_cost < 1:  # the defaults do not qualify
        return f" (the best recall within {max_cost:g}x the defaults' cost)"
    points = 100 * ((best.recall or 0.0) - (base.recall or 0.0))
    extra = best.cost(price) - base.cost(price)
    why = f" (it gains at least {_LEAST_GAIN} within {max_cost:g}x the defaults' cost)"
    if points <= 0:
        return why
    if extra <= 0:
        return f"{why}; it shows {points:.2f} points more than the defaults for less"
    return f"{why}; a point of recall over the defaults costs {_tokens(extra / points)}"


def _say(line: str) -> None:
    # A line may carry a name from the input (a setting's label from its file): inert.
    print(f"frontier: {inert(line)}", file=sys.stderr, flush=True)


LARGE_INPUT_BYTES = 50 << 20
"""Input files larger than this together get a line on stderr before they are read."""
PROGRESS_SECONDS = 10.0
"""Without a terminal, a progress line at least this often during a long replay."""


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[..., None]]:
    """`advance(n=1, line=None)`: a live bar on a terminal; otherwise lines on stderr.

    Without a terminal each `line` is printed, and the count of calls replayed at least every
    `PROGRESS_SECONDS`, so a long replay is never silent.
    """
    if not sys.stderr.isatty():
        done = 0
        last = time.monotonic()

        def plain(n: int = 1, line: str | None = None) -> None:
            nonlocal done, last
            done += n
            if line:
                _say(line)
            elif time.monotonic() - last >= PROGRESS_SECONDS:
                _say(f"replayed {done:,} of {total:,} model calls ({done / max(total, 1):.0%})")
            else:
                return
            last = time.monotonic()

        yield plain
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = [TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replaying", total=total)

        def live(n: int = 1, line: str | None = None) -> None:
            bar.update(task, advance=n)
            if line:
                bar.update(task, description=inert(line)[:60])

        yield live
