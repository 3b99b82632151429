"""The request `ContextMiddleware` sends on, and the recent builds a retried call reuses.

`Call` is what the model will receive as far as the build must count it: the request's tools,
our archive tools (`recall`, the search tool) while the prompt names the archive, the
structured-output tool the agent adds. `sent_request` turns a build into the request handed to
the inner handler.

LangGraph gives every model-node run a state of its own; middleware that retries or falls back
calls the inner handler again with that state, the same messages and (a fallback) a model with
the same or another window. `BuildKey` names one call's inputs; the middleware keeps the last
few builds by it (`Builds`), so a retried call does not build (or summarize) again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import SystemMessage

from langgraph_ctx.graph.attempts import CalledModel, Target
from langgraph_ctx.ledger.schema import has_archived
from langgraph_ctx.prompt.assembly import tool_name
from langgraph_ctx.prompt.render import without_recall_calls
from langgraph_ctx.tokens.counter import count_tool_tokens

if TYPE_CHECKING:
    from langgraph_ctx.pipeline.result import BuildResult


SEARCH_SHARE = 0.05
"""Most of the window the search tool's schema may cost for the middleware to bind it."""


@dataclass(frozen=True, slots=True)
class Call:
    """What the model will receive, as far as the build must count it."""

    tools: list[Any]
    """Every tool the model will receive: the request's, `recall`, the structured-output tool."""
    names: tuple[str, ...]
    """The names of `tools`, in order."""
    counted_only: tuple[Any, ...]
    """Tools counted but added by the agent itself (structured output), not by the request."""
    added: tuple[Any, ...]
    """Our archive tools (`recall`, the search tool) the request did not bind: they are bound
    only while the prompt references the archive."""

    @classmethod
    def of(
        cls, request: ModelRequest[Any], ledger: Any, ours: Sequence[Any], requested: Target
    ) -> Call:
        """The call `request` makes, with `ours` (`recall` first, then the search tool).

        `recall` stays bound while a placeholder tells the model to call it, whatever an outer
        middleware (a tool selector) left in the request; the search tool with it, once
        something has left the prompt and when its schema fits the requested model's window.
        """
        tools = list(request.tools)
        search = has_archived(ledger) and search_fits(ours[1:], requested)
        if not search:  # nothing to search yet, or too dear: `create_agent` binds it anyway
            tools = [t for t in tools if t not in ours[1:]]
        names = {tool_name(t) for t in tools}
        added = [t for t in (ours if search else ours[:1]) if t.name not in names]
        tools.extend(added)
        structured = structured_output_tools(request.response_format)
        every = [*tools, *structured]
        return cls(
            tools=every,
            names=tuple(tool_name(t) for t in every),
            counted_only=tuple(t for t in structured if tool_name(t) not in names),
            added=tuple(added),
        )


def search_fits(search: Sequence[Any], requested: Target) -> bool:
    """Whether the search tool's schema costs at most `SEARCH_SHARE` of the model's window.

    In a tiny window the schema, sent with every call, would crowd out what it helps find
    (a summary no longer fits); there `recall` alone is bound.
    """
    if not search:
        return False
    return count_tool_tokens(requested.counter, search) <= SEARCH_SHARE * requested.window


def sent_request(
    request: ModelRequest[Any], result: BuildResult, call: Call, called: CalledModel
) -> ModelRequest[Any]:
    """`request` with the build's system message, messages and tools.

    The build's tools are the call's own objects (`tool_policy` filters, never copies): the
    ones only counted, and ours while the prompt does not name the archive, are left out.
    """
    messages: list[Any] = list(result.messages)
    tools = [t for t in result.tools if not _among(t, call.counted_only)]
    if called.recall_unbound:
        # A middleware inside drops `recall`: placeholders name the archive without
        # telling the model to call it; `recall` is still offered, should it stay bound.
        messages = without_recall_calls(messages)
    elif call.added and not result.names_recall:
        tools = [t for t in tools if not _among(t, call.added)]
    first = messages[0] if messages else None
    system = messages.pop(0) if isinstance(first, SystemMessage) else None
    return request.override(system_message=system, messages=messages, tools=tools)


def _among(tool: Any, tools: Sequence[Any]) -> bool:
    return any(tool is t for t in tools)


def structured_output_tools(response_format: Any) -> list[Any]:
    """The tools the agent adds for `response_format` (counted: the model receives them).

    A `ToolStrategy` binds one tool per schema; an `AutoStrategy` may become one, and a
    `ProviderStrategy` sends the same JSON schema another way, so both are counted alike.
    """
    if response_format is None:
        return []
    from langchain.agents.structured_output import (
        AutoStrategy,
        OutputToolBinding,
        ProviderStrategy,
        ToolStrategy,
    )

    if isinstance(response_format, (AutoStrategy, ProviderStrategy)):
        response_format = ToolStrategy(response_format.schema)
    elif not isinstance(response_format, ToolStrategy):  # a bare schema: an AutoStrategy
        response_format = ToolStrategy(response_format)
    return [OutputToolBinding.from_schema_spec(spec).tool for spec in response_format.schema_specs]


@dataclass(frozen=True, slots=True)
class BuildKey:
    """Identity of one model call's inputs: a retry or fallback of it has the same key.

    Ids are of objects the cache keeps alive.
    """

    state: int
    messages: tuple[int, ...]
    tools: tuple[str, ...]
    window: int
    counter: int

    @classmethod
    def of(
        cls,
        request: ModelRequest[Any],
        history: Sequence[Any],
        call: Call,
        window: int,
        counter: Any,
    ) -> BuildKey:
        """The key of `request`'s call with these messages, tools, window and counter."""
        return cls(
            state=id(request.state),
            messages=tuple(id(m) for m in history),
            tools=call.names,
            window=window,
            counter=id(counter),  # the memory keeps its counters: an id is never reused
        )


class Builds:
    """The builds of model calls in flight, by call inputs.

    A retried call does not build (or summarize) again; a call that passed drops its build.
    Not a cache (`langgraph_ctx._lru`): an entry lives while its call may be retried, and the
    few left by calls that never ended are the oldest to go past `size`. Each keeps the
    objects its key names alive (state, messages), so their ids cannot be reused meanwhile.
    Kept here, on the model call's path, so that path reads in the rooms it names.
    """

    size = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[BuildKey, tuple[Any, BuildResult]] = {}

    def get(self, key: BuildKey) -> BuildResult | None:
        """The build of `key`'s call, when it is still kept."""
        with self._lock:
            entry = self._entries.get(key)
        return entry[1] if entry is not None else None

    def put(self, key: BuildKey, keep: Any, result: BuildResult) -> None:
        """Keep `result` for `key`, and `keep` (the objects the key names) alive with it."""
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (keep, result)
            while len(self._entries) > self.size:  # dicts keep insertion order: oldest first
                del self._entries[next(iter(self._entries))]

    def drop(self, key: BuildKey) -> None:
        """Forget `key`'s build (its call passed)."""
        with self._lock:
            self._entries.pop(key, None)
