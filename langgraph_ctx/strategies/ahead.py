"""Summaries prepared ahead: the summarizer runs while the agent works, not in its model call.

`SlidingWindow(summarize=True)` summarizes what leaves the window once the prompt passes the
trigger (0.9 of the limit), and the model call that passed it waits for the summarizer: seconds
with a real model. With `SlidingWindow(prepare_at=0.85)` (what
`ContextManager(prepare_summaries=True)` sets) the work moves ahead:

1. **Prepare.** A build whose prompt is under the trigger but near it (over `prepare_at`, or
   within `LOOKAHEAD_CALLS` calls growing like the last one) works out, on a scratch copy of
   the view, the span the next summary will cover: a dry run of the window's shrink, cut
   deeper by the growth expected until the trigger (the newest step too, mid-turn, when the
   window keeps only it: by the trigger it will not be the newest). It records the span in
   the ledger (`ahead`: where the window will start, the pinned task, a digest of the span
   and of the summary it folds into, the newest message and the prompt's size when it
   started) and asks the preparer to start it (`SpanToPrepare`): the sync driver starts a
   worker thread, the async driver an asyncio task, each running the summarizer's own plan.
   One preparation runs per thread at a time, keyed by thread, so a manager shared by many
   threads never mixes them. A new user turn, or a span that changed (an edit, a removal),
   makes the next build work it out again.
2. **Take.** A build over the trigger whose ledger names a span that is still valid
   (same messages, same content, same previous summary: the digest) moves the window to the
   recorded start and summarizes exactly that span: with the prepared outcome (`SpanWanted`,
   waiting a bounded time for one still running), else by calling the summarizer as without
   preparation. The ledger, not timing, decides the span, so the prompt is the same either
   way for the same summarizer answers. What came since the preparation stays in the window
   up to `accept_tokens`; only beyond that is more cut and folded in the call, as before. A
   prompt that jumped over the trigger is cut in that build too, even when pruning and
   compaction brought it back under: those edits already broke the cached prefix, and the
   cut, made a call or two later to give a preparation time, would break it again (figures
   in docs/benchmarks.md). A recorded span is taken, waiting for its preparation within the
   bound; with none the span is summarized in the call.

A record that no longer matches, a preparation lost with its process (the outcome lives in
memory, the record in the ledger: after a restart the span is summarized when the trigger is
reached, or prepared again), or no record at all: the build summarizes as it always did. The
insurance dump is written before the summary replaces the messages, and `redact` applies, on
the prepared path exactly as on the other (both run through `summarize_span`).

This module holds the decisions a summarizing `SlidingWindow` takes (prepare, take);
`ahead_span` works out the span they record, and `langgraph_ctx.summaries.preparer` runs the
preparations (`SummaryPreparer`, and the `AheadBinding` a build hands its strategies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.ledger.edits import set_ahead
from langgraph_ctx.ledger.schema import AheadEntry
from langgraph_ctx.strategies.ahead_span import (
    dry_run,
    new_turn_since,
    previous_summary,
    reachable,
    span_digest,
    valid_record,
)
from langgraph_ctx.strategies.summaries import Reading, ReadingPlan, conversation_of

if TYPE_CHECKING:
    from langgraph_ctx.prompt.view import PromptView
    from langgraph_ctx.summaries.preparer import AheadBinding


def slack_tokens(view: PromptView, prepare_at: float) -> int:
    """Tokens the prompt may grow between the preparation and the trigger."""
    return max(0, int((view.budget.trigger - prepare_at) * view.budget.limit))


LOOKAHEAD_CALLS = 3
"""A preparation also starts when the last call's growth, this many times over, would pass the
trigger: a step that adds much gets its summary prepared earlier."""


LOOKAHEAD_SHARE = 0.2
"""The earliest a preparation starts: this share of the limit before the trigger."""


def plan_prepare(
    view: PromptView,
    *,
    prepare_at: float,
    pruners: Sequence[Any],
    reading: Reading | None = None,
) -> Plan[None]:
    """Under the trigger, with the trigger near: record the next span and start preparing it.

    Near means over `prepare_at` of the limit, or within `LOOKAHEAD_CALLS` calls growing as
    much as the last one did (the ledger's last report gives the previous prompt's size).
    `reading`: how the summarizer reads
    the span (`SlidingWindow.summarize_shown`, `read_chars`), as it would in the call.
    """
    ahead = view.resources.ahead
    if ahead is None or view.resources.summarize is None:
        return
    trigger = view.trigger  # the budget's, or earlier with a cache price
    last = (view.ledger.get("last_report") or {}).get("tokens")
    growth = view.tokens - last if isinstance(last, int) and last < view.tokens else 0
    near = view.tokens > trigger - slack_tokens(view, prepare_at)
    # Never earlier than `LOOKAHEAD_SHARE` of the limit before the trigger: what came since
    # the preparation stays in the window, so an early one makes the next summary come early.
    reach = min(LOOKAHEAD_CALLS * growth, int(LOOKAHEAD_SHARE * view.budget.limit))
    soon = view.tokens + reach > trigger
    if not (near or soon or view.ledger.get("ahead")):
        return
    valid = valid_record(view)
    if valid is not None:
        entry, at, span = valid
        newest = view.history[-1].id if view.history else None
        if new_turn_since(view, entry):
            if not reachable(view, entry, at, span):
                valid = None  # the window will not move there any more: worked out again
            else:  # checked up to here
                set_ahead(view.ledger, {**entry, "started": newest})
        if valid is not None:  # recorded already: (re)start it, e.g. after a restart
            if not ahead.has(entry["digest"]):  # what it reads is worked out only to start it
                read = reading.of(view, span) if reading is not None else span
                yield from ahead.plan_start(entry["digest"], read, previous_summary(view))
            return
    # Cut deeper by what the prompt will grow until the trigger: then, at the trigger, the
    # window holds about what it would after a summary made there.
    deeper = max(slack_tokens(view, prepare_at), trigger - view.tokens)
    found = dry_run(view, deeper, pruners)
    if found is None:
        set_ahead(view.ledger, None)
        return
    start_id, pin_id, span, after = found
    digest = span_digest(previous_summary(view), span)
    newest = view.history[-1].id if view.history else None
    record: AheadEntry = {
        "start_id": start_id,
        "pin_id": pin_id,
        "digest": digest,
        "count": len(span),
        "started": newest,
        "tokens": view.report.tokens_in,
    }
    if after:
        record["after"] = True
    set_ahead(view.ledger, record)
    read = reading.of(view, span) if reading is not None else span
    yield from ahead.plan_start(digest, read, previous_summary(view))
    view.record(
        "prepare",
        view.tokens,
        message_ids=[m.id or "" for m in span],
        detail={"messages": len(span), "start_id": start_id, "digest": digest},
    )


def accept_tokens(view: PromptView) -> int:
    """What the window may keep after taking a prepared summary: half way to the trigger.

    The span was cut deeper for the growth expected until the trigger; what came since stays
    in the window up to this rather than cost a second summarizer call inside the model call.
    Beyond it the window cuts on and folds the rest in the call, as without preparing: keeping
    more makes the next summary come sooner, which costs more than it saves.
    """
    final_goal = view.summary_goal
    return max(final_goal, (final_goal + view.trigger) // 2)


@dataclass
class Taken:
    """What `take_prepared` did at the trigger."""

    pending: list[BaseMessage] = field(default_factory=list)
    """Messages that left the window."""
    summarize: ReadingPlan | None = None
    """Summarizes them (the prepared outcome, else the summarizer); None when the record did
    not apply: the window then shrinks and summarizes as without preparation."""
    note: dict[str, Any] = field(default_factory=dict)
    """For the report: `ahead` says whether the prepared summary was used, or why not."""


def take_prepared(view: PromptView, *, pruners: Sequence[Any]) -> Plan[Taken]:
    """At the trigger: move the window to the recorded start when the record is still valid."""
    note: dict[str, Any] = {}
    ahead: AheadBinding | None = view.resources.ahead
    valid = valid_record(view)
    if view.ledger.get("ahead") and valid is None:
        note["ahead"] = "stale: the span changed"
    set_ahead(view.ledger, None)
    if ahead is None or valid is None:
        return Taken(note=note)
    entry, at, span = valid
    pending: list[BaseMessage] = []
    while view.start < at:
        step = view.shrink_recorded(reason="prepared summary")
        if step is None:
            break
        pending.extend(step)
        for pruner in pruners:
            yield from pruner.apply(view)
    pin = view.history[view.pin].id if view.pin is not None else None
    same = [m.id for m in conversation_of(pending)] == [m.id for m in span]
    if view.start != at or pin != entry.get("pin_id") or not same:
        note["ahead"] = "the window moved otherwise"
        return Taken(pending, None, note)
    digest = entry["digest"]

    def summarize(read: Callable[[], list[BaseMessage]], prev: str | None) -> Plan[Any]:
        return ahead.plan_outcome(digest, read, prev, note)

    return Taken(pending, summarize, note)
