"""The sliding window: the newest history that fits, optionally summarizing what leaves it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.strategies.base import check_field_types
from langgraph_ctx.strategies.pruning import PruneToolOutputs
from langgraph_ctx.strategies.summaries import summarize_span

if TYPE_CHECKING:
    from langgraph_ctx.view import PromptView


@dataclass(frozen=True, kw_only=True, slots=True)
class SlidingWindow:
    """Over the trigger, shrink the history one turn (or block) at a time, down to the target.

    After each shrink, the `PruneToolOutputs` of the build's list run again (a new attempt).
    With `summarize`, what leaves the window is written to the archive (the insurance dump)
    and folded into the running summary at the first shrink that fits; the window then cuts
    to the budget's lower `summary_target`, so the summary is rare and the prompt stays short.
    When even the newest turn does not fit the limit, its task gives way to a short note.
    """

    summarize: bool = False
    """Summarize what leaves the window (auto-compaction)."""

    def __post_init__(self) -> None:
        check_field_types(self)

    def apply(self, view: PromptView) -> Plan[None]:
        """Shrink until the prompt is at or under the target."""
        if not view.over_trigger() or view.tokens <= view.goal:
            return  # earlier strategies (pruning, compaction) were enough
        auto = self.summarize
        prune_again = [s for s in view.strategies if isinstance(s, PruneToolOutputs)]
        pending: list[BaseMessage] = []
        # What leaves is summarized: cut to the (lower) summary target, leaving room for the
        # summary that will land, so one summarizer call usually suffices.
        final_goal = min(view.goal, view.budget.summary_target_tokens) if auto else view.goal
        # The reserve never takes more than half the goal: in a small window the summary gets
        # cut to fit instead of the window being emptied to make room for it.
        goal = final_goal - (min(_summary_reserve(view), final_goal // 2) if auto else 0)
        summarized = False
        while view.tokens > goal:
            before = view.tokens
            dropped = view.shrink_once()
            if dropped is None:
                break
            pending.extend(dropped)
            view.record(
                "shrink",
                before,
                message_ids=[m.id or "" for m in dropped],
                detail={"messages": len(dropped)},
            )
            for pruner in prune_again:
                yield from pruner.apply(view)
            if auto and not summarized and view.tokens <= goal and pending:
                yield from summarize_span(view, pending, kind="auto_compact")
                summarized = True
                pending, goal = [], final_goal  # the summary has landed: the real goal again
        # Whatever left after the first summary is folded in once more at the end, so a build
        # calls the summarizer at most twice.
        if auto and pending:
            yield from summarize_span(view, pending, kind="auto_compact")
        if view.tokens > view.budget.limit:
            view.drop_task()


def _summary_reserve(view: PromptView) -> int:
    # The summary that will land: at least today's, at most what a summarizer may write.
    current = view.cost(view.summary_message())
    return max(current, min(1_024, view.budget.limit // 10))
