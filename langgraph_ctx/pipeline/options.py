"""The options of a `ContextManager`, checked and made ready once, when it is created.

A thread-bound archive, the summaries prepared ahead (`prepare_at` on each summarizing window)
and the summarizer the manager builds or is given. Plain values (numbers, flags, lists) are
checked by `langgraph_ctx.checks`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph_ctx.checks import check_type
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import (
    SlidingWindow,
    Strategy,
)
from langgraph_ctx.summaries.preparer import SummaryPreparer
from langgraph_ctx.summaries.slots import SummarySlots
from langgraph_ctx.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langgraph_ctx.summaries.summarizer import Summarizer


def check_archive(archive: Any) -> None:
    """Raise `ConfigError` unless `archive` is `None` or an `Archive`."""
    from langgraph_ctx.archive.archive import Archive

    check_type(
        "archive",
        archive,
        Archive,
        rule="an Archive bound to a thread",
        optional=True,
        example="Archive(DirectoryBackend(path), thread_id=...)",
        note="or Archive(store, thread_id=...); ContextMemory(archive=path) takes a directory",
    )


def prepare_ahead(
    strategies: list[Strategy],
    budget: ContextBudget,
    prepare: bool,
    slots: SummarySlots | None = None,
) -> tuple[list[Strategy], SummaryPreparer | None]:
    """The strategies with `prepare_at` set (when `prepare`), and a preparer when one needs it.

    The preparer's summarizer calls hold `slots` (the manager's cap; None: a default one).

    Raises:
        ConfigError: `prepare` without a summarizing window, or a `prepare_at` not below the
            budget's trigger.
    """
    default = round(budget.trigger - 0.05, 4) if budget.trigger > 0.1 else budget.trigger / 2
    out: list[Strategy] = []
    for strategy in strategies:
        if isinstance(strategy, SlidingWindow) and strategy.summarize:
            if prepare and strategy.prepare_at is None:
                strategy = dataclasses.replace(strategy, prepare_at=default)
            if strategy.prepare_at is not None and strategy.prepare_at >= budget.trigger:
                msg = (
                    f"SlidingWindow(prepare_at={strategy.prepare_at}) must be below the "
                    f"budget's trigger ({budget.trigger}): the summary is prepared before the "
                    f"trigger is reached; use e.g. prepare_at={default}"
                )
                raise ConfigError(msg)
        out.append(strategy)
    wanted = [s for s in out if isinstance(s, SlidingWindow) and s.summarize and s.prepare_at]
    if prepare and not wanted:
        msg = (
            "prepare_summaries=True needs a window that summarizes: add "
            "SlidingWindow(summarize=True) to strategies, e.g. strategies=default_strategies()"
        )
        raise ConfigError(msg)
    return out, (SummaryPreparer(slots=slots) if wanted else None)


def coerce_summarizer(
    summarizer: Summarizer | BaseChatModel | None,
    redact: Callable[[str], str] | None,
    token_counter: TokenCounter,
) -> Summarizer:
    """The manager's summarizer (one it builds counts with the manager's counter).

    A `Summarizer` given whole is used as it is.
    """
    from langgraph_ctx.summaries.summarizer import Summarizer

    if summarizer is None:
        return Summarizer(redact=redact, token_counter=token_counter)
    if hasattr(summarizer, "invoke") and not isinstance(summarizer, Summarizer):
        return Summarizer(model=summarizer, redact=redact, token_counter=token_counter)
    check_type(
        "summarizer",
        summarizer,
        Summarizer,
        rule="a Summarizer or a chat model",
        example="Summarizer(model=...)",
    )
    if redact is None or summarizer.redact is redact:
        return summarizer
    if summarizer.redact is not None:
        msg = (
            "redact= is given twice, to ContextManager and to its Summarizer, with different "
            "functions; give it in one place"
        )
        raise ConfigError(msg)
    return dataclasses.replace(summarizer, redact=redact)
