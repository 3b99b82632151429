"""The providers' message rules, checked: what a prompt must be for OpenAI and Anthropic.

`validate_messages` lists every problem of a prompt (`Problem`), `check_messages` raises them;
`coerce_messages` reads a history the way LangGraph's `add_messages` does, and
`check_tool_args` / `check_unique_ids` refuse what no provider could be sent or the ledger
could not key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)

from langgraph_ctx.errors import InvalidMessagesError, reason_of, shorten
from langgraph_ctx.messages.blocks import sent_calls, split_blocks
from langgraph_ctx.messages.content import is_blank

Provider = Literal["openai", "anthropic", "all"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One way a message list breaks a provider's rules.

    Attributes:
        code: A stable short code, e.g. `orphan_tool_result`.
        index: Position of the offending message, or -1 for list-level problems.
        detail: A sentence a person can act on.
        providers: The providers that reject this.
    """

    code: str
    index: int
    detail: str
    providers: tuple[str, ...] = ("openai", "anthropic")

    def __str__(self) -> str:
        where = f" at {self.index}" if self.index >= 0 else ""
        return f"{self.code}{where}: {self.detail}"


def validate_messages(
    messages: Sequence[BaseMessage], *, provider: Provider = "all"
) -> list[Problem]:
    """Check a prompt against the OpenAI and Anthropic message rules.

    Rules: not empty; every tool result answers a call of the AI message right before its run;
    every tool call the converters send (`sent_calls`: invalid ones too) is answered, has an
    id of its own in the message and is one of `tool_calls` or `invalid_tool_calls`; system
    messages only at the start (Anthropic); at least one non-system message, and the first of
    them a user message (Anthropic); no user message without content (`is_blank`).

    Args:
        messages: The prompt as it would be sent.
        provider: `"openai"`, `"anthropic"` or `"all"` (both rule sets).

    Returns:
        The problems found; an empty list means valid.
    """
    problems: list[Problem] = []
    if not messages:
        return [Problem("empty", -1, "the prompt has no messages")]
    seen_other = False
    for i, msg in enumerate(messages):
        if isinstance(msg, SystemMessage):
            if seen_other:
                problems.append(
                    Problem(
                        "system_not_leading",
                        i,
                        "a system message follows conversation messages; Anthropic accepts "
                        "system text only at the start",
                        ("anthropic",),
                    )
                )
        else:
            seen_other = True
    for block in split_blocks(messages):
        if block.kind == "orphan_tool":
            tm = block.messages[0]
            problems.append(
                Problem(
                    "orphan_tool_result",
                    block.start,
                    f"tool result for call {tm.tool_call_id!r} "  # type: ignore[attr-defined]
                    "does not follow the AI message that made the call",
                )
            )
        elif block.kind == "tool_exchange":
            ai = block.messages[0]
            assert isinstance(ai, AIMessage)
            answered = [m.tool_call_id for m in block.messages[1:]]  # type: ignore[attr-defined]
            problems += _call_problems(ai, block.start)
            for tc in sent_calls(ai):
                if tc.get("id") not in answered:
                    problems.append(
                        Problem(
                            "unanswered_tool_call",
                            block.start,
                            f"tool call {tc.get('id')!r} ({tc.get('name')}) has no tool result",
                        )
                    )
            dupes = {cid for cid in answered if answered.count(cid) > 1}
            for cid in sorted(dupes):
                problems.append(
                    Problem("duplicate_tool_result", block.start, f"call {cid!r} answered twice")
                )
    conversation = [m for m in messages if not isinstance(m, SystemMessage)]
    if not conversation:
        problems.append(
            Problem("no_conversation", -1, "only system messages; send a user message too")
        )
    elif not isinstance(conversation[0], HumanMessage):
        problems.append(
            Problem(
                "first_not_user",
                messages.index(conversation[0]),
                "the first non-system message must be a user message for Anthropic",
                ("anthropic",),
            )
        )
    for i, msg in enumerate(messages):
        if isinstance(msg, HumanMessage) and is_blank(msg):
            problems.append(
                Problem("empty_user_message", i, "a user message has no text but whitespace")
            )
    if provider != "all":
        problems = [p for p in problems if provider in p.providers]
    return problems


def _call_problems(ai: AIMessage, index: int) -> list[Problem]:
    """Calls the providers cannot pair with an answer: no id, a repeated id, or only a block."""
    problems: list[Problem] = []
    ids = [tc.get("id") for tc in sent_calls(ai)]
    listed = len(ai.tool_calls) + len(ai.invalid_tool_calls)
    if len(ids) == 1 and ids[0] and listed == 1:
        return []  # the usual case: one call with an id, listed
    if not all(ids):
        problems.append(Problem("tool_call_without_id", index, "a tool call has no id"))
    for cid in sorted({c for c in ids if c and ids.count(c) > 1}):
        problems.append(
            Problem("duplicate_tool_call_id", index, f"two tool calls share the id {cid!r}")
        )
    if len(ids) > listed:
        problems.append(
            Problem(
                "tool_use_without_tool_call",
                index,
                "a tool_use content block has no tool call: OpenAI is not sent the call, "
                "so its answer is refused",
                ("openai",),
            )
        )
    return problems


def check_messages(messages: Sequence[BaseMessage], *, provider: Provider = "all") -> None:
    """Raise `InvalidMessagesError` listing every problem `validate_messages` finds."""
    problems = validate_messages(messages, provider=provider)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        msg = (
            f"{len(problems)} problem(s) in a list of {len(messages)} messages:\n{lines}\n"
            "Fix the history, or call langgraph_ctx.repair_messages(...) to drop orphan tool "
            "results and answer dangling tool calls explicitly."
        )
        raise InvalidMessagesError(msg, problems)


def coerce_messages(messages: Any) -> list[BaseMessage]:
    """The history as a list of `BaseMessage`, coerced the way LangGraph's `add_messages` does.

    Message objects pass through untouched (the usual case: no copy per message). Anything
    `langchain_core.messages.convert_to_messages` accepts (`{"role": "user", "content": ...}`
    dicts, `("user", "text")` tuples, a bare string as a user message) becomes the message it
    describes, without an id (the pipeline derives one). Anything else is a clear error.

    Raises:
        InvalidMessagesError: `messages` is not a list, or an item is not a message and cannot
            be read as one (None, numbers, dicts without role/content, ...).
    """
    if isinstance(messages, (str, bytes, BaseMessage, dict)) or not isinstance(messages, Sequence):
        msg = (
            f"messages must be a list of messages, got {type(messages).__name__} "
            f"{shorten(messages)}; pass a list such as [HumanMessage('...')] "
            "(state['messages'] in a graph)"
        )
        raise InvalidMessagesError(msg)
    # One check per distinct type, not per message: a long history costs a C-level pass.
    kinds = set(map(type, messages))
    if all(issubclass(kind, BaseMessage) for kind in kinds):
        _check_sendable(messages, kinds)
        return list(messages)
    from langchain_core.messages import convert_to_messages

    out: list[BaseMessage] = []
    for i, item in enumerate(messages):
        if isinstance(item, BaseMessage):
            out.append(item)
            continue
        try:
            out.extend(convert_to_messages([item]))
        except (ValueError, TypeError, NotImplementedError, KeyError) as exc:
            msg = (
                f"item {i} of the history is not a message: {type(item).__name__} "
                f"{shorten(item)} ({reason_of(exc)}). Pass BaseMessage objects, or what "
                'LangGraph\'s add_messages accepts: {"role": "user", "content": "..."} dicts, '
                '("user", "...") tuples or strings'
            )
            raise InvalidMessagesError(msg, [f"item {i}: {type(item).__name__}"]) from exc
    _check_sendable(out, set(map(type, out)))
    return out


def _check_sendable(messages: Sequence[BaseMessage], kinds: set[type]) -> None:
    """Refuse a `RemoveMessage`: an instruction to LangGraph's `add_messages` reducer.

    It is not a message to send. One set lookup when there is none (`kinds` is at hand).
    """
    from langchain_core.messages import RemoveMessage

    if RemoveMessage not in kinds:
        return
    for i, m in enumerate(messages):
        if isinstance(m, RemoveMessage):
            msg = (
                f"item {i} of the history is a RemoveMessage (id {m.id!r}): it tells LangGraph's "
                "add_messages reducer to delete a message and is not a message to send. Return "
                "it from a node so the reducer applies it, and build from state['messages']"
            )
            raise InvalidMessagesError(msg, [f"item {i}: RemoveMessage"])


def check_tool_args(messages: Sequence[BaseMessage]) -> None:
    """Refuse tool-call arguments that are not JSON (a `datetime`, `bytes`, a `set`, deep nesting).

    Both providers' converters send tool arguments with `json.dumps`, so such a value would fail
    at the provider, and it cannot be counted or archived. The build checks what it shows (the
    window: every message is in it before it is sent, dumped or summarized), so the work per
    call follows the window, not the whole history.

    Raises:
        InvalidMessagesError: Names the message, the tool, the value and how to convert it.
    """
    for m in messages:
        if not (isinstance(m, AIMessage) and m.tool_calls):
            continue
        for tc in m.tool_calls:
            try:
                json.dumps(tc.get("args"))
            except (TypeError, ValueError, RecursionError) as exc:
                try:
                    shown = shorten(tc.get("args"))
                except RecursionError:  # the repr recurses as deep as the encoder did
                    shown = "(nested too deeply to show)"
                msg = (
                    f"message {m.id!r} calls tool {tc.get('name')!r} with arguments that are not "
                    f"JSON ({exc}): {shown}. Providers send tool arguments as JSON; convert the "
                    "value first (a datetime to an ISO string, bytes to base64 text, a set to a "
                    "list)"
                )
                raise InvalidMessagesError(msg, [f"{m.id}: tool args"]) from exc


def check_unique_ids(messages: Sequence[BaseMessage]) -> None:
    """Raise `InvalidMessagesError` when two messages share an id.

    The pipeline keys everything it keeps (pruned, compacted, window start) by message id, so
    two messages with one id would be ambiguous. LangGraph's `add_messages` never leaves
    duplicates in state (a message with an existing id replaces the old one).
    """
    ids = [m.id for m in messages if m.id]
    if len(set(ids)) == len(ids):
        return
    seen: dict[str, int] = {}
    for i, message in enumerate(messages):
        if not message.id:
            continue
        if message.id in seen:
            msg = (
                f"duplicate message id {message.id!r} at positions {seen[message.id]} and {i} "
                "of the history; every message needs its own id (or none, and one is "
                "derived). Give each message a unique id, or merge the list with LangGraph's "
                "add_messages([], messages), which keeps the last message of each id"
            )
            raise InvalidMessagesError(msg, [f"duplicate_id {message.id!r}"])
        seen[message.id] = i
