"""Repairs shown in a prompt, never made in state: tool-call pairing and the conversation's form.

`repair_messages` pairs every tool call the providers are sent with exactly one answer;
`in_conversation_form` shows a system or blank user message inside the conversation so every
provider accepts it, and `conversation_start_message` opens a conversation that starts with
the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx._ids import CONVERSATION_START_ID, repair_id
from langgraph_ctx.messages.blocks import sent_calls, shown_call_ids
from langgraph_ctx.messages.content import TAG_KEY, get_tag, is_blank, text_of


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What `repair_messages` returns.

    Attributes:
        messages: The repaired list: a new list when something changed, else the input list
            itself (never mutated either way).
        actions: One line per change made; empty when nothing needed repair.
    """

    messages: list[BaseMessage]
    actions: list[str] = field(default_factory=list)


def repair_messages(messages: Sequence[BaseMessage]) -> RepairResult:
    """Pair every tool call the providers are sent with exactly one answer.

    The one owner of the tool-call pairing rule (the same blocks as `split_blocks`). Orphan
    tool results and second answers to one call are dropped; a call without an answer gets a
    `ToolMessage` with `status="error"`, a deterministic id (`lgctx-repair-...`) and the tag
    `{"repair": "dangling_call"}` (`"invalid_call"` for a call whose arguments were not valid
    JSON: the converters still send it, so it needs an answer too). A call with no id, or with
    the id of an earlier call of its message, is shown with a `call_id` (`lgctx-call-...`),
    and the answers that name its old id (`""` for none) are given the new one, in order; a
    `tool_use` content block without a tool call becomes one. Such copies keep their message
    id and carry no tag.

    A single pass that copies nothing until the first change: a valid history comes back as
    the same list object with no actions, so the pipeline runs it on every build. The
    pipeline applies this to the prompt it shows (never to state) and reports it as a
    `repair` decision; call it yourself to fix a list. Nothing is repaired silently: every
    change is listed in `RepairResult.actions`.
    """
    out: list[BaseMessage] | None = None  # made at the first change
    actions: list[str] = []
    ai: AIMessage | None = None  # the AI message whose tool results may follow
    calls: list[dict[str, Any]] = []  # its calls, with the ids they are shown with
    waiting: dict[str, list[str]] = {}  # an answer's tool_call_id -> shown ids still open
    answered: set[str] = set()
    for i, message in enumerate(messages):
        if ai is not None:
            if isinstance(message, ToolMessage) and message.tool_call_id in waiting:
                open_ids = waiting[message.tool_call_id]
                if not open_ids:
                    out = out if out is not None else list(messages[:i])
                    actions.append(
                        f"dropped duplicate tool result {message.id or '?'} "
                        f"for {message.tool_call_id!r}"
                    )
                    continue
                shown_id = open_ids.pop(0)
                answered.add(shown_id)
                if shown_id != message.tool_call_id:
                    out = out if out is not None else list(messages[:i])
                    actions.append(f"gave tool result {message.id or '?'} the call id {shown_id!r}")
                    message = message.model_copy(update={"tool_call_id": shown_id})
                if out is not None:
                    out.append(message)
                continue
            out = _answer_dangling(ai, calls, answered, messages, i, out, actions)
            ai = None
        if isinstance(message, ToolMessage):
            out = out if out is not None else list(messages[:i])
            actions.append(
                f"dropped orphan tool result {message.id or '?'} for call {message.tool_call_id!r}"
            )
            continue
        sent = sent_calls(message)
        if sent:
            assert isinstance(message, AIMessage)
            shown_ids = shown_call_ids(message, sent)
            waiting = {}
            for tc, shown_id in zip(sent, shown_ids, strict=True):
                waiting.setdefault(tc.get("id") or "", []).append(shown_id)
            ai, answered, calls = message, set(), sent
            if shown_ids != [tc.get("id") for tc in sent] or len(sent) > len(
                message.tool_calls
            ) + len(message.invalid_tool_calls):
                calls = [{**tc, "id": cid} for tc, cid in zip(sent, shown_ids, strict=True)]
                out = out if out is not None else list(messages[:i])
                actions.append(f"showed the tool calls of {message.id or '?'} with ids {shown_ids}")
                message = _with_calls(message, calls)
        if out is not None:
            out.append(message)
    if ai is not None:
        out = _answer_dangling(ai, calls, answered, messages, len(messages), out, actions)
    if out is None:
        return RepairResult(messages if isinstance(messages, list) else list(messages), [])
    return RepairResult(out, actions)


def _with_calls(ai: AIMessage, calls: list[dict[str, Any]]) -> AIMessage:
    """A copy of `ai` whose `tool_calls` and `invalid_tool_calls` are `calls`.

    The copy's `tool_use` content blocks go: both converters send the calls from
    `tool_calls` and `invalid_tool_calls`, and a block naming a renamed id would be sent
    twice.
    """
    valid = [tc for tc in calls if tc.get("type") != "invalid_tool_call"]
    invalid = [tc for tc in calls if tc.get("type") == "invalid_tool_call"]
    content: Any = ai.content
    if isinstance(content, list):
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
    return ai.model_copy(
        update={"content": content or "", "tool_calls": valid, "invalid_tool_calls": invalid}
    )


def _answer_dangling(
    ai: AIMessage,
    calls: list[dict[str, Any]],
    answered: set[str],
    messages: Sequence[BaseMessage],
    end: int,
    out: list[BaseMessage] | None,
    actions: list[str],
) -> list[BaseMessage] | None:
    """Close the tool block of `ai` ending before `end`: answer each call left unanswered."""
    for tc in calls:
        if tc["id"] in answered:
            continue
        out = out if out is not None else list(messages[:end])
        invalid = tc.get("type") == "invalid_tool_call"
        reason = tc.get("error") or "its arguments were not valid JSON"
        text = (
            f"[tool call {tc.get('name')} was not run: {reason}]"
            if invalid
            else f"[tool call {tc.get('name')} was never answered]"
        )
        out.append(
            ToolMessage(
                content=text,
                tool_call_id=tc["id"],
                name=tc.get("name"),
                status="error",
                id=repair_id(ai, tc["id"]),
                additional_kwargs={
                    TAG_KEY: {"repair": "invalid_call" if invalid else "dangling_call"}
                },
            )
        )
        what = "invalid call" if invalid else "dangling call"
        actions.append(f"answered {what} {tc['id']!r} with an error")
    return out


def conversation_start_message() -> HumanMessage:
    """Opens a prompt whose conversation starts with an AI message (a greeting, say).

    Anthropic wants the first non-system message to be a user message; the stand-in is only
    ever in the prompt, never in state.
    """
    return HumanMessage(
        content="[The conversation starts with the assistant's message below.]",
        id=CONVERSATION_START_ID,
        additional_kwargs={TAG_KEY: {"repair": "conversation_start"}},
    )


def needs_conversation_form(message: BaseMessage) -> bool:
    """Whether a message inside the conversation breaks a provider rule on its own."""
    return isinstance(message, SystemMessage) or (
        isinstance(message, HumanMessage) and is_blank(message)
    )


def in_conversation_form(message: BaseMessage) -> BaseMessage:
    """How a message inside the conversation is shown so every provider accepts it.

    A system message after the conversation started becomes a user message holding its text
    in `<system_message>` tags (Anthropic accepts system text only at the start); a user
    message with no content but empty or whitespace text (`is_blank`) gets a short placeholder
    (providers refuse empty user content). The id stays and
    the copy is tagged `{"shown_as": "user", "was": "system" | "empty"}`; the state keeps the
    original. Anything else is returned as it is.
    """
    if isinstance(message, SystemMessage):
        text, was = f"<system_message>\n{text_of(message)}\n</system_message>", "system"
    elif isinstance(message, HumanMessage) and is_blank(message):
        text, was = "[empty message]", "empty"
    else:
        return message
    tag = {**get_tag(message), "shown_as": "user", "was": was}
    return HumanMessage(content=text, id=message.id, additional_kwargs={TAG_KEY: tag})
