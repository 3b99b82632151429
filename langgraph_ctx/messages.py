"""The message model every strategy shares: blocks, turns, provider rules, ids and tags.

One place owns the tool-call pairing rule: an `AIMessage` with `tool_calls` and the
`ToolMessage`s that answer it, contiguous, form one atomic *block*. Strategies cut histories only
at block boundaries, so a parallel batch is never split and no tool result is left an orphan.

A *turn* is one user input and everything up to the next user input.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx.errors import InvalidMessagesError, shorten

_MESSAGE_ID = operator.attrgetter("id")

TAG_KEY = "langgraph_ctx"
"""Key under `additional_kwargs` that marks messages langgraph_ctx wrote or changed."""

BlockKind = Literal["system", "user", "ai", "tool_exchange", "orphan_tool", "other"]
Provider = Literal["openai", "anthropic", "all"]


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
        if isinstance(msg, AIMessage) and msg.tool_calls:
            call_ids = {tc.get("id") for tc in msg.tool_calls}
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
    every tool call is answered; system messages only at the start (Anthropic); at least one
    non-system message, and the first of them a user message (Anthropic).

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
            for tc in ai.tool_calls:
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
        if isinstance(msg, HumanMessage) and not msg.content:
            problems.append(Problem("empty_user_message", i, "a user message has no content"))
    if provider != "all":
        problems = [p for p in problems if provider in p.providers]
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


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What `repair_messages` returns.

    Attributes:
        messages: The repaired list (new list; the input is untouched).
        actions: One line per change made.
    """

    messages: list[BaseMessage]
    actions: list[str] = field(default_factory=list)


def needs_repair(messages: Sequence[BaseMessage]) -> bool:
    """Whether `repair_messages` would change the tool-call pairing of `messages` (one pass)."""
    pending: set[Any] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                return True  # an orphan, or a second answer to one call
            pending.discard(message.tool_call_id)
            continue
        if pending:
            return True  # a call left unanswered
        if isinstance(message, AIMessage) and message.tool_calls:
            pending = {tc.get("id") for tc in message.tool_calls}
    return bool(pending)


def repair_messages(messages: Sequence[BaseMessage]) -> RepairResult:
    """Drop orphan tool results and second answers to one call; answer dangling calls.

    A dangling call gets a `ToolMessage` with `status="error"`, a deterministic id
    (`lgctx-repair-...`) and the tag `{"repair": "dangling_call"}`. The pipeline applies this
    to the prompt it shows (never to state) and reports it as a `repair` decision; call it
    yourself to fix a list. Nothing is repaired silently: every change is listed in
    `RepairResult.actions`.
    """
    out: list[BaseMessage] = []
    actions: list[str] = []
    for block in split_blocks(messages):
        if block.kind == "orphan_tool":
            tm = block.messages[0]
            actions.append(
                f"dropped orphan tool result {tm.id or '?'} for call {tm.tool_call_id!r}"  # type: ignore[attr-defined]
            )
            continue
        if block.kind != "tool_exchange":
            out.extend(block.messages)
        else:
            ai = block.messages[0]
            assert isinstance(ai, AIMessage)
            out.append(ai)
            answered: set[str] = set()
            for tm in block.messages[1:]:
                call_id = tm.tool_call_id  # type: ignore[attr-defined]
                if call_id in answered:
                    actions.append(f"dropped duplicate tool result {tm.id or '?'} for {call_id!r}")
                    continue
                answered.add(call_id)
                out.append(tm)
            for tc in ai.tool_calls:
                if tc.get("id") not in answered:
                    out.append(
                        ToolMessage(
                            content=f"[tool call {tc.get('name')} was never answered]",
                            tool_call_id=tc.get("id") or "",
                            name=tc.get("name"),
                            status="error",
                            id=_repair_id(ai, tc.get("id")),
                            additional_kwargs={TAG_KEY: {"repair": "dangling_call"}},
                        )
                    )
                    actions.append(f"answered dangling call {tc.get('id')!r} with an error")
    return RepairResult(out, actions)


CONVERSATION_START_ID = "lgctx-conversation-start"
"""Id of the user stand-in that opens a prompt whose conversation starts with the model."""


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
        isinstance(message, HumanMessage) and not message.content
    )


def in_conversation_form(message: BaseMessage) -> BaseMessage:
    """How a message inside the conversation is shown so every provider accepts it.

    A system message after the conversation started becomes a user message holding its text
    in `<system_message>` tags (Anthropic accepts system text only at the start); an empty user
    message gets a short placeholder (providers refuse empty user content). The id stays and
    the copy is tagged `{"shown_as": "user", "was": "system" | "empty"}`; the state keeps the
    original. Anything else is returned as it is.
    """
    if isinstance(message, SystemMessage):
        text, was = f"<system_message>\n{text_of(message)}\n</system_message>", "system"
    elif isinstance(message, HumanMessage) and not message.content:
        text, was = "[empty message]", "empty"
    else:
        return message
    tag = {**get_tag(message), "shown_as": "user", "was": was}
    return HumanMessage(content=text, id=message.id, additional_kwargs={TAG_KEY: tag})


def _repair_id(ai: AIMessage, call_id: str | None) -> str:
    # Deterministic, so a repaired prompt is the same bytes on every build.
    source = ai.id or message_fingerprint(ai)
    digest = hashlib.sha256(f"{source}:{call_id}".encode()).hexdigest()
    return f"lgctx-repair-{digest[:24]}"


# --- what counts as a message -------------------------------------------------------------


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
    if all(issubclass(kind, BaseMessage) for kind in set(map(type, messages))):
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
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            msg = (
                f"item {i} of the history is not a message: {type(item).__name__} "
                f"{shorten(item)} ({reason}). Pass BaseMessage objects, or what LangGraph's "
                'add_messages accepts: {"role": "user", "content": "..."} dicts, '
                '("user", "...") tuples or strings'
            )
            raise InvalidMessagesError(msg, [f"item {i}: {type(item).__name__}"]) from exc
    return out


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


# --- ids and tags -------------------------------------------------------------------------


def message_fingerprint(message: BaseMessage) -> str:
    """A stable sha256 of what a message says (type, content, name, tool calls, call id)."""
    payload = {
        "type": message.type,
        "content": message.content,
        "name": getattr(message, "name", None),
        "tool_calls": getattr(message, "tool_calls", None) or None,
        "tool_call_id": getattr(message, "tool_call_id", None),
    }
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def ensure_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the messages with ids, deriving missing ones from position and content.

    Derived ids are deterministic (`lgctx-<hash>`), so building twice from the same list
    gives the same ids and the same prompt. Messages that already have ids are returned as is.
    """
    if all(map(_MESSAGE_ID, messages)):  # the usual case in graph state: no copy per message
        return list(messages)
    return [with_id(msg, i) for i, msg in enumerate(messages)]


def derived_id(message: BaseMessage, position: int) -> str:
    """The id a message without one gets: deterministic from its position and content."""
    digest = hashlib.sha256(f"{position}:{message_fingerprint(message)}".encode()).hexdigest()
    return f"lgctx-{digest[:24]}"


def with_id(message: BaseMessage, position: int) -> BaseMessage:
    """`message` itself when it has an id, else a copy with its `derived_id`."""
    if message.id:
        return message
    return message.model_copy(update={"id": derived_id(message, position)})


def get_tag(message: BaseMessage) -> dict[str, Any]:
    """The langgraph_ctx tag of a message (empty dict when untagged)."""
    tag = message.additional_kwargs.get(TAG_KEY)
    return tag if isinstance(tag, dict) else {}


def with_tag(message: BaseMessage, **info: Any) -> BaseMessage:
    """A copy of `message` whose tag carries `info` (merged into any existing tag)."""
    kwargs = dict(message.additional_kwargs)
    kwargs[TAG_KEY] = {**get_tag(message), **info}
    return message.model_copy(update={"additional_kwargs": kwargs})


def text_of(message: BaseMessage) -> str:
    """The text of a message: string content, or its text blocks joined by newlines."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def is_error_result(message: BaseMessage) -> bool:
    """Whether a tool result reports an error (status, or a `[tool:` fallback saying error)."""
    if isinstance(message, ToolMessage):
        return message.status == "error"
    return False


def is_tool_output(message: BaseMessage) -> bool:
    """Tool results, and system-tool fallback messages whose text starts with `[tool:`."""
    if isinstance(message, ToolMessage):
        return True
    return isinstance(message, SystemMessage) and text_of(message).startswith("[tool:")
