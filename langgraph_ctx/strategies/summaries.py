"""Summaries: the insured running summary, and dynamic summarization of the oldest turns."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.checks import check_int
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages.base import is_summary_message
from langgraph_ctx.messages.content import get_tag, is_tool_output, text_of
from langgraph_ctx.prompt.excerpt import LaterUse, excerpt_lines, quoted_lines, render_excerpt
from langgraph_ctx.strategies.base import check_field_types

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView


def conversation_of(dropped: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What a summary of `dropped` covers: not a previous summary, not a repair's stand-in.

    Error results the pipeline made up for unanswered calls are not history: not summarized,
    not dumped.
    """
    return [m for m in dropped if not is_summary_message(m) and not get_tag(m).get("repair")]


def span_uses(view: PromptView, span: Sequence[BaseMessage]) -> tuple[dict[str, int], LaterUse]:
    """History positions by id, and the names model messages used from `span`'s first on.

    Worked out once per build and span (the history is fixed within a build): the summary's
    quoted lines and the summarizer's reading of the same span share it.
    """
    where = view.memo.get("positions")
    if where is None:
        where = view.memo["positions"] = {m.id: i for i, m in enumerate(view.history) if m.id}
    first = min((where.get(m.id or "", len(view.history)) for m in span), default=0)
    later = view.memo.get(("later_use", first))
    if later is None:
        later = view.memo[("later_use", first)] = LaterUse.of(view.history, first)
    return where, later


@dataclass(frozen=True, slots=True)
class Reading:
    """How the summarizer reads the messages a summary replaces (instead of the originals)."""

    shown: bool = True
    """As the prompt showed them: a compacted output as its excerpt, a shortened turn short."""
    output_chars: int | None = None
    """A tool output longer than this many characters (and than its shown form) is read as
    its first and last two lines and the lines a later model message used, up to this many
    characters of them: what the agent took from an output is what a summary needs of it,
    and the summary quotes those lines verbatim anyway (`quote_share`). None: as shown."""

    def describe(self) -> str:
        """What the summarizer read, for the report's decision (`detail["read"]`)."""
        if not self.shown:
            return "originals"
        if self.output_chars is None:
            return "as shown"
        return f"as shown, tool outputs as their used lines (up to {self.output_chars} chars)"

    def of(self, view: PromptView, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """`messages` as the summarizer reads them."""
        if not self.shown:
            return list(messages)
        limit = self.output_chars
        if limit is None:
            return [view.shown(m) for m in messages]
        where, later = span_uses(view, messages)
        out = []
        for message in messages:
            shown = view.shown(message)
            text = text_of(message)
            if is_tool_output(message) and len(text) > limit and len(text_of(shown)) > limit:
                index = where.get(message.id or "", -1)
                kept = excerpt_lines(text, index=index, later=later, max_chars=limit)
                shown = message.model_copy(update={"content": render_excerpt(text, kept)})
            out.append(shown)
        return out


class SpanSummary(enum.Enum):
    """What `summarize_span` did; true only when a summary was written."""

    WRITTEN = "written"
    """The summary covers the span."""
    SKIPPED = "skipped"
    """Nothing to summarize (only a previous summary), or no room: the kept window alone is
    over the trigger, or no summary fits within the limit. The budget needs the cut anyway."""
    UNAVAILABLE = "unavailable"
    """No summary can be written whatever the budget: no summarizer, or the insurance dump
    failed (nothing is summarized without its insurance)."""

    def __bool__(self) -> bool:
        """True for `WRITTEN`: `if (yield from summarize_span(...))` reads as before."""
        return self is SpanSummary.WRITTEN


ReadingPlan = Callable[[Callable[[], list[BaseMessage]], "str | None"], Plan[Any]]
"""`(read, previous) -> Plan[SummaryOutcome]`: `read()` gives the span as the summarizer reads
it, called only when the span is summarized now (not when a prepared summary is taken)."""


def summarize_span(
    view: PromptView,
    dropped: Sequence[BaseMessage],
    *,
    kind: Any,
    summarize: ReadingPlan | None = None,
    quote_chars: int = 0,
    quote_repeats: bool = False,
    reading: Reading | None = None,
) -> Plan[SpanSummary]:
    """Insurance dump, then a running summary of `dropped` folded into the ledger.

    Nothing is summarized when only a previous summary would be; the report says why.
    `summarize` replaces the resources' summarizer plan (a summary prepared ahead): it is
    given how to read the span, a function it calls only when it summarizes now (reading
    long outputs as their used lines is most of the time of taking a prepared summary).
    `quote_chars` > 0: the summary also quotes, verbatim, up to that many characters of the
    tool-output lines a later model message used (`langgraph_ctx.prompt.excerpt.quoted_lines`),
    whatever the summarizer kept, each line for a name no other quoted line carries (with
    `quote_repeats`, every used line while room is left). `reading`: how the summarizer reads
    the messages (`Reading`; None: the originals); the insurance dump and the archive hold
    every original whatever it reads. Returns what was done (`SpanSummary`, true when a
    summary was written).
    """
    conversation = conversation_of(dropped)
    if not conversation:
        reason = "only the previous summary would be summarized"
        view.record("skip", view.tokens, detail={"reason": reason})
        return SpanSummary.SKIPPED
    if view.tokens - view.cost(view.summary_message()) > view.trigger:
        # The kept window alone is over the trigger: the next call would cut and summarize
        # again, and again (thrash). The messages stay in state, uncovered: nothing is lost.
        view.record(
            "skip",
            view.tokens,
            message_ids=[m.id or "" for m in conversation],
            detail={"reason": "the kept window alone is over the trigger"},
        )
        return SpanSummary.SKIPPED
    if summarize is None:
        plain = view.resources.summarize
        if plain is None:
            view.record(kind, view.tokens, detail={"skipped": "no summarizer configured"})
            return SpanSummary.UNAVAILABLE

        def summarize(read: Callable[[], list[BaseMessage]], previous: str | None) -> Plan[Any]:
            return plain(read(), previous)

    dump_ref = None
    if view.resources.dump_messages is not None:
        try:
            dump_ref = yield from view.resources.dump_messages(list(conversation))
        except Exception as exc:  # nothing is summarized without its insurance
            view.record("skip", view.tokens, detail={"reason": f"insurance dump failed: {exc}"})
            return SpanSummary.UNAVAILABLE
    previous = (view.ledger.get("summary") or {}).get("text")

    # By default the summarizer reads the originals: what it does not see is lost from the
    # summary (not from the archive). Reading what the prompt showed costs far less.
    def read() -> list[BaseMessage]:
        return reading.of(view, conversation) if reading is not None else list(conversation)

    outcome = yield from summarize(read, previous)
    detail = {
        "dump_ref": dump_ref,
        "source": outcome.source,
        "model_calls": outcome.model_calls,
        "summarizer_input_tokens": outcome.input_tokens,
        "error": outcome.error,
        "read": reading.describe() if reading is not None else "originals",
    }
    quotes = _quotes(view, conversation, quote_chars, quote_repeats) if quote_chars > 0 else None
    fitted = view.fit_summary(outcome.text, quotes=quotes, dump_ref=dump_ref)
    ids = [m.id or "" for m in conversation]
    if fitted is None:  # the messages stay in state, uncovered: nothing is lost
        detail["reason"] = "no room for a summary within the limit"
        view.record("skip", view.tokens, message_ids=ids, detail=detail)
        return SpanSummary.SKIPPED
    text, kept = fitted
    if text != outcome.text:
        detail["cut_to_chars"] = len(text)
    if quotes and len(kept or ()) < len(quotes):
        detail["quotes_cut_to"] = len(kept or ())
    quotes = list(kept) if kept is not None else None
    before = view.tokens
    view.set_summary(text, conversation, dump_ref, outcome.source, quotes=quotes)
    if quotes:
        detail["quoted_lines"] = len(quotes)
    view.record(kind, before, message_ids=ids, detail=detail)
    return SpanSummary.WRITTEN


def _quotes(
    view: PromptView, covered: Sequence[BaseMessage], max_chars: int, repeats: bool
) -> list[str]:
    """The lines the summary quotes: used lines of `covered`, then the earlier quotes."""
    where, later = span_uses(view, covered)
    previous = (view.ledger.get("summary") or {}).get("quotes") or []
    return quoted_lines(
        covered,
        later=later,
        positions=where,
        previous=previous,
        max_chars=max_chars,
        repeats=repeats,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class DynamicSummarization:
    """Once history passes a threshold, summarize its oldest turns into the running summary.

    Runs on every build (not only over the trigger). Only finished turns are summarized: the
    newest turn never is. The cut is made only to put a summary in its place: when no summary
    can be written (the insurance dump failed, no summarizer) the turns stay in the prompt and
    the report keeps a `skip` saying why.
    """

    threshold_turns: int | None = 10
    """Summarize once the prompt holds more turns than this (None: no turn trigger)."""
    threshold_tokens: int | None = None
    """Summarize once the prompt holds more tokens than this (None: no token trigger)."""
    turns: int = 5
    """How many of the oldest turns each summarization takes, at least: more when that is
    what it takes to get back to `threshold_turns` (so the next call does not summarize
    again)."""

    def __post_init__(self) -> None:
        check_field_types(self)  # threshold_turns and threshold_tokens >= 0 or None
        if self.threshold_turns is None and self.threshold_tokens is None:
            msg = (
                "DynamicSummarization needs threshold_turns or threshold_tokens, got None for "
                "both; pass e.g. threshold_turns=10"
            )
            raise ConfigError(msg)
        check_int("turns", self.turns, minimum=1, example=5, owner="DynamicSummarization")

    def apply(self, view: PromptView) -> Plan[None]:
        """Summarize the oldest turns when a threshold is passed."""
        starts = [b.start for b in view.window_blocks() if b.kind == "user"]
        over_turns = self.threshold_turns is not None and len(starts) > self.threshold_turns
        over_tokens = self.threshold_tokens is not None and view.tokens > self.threshold_tokens
        if not (over_turns or over_tokens) or len(starts) < 2:
            return
        take = self.turns
        if over_turns and self.threshold_turns is not None:
            take = max(take, len(starts) - self.threshold_turns)
        cut = starts[min(take, len(starts) - 1)]  # the newest turn always stays
        before, mark = view.tokens, view.window_mark()
        dropped: list[BaseMessage] = []
        while view.start < cut:
            step = view.shrink_once()
            if step is None:
                break
            dropped.extend(step)
        if not dropped:
            return
        shrink = view.record(
            "shrink",
            before,
            message_ids=[m.id or "" for m in dropped],
            detail={"messages": len(dropped), "reason": "dynamic_summarization"},
        )
        outcome = yield from summarize_span(view, dropped, kind="summarize")
        if outcome is SpanSummary.UNAVAILABLE:
            # Nothing is removed without a summary: this cut is made only to put one in its
            # place, so when none can be written (the insurance dump failed, no summarizer) it
            # is taken back, and the report keeps the skip and its reason. A cut skipped for
            # want of room stands: the budget needs it anyway, and a later strategy would cut
            # again from a state that no longer records it (a rerun on the build's own state
            # would differ).
            view.rewind_window(mark)
            view.report.retract(shrink)


def summary_goal(view: PromptView) -> int:
    """Where a summarizing window cuts to first: the summary target less room for the summary.

    The reserve never takes more than half the goal: in a small window the summary gets cut to
    fit instead of the window being emptied to make room for it.
    """
    final_goal = view.summary_goal
    return final_goal - min(_summary_reserve(view), final_goal // 2)


def _summary_reserve(view: PromptView) -> int:
    # The summary that will land: at least today's, at most what a summarizer may write.
    current = view.cost(view.summary_message())
    return max(current, min(1_024, view.budget.limit // 10))
