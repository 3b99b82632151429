"""What one model call of `ContextMiddleware` receives, what it is built for, and its cache.

`_Call` is what the model will receive as far as the build must count it (the tools, the
structured-output tool), `Target` the model a build is made for (its counter, its window less
what was learned), `KnownModels` the models the middleware saw called (a fallback the ledger
names is found again), `BuildKey`/`Builds` the few recent builds a retried call reuses.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import ModelRequest

from langgraph_ctx.graph._guard import effective_window
from langgraph_ctx.prompt.assembly import tool_name

if TYPE_CHECKING:
    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.pipeline.result import BuildResult


MAX_REBUILDS = 4
"""Rebuilds of one model call after refusals; each must have taught something (see `_plan`)."""


@dataclass(frozen=True, slots=True)
class Target:
    """The model a build is made for: its counter, and its window less what was learned."""

    model: Any
    memory: ContextMemory

    @property
    def counter(self) -> Any:
        return self.memory.counter_for(self.model)

    def window(self, called: Mapping[str, Any]) -> int:
        return effective_window(called, self.memory.window_for(self.model))


class KnownModels:
    """The models this middleware saw called, by identity (`same_model` finds them)."""

    size = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: OrderedDict[int, Any] = OrderedDict()

    def update(self, models: Sequence[Any]) -> None:
        with self._lock:
            for model in models:
                self._models[id(model)] = model  # kept alive here: the id is not reused
                self._models.move_to_end(id(model))
            while len(self._models) > self.size:
                self._models.popitem(last=False)

    def models(self) -> list[Any]:
        with self._lock:
            return list(self._models.values())


@dataclass(frozen=True, slots=True)
class Call:
    tools: list[Any]
    """Every tool the model will receive: the request's, `recall`, the structured-output tool."""
    counted_only: frozenset[str]
    """Tools counted but added by the agent itself (structured output), not by the request."""
    added: frozenset[str]
    """Our archive tools (`recall`, the search tool) the request did not bind: they are bound
    only while the prompt references the archive."""


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

    LangGraph gives every model-node run a state of its own; middleware that retries or falls
    back calls the inner handler again with that state, the same messages and (a fallback) a
    model with the same or another window. Ids are of objects the cache keeps alive.
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
        return cls(
            state=id(request.state),
            messages=tuple(id(m) for m in history),
            tools=tuple(tool_name(t) for t in call.tools),
            window=window,
            counter=id(counter),  # the memory keeps its counters: an id is never reused
        )


class Builds:
    """A few recent builds by call inputs, so a retried call does not build (or summarize) again.

    Each entry keeps the objects its key names alive (state, messages), so their ids cannot be
    reused while it is cached.
    """

    size = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[BuildKey, tuple[Any, BuildResult]] = OrderedDict()

    def get(self, key: BuildKey) -> BuildResult | None:
        with self._lock:
            entry = self._entries.get(key)
        return entry[1] if entry is not None else None

    def put(self, key: BuildKey, keep: Any, result: BuildResult) -> None:
        with self._lock:
            self._entries[key] = (keep, result)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def drop(self, key: BuildKey) -> None:
        with self._lock:
            self._entries.pop(key, None)
