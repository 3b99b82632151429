"""Strategies: each owns one algorithm; a build runs them in the order of its list.

The default list, and what each does when the prompt grows (DESIGN part 2)::

    DropMemory()            over the limit: retrieved memory leaves first (and comes back
                            when the strategies after it made room)
    Compaction()            over the trigger: older outputs go to the archive and show an
                            excerpt (the lines the agent used, head and tail); an output over
                            a tenth of the limit is excerpted as it arrives (needs an archive)
    ShortenTurns()          a model turn shows its first and last lines and short arguments
                            once the next turn follows (needs an archive)
    PruneToolOutputs()      over the trigger: old tool outputs become placeholders
    SlidingWindow()         over the trigger: shrink a turn at a time, pruning again after
                            each shrink; with summarize=True, what leaves is summarized and
                            the summary quotes the tool-output lines the agent used

`DynamicSummarization` and `EntityExtraction` run on every build; put them first. A strategy
of your own is any object with `apply(view)` (see `Strategy`); put it where it belongs in the
list, e.g. `[KeepLastResults("grep"), *default_strategies()]`.
"""

from __future__ import annotations

from langgraph_ctx.checks import check_bool
from langgraph_ctx.strategies.base import (
    Strategy,
    apply_strategy,
    register_strategy,
    strategies_from_config,
    strategy_from_config,
)
from langgraph_ctx.strategies.compaction import Compaction
from langgraph_ctx.strategies.entities import EntityExtraction
from langgraph_ctx.strategies.pruning import DropMemory, PruneToolOutputs
from langgraph_ctx.strategies.summaries import DynamicSummarization, SpanSummary, summarize_span
from langgraph_ctx.strategies.turns import ShortenTurns
from langgraph_ctx.strategies.window import SlidingWindow

for _name, _cls in {
    "drop_memory": DropMemory,
    "prune_tool_outputs": PruneToolOutputs,
    "compaction": Compaction,
    "sliding_window": SlidingWindow,
    "dynamic_summarization": DynamicSummarization,
    "entity_extraction": EntityExtraction,
    "shorten_turns": ShortenTurns,
}.items():
    register_strategy(_name, _cls)


def default_strategies(*, summarize: bool = True) -> list[Strategy]:
    """The default list: drop memory, excerpt outputs, shorten turns, prune, then the window.

    `ContextMemory` uses it as it is; `ContextManager` with `summarize=False` (without an
    archive, compaction and turn shortening do nothing: pruning and the window remain).

    What each default is for (the cost and next-step recall it buys are in the README's
    benchmark section): an output over a tenth of the limit is shown as its excerpt when it
    arrives, with the lines carrying names no earlier message showed (what it tells the agent
    that nothing else did), an older one once the prompt passes the trigger; a model turn of
    700 characters or more that called a tool is shown as its first and last line and its
    calls (arguments cut at 60 characters) from the first call after it, so between summaries
    the prompt only grows at its end and every call reuses the whole cached prefix; a summary
    reads what the prompt showed, each tool output as its first and last lines, and quotes the
    lines of tool output the agent used verbatim, each for a name no other quoted line
    carries, up to 0.22 of the room above the task: what an agent reuses after a fold is
    mostly a name it used before.

    Args:
        summarize: Summarize what leaves the window (`SlidingWindow(summarize=True)`).
    """
    check_bool("summarize", summarize)
    return [
        DropMemory(),
        Compaction(
            excerpt=True,
            excerpt_chars=800,
            min_chars=600,
            keep_last=1,
            keep_share=0.05,
            on_arrival=0.1,
            arrival_min_tokens=0,
            arrival_news=True,
        ),
        ShortenTurns(
            settle_after=0,
            keep_last=0,
            head_lines=1,
            tail_lines=1,
            max_arg_chars=60,
            min_chars=700,
        ),
        PruneToolOutputs(),
        SlidingWindow(summarize=summarize, quote_share=0.22, summarize_shown=True, read_chars=0),
    ]


__all__ = [
    "Compaction",
    "DropMemory",
    "DynamicSummarization",
    "EntityExtraction",
    "PruneToolOutputs",
    "ShortenTurns",
    "SlidingWindow",
    "SpanSummary",
    "Strategy",
    "apply_strategy",
    "default_strategies",
    "register_strategy",
    "strategies_from_config",
    "strategy_from_config",
    "summarize_span",
]
