"""The few recent builds of `ContextMiddleware`, so a retried call does not build again.

LangGraph gives every model-node run a state of its own; middleware that retries or falls back
calls the inner handler again with that state, the same messages and (a fallback) a model with
the same or another window. `BuildKey` names one call's inputs, `Builds` keeps their builds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import ModelRequest

from langgraph_ctx.graph.model_request import Call
from langgraph_ctx.prompt.assembly import tool_name

if TYPE_CHECKING:
    from langgraph_ctx.pipeline.result import BuildResult


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
        """The key of `request`'s call with these messages, tools, window and counter."""
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
        """The build of `key`'s call, when it is still kept."""
        with self._lock:
            entry = self._entries.get(key)
        return entry[1] if entry is not None else None

    def put(self, key: BuildKey, keep: Any, result: BuildResult) -> None:
        """Keep `result` for `key`, and `keep` (the objects the key names) alive with it."""
        with self._lock:
            self._entries[key] = (keep, result)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def drop(self, key: BuildKey) -> None:
        """Forget `key`'s build (its call passed)."""
        with self._lock:
            self._entries.pop(key, None)
