"""Blocks and turns: the tool-call pairing rule that every cut of a history follows.

One place owns the rule: an `AIMessage` with `tool_calls` and the `ToolMessage`s that answer
it, contiguous, form one atomic *block*. Strategies cut histories only at block boundaries, so
a parallel batch is never split and no tool result is left an orphan.

A *turn* is one user input and everything up to the next user input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx._ids import call_id
from langgraph_ctx.messages.content import get_tag

BlockKind = Literal["system", "user", "ai", "tool_exchange", "orphan_tool", "other"]


@dataclass(frozen=True, slots=True)
class Block:
    """An atomic run of messages that must stay together.

    Attributes:
        kind: What the block holds. `tool_exchange` is an AI message with tool calls plus the
            tool results that answer it.
        start: Index of the block's first message in the list it was split from.
        messages: The messages, in order.
    """

    kind: BlockKind
    start: int
    messages: tuple[BaseMessage, ...]

    @property
    def end(self) -> int:
        """Index one past the block's last message."""
        return self.start + len(self.messages)


@dataclass(frozen=True, slots=True)
class Turn:
    """One user input and every block up to the next user input.

    Attributes:
        start: Index of the turn's first message.
        blocks: The blocks of the turn; the first is the user block unless the history
            begins without a user message.
    """

    start: int
    blocks: tuple[Block, ...]

    @property
    def end(self) -> int:
        """Index one past the turn's last message."""
        return self.blocks[-1].end if self.blocks else self.start

    @property
    def user(self) -> HumanMessage | None:
        """The user message that opens the turn, if any."""
        first = self.blocks[0] if self.blocks else None
        if first is not None and first.kind == "user":
            msg = first.messages[0]
            return msg if isinstance(msg, HumanMessage) else None
        return None


def is_user_input(message: BaseMessage) -> bool:
    """Whether a message opens a turn: a human message the user wrote.

    Not the user messages a prompt view made (a system message shown as user text, the
    stand-in that opens a conversation starting with the model), so a prompt fed back as
    history splits into the same turns as the history it was built from.
    """
    if not isinstance(message, HumanMessage):
        return False
    tag = get_tag(message)
    return tag.get("was") != "system" and tag.get("repair") != "conversation_start"


def split_blocks(messages: Sequence[BaseMessage]) -> list[Block]:
    """Split a history into atomic blocks.

    An AI message with tool calls takes every immediately following tool message that answers
    one of its calls. A tool message that answers nothing before it becomes an `orphan_tool`
    block of its own.
    """
    blocks: list[Block] = []
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        calls = sent_calls(msg)
        if calls:
            # An answer pairs by the id its call has or by the one it is shown with.
            call_ids = {tc.get("id") or "" for tc in calls} | set(shown_call_ids(msg, calls))
            j = i + 1
            while (
                j < n
                and isinstance(messages[j], ToolMessage)
                and messages[j].tool_call_id in call_ids  # type: ignore[attr-defined]
            ):
                j += 1
            blocks.append(Block("tool_exchange", i, tuple(messages[i:j])))
            i = j
            continue
        kind: BlockKind
        if isinstance(msg, SystemMessage):
            kind = "system"
        elif isinstance(msg, HumanMessage):
            kind = "user" if is_user_input(msg) else "system"
        elif isinstance(msg, AIMessage):
            kind = "ai"
        elif isinstance(msg, ToolMessage):
            kind = "orphan_tool"
        else:
            kind = "other"
        blocks.append(Block(kind, i, (msg,)))
        i += 1
    return blocks


def split_turns(messages: Sequence[BaseMessage]) -> list[Turn]:
    """Split a history (without its leading system messages) into turns.

    Leading system messages are not part of any turn; pass `messages[k:]` if you have them.
    Blocks before the first user message form a turn of their own without a user.
    """
    turns: list[Turn] = []
    current: list[Block] = []
    for block in split_blocks(messages):
        if block.kind == "user" and current:
            turns.append(Turn(current[0].start, tuple(current)))
            current = []
        current.append(block)
    if current:
        turns.append(Turn(current[0].start, tuple(current)))
    return turns


def sent_calls(message: BaseMessage) -> list[dict[str, Any]]:
    """The tool calls a provider is sent for a message, each of which needs an answer.

    LangChain's OpenAI and Anthropic converters send `tool_calls`, and `invalid_tool_calls`
    too (arguments that were not valid JSON); Anthropic's also sends a `tool_use` content
    block that no tool call stands for. Invalid calls keep their `type` and `error`; a
    content-only block comes back as a tool call. Empty for anything but an `AIMessage`.
    """
    if not isinstance(message, AIMessage):
        return []
    calls = cast(list[dict[str, Any]], [*message.tool_calls, *message.invalid_tool_calls])
    if isinstance(message.content, list):
        known = {tc.get("id") for tc in calls}
        for block in message.content:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("id") not in known
            ):
                known.add(block.get("id"))
                calls.append(
                    {
                        "type": "tool_call",
                        "name": block.get("name") or "",
                        "args": block.get("input") or {},
                        "id": block.get("id"),
                    }
                )
    return calls


def shown_call_ids(message: BaseMessage, calls: Sequence[dict[str, Any]]) -> list[str]:
    """The id each of `calls` (from `sent_calls(message)`) is shown with: unique, non-empty.

    A call keeps its id unless it has none or an earlier call of the message has it; then it
    gets `call_id(message, index)`, deterministic, so every build shows the same id.
    """
    seen: set[str] = set()
    out: list[str] = []
    for index, tc in enumerate(calls):
        cid = tc.get("id")
        if not cid or cid in seen:
            cid = call_id(message, index)
        seen.add(cid)
        out.append(cid)
    return out
