"""The message model every strategy shares: blocks, turns, provider rules, ids and tags.

One place owns the tool-call pairing rule: an `AIMessage` with `tool_calls` and the
`ToolMessage`s that answer it, contiguous, form one atomic *block*. Strategies cut histories only
at block boundaries, so a parallel batch is never split and no tool result is left an orphan.

A *turn* is one user input and everything up to the next user input.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx._ids import CONVERSATION_START_ID, call_id, derived_id, repair_id
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


def is_blank(message: BaseMessage) -> bool:
    """Whether a message has nothing a provider accepts as content.

    No block but text, and every text empty or whitespace: Anthropic's converter drops empty
    text blocks (leaving no content) and the API refuses whitespace-only text; OpenAI refuses
    an empty content list.
    """
    content = message.content
    if isinstance(content, str):
        return not content.strip()
    for block in content:
        text = block if isinstance(block, str) else None
        if isinstance(block, dict) and block.get("type") == "text":
            text = str(block.get("text") or "")
        if text is None or text.strip():  # a non-text block, or real text
            return False
    return True


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
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            msg = (
                f"item {i} of the history is not a message: {type(item).__name__} "
                f"{shorten(item)} ({reason}). Pass BaseMessage objects, or what LangGraph's "
                'add_messages accepts: {"role": "user", "content": "..."} dicts, '
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


# --- ids and tags -------------------------------------------------------------------------


def ensure_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return the messages with ids, deriving missing ones from position and content.

    Derived ids are deterministic (`lgctx-<hash>`), so building twice from the same list
    gives the same ids and the same prompt. Messages that already have ids are returned as is.
    """
    if all(map(_MESSAGE_ID, messages)):  # the usual case in graph state: no copy per message
        return list(messages)
    return [with_id(msg, i) for i, msg in enumerate(messages)]


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


_ERROR_TEXT = re.compile(r"\s*(?:error|traceback|exception)\b", re.IGNORECASE)


def is_error_result(message: BaseMessage, *, by_text: bool = False) -> bool:
    """Whether a tool result reports an error: the one rule for it.

    A `ToolMessage` with `status="error"` (what `ToolNode` writes for a tool that raised) is
    one. With `by_text`, so is a tool result whose text starts with `Error`, `Traceback` or
    `Exception`: tools that return their failure as text. The fallback summary asks with
    `by_text`, so that no failure's text is mined for facts or paths; pruning, compaction and
    the summarizer's transcript trust the status, so an output that merely mentions an error
    is handled like any other. A `[tool:` system fallback is never an error result.
    """
    if not isinstance(message, ToolMessage):
        return False
    if message.status == "error":
        return True
    return by_text and _ERROR_TEXT.match(text_of(message)) is not None


def is_tool_output(message: BaseMessage) -> bool:
    """Tool results, and system-tool fallback messages whose text starts with `[tool:`."""
    if isinstance(message, ToolMessage):
        return True
    return isinstance(message, SystemMessage) and text_of(message).startswith("[tool:")
