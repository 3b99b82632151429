"""`ProviderCounter`: the provider's own token-count API, opt-in, cached per message.

For Claude and Gemini there is no public tokenizer; the providers' count endpoints (Anthropic's
`messages.count_tokens`, Google's `countTokens`; free, rate-limited) say exactly what a prompt
costs. `counter_for_model(model, use_provider_api=True)` gives such a model a `ProviderCounter`
instead of the approximation. It needs a network and the provider's key, so it is never the
default. How the provider is asked is a small adapter (`count_api_for`): LangChain's
`ChatAnthropic.get_num_tokens_from_messages`, or, for `ChatGoogleGenerativeAI`, the request
LangChain builds counted by the model's google-genai client (`_gemini_count`); the caching and
the fallback below are the same for both.

The pipeline counts each message on its own (`count_message`) while it decides what to cut,
then the final prompt once (`__call__`). Both are cached by a sha256 of what the messages say
(`message_fingerprint`): an unchanged message is never sent twice, and a message edited in
place has another hash, so it is counted again. A message is counted as one user turn holding
its text (tool calls as JSON), since a lone assistant turn or tool result is not a valid
request; the final count sends the real prompt. When a call fails (no network, a rate limit,
a bad key), the count comes from the approximation `counter_for_model(model)` gives, with a
logged warning, and is not cached: the next count asks the provider again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langgraph_ctx._ids import message_fingerprint
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.checks import check_int
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages.content import text_of
from langgraph_ctx.tokens._gemini_count import GeminiCountApi, is_gemini_model
from langgraph_ctx.tokens._providers import offline_counter
from langgraph_ctx.tokens.counter import TokenCounter, ToolLike, tool_schema

logger = logging.getLogger("langgraph_ctx.provider_count")  # the name it always had
"""Warnings when the provider's count API fails and the approximation is used."""

CountApi = Callable[[list[BaseMessage], list[Any] | None], int]
"""Asks the provider for the tokens of a prompt: its messages, and the tools bound or None."""


def count_api_for(model: Any) -> CountApi | None:
    """How `model`'s provider counts a prompt, or None when it offers no way.

    A `ChatGoogleGenerativeAI` gets Google's `countTokens` on the request LangChain builds
    (`GeminiCountApi`); any other chat model its own `get_num_tokens_from_messages(messages,
    tools=...)`, which `ChatAnthropic` answers with Anthropic's count API.
    """
    if is_gemini_model(model):
        return GeminiCountApi(model)
    method = getattr(model, "get_num_tokens_from_messages", None)
    if not callable(method):
        return None

    def ask(messages: list[BaseMessage], tools: list[Any] | None) -> int:
        return int(method(messages, tools=tools) if tools else method(messages))

    return ask


class ProviderCounter:
    """Counts with the provider's own count API, asked through the chat model (`count_api_for`).

    Example:
        >>> from langchain_anthropic import ChatAnthropic
        >>> model = ChatAnthropic(model="claude-sonnet-4-5", api_key="...")  # doctest: +SKIP
        >>> counter = ProviderCounter(model)  # doctest: +SKIP

    Args:
        model: A `ChatGoogleGenerativeAI` (Google's `countTokens`), or a chat model whose
            `get_num_tokens_from_messages(messages, tools=...)` asks the provider
            (`ChatAnthropic`).
        fallback: The counter used when a call fails; default `counter_for_model(model)`.
        cache_size: How many counts to keep (least recently used go first).
    """

    def __init__(
        self, model: Any, *, fallback: TokenCounter | None = None, cache_size: int = 50_000
    ) -> None:
        ask = count_api_for(model)
        if ask is None:
            msg = (
                "ProviderCounter needs a chat model that asks its provider to count (its "
                f"get_num_tokens_from_messages), got {type(model).__name__}; pass e.g. "
                "ChatAnthropic(...) or ChatGoogleGenerativeAI(...), or use "
                "counter_for_model(model) for the offline counter"
            )
            raise ConfigError(msg)
        check_int("cache_size", cache_size, example=50_000, note="0 disables the cache")
        if fallback is None:
            fallback = offline_counter(model)
        self.model = model
        self._ask = ask
        self.fallback = fallback
        self.cache_size = cache_size
        self._cache: LRUCache[str, int] = LRUCache(max_items=cache_size)
        self._lock = threading.Lock()  # guards the call tallies
        self.api_calls = 0
        """How many times the provider was asked (cache misses)."""
        self.failures = 0
        """How many calls failed and were answered by `fallback`."""

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """The provider's count of the prompt `messages` (a `TokenCounter`)."""
        if not messages:
            return 0  # the API refuses an empty prompt; an empty prompt costs nothing to add
        key = "prompt:" + _digest([message_fingerprint(m) for m in messages])
        tokens = self._count(key, list(messages), None)
        return self.fallback(messages) if tokens is None else tokens

    def count_message(self, message: BaseMessage) -> int:
        """The provider's count of one message, as a user turn holding its text (cached).

        A user message is sent as it is (its images and documents counted by the provider);
        any other as a user turn holding its text and tool calls.
        """
        key = "message:" + message_fingerprint(message)
        if isinstance(message, HumanMessage) and message.content:
            turn: BaseMessage = HumanMessage(message.content)
        else:
            turn = HumanMessage(_text_for_count(message) or " ")
        tokens = self._count(key, [turn], None)
        return self.fallback([message]) if tokens is None else tokens

    def count_tools(self, tools: Sequence[ToolLike]) -> int:
        """The provider's count of binding `tools`: a one-word prompt with and without them."""
        if not tools:
            return 0
        schemas = [
            json.dumps(tool_schema(t, f"tools[{i}]"), sort_keys=True, default=str)
            for i, t in enumerate(tools)
        ]
        probe: list[BaseMessage] = [HumanMessage("hi")]
        with_tools = self._count("tools:" + _digest(schemas), probe, list(tools))
        bare = self._count("prompt:" + _digest([message_fingerprint(probe[0])]), probe, None)
        if with_tools is None or bare is None:
            count_tools = getattr(self.fallback, "count_tools", None)
            return int(count_tools(tools)) if callable(count_tools) else 0
        return max(with_tools - bare, 0)

    def cache_clear(self) -> None:
        """Forget every cached count."""
        self._cache.clear()

    def _count(self, key: str, messages: list[BaseMessage], tools: list[Any] | None) -> int | None:
        """The provider's count, cached under `key`; None (and a warning) when the call fails."""
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            with self._lock:
                self.api_calls += 1
            tokens = int(self._ask(messages, tools))
        except Exception as exc:  # offline, rate-limited, a bad key: count approximately
            with self._lock:
                self.failures += 1
            logger.warning(
                "the provider's token count failed (%s: %s); using the approximation instead",
                type(exc).__name__,
                exc,
            )
            return None
        self._cache.put(key, tokens)
        return tokens


def _text_for_count(message: BaseMessage) -> str:
    """What a message says, as text: its text, its tool calls as JSON, its name."""
    parts = [text_of(message)]
    if isinstance(message, AIMessage) and message.tool_calls:
        parts += [
            json.dumps({"name": c.get("name"), "input": c.get("args")}, default=str)
            for c in message.tool_calls
        ]
    return "\n".join(p for p in parts if p)


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()
