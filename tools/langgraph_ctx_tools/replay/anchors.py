"""The anchors: what a team would pick instead, each driven through its real code path.

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
* deepagents' summarization and eviction: `langgraph_ctx_tools.replay.anchors_deepagents`.

Each is a `langgraph_ctx_tools.replay.engine.System`: `langgraph-ctx frontier` and the benchmarks
replay them through the same engine. Counts use the given counter (default: exact gpt-4o);
anchors that need a summarizer get the given model (the frontier and the benchmarks give every
row the one summarizer of a summary condition, `replay.summary_models`), or else a
`RecordingModel` that writes nothing.

As in `create_agent`, the system prompt is not part of a middleware's `state["messages"]`: it
travels as `ModelRequest.system_message`, and budgets given to anchors that count state
messages only are reduced by the system prompt's tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any, cast

from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware import SummarizationMiddleware as LCSummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    trim_messages,
)
from langgraph.graph.message import add_messages

from langgraph_ctx.messages import text_of
from langgraph_ctx.tokens import TiktokenCounter
from langgraph_ctx_tools.replay.models import Counter, RecordingModel, summarizer_usage

__all__ = [
    "AnchorBase",
    "ContextEditingAnchor",
    "LCSummarizationAnchor",
    "LangmemAnchor",
    "TrimMessagesAnchor",
    "gpt4o_counter",
    "merged",
    "stand_in",
]


class AnchorBase:
    """Shared bookkeeping: the system prompt apart, the state messages, the captured request."""

    name = "anchor"
    model: BaseChatModel | None = None

    def __init__(self, *, limit: int, counter: Counter | None = None) -> None:
        self.limit = limit
        # Any: each anchor's API types its token counter its own way; all take a message list.
        self.count: Any = counter or gpt4o_counter()
        self.system: SystemMessage | None = None
        self.messages: list[BaseMessage] = []  # state["messages"], system prompt excluded
        self.captured: list[ModelRequest] = []

    def _absorb(self, new: list[BaseMessage]) -> list[BaseMessage]:
        if self.system is None and not self.messages and new and isinstance(new[0], SystemMessage):
            self.system, new = new[0], new[1:]
        return new

    def _system_tokens(self) -> int:
        return self.count([self.system]) - self.count([]) if self.system is not None else 0

    def _handler(self, request: ModelRequest) -> ModelResponse:
        self.captured.append(request)
        return ModelResponse(result=[AIMessage("")])

    def _request(self, state: dict[str, Any] | None = None) -> ModelRequest:
        return ModelRequest(
            model=self.model or _STUB_MODEL,
            messages=cast(Any, list(self.messages)),
            system_message=self.system,
            tools=[],
            state=cast(Any, state if state is not None else {"messages": list(self.messages)}),
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

    def observe(self) -> None:
        """Nothing to record between calls."""

    def summarizer_usage(self) -> tuple[int, int, int]:
        """(calls, input tokens, output tokens) of the anchor's summarizer model so far."""
        return summarizer_usage(self.model, self.count)

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """No extra metrics by default."""
        return {}


def merged(messages: list[BaseMessage], update: Any) -> list[BaseMessage]:
    """`messages` with a state update applied by LangGraph's `add_messages` reducer."""
    return cast(list[BaseMessage], list(add_messages(cast(Any, messages), update)))


@cache
def gpt4o_counter() -> TiktokenCounter:
    """The exact gpt-4o counter the anchors count with unless given one (one, shared)."""
    return TiktokenCounter("gpt-4o")


def stand_in(limit: int) -> RecordingModel:
    """The summarizer an anchor gets when none is given: records its input, writes nothing.

    Its profile advertises `limit` input tokens.
    """
    return RecordingModel(profile={"max_input_tokens": limit})


_STUB_MODEL = stand_in(0)


class TrimMessagesAnchor(AnchorBase):
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

    def __init__(
        self,
        *,
        limit: int,
        tool_safe: bool = False,
        fill: bool = True,
        counter: Counter | None = None,
    ) -> None:
        super().__init__(limit=limit, counter=counter)
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
                token_counter=self.count,
            )
        head: list[BaseMessage] = [m for m in self.messages[:1] if isinstance(m, SystemMessage)]
        rest = self.messages[len(head) :]
        task = next((m for m in rest if isinstance(m, HumanMessage)), None)
        pinned: list[BaseMessage] = [task] if task is not None else []
        budget = self.limit - self.count([*head, *pinned])
        while True:
            prompt = self._trimmed(head, rest, pinned, budget)
            over = self.count(prompt) - self.limit
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
            token_counter=self.count,
        )
        if (kept and isinstance(kept[0], HumanMessage)) or not pinned:
            return [*head, *kept]
        task = pinned[0]
        return [*head, *pinned, *[m for m in kept if m is not task]]


class ContextEditingAnchor(AnchorBase):
    """`ContextEditingMiddleware([ClearToolUsesEdit(trigger, keep=3)])` via `wrap_model_call`."""

    name = "ContextEditing(ClearToolUses)"

    def __init__(
        self, *, limit: int, trigger: int, keep: int = 3, counter: Counter | None = None
    ) -> None:
        super().__init__(limit=limit, counter=counter)
        self.trigger, self.keep = trigger, keep
        self.mw: ContextEditingMiddleware | None = None

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Edit a deep copy of the history (the middleware's own behaviour) and capture it."""
        self.messages.extend(self._absorb(new))
        if self.mw is None:  # the trigger counts state messages: leave room for the system
            edit = ClearToolUsesEdit(trigger=self.trigger - self._system_tokens(), keep=self.keep)
            self.mw = ContextEditingMiddleware(edits=[edit], token_counter=self.count)
        self.mw.wrap_model_call(self._request(), self._handler)
        return self._sent()


class LCSummarizationAnchor(AnchorBase):
    """LangChain `SummarizationMiddleware.before_model`, its state rewrite applied."""

    name = "LC SummarizationMiddleware"

    def __init__(
        self,
        *,
        limit: int,
        trigger: int,
        keep: int,
        model: BaseChatModel | None = None,
        trim_tokens_to_summarize: int | None = 4000,
        counter: Counter | None = None,
    ) -> None:
        super().__init__(limit=limit, counter=counter)
        self.model = model or stand_in(limit)
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
                token_counter=self.count,
                trim_tokens_to_summarize=self.trim,
            )
        update = self.mw.before_model(cast(Any, {"messages": self.messages}), cast(Any, None))
        if update:
            self.messages = merged(self.messages, update["messages"])
            self.rewrites += 1
        return self._full()

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """How often the whole state was rewritten."""
        return {"state_rewrites": self.rewrites}


class LangmemAnchor(AnchorBase):
    """`langmem.short_term.summarize_messages` with the running summary carried forward."""

    name = "langmem summarize_messages"

    def __init__(
        self,
        *,
        limit: int,
        before_summary: int,
        max_summary_tokens: int,
        model: BaseChatModel | None = None,
        counter: Counter | None = None,
    ) -> None:
        super().__init__(limit=limit, counter=counter)
        self.model = model or stand_in(limit)
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
            token_counter=self.count,
        )
        if result.running_summary is not None:
            self.running = result.running_summary
        return list(result.messages)

    def recoverable_texts(self) -> Iterable[str]:
        """The raw history (state messages are never removed)."""
        return (text_of(m) for m in self.history)
