"""The first build on a long history (issue 13 item 10): adopting the package on a thread.

A thread that grew without `langgraph_ctx` has no ledger, so its first build starts from the
whole history and the window shrinks turn by turn (hundreds of times) down to the target. This
table times that build at 1,000, 4,000, 8,000 and 20,000 messages (the default `max_messages`),
CPU seconds, best of three (one, and only the first two sizes, with `--quick`), after a warm-up
build (imports, tokenizer tables). Later builds start from the ledger's window and are timed by
the `pipeline` section.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from benchmarks._table import fmt_duration, fmt_int, print_table
from benchmarks.replay import make_model
from benchmarks.synthetic import generate_run
from benchmarks.tokens import synthetic_history
from langgraph_ctx import ContextManager
from langgraph_ctx.archive import Archive, StoreBackend
from langgraph_ctx.strategies import default_strategies
from langgraph_ctx.summaries.summarizer import Summarizer

SIZES = (1_000, 4_000, 8_000, 20_000)
WINDOW = 32_000


def _plain() -> ContextManager:
    return ContextManager(
        context_window_tokens=WINDOW, strategies=default_strategies(summarize=False)
    )


def _summarizing() -> ContextManager:
    return ContextManager(
        context_window_tokens=WINDOW,
        strategies=default_strategies(),
        archive=Archive(StoreBackend(InMemoryStore()), thread_id="first-build"),
        summarizer=Summarizer(model=make_model(WINDOW), timeout_seconds=None),
    )


def _cpu(make: Callable[[], ContextManager], history: list[BaseMessage], repeat: int) -> Any:
    """Best CPU time of `repeat` first builds (a fresh manager each) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        manager = make()
        started = time.process_time()
        result = manager.build(history)
        best = min(best, time.process_time() - started)
    return best, result


def first_build(*, quick: bool) -> None:
    """Print the first-build table."""
    repeat = 1 if quick else 3
    _plain().build(synthetic_history(200))  # warm-up: imports and tokenizer tables
    rows = []
    for n in SIZES[:2] if quick else SIZES:
        histories = {
            "short turns": synthetic_history(n),
            "long turns": generate_run(n, seed=1).messages[:n],
        }
        for shape, history in histories.items():
            plain, result = _cpu(_plain, history, repeat)
            summarizing, _ = _cpu(_summarizing, history, repeat)
            shrinks = sum(d.kind == "shrink" for d in result.report.decisions)
            rows.append(
                [
                    f"{fmt_int(n)} messages, {shape}",
                    fmt_int(shrinks),
                    fmt_duration(plain),
                    fmt_duration(summarizing),
                ]
            )
    print_table(
        f"First build on a long history (window {WINDOW:,}, no ledger yet)",
        ["history", "shrinks", "default, no summary", "default + archive + summarizer"],
        rows,
        notes=[
            "CPU time of ContextManager.build on the whole history, best of "
            f"{repeat}; short turns: benchmarks.tokens.synthetic_history (2-12 steps a turn);"
            " long turns: benchmarks.synthetic.generate_run (about 400 messages a turn).",
            "default, no summary: default_strategies(summarize=False); default + archive +"
            " summarizer: default_strategies() with Archive(StoreBackend(InMemoryStore())) and"
            " Summarizer(model=FactEchoModel).",
            "Before issue 13 item 10 (each shrink re-split the window and re-ran pruning over it)"
            " 8,000 messages took 22-36 s; the work is now near-linear in the history.",
        ],
    )
