"""Strategies: each owns one algorithm; a build runs them in the order of its list.

The default list, and what each does when the prompt grows (DESIGN part 2)::

    DropMemory()            over the limit: retrieved memory leaves first (and comes back
                            when the strategies after it made room)
    PruneToolOutputs()      over the trigger: old tool outputs become placeholders
    Compaction()            over the trigger: large outputs go to the archive (needs one);
                            an output over a tenth of the limit goes there as it arrives
    SlidingWindow()         over the trigger: shrink a turn at a time, pruning again after
                            each shrink; with summarize=True, what leaves is summarized

`DynamicSummarization` and `EntityExtraction` run on every build; put them first. A strategy
of your own is any object with `apply(view)` (see `Strategy`); put it where it belongs in the
list, e.g. `[KeepLastResults("grep"), *default_strategies()]`.
"""

from __future__ import annotations

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
from langgraph_ctx.strategies.summaries import DynamicSummarization, summarize_span
from langgraph_ctx.strategies.window import SlidingWindow

for _name, _cls in {
    "drop_memory": DropMemory,
    "prune_tool_outputs": PruneToolOutputs,
    "compaction": Compaction,
    "sliding_window": SlidingWindow,
    "dynamic_summarization": DynamicSummarization,
    "entity_extraction": EntityExtraction,
}.items():
    register_strategy(_name, _cls)


def default_strategies(*, summarize: bool = True) -> list[Strategy]:
    """The default list: drop memory, prune, compact, then the sliding window.

    `ContextMemory` uses it as it is; `ContextManager` with `summarize=False`.

    Args:
        summarize: Summarize what leaves the window (`SlidingWindow(summarize=True)`).
    """
    return [
        DropMemory(),
        PruneToolOutputs(),
        Compaction(on_arrival=0.1),
        SlidingWindow(summarize=summarize),
    ]


__all__ = [
    "Compaction",
    "DropMemory",
    "DynamicSummarization",
    "EntityExtraction",
    "PruneToolOutputs",
    "SlidingWindow",
    "Strategy",
    "apply_strategy",
    "default_strategies",
    "register_strategy",
    "strategies_from_config",
    "strategy_from_config",
    "summarize_span",
]
