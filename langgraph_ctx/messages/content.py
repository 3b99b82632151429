"""What a message says and how the package marks it: text, tags, ids, error results.

The small rules every other part asks about one message: its text (`text_of`), the tag the
package puts on messages it wrote or changed (`TAG_KEY`, `get_tag`, `with_tag`), its id
(`with_id`, `ensure_ids`: derived when missing), whether a tool result reports an error
(`is_error_result`) and whether a message is blank to a provider (`is_blank`).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx._ids import derived_id

_MESSAGE_ID = operator.attrgetter("id")


TAG_KEY = "langgraph_ctx"
"""Key under `additional_kwargs` that marks messages langgraph_ctx wrote or changed."""


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


def text_of(message: BaseMessage, *, other_blocks: bool = False) -> str:
    """The text of a message: string content, or its text blocks joined by newlines.

    A block that is not text (an image, a file, ...) is left out, or with `other_blocks`
    shown in its place as JSON (keys sorted): what a reader of the whole message, such as the
    recall tool, should see rather than silently miss.
    """
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif other_blocks:
            parts.append(json.dumps(block, sort_keys=True, ensure_ascii=False, default=str))
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


RECALLED_KEY = "langgraph_ctx_recalled"
"""The key of a `recall` result's artifact: the reference it read back."""


def is_recalled(message: BaseMessage) -> bool:
    """Whether `message` is a `recall` result (its artifact names what it read back).

    The agent asked for that output whole: it is not excerpted again as it arrives.
    """
    artifact = getattr(message, "artifact", None)
    return isinstance(artifact, dict) and RECALLED_KEY in artifact
