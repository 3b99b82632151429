"""The sliding window: the newest history that fits, optionally summarizing what leaves it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.checks import check_number
from langgraph_ctx.strategies.ahead import accept_tokens, plan_prepare, take_prepared
from langgraph_ctx.strategies.base import check_field_types
from langgraph_ctx.strategies.pruning import PruneToolOutputs
from langgraph_ctx.strategies.summaries import Reading, summarize_span, summary_goal

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


@dataclass(frozen=True, kw_only=True, slots=True)
class SlidingWindow:
    """Over the trigger, shrink the history one turn (or block) at a time, down to the target.

    After each shrink, the `PruneToolOutputs` of the build's list run again (a new attempt).
    With `summarize`, what leaves the window is written to the archive (the insurance dump)
    and folded into the running summary at the first shrink that fits; the window then cuts
    to the budget's lower `summary_target`, so the summary is rare and the prompt stays short.
    When even the newest turn does not fit the limit, its task gives way to a short note.

    With `prepare_at` the next summary is prepared in the background once the prompt passes
    that share of the limit, and taken when the trigger is reached (`strategies.ahead`).
    """

    summarize: bool = False
    """Summarize what leaves the window (auto-compaction)."""
    prepare_at: float | None = None
    """With `summarize`: share of the limit from which the next summary is prepared in the
    background, below the budget's `trigger` (e.g. 0.85 under 0.9); None makes it when the
    trigger is reached. Takes effect in a `ContextManager` (it keeps the preparations)."""
    quote_share: float = 0.0
    """With `summarize`: the share of the room the summary may spend quoting, verbatim, the
    tool-output lines of what it replaces that a later model message used (paths, names, ids
    the agent was working with), whatever the summarizer kept. The room is what the limit
    leaves above the system prompt, tool schemas and pinned task (`PromptView.room_share`):
    in a small window a long task leaves less to share. 0: no quotes."""
    quote_repeats: bool = False
    """With `quote_share`: also quote a used line whose names a quoted line already carries
    (every used line, while room is left). By default each quoted line brings a name no other
    quoted line carries: one line shows a name as well as ten, so a small window's quotes
    cover more of the names the agent comes back to, and a large one's cost less."""
    summarize_shown: bool = False
    """With `summarize`: the summarizer reads what leaves as the prompt showed it (a compacted
    output as its excerpt) instead of the originals. Much cheaper; a fact only in the hidden
    lines of a compacted output then stays in the archive (`recall`) but not in the summary."""
    read_chars: int | None = None
    """With `summarize_shown`: a tool output the summarizer reads is cut to its first and last
    two lines and the lines a later model message used, up to this many characters of them
    (`Reading.output_chars`); those lines are what `quote_share` quotes verbatim. None: as
    the prompt showed it."""

    def __post_init__(self) -> None:
        check_field_types(self)
        share = "a share of the limit"
        check_number("quote_share", self.quote_share, ge=0, le=1, example=0.12, note=share)
        check_number(
            "prepare_at",
            self.prepare_at,
            gt=0,
            lt=1,
            optional=True,
            example=0.85,
            owner="SlidingWindow",
            note="between 0 and the budget's trigger, e.g. under trigger=0.9",
        )

    def apply(self, view: PromptView) -> Plan[None]:
        """Shrink until the prompt is at or under the target."""
        prune_again = [s for s in view.strategies if isinstance(s, PruneToolOutputs)]
        prepare_at = self.prepare_at if self.summarize else None
        reading = Reading(output_chars=self.read_chars) if self.summarize_shown else None
        # What leaves is folded into the summary as one kind of step, quoted and read alike
        # whether it is taken prepared, summarized at the first shrink that fits, or at the end.
        fold = partial(
            summarize_span,
            view,
            kind="auto_compact",
            quote_chars=view.room_share(self.quote_share) * _CHARS_PER_TOKEN,
            quote_repeats=self.quote_repeats,
            reading=reading,
        )
        if not view.over_trigger():
            if prepare_at is not None:
                yield from plan_prepare(
                    view, prepare_at=prepare_at, pruners=prune_again, reading=reading
                )
            return
        if view.tokens <= view.goal:
            return  # earlier strategies (pruning, compaction) were enough
        # Past the trigger the cut is made in this build, with or without a preparation:
        # this build's pruning and compaction already broke the cached prefix, and a cut
        # made a call or two later would break it again (`strategies.ahead`).
        auto = self.summarize
        pending: list[BaseMessage] = []
        # What leaves is summarized: cut to the (lower) summary target, leaving room for the
        # summary that will land, so one summarizer call usually suffices.
        final_goal = view.summary_goal if auto else view.goal
        goal = summary_goal(view) if auto else view.goal
        summarized = False
        if prepare_at is not None:
            taken = yield from take_prepared(view, pruners=prune_again)
            pending = taken.pending
            if taken.summarize is not None:
                yield from fold(pending, summarize=taken.summarize)
                _annotate(view, taken.note)
                summarized, pending = True, []
                goal = accept_tokens(view)  # what came since the preparation stays
            elif taken.note:
                view.record("skip", view.tokens, detail={"reason": taken.note["ahead"]})
        while view.tokens > goal:
            dropped = view.shrink_recorded()
            if dropped is None:
                break
            pending.extend(dropped)
            for pruner in prune_again:
                yield from pruner.apply(view)
            if auto and not summarized and view.tokens <= goal and pending:
                yield from fold(pending)
                summarized = True
                pending, goal = [], final_goal  # the summary has landed: the real goal again
        # Whatever left after the first summary is folded in once more at the end, so a build
        # calls the summarizer at most twice.
        if auto and pending:
            yield from fold(pending)
        if view.tokens > view.budget.limit:
            view.drop_task()


_CHARS_PER_TOKEN = 3
"""Characters a quoted line takes per token, rounded down (code and logs run 3 to 4)."""


def _annotate(view: PromptView, note: dict[str, object]) -> None:
    """Say on the summary's decision whether the prepared summary was used."""
    decision = view.report.decisions[-1] if view.report.decisions else None
    if decision is not None and decision.kind == "auto_compact" and note.get("ahead"):
        decision.detail["ahead"] = note["ahead"]
