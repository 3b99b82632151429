"""The anchors: today's answers, each driven through its real code path.

Nothing here re-implements an anchor. Each adapter keeps the history the anchor's graph would
keep and calls the anchor's own entry point before every model call:

* `TrimMessagesAnchor`: `langchain_core.messages.trim_messages` on the whole history.
* `ContextEditingAnchor`: `ContextEditingMiddleware(ClearToolUsesEdit)`, its
  `wrap_model_call` with a real `ModelRequest`; the handler captures the edited request.
* `LCSummarizationAnchor`: LangChain's `SummarizationMiddleware.before_model` on an
  `AgentState`; its state update (`RemoveMessage(REMOVE_ALL_MESSAGES)` + summary + kept
  messages) is applied to the kept history with LangGraph's `add_messages` reducer.
* `LangmemAnchor`: `langmem.short_term.summarize_messages` with its `RunningSummary` carried
  between calls, as `SummarizationNode` does (the raw history stays in state).
* `DeepagentsSummarizationAnchor`: deepagents' `create_summarization_middleware(...)` and its
  `wrap_model_call`; the `_summarization_event` (and any message replacements) it returns in
  its `Command` are applied to the kept state. History offloads go to a `FilesystemBackend`.
* `DeepagentsEvictionAnchor`: deepagents' `FilesystemMiddleware`: every tool result passes
  its `wrap_tool_call` (large tool result eviction to the backend) when it is produced, and
  every model call its `wrap_model_call`.

As in `create_agent`, the system prompt is not part of a middleware's `state["messages"]`: it
travels as `ModelRequest.system_message`, and budgets given to anchors that count state
messages only are reduced by the system prompt's tokens.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware import SummarizationMiddleware as LCSummarizationMiddleware
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langgraph.graph.message import add_messages

from benchmarks.replay import FactEchoModel, counter, make_model
from langgraph_ctx.messages import text_of

__all__ = [
    "ContextEditingAnchor",
    "DeepagentsAgentAnchor",
    "DeepagentsEvictionAnchor",
    "DeepagentsSummarizationAnchor",
    "LCSummarizationAnchor",
    "LangmemAnchor",
    "TrimMessagesAnchor",
]


class _Base:
    """Shared bookkeeping: the system prompt apart, the state messages, the captured request."""

    name = "anchor"
    model: FactEchoModel | None = None

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.system: SystemMessage | None = None
        self.messages: list[BaseMessage] = []  # state["messages"], system prompt excluded
        self.captured: list[ModelRequest] = []

    def _absorb(self, new: list[BaseMessage]) -> list[BaseMessage]:
        if self.system is None and not self.messages and new and isinstance(new[0], SystemMessage):
            self.system, new = new[0], new[1:]
        return new

    def _system_tokens(self) -> int:
        return counter()([self.system]) - counter()([]) if self.system is not None else 0

    def _handler(self, request: ModelRequest) -> ModelResponse:
        self.captured.append(request)
        return ModelResponse(result=[AIMessage("")])

    def _request(self, state: dict[str, Any] | None = None) -> ModelRequest:
        return ModelRequest(
            model=self.model or _STUB_MODEL,
            messages=list(self.messages),
            system_message=self.system,
            tools=[],
            state=state if state is not None else {"messages": list(self.messages)},
            runtime=None,
        )

    def _sent(self) -> list[BaseMessage]:
        request = self.captured[-1]
        self.captured.clear()
        head = [request.system_message] if request.system_message is not None else []
        return [*head, *request.messages]

    def _full(self) -> list[BaseMessage]:
        return ([self.system] if self.system is not None else []) + self.messages

    def recoverable_texts(self) -> Iterable[str]:
        """The kept state's texts."""
        return (text_of(m) for m in self._full())

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """No extra metrics by default."""
        return {}


_STUB_MODEL = make_model(0)


class TrimMessagesAnchor(_Base):
    """`trim_messages(strategy="last", start_on="human", include_system=True)` each call.

    `tool_safe`: the newest history from a user or model message on (`start_on=("human",
    "ai")`, never an orphan tool result), with the task (the first user message) pinned in
    front when the kept history opens with the model, as Anthropic wants a user message
    first; the task's tokens come off the trim budget. At its best it fills the budget
    (`fill`, the default): `allow_partial=True` keeps the newest lines of the message that
    straddles the budget instead of dropping it whole (LangChain's documented way to use all
    of `max_tokens`), and the budget is lowered by any token the recount of the assembled
    prompt finds over it (the pieces are counted apart).
    """

    def __init__(self, *, limit: int, tool_safe: bool = False, fill: bool = True) -> None:
        super().__init__(limit=limit)
        self.tool_safe, self.fill = tool_safe, fill
        self.name = "trim_messages, tool-safe" if tool_safe else "trim_messages"
        if tool_safe and not fill:
            self.name += ", whole messages"

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Trim the whole history to the limit."""
        self.messages.extend(new)
        if not self.tool_safe:
            return trim_messages(
                self.messages,
                strategy="last",
                max_tokens=self.limit,
                start_on="human",
                include_system=True,
                allow_partial=False,
                token_counter=counter(),
            )
        head = [m for m in self.messages[:1] if isinstance(m, SystemMessage)]
        rest = self.messages[len(head) :]
        task = next((m for m in rest if isinstance(m, HumanMessage)), None)
        pinned = [task] if task is not None else []
        budget = self.limit - counter()([*head, *pinned])
        while True:
            prompt = self._trimmed(head, rest, pinned, budget)
            over = counter()(prompt) - self.limit
            if over <= 0 or budget <= 0:
                return prompt
            budget -= over

    def _trimmed(
        self,
        head: list[BaseMessage],
        rest: list[BaseMessage],
        pinned: list[BaseMessage],
        budget: int,
    ) -> list[BaseMessage]:
        kept = trim_messages(
            rest,
            strategy="last",
            max_tokens=max(0, budget),
            start_on=("human", "ai"),
            allow_partial=self.fill,
            token_counter=counter(),
        )
        if (kept and isinstance(kept[0], HumanMessage)) or not pinned:
            return [*head, *kept]
        task = pinned[0]
        return [*head, *pinned, *[m for m in kept if m is not task]]


class ContextEditingAnchor(_Base):
    """`ContextEditingMiddleware([ClearToolUsesEdit(trigger, keep=3)])` via `wrap_model_call`."""

    name = "ContextEditing(ClearToolUses)"

    def __init__(self, *, limit: int, trigger: int, keep: int = 3) -> None:
        super().__init__(limit=limit)
        self.trigger, self.keep = trigger, keep
        self.mw: ContextEditingMiddleware | None = None

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Edit a deep copy of the history (the middleware's own behaviour) and capture it."""
        self.messages.extend(self._absorb(new))
        if self.mw is None:  # the trigger counts state messages: leave room for the system
            edit = ClearToolUsesEdit(trigger=self.trigger - self._system_tokens(), keep=self.keep)
            self.mw = ContextEditingMiddleware(edits=[edit], token_counter=counter())
        self.mw.wrap_model_call(self._request(), self._handler)
        return self._sent()


class LCSummarizationAnchor(_Base):
    """LangChain `SummarizationMiddleware.before_model`, its state rewrite applied."""

    name = "LC SummarizationMiddleware"

    def __init__(
        self,
        *,
        limit: int,
        trigger: int,
        keep: int,
        model: FactEchoModel | None = None,
        trim_tokens_to_summarize: int | None = 4000,
    ) -> None:
        super().__init__(limit=limit)
        self.model = model or make_model(limit)
        self.trigger, self.keep = trigger, keep
        self.trim = trim_tokens_to_summarize
        self.mw: LCSummarizationMiddleware | None = None
        self.rewrites = 0

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Run `before_model`; apply its update with `add_messages`; the prompt is the state."""
        self.messages.extend(self._absorb(new))
        if self.mw is None:
            room = self._system_tokens()
            self.mw = LCSummarizationMiddleware(
                model=self.model,  # type: ignore[arg-type]
                trigger=("tokens", self.trigger - room),
                keep=("tokens", self.keep - room),
                token_counter=counter(),
                trim_tokens_to_summarize=self.trim,
            )
        update = self.mw.before_model({"messages": self.messages}, None)  # type: ignore[arg-type]
        if update:
            self.messages = list(add_messages(self.messages, update["messages"]))  # type: ignore[arg-type]
            self.rewrites += 1
        return self._full()

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """How often the whole state was rewritten."""
        return {"state_rewrites": self.rewrites}


class LangmemAnchor(_Base):
    """`langmem.short_term.summarize_messages` with the running summary carried forward."""

    name = "langmem summarize_messages"

    def __init__(
        self,
        *,
        limit: int,
        before_summary: int,
        max_summary_tokens: int,
        model: FactEchoModel | None = None,
    ) -> None:
        super().__init__(limit=limit)
        self.model = model or make_model(limit)
        self.before_summary = before_summary
        self.max_summary_tokens = max_summary_tokens
        self.running: Any = None
        self.history: list[BaseMessage] = []  # the raw history, system prompt included

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Summarize as `SummarizationNode` would; the raw history stays untouched."""
        from langmem.short_term import summarize_messages

        self.history.extend(new)
        result = summarize_messages(
            self.history,
            running_summary=self.running,
            model=self.model,
            max_tokens=self.limit,
            max_tokens_before_summary=self.before_summary,
            max_summary_tokens=self.max_summary_tokens,
            token_counter=counter(),
        )
        if result.running_summary is not None:
            self.running = result.running_summary
        return list(result.messages)

    def recoverable_texts(self) -> Iterable[str]:
        """The raw history (state messages are never removed)."""
        return (text_of(m) for m in self.history)


class DeepagentsSummarizationAnchor(_Base):
    """deepagents `create_summarization_middleware(model, backend)` via `wrap_model_call`."""

    name = "deepagents summarization"

    def __init__(self, *, limit: int, model: FactEchoModel | None = None) -> None:
        super().__init__(limit=limit)
        from deepagents.backends import FilesystemBackend
        from deepagents.middleware.summarization import create_summarization_middleware

        self.model = model or make_model(limit)
        self.root = Path(tempfile.mkdtemp(prefix="bench-deepagents-"))
        self.backend = FilesystemBackend(root_dir=self.root, virtual_mode=True)
        self.mw = create_summarization_middleware(
            self.model,  # type: ignore[arg-type]
            self.backend,
            token_counter=counter(),
        )
        self.state: dict[str, Any] = {"messages": self.messages}
        self.events = 0

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Call `wrap_model_call`; apply the returned `Command` update to the kept state."""
        self.messages.extend(self._absorb(new))
        self.state["messages"] = self.messages
        response = self.mw.wrap_model_call(self._request(self.state), self._handler)
        prompt = self._sent()
        if isinstance(response, ExtendedModelResponse) and response.command is not None:
            for key, value in (response.command.update or {}).items():  # type: ignore[union-attr]
                if key == "messages":
                    self.messages = list(add_messages(self.messages, value))
                    self.state["messages"] = self.messages
                else:
                    self.state[key] = value
                    self.events += key == "_summarization_event"
        return prompt

    def recoverable_texts(self) -> Iterable[str]:
        """State messages (never removed) and the offloaded history files."""
        yield from super().recoverable_texts()
        for path in self.root.rglob("*"):
            if path.is_file():
                yield path.read_text(encoding="utf-8", errors="replace")

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Bytes offloaded; the temporary backend is removed."""
        written = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        shutil.rmtree(self.root, ignore_errors=True)
        return {"archive_bytes": written, "summary_events": self.events}


class DeepagentsEvictionAnchor(_Base):
    """deepagents `FilesystemMiddleware(tool_token_limit_before_evict=...)`.

    Tool results pass `wrap_tool_call` as they are produced (eviction rewrites what enters
    state); model calls pass `wrap_model_call` (oversized human messages are evicted there).
    """

    name = "deepagents FilesystemMiddleware eviction"

    def __init__(self, *, limit: int, evict_tokens: int) -> None:
        super().__init__(limit=limit)
        from deepagents.backends import FilesystemBackend
        from deepagents.middleware.filesystem import FilesystemMiddleware

        self.root = Path(tempfile.mkdtemp(prefix="bench-deepagents-fs-"))
        self.backend = FilesystemBackend(root_dir=self.root, virtual_mode=True)
        self.mw = FilesystemMiddleware(
            backend=self.backend, tool_token_limit_before_evict=evict_tokens
        )
        self.state: dict[str, Any] = {"messages": self.messages}
        self.evicted: dict[str, ToolMessage] = {}  # id -> the original result

    def _produce(self, message: BaseMessage) -> BaseMessage:
        from langgraph.prebuilt.tool_node import ToolCallRequest

        if not isinstance(message, ToolMessage):
            return message
        ai = next((m for m in reversed(self.messages) if isinstance(m, AIMessage)), None)
        call = next(
            (tc for tc in (ai.tool_calls if ai else []) if tc.get("id") == message.tool_call_id),
            {"name": message.name or "tool", "args": {}, "id": message.tool_call_id},
        )
        request = ToolCallRequest(tool_call=call, tool=None, state=self.state, runtime=None)  # type: ignore[arg-type]
        out = self.mw.wrap_tool_call(request, lambda _req: message)
        if not isinstance(out, ToolMessage):  # a Command: not produced by these tool results
            return message
        if out is not message and out.content != message.content:
            self.evicted[message.id or ""] = message
        return out

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Produce the new tool results through `wrap_tool_call`, then `wrap_model_call`."""
        for message in self._absorb(new):
            self.messages.append(self._produce(message))
        self.state["messages"] = self.messages
        response = self.mw.wrap_model_call(self._request(self.state), self._handler)
        prompt = self._sent()
        if isinstance(response, ExtendedModelResponse) and response.command is not None:
            update = response.command.update or {}
            if "messages" in update:  # type: ignore[operator]
                self.messages = list(add_messages(self.messages, update["messages"]))  # type: ignore[index]
                self.state["messages"] = self.messages
        return prompt

    def recoverable_texts(self) -> Iterable[str]:
        """State messages and evicted files."""
        yield from super().recoverable_texts()
        for path in self.root.rglob("*"):
            if path.is_file():
                yield path.read_text(encoding="utf-8", errors="replace")

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Restorability of evicted results (file content equal to the original content)."""
        from deepagents.backends.utils import sanitize_tool_call_id

        restored = 0
        for message in self.evicted.values():
            path = self.root / "large_tool_results" / sanitize_tool_call_id(message.tool_call_id)
            try:
                with path.open(encoding="utf-8", newline="") as fh:
                    restored += fh.read() == message.content
            except OSError:
                pass
        written = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        shutil.rmtree(self.root, ignore_errors=True)
        return {
            "removed": len(self.evicted),
            "restorable": restored,
            "archive_bytes": written,
            "restorable_note": "evicted content equals the file (message fields kept in state)",
        }


class DeepagentsAgentAnchor(DeepagentsEvictionAnchor):
    """The context stack of `create_deep_agent`: `FilesystemMiddleware` (large tool result
    eviction, `tool_token_limit_before_evict`) then `create_summarization_middleware`.

    Tool results pass the filesystem middleware's `wrap_tool_call` as they are produced; each
    model call passes its `wrap_model_call`, whose handler is the summarization middleware's
    `wrap_model_call` (the order `create_deep_agent` composes them in). Both write to one
    `FilesystemBackend`; every `Command` update either returns is applied to the kept state.
    """

    def __init__(
        self,
        *,
        limit: int,
        evict_tokens: int,
        model: FactEchoModel | None = None,
        scaled: bool = False,
    ) -> None:
        super().__init__(limit=limit, evict_tokens=evict_tokens)
        from deepagents.middleware.summarization import create_summarization_middleware

        self.name = f"deepagents (evict at {evict_tokens:,}{', scaled' if scaled else ''})"
        self.model = model or make_model(limit)
        self.summarization = create_summarization_middleware(
            self.model,  # type: ignore[arg-type]
            self.backend,
            token_counter=counter(),
        )

    def _apply(self, response: object) -> None:
        if isinstance(response, ExtendedModelResponse) and response.command is not None:
            for key, value in (response.command.update or {}).items():  # type: ignore[union-attr]
                if key == "messages":
                    self.messages = list(add_messages(self.messages, value))
                    self.state["messages"] = self.messages
                else:
                    self.state[key] = value

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Produce new tool results through eviction, then call both model wrappers."""
        for message in self._absorb(new):
            self.messages.append(self._produce(message))
        self.state["messages"] = self.messages
        inner: list[object] = []

        def handler(request: ModelRequest) -> Any:
            response = self.summarization.wrap_model_call(request, self._handler)
            inner.append(response)
            return response

        outer = self.mw.wrap_model_call(self._request(self.state), handler)
        prompt = self._sent()
        for response in {id(r): r for r in [*inner, outer]}.values():
            self._apply(response)
        return prompt
