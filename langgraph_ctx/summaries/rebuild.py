"""Rebuild from a compression hint, between graph steps (DESIGN part 7).

After a finished turn, when the real prompt tokens of the last model call (the AI message's
`usage_metadata["input_tokens"]`) pass `threshold * window`, the history is written to the
archive (the insurance dump), summarized into the running summary, and cleared from the live
state by id. The next call's system prompt carries a compression hint: the summary and a note
that the session was rebuilt and finished steps must not be repeated.

`plan_rebuild` is pure apart from the effects it yields; nodes and middleware drive it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx._effects import Plan
from langgraph_ctx.ledger.edits import forget_entries, set_hint, set_window
from langgraph_ctx.ledger.repair import load_ledger
from langgraph_ctx.ledger.schema import ContextLedger
from langgraph_ctx.ledger.summary import adopt_summary, fold_summary
from langgraph_ctx.messages.base import split_base
from langgraph_ctx.messages.blocks import is_user_input
from langgraph_ctx.prompt.markup import WRAPPER_TAGS, escape_markup
from langgraph_ctx.prompt.render import split_summary_body
from langgraph_ctx.prompt.report import Decision, append_to_ledger_report
from langgraph_ctx.prompt.view import Resources

HINT_NOTE = (
    "The session was rebuilt to free context: {count} earlier messages were archived and "
    "compressed into the summary below; the last request and its answer are kept as they "
    "were. Steps under <completed> are finished: do not repeat them. Continue from "
    "<current_state> and <remaining>."
)
"""The note that opens every compression hint (`{count}` is the number of messages cleared)."""


def render_hint(summary: str, count: int) -> str:
    """The compression hint injected into the system prompt."""
    note = HINT_NOTE.format(count=count)
    summary = escape_markup(summary, WRAPPER_TAGS)  # the summary cannot close the hint
    return f"<compression_hint>\n{note}\n<summary>\n{summary}\n</summary>\n</compression_hint>"


@dataclass(frozen=True, slots=True)
class RebuildResult:
    """What a rebuild decided."""

    remove_ids: list[str]
    """Message ids to remove from live state (all archived in the dump)."""
    state: dict[str, Any]
    """The updated ledger."""
    decision: Decision
    """The `rebuild` (or `skip`) decision, for the report."""


def last_prompt_tokens(messages: Sequence[BaseMessage]) -> tuple[AIMessage | None, int | None]:
    """The newest AI message and the prompt tokens its provider reported."""
    for msg in reversed(messages):
        if isinstance(msg, AIMessage):
            usage: dict[str, Any] = dict(msg.usage_metadata or {})
            tokens = usage.get("input_tokens")
            return msg, int(tokens) if tokens is not None else None
    return None, None


def plan_rebuild(
    messages: Sequence[BaseMessage],
    state: dict[str, Any] | None,
    *,
    window_tokens: int,
    threshold: float,
    resources: Resources,
) -> Plan[RebuildResult | None]:
    """Decide, and when due perform, a rebuild. Returns None when nothing is due."""
    ledger: ContextLedger = load_ledger(state)
    last_ai, prompt_tokens = last_prompt_tokens(messages)
    if last_ai is None or prompt_tokens is None:
        return None
    if prompt_tokens <= threshold * window_tokens:
        return None
    # The base prompt is configuration, not history: never cleared. The build draws the same
    # line (`split_base`), so a system message inside the conversation is history here too.
    _, adopted, conversation = split_base(messages)
    unnamed = sum(1 for m in conversation if not m.id)
    if unnamed:
        # The state is cleared by id only: clearing the messages that have one would tear the
        # conversation (a reply without its request opening the next prompt behind a made-up
        # user stand-in, a result without its call). The build's own window copes meanwhile.
        reason = (
            f"{unnamed} of the {len(conversation)} messages have no id, and the state can "
            "clear messages by id only; give every message an id (LangGraph's add_messages "
            "reducer does)"
        )
        return _skip(ledger, prompt_tokens, reason)
    hint = ledger.get("hint") or {}
    if hint.get("after_id") == last_ai.id:
        return None  # already rebuilt after this call
    if last_ai.tool_calls:
        return _skip(ledger, prompt_tokens, "the turn is not finished (pending tool calls)")
    history = list(conversation)
    if not history:
        return None
    if resources.dump_messages is None or resources.summarize is None:
        return _skip(ledger, prompt_tokens, "no archive: nothing is cleared without its dump")
    kept = {m.id for m in _final_exchange(history, last_ai)}
    cleared_messages = [m for m in history if m.id not in kept]
    if not cleared_messages:
        return None
    try:  # the dump holds the kept pair too, so the archive alone gives the order
        dump_ref = yield from resources.dump_messages(history)
    except Exception as exc:
        return _skip(ledger, prompt_tokens, f"insurance dump failed: {exc}")
    # As the build would have: a leading summary is folded on (its quoted lines apart).
    adopt_summary(ledger, *split_summary_body(adopted))
    previous = (ledger.get("summary") or {}).get("text")
    outcome = yield from resources.summarize(cleared_messages, previous)
    ids = [m.id or "" for m in cleared_messages]
    fold_summary(
        ledger, text=outcome.text, covered_ids=ids, dump_ref=dump_ref, source=outcome.source
    )
    set_hint(
        ledger,
        text=render_hint(outcome.text, len(ids)),
        cleared_ids=ids,
        dump_ref=dump_ref,
        prompt_tokens=prompt_tokens,
        after_id=last_ai.id,
    )
    set_window(ledger)
    forget_entries(ledger, set(ids))
    decision = Decision(
        kind="rebuild",
        tokens_before=prompt_tokens,
        tokens_after=0,
        message_ids=ids,
        detail={
            "dump_ref": dump_ref,
            "threshold": threshold,
            "window": window_tokens,
            "source": outcome.source,
            "error": outcome.error,
        },
    )
    append_to_ledger_report(ledger, decision)
    return RebuildResult(remove_ids=ids, state=dict(ledger), decision=decision)


def _final_exchange(history: Sequence[BaseMessage], answer: AIMessage) -> list[BaseMessage]:
    """The last user request and the final answer, kept live so the thread still reads well.

    The next prompt then opens with a user message (as Anthropic requires) and the state's
    last message is still the answer the caller expects in `result["messages"][-1]`.
    """
    if not history or history[-1] is not answer:
        return []
    request = next((m for m in reversed(history) if is_user_input(m)), None)
    return [request, answer] if request is not None else []


def _skip(ledger: ContextLedger, tokens: int, reason: str) -> RebuildResult:
    decision = Decision(
        kind="skip",
        tokens_before=tokens,
        tokens_after=tokens,
        detail={"reason": f"rebuild: {reason}"},
    )
    append_to_ledger_report(ledger, decision)
    return RebuildResult(remove_ids=[], state=dict(ledger), decision=decision)
