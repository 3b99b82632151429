"""Validity as the providers judge it: LangChain's own converters plus the documented rules.

`validate_messages` is our reading of the rules; these checks convert the prompt the way
`langchain_openai` and `langchain_anthropic` do before a request, then apply the rules the
providers document for the request body (tool calls answered right after, every answer for a
call of the message before, ids present and unique in a batch, no empty user content, no
empty or whitespace-only text block for Anthropic). A test that asserts
`provider_problems(prompt) == []` asserts what a real request would be accepted.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from typing import Any

from langchain_anthropic.chat_models import _format_messages
from langchain_core.messages import BaseMessage
from langchain_openai.chat_models.base import _convert_message_to_dict

_ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
"""Anthropic's documented pattern for a `tool_use` id."""


def openai_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """What the OpenAI chat completions API rejects in `messages`, as its converter sends them."""
    payload = [_convert_message_to_dict(m) for m in messages]
    problems: list[str] = []
    pending: set[str] | None = None  # calls of the last assistant message not answered yet
    for i, item in enumerate(payload):
        role = item["role"]
        if role == "tool":
            call_id = item.get("tool_call_id")
            if pending is None or call_id not in pending:
                problems.append(f"openai: tool message {i} answers no open call ({call_id!r})")
            else:
                pending.discard(call_id)
            continue
        if pending:
            problems.append(f"openai: calls {sorted(pending)} unanswered before message {i}")
        pending = None
        if role == "assistant" and item.get("tool_calls"):
            ids = [tc.get("id") for tc in item["tool_calls"]]
            if not all(isinstance(c, str) and c for c in ids):
                problems.append(f"openai: assistant message {i} has a call without an id")
            if len(set(ids)) != len(ids):
                problems.append(f"openai: assistant message {i} repeats a call id {ids}")
            pending = {c for c in ids if isinstance(c, str)}
        if role == "user" and not _has_content(item.get("content")):
            problems.append(f"openai: user message {i} has no content")
    if pending:
        problems.append(f"openai: calls {sorted(pending)} unanswered at the end")
    return problems


def anthropic_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """What the Anthropic messages API rejects in `messages`, as its converter sends them."""
    # Newer converters take the model (its features change the payload); older ones do not.
    takes_model = "model" in inspect.signature(_format_messages).parameters
    options = {"model": "claude-sonnet-4-5"} if takes_model else {}
    _, payload = _format_messages(list(messages), **options)
    problems: list[str] = []
    if not payload or payload[0]["role"] != "user":
        problems.append("anthropic: the first message is not a user message")
    for i, item in enumerate(payload):
        blocks = _blocks(item["content"])
        if item["role"] == "user" and not blocks:
            problems.append(f"anthropic: user message {i} has no content")
        for block in blocks:
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                problems.append(f"anthropic: message {i} has an empty or blank text block")
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        if item["role"] == "assistant" and uses:
            if not all(isinstance(u, str) and _ANTHROPIC_TOOL_ID.match(u) for u in uses):
                problems.append(f"anthropic: message {i} has a tool_use id {uses} not allowed")
            if len(set(uses)) != len(uses):
                problems.append(f"anthropic: message {i} repeats a tool_use id {uses}")
            following = _blocks(payload[i + 1]["content"]) if i + 1 < len(payload) else []
            answered = {b.get("tool_use_id") for b in following if b.get("type") == "tool_result"}
            if missing := [u for u in uses if u not in answered]:
                problems.append(f"anthropic: tool_use {missing} of message {i} not answered")
        if item["role"] == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            before = _blocks(payload[i - 1]["content"]) if i > 0 else []
            asked = {b.get("id") for b in before if b.get("type") == "tool_use"}
            if stray := [r for r in results if r not in asked]:
                problems.append(f"anthropic: tool_result {stray} of message {i} answers no call")
    return problems


def provider_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Every problem either provider finds in `messages` (an empty list: both accept it)."""
    return openai_problems(messages) + anthropic_problems(messages)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b if isinstance(b, dict) else {"type": "text", "text": b} for b in content or []]


def _has_content(content: Any) -> bool:
    return any(b.get("type") != "text" or str(b.get("text", "")).strip() for b in _blocks(content))
