"""`ContextMiddleware`: the pipeline as an `AgentMiddleware` for `langchain.agents.create_agent`.

Around every model call it builds the request from the pipeline (system prompt, summary,
window, placeholders, tools), calls the model, writes the `context_cost` report onto the AI
message's `response_metadata`, and persists the ledger in the agent state. After the agent
finishes a turn it runs the hint rebuild (DESIGN part 7).

This module is the LangChain adapter; one model call (`ContextMiddleware._plan`) reads top-down
through the modules it names: the attempt and what the ledger learned of the called model
(`attempts`), the request built and the recent builds a retried call reuses (`model_request`),
the call guard that counts what the model actually receives and refuses a call that cannot fit
(`guard`), then `attempts` again for the decision to rebuild after a refusal or a provider's
overflow, or to raise.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command

from langgraph_ctx._effects import CallHandler, Plan, arun_plan, both, run_plan
from langgraph_ctx.errors import ConfigError, ContextWindowExceededError, shorten
from langgraph_ctx.graph.attempts import (
    Attempt,
    CalledModel,
    KnownModels,
    ModelTerms,
    Received,
    after_failure,
    too_little_left,
)
from langgraph_ctx.graph.guard import CallGuard, guarded
from langgraph_ctx.graph.model_request import BuildKey, Builds, Call, sent_request
from langgraph_ctx.graph.state import ContextAgentState
from langgraph_ctx.ledger.edits import set_called
from langgraph_ctx.pipeline.manager import ContextManager
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.prompt.report import attach_report
from langgraph_ctx.summaries.internal_calls import internal_call_transformers
from langgraph_ctx.tokens._calibration import received_prompt
from langgraph_ctx.tokens.counter import TokenCounter

logger = logging.getLogger("langgraph_ctx.middleware")  # the name it always had
"""Warnings for what a run survives but an operator should see."""


@runtime_checkable
class CallMemory(ModelTerms, Protocol):
    """What the middleware uses of a `ContextMemory`: the interface it is given.

    `ContextMemory` implements it (mypy checks it at `ContextMemory.middleware()`); the
    middleware refuses an argument without these members.
    """

    expose_recall: bool
    expose_search: bool

    @property
    def manager(self) -> ContextManager:
        """The configured pipeline (its budget reserves the output tokens)."""
        ...

    def recall_tool(self) -> BaseTool:
        """The `recall` tool."""
        ...

    def search_tool(self) -> BaseTool:
        """The search tool."""
        ...

    def plan_build(
        self,
        messages: Sequence[BaseMessage],
        ledger: Mapping[str, Any] | None,
        config: RunnableConfig | None,
        *,
        tools: Sequence[Any] | None = None,
        harder: bool = False,
        model: Any = None,
        window: int | None = None,
        counter: TokenCounter | None = None,
    ) -> Plan[BuildResult]:
        """The pipeline build for one model call (`ContextMemory.plan_build`'s signature)."""
        ...

    def plan_removals(
        self, messages: Sequence[BaseMessage], result: BuildResult, config: RunnableConfig | None
    ) -> Plan[tuple[list[RemoveMessage], dict[str, Any]]]:
        """The summarized messages to remove, and the ledger to persist."""
        ...

    def plan_after_turn(
        self,
        messages: Sequence[BaseMessage],
        ledger: Mapping[str, Any] | None,
        config: RunnableConfig | None,
    ) -> Plan[dict[str, Any]]:
        """After a turn: the report onto the AI message, the hint rebuild."""
        ...


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
    transformers = internal_call_transformers()
    """Keeps the summarizer's and extractor's calls out of the v3 stream's `run.messages`."""

    def __init__(self, memory: CallMemory) -> None:
        if not isinstance(memory, CallMemory):
            msg = (
                f"memory must be a ContextMemory, got {type(memory).__name__} {shorten(memory)}; "
                "pass e.g. ContextMemory(model=model).middleware()"
            )
            raise ConfigError(msg)
        super().__init__()
        self.memory = memory
        # `recall` first: the guard checks it stays bound; the search tool travels with it.
        self.tools = [memory.recall_tool()] if memory.expose_recall else []
        if self.tools and memory.expose_search:
            self.tools.append(memory.search_tool())
        self._recall = self.tools[0] if self.tools else None
        self._reserved = memory.manager.budget.reserved_output_tokens
        # Recent builds by call inputs, each with the objects its key names (ids not reused).
        self._builds = Builds()
        self._known = KnownModels()

    @property
    def name(self) -> str:
        """Middleware name in the agent graph."""
        return "ContextMiddleware"

    # --- one plan, two drivers -------------------------------------------------------------

    def _plan(self, request: ModelRequest[Any], handler: Callable[[Any], Any]) -> Plan[Any]:
        """One model call: build for what the called model receives, call, learn, rebuild.

        The build is made for the attempt's target: the model whose window and counter bound
        the call (the request's, or the fallback with the smallest window the ledger's `called`
        names), less what middleware inside ours add, with `recall` named only while it is
        bound. A call the guard refuses, or the provider's overflow, is rebuilt as
        `after_failure` decides; a retry or a fallback of this very request reuses its build.
        """
        history: list[BaseMessage] = list(request.messages)
        if request.system_message is not None:
            history.insert(0, request.system_message)
        ledger: Any = request.state.get("context_ledger") if request.state else None
        attempt = Attempt.first(request.model, ledger, self.memory, self._known)
        call = Call.of(request, ledger, self.tools, attempt.requested)
        key = BuildKey.of(request, history, call, attempt.window, attempt.target.counter)
        result = self._builds.get(key)
        failure: Exception | None = None
        while True:
            if result is None:
                try:
                    result = yield from self.memory.plan_build(
                        history,
                        ledger,
                        None,
                        tools=call.tools,
                        harder=attempt.harder,
                        model=attempt.target.model,
                        window=attempt.window,
                        counter=attempt.target.counter,
                    )
                except ContextWindowExceededError as err:
                    if failure is None:
                        raise
                    raise too_little_left(err, attempt) from failure
                if failure is None:
                    self._builds.put(key, (request.state, history), result)
            sent = sent_request(request, result, call, attempt.called)
            guard = CallGuard.of_build(
                self.memory, attempt.target, self._reserved, result, sent, self._recall
            )
            try:
                response = yield CallHandler(handler, guarded(sent), within=guard.active)
                break
            except Exception as exc:
                failure = exc
                retried = after_failure(attempt, exc, guard.refusal, result.report)
                if retried is exc:
                    raise
                if isinstance(retried, Exception):
                    raise retried from exc
                if retried.harder and not attempt.harder:
                    logger.warning(
                        "the provider overflowed (%s); rebuilding for a smaller window", exc
                    )
                attempt, result = retried, None
            finally:
                self._known.update(guard.models)
        learned = attempt.called.after_pass(guard.last, attempt.configured)
        self._builds.drop(key)
        return (yield from self._finish(request, response, result, guard.last, learned))

    def _finish(
        self,
        request: ModelRequest[Any],
        response: Any,
        result: BuildResult,
        last: Received | None,
        called: CalledModel,
    ) -> Plan[ExtendedModelResponse[Any]]:
        """After the call passed: persist the ledger with what `called` learned, attach the report.

        `last` is the call as the model received it, when the guard measured it.
        """
        received = last.tokens if last is not None and last.added else None
        if received is not None:  # the request changed inside: the report says what was sent
            result.report.received_tokens = received
        state_messages = list((request.state or {}).get("messages") or [])
        removals, ledger = yield from self.memory.plan_removals(state_messages, result, None)
        if received is not None:  # the reply's usage is of what the model received
            received_prompt(ledger, received, last.parts if last else None)
        set_called(ledger, called.to_ledger())
        return _with_report(response, result, ledger, removals)

    # Written out, not derived with `both`: the model call is the path a reader follows first
    # (`farm-studio walk ...ContextMiddleware.wrap_model_call:request`), and the two handlers'
    # types differ.
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

    def _plan_after_agent(
        self, state: ContextAgentState, runtime: Any
    ) -> Plan[dict[str, Any] | None]:
        plan = self.memory.plan_after_turn(state["messages"], state.get("context_ledger"), None)
        return (yield from plan) or None

    after_agent, aafter_agent = both(
        _plan_after_agent,
        doc="After a turn: rebuild from a compression hint when the last prompt was too big.",
    )


def _with_report(
    response: Any,
    result: BuildResult,
    ledger: dict[str, Any],
    removals: list[RemoveMessage],
) -> ExtendedModelResponse[Any]:
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
