"""What a token counter is: any callable from a message list to a whole number of tokens.

`TokenCounter` is the type every part of the package counts with (pass `len` in tests to make
every message cost one token); `checked_count` refuses a counter's answer that is not a whole
number >= 0, `count_tool_tokens` counts tool schemas with any counter, and `tool_schema` is
the one conversion of a tool to its schema (`check_tools` refuses what is not a tool).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from langgraph_ctx.checks import check_list
from langgraph_ctx.errors import ConfigError, reason_of, shorten

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


_A_TOOL = "a tool: a BaseTool, a function, a pydantic model or an OpenAI tool schema dict"


def tool_schema(tool: Any, where: str = "tool") -> dict[str, Any]:
    """The OpenAI schema of `tool` (`convert_to_openai_tool`): the one conversion counters use.

    Args:
        tool: A tool in any form `convert_to_openai_tool` accepts.
        where: How the message names it, e.g. `tools[2]`.

    Raises:
        ConfigError: `tool` is not a tool, naming `where` and the value, instead of LangChain's
            `ValueError: Unsupported function` that names neither.
    """
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        return convert_to_openai_tool(tool)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        msg = (
            f"{where} must be {_A_TOOL}, got {type(tool).__name__} {shorten(tool)} "
            f"(LangChain: {reason_of(exc)}); pass e.g. tools=[my_tool] with a @tool function, or "
            "{'name': 'search', 'description': '...', 'parameters': {...}}"
        )
        raise ConfigError(msg) from exc


def tool_function(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The `function` part of an OpenAI tool schema; None for a provider's built-in tool.

    A built-in tool (`{"type": "web_search_preview"}`, Anthropic's `{"type": "bash_20250124",
    ...}`) passes `convert_to_openai_tool` as it is, with no function; the provider bills it
    its own way, which the counters estimate from its JSON text.
    """
    function = schema.get("function")
    return function if isinstance(function, dict) else None


def check_tools(tools: Any) -> None:
    """Refuse `tools` unless it is None or a list of tools, each named in the message.

    Cheap enough for every build: a schema dict is converted (that is formatting), other tools
    only need to be a `BaseTool` or callable (functions, pydantic models).

    Raises:
        ConfigError: Not a list, or an item that is not a tool (`tools[i]`).
    """
    check_list("tools", tools, "tools, e.g. [my_tool] (functions, BaseTool or schemas)")
    for i, tool in enumerate(tools or ()):
        if isinstance(tool, Mapping):
            tool_schema(tool, f"tools[{i}]")
        elif not (isinstance(tool, BaseTool) or callable(tool)):
            msg = (
                f"tools[{i}] must be {_A_TOOL}, got {type(tool).__name__} {shorten(tool)}; "
                "pass e.g. tools=[my_tool] with a @tool function"
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
    schemas = json.dumps(
        [tool_schema(t, f"tools[{i}]") for i, t in enumerate(tools)], sort_keys=True
    )
    return counter([SystemMessage(schemas)]) - counter([])
