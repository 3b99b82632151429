"""What a token counter is: any callable from a message list to a whole number of tokens.

`TokenCounter` is the type every part of the package counts with (pass `len` in tests to make
every message cost one token); `checked_count` refuses a counter's answer that is not a whole
number >= 0, and `count_tool_tokens` counts tool schemas with any counter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from langgraph_ctx.errors import ConfigError

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Anything that counts the tokens of a message list (langchain's convention)."""


ToolLike = dict[str, Any] | type | Callable[..., Any] | BaseTool


def checked_count(counter: TokenCounter, messages: Sequence[BaseMessage]) -> int:
    """`counter(messages)`, refused unless it is a whole number >= 0.

    A custom counter returning `None`, a negative number or a float would otherwise fail far
    from its cause (a `TypeError` in the budget arithmetic) or make the prompt look smaller.

    Raises:
        ConfigError: The counter returned something other than a whole number >= 0.
    """
    tokens = counter(messages)
    if type(tokens) is int and tokens >= 0:  # the usual case: one C-level check
        return tokens
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        return int(tokens)
    msg = (
        f"token_counter returned {type(tokens).__name__} {tokens!r} for {len(messages)} "
        f"message(s); it must return a whole number >= 0 of tokens. Fix the counter {counter!r}, "
        "or pass TiktokenCounter(...) / ApproximateCounter()"
    )
    raise ConfigError(msg)


def count_tool_tokens(counter: TokenCounter, tools: Sequence[Any]) -> int:
    """Tokens of `tools`' schemas: the counter's `count_tools`, else their JSON as a message.

    Args:
        counter: Any token counter (a plain callable counts the schemas' JSON).
        tools: Tools or schemas, in any form `convert_to_openai_tool` accepts.
    """
    if not tools:
        return 0
    count_tools = getattr(counter, "count_tools", None)
    if callable(count_tools):
        return int(count_tools(list(tools)))
    from langchain_core.utils.function_calling import convert_to_openai_tool

    schemas = json.dumps([convert_to_openai_tool(t) for t in tools], sort_keys=True)
    return counter([SystemMessage(schemas)]) - counter([])
