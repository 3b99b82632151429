"""`ContextMiddleware`: the pipeline as an `AgentMiddleware` for `langchain.agents.create_agent`.

Around every model call it builds the request from the pipeline (system prompt, summary,
window, placeholders, tools), calls the model, writes the `context_cost` report onto the AI
message's `response_metadata`, and persists the ledger in the agent state. When the provider
still answers with a `ContextOverflowError`, it rebuilds against a smaller window and retries
once before raising `ContextWindowExceededError`. After the agent finishes a turn it runs the
hint rebuild (DESIGN part 7).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, SystemMessage
from langgraph.types import Command

from langgraph_ctx._effects import CallHandler, Plan, arun_plan, run_plan
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.state import ContextAgentState

if TYPE_CHECKING:
    from langgraph_ctx.memory import ContextMemory
    from langgraph_ctx.pipeline import BuildResult


def _internal_call_transformers() -> tuple[Any, ...]:
    try:
        from langchain.agents.middleware.internal_call_transformer import (
            InternalCallTransformer,
        )
    except ImportError:  # an older langchain: the `nostream` tag still filters `messages`
        return ()
    return (InternalCallTransformer,)


class ContextMiddleware(AgentMiddleware[ContextAgentState, Any]):  # type: ignore[type-var]
    """Keeps a `create_agent` agent inside its context window.

    Example:
        >>> from langgraph_ctx import ContextMemory
        >>> memory = ContextMemory(context_window_tokens=32_000)
        >>> middleware = memory.middleware()  # create_agent(model, tools, middleware=[middleware])

    Args:
        memory: The `ContextMemory` whose pipeline, archive and rebuild policy to use.
    """

    state_schema = ContextAgentState
    transformers = _internal_call_transformers()
    """Keeps the summarizer's and extractor's calls out of the v3 stream's `run.messages`."""

    def __init__(self, memory: ContextMemory) -> None:
        super().__init__()
        self.memory = memory
        self.tools = [memory.recall_tool()] if memory.expose_recall else []

    @property
    def name(self) -> str:
        """Middleware name in the agent graph."""
        return "ContextMiddleware"

    # --- one plan, two drivers -------------------------------------------------------------

    def _request(self, request: ModelRequest[Any], result: BuildResult) -> ModelRequest[Any]:
        messages: list[Any] = list(result.messages)
        first = messages[0] if messages else None
        system = messages.pop(0) if isinstance(first, SystemMessage) else None
        return request.override(system_message=system, messages=messages, tools=result.tools)

    def _plan(self, request: ModelRequest[Any], handler: Callable[[Any], Any]) -> Plan[Any]:
        history: list[BaseMessage] = list(request.messages)
        if request.system_message is not None:
            history.insert(0, request.system_message)
        ledger: Any = request.state.get("context_ledger") if request.state else None
        result = yield from self.memory.plan_build(history, ledger, None, tools=request.tools)
        call = self._request(request, result)
        try:
            response = yield CallHandler(handler, call)
        except ContextWindowExceededError:
            raise
        except ContextOverflowError as exc:
            try:
                result = yield from self.memory.plan_build(
                    history, ledger, None, tools=request.tools, harder=True
                )
            except ContextWindowExceededError as err:
                raise err from exc
            call = self._request(request, result)
            try:
                response = yield CallHandler(handler, call)
            except ContextOverflowError as again:
                report = result.report
                report.fail(f"the provider still overflowed: {again}")
                raise ContextWindowExceededError(str(report.error), report) from again
        state_messages = list((request.state or {}).get("messages") or [])
        removals, ledger = yield from self.memory.plan_removals(state_messages, result, None)
        return _with_report(response, result, ledger, removals)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Any],
    ) -> Any:
        """Build the request from the pipeline, call the model, record the report."""
        return run_plan(self._plan(request, handler))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[Any]],
    ) -> Any:
        """Async twin of `wrap_model_call`."""
        return await arun_plan(self._plan(request, handler))

    def after_agent(self, state: ContextAgentState, runtime: Any) -> dict[str, Any] | None:
        """After a turn: rebuild from a compression hint when the last prompt was too big."""
        plan = self.memory.plan_after_turn(state["messages"], state.get("context_ledger"), None)
        return run_plan(plan) or None

    async def aafter_agent(self, state: ContextAgentState, runtime: Any) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        plan = self.memory.plan_after_turn(state["messages"], state.get("context_ledger"), None)
        return await arun_plan(plan) or None


def _with_report(
    response: Any,
    result: BuildResult,
    ledger: dict[str, Any],
    removals: list[RemoveMessage],
) -> ExtendedModelResponse[Any]:
    from langgraph_ctx.memory import attach_report

    if isinstance(response, ExtendedModelResponse):
        inner, command = response.model_response, response.command
    elif isinstance(response, AIMessage):
        inner, command = ModelResponse(result=[response]), None
    else:
        inner, command = response, None
    report = result.report.to_dict()
    inner = ModelResponse(
        result=[attach_report(m, report) if isinstance(m, AIMessage) else m for m in inner.result],
        structured_response=inner.structured_response,
    )
    update: dict[str, Any] = {"context_ledger": ledger}
    if removals:  # `remove_summarized`: applied after the new AI message, by id
        update["messages"] = removals
    if command is not None and isinstance(command.update, dict):
        inner_update = dict(command.update)
        if removals and inner_update.get("messages"):
            update["messages"] = [*inner_update.pop("messages"), *removals]
        update = {**inner_update, **update}
    return ExtendedModelResponse(model_response=inner, command=Command(update=update))
