"""`ContextMiddleware`: the pipeline as an `AgentMiddleware` for `langchain.agents.create_agent`.

Around every model call it builds the request from the pipeline (system prompt, summary,
window, placeholders, tools), calls the model, writes the `context_cost` report onto the AI
message's `response_metadata`, and persists the ledger in the agent state. When the provider
still rejects the prompt as too long (`errors.is_context_overflow`: LangChain's
`ContextOverflowError`, or a server's own error such as llama.cpp's), it rebuilds against a
smaller window and retries once before raising `ContextWindowExceededError`. Middleware
placed inside it (after it in `create_agent(middleware=[...])`) may change the request after
the build; the call guard (`_guard`) counts what the model actually receives and refuses a
call that cannot fit before the provider sees it; `_plan` rebuilds for what each refusal
taught until the call fits or a refusal teaches nothing (then the error names the cause), and
the next builds leave room for what those middleware add. After the agent finishes a turn it
runs the hint rebuild (DESIGN part 7).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, SystemMessage
from langgraph.types import Command

from langgraph_ctx._effects import CallHandler, Plan, arun_plan, run_plan
from langgraph_ctx.errors import (
    ConfigError,
    ContextWindowExceededError,
    ModelCallRefusedError,
    is_context_overflow,
    shorten,
)
from langgraph_ctx.graph._calls import (
    MAX_REBUILDS,
    BuildKey,
    Builds,
    Call,
    KnownModels,
    Target,
    structured_output_tools,
)
from langgraph_ctx.graph._guard import (
    NOTHING_LEARNED,
    CallGuard,
    CallRefused,
    Received,
    learned,
    same_model,
)
from langgraph_ctx.graph.state import ContextAgentState
from langgraph_ctx.ledger.edits import set_called
from langgraph_ctx.ledger.schema import has_archived
from langgraph_ctx.prompt.assembly import tool_name
from langgraph_ctx.prompt.render import references_recall, without_recall_calls
from langgraph_ctx.prompt.report import attach_report
from langgraph_ctx.tokens._calibration import after_overflow, received_prompt
from langgraph_ctx.tokens.counter import count_tool_tokens

logger = logging.getLogger("langgraph_ctx.middleware")  # the name it always had
"""Warnings for what a run survives but an operator should see."""

if TYPE_CHECKING:
    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.pipeline.result import BuildResult


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
        # What the middleware calls on it (importing the class here would close an import
        # circle: `ContextMemory.middleware()` imports this module).
        if not all(hasattr(memory, a) for a in ("plan_build", "plan_after_turn", "recall_tool")):
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
        self._builds = Builds()
        self._known = KnownModels()

    @property
    def name(self) -> str:
        """Middleware name in the agent graph."""
        return "ContextMiddleware"

    # --- one plan, two drivers -------------------------------------------------------------

    def _request(
        self,
        request: ModelRequest[Any],
        result: BuildResult,
        call: Call,
        called: Mapping[str, Any],
    ) -> ModelRequest[Any]:
        messages: list[Any] = list(result.messages)
        tools = [t for t in result.tools if tool_name(t) not in call.counted_only]
        if called.get("recall_unbound"):
            # A middleware inside drops `recall`: placeholders name the archive without
            # telling the model to call it; `recall` is still offered, should it stay bound.
            messages = without_recall_calls(messages)
        elif call.added and not references_recall(result.messages):
            tools = [t for t in tools if tool_name(t) not in call.added]
        first = messages[0] if messages else None
        system = messages.pop(0) if isinstance(first, SystemMessage) else None
        return request.override(system_message=system, messages=messages, tools=tools)

    def _call(self, request: ModelRequest[Any], ledger: Any) -> Call:
        """What the model will receive, as far as the build must count it."""
        tools = list(request.tools)
        search = has_archived(ledger) and self._search_fits(request.model)
        if not search:  # nothing to search yet, or too dear: `create_agent` binds it anyway
            tools = [t for t in tools if t not in self.tools[1:]]
        names = {tool_name(t) for t in tools}
        # `recall` stays bound while a placeholder tells the model to call it, whatever an
        # outer middleware (a tool selector) left in the request; the search tool with it,
        # once something has left the prompt.
        ours = self.tools if search else self.tools[:1]
        added = [t for t in ours if t.name not in names]
        tools.extend(added)
        structured = structured_output_tools(request.response_format)
        return Call(
            tools=[*tools, *structured],
            counted_only=frozenset(tool_name(t) for t in structured) - names,
            added=frozenset(t.name for t in added),
        )

    def _search_fits(self, model: Any) -> bool:
        """Whether the search tool's schema costs at most `SEARCH_SHARE` of the model's window.

        In a tiny window the schema, sent with every call, would crowd out what it helps find
        (a summary no longer fits); there `recall` alone is bound.
        """
        if len(self.tools) < 2:
            return False
        schema = count_tool_tokens(self.memory.counter_for(model), self.tools[1:])
        return schema <= SEARCH_SHARE * self.memory.window_for(model)

    def _plan(self, request: ModelRequest[Any], handler: Callable[[Any], Any]) -> Plan[Any]:
        """One model call: build for what the called model receives, call, learn, rebuild.

        The build is made for a target: the model whose window and counter bound the call
        (the request's, or the fallback with the smallest window the ledger's `called` names),
        less what middleware inside ours add, with `recall` named only while it is bound. The
        call guard (`_guard`) refuses a call that does not fit what the model received; each
        refusal must teach something (a smaller window, a larger addition, `recall` unbound,
        another model's counter) and the call is rebuilt for it, at most `MAX_REBUILDS` times.
        A refusal that teaches nothing proves the call cannot fit: the error names the cause.
        A provider overflow is rebuilt once against a smaller window (`harder`).
        """
        history: list[BaseMessage] = list(request.messages)
        if request.system_message is not None:
            history.insert(0, request.system_message)
        ledger: Any = request.state.get("context_ledger") if request.state else None
        call = self._call(request, ledger)
        configured = self.memory.window_for(request.model)
        called = learned((ledger or {}).get("called"), None, configured)
        target = self._target(request.model, called)
        key = BuildKey.of(request, history, call, target.window(called), target.counter)
        result = self._builds.get(key)
        if result is None:  # a retry or a fallback of this very request reuses its build
            result = yield from self._build(history, ledger, call, target, called)
            self._builds.put(key, (request.state, history), result)
        harder, rebuilds, failure = False, 0, None
        while True:
            sent = self._request(request, result, call, called)
            guard = CallGuard(
                self.memory,
                target.model,
                result.messages,
                result.tools,
                result.report.tokens,
                self._sent_recall(sent),
                ratios=result.report.calibration_ratios,
            )
            try:
                response = yield CallHandler(guard.around(handler), sent)
                break
            except ContextWindowExceededError:
                raise
            except Exception as exc:
                failure = exc
                # A fallback middleware may raise another error after the guard's refusal.
                refusal = exc if isinstance(exc, CallRefused) else guard.refusal
                if refusal is not None:
                    taught = learned(called, refusal.received, configured, refused=True)
                    retarget = self._retarget(target, refusal.received)
                    if (taught == called and retarget is target) or rebuilds >= MAX_REBUILDS:
                        _cannot_fit(result, refusal, rebuilds, exc)
                    called, target = taught, retarget
                elif not is_context_overflow(exc):
                    raise
                elif harder:
                    _fail(result, f"the provider still overflowed: {exc}", exc)
                else:
                    logger.warning(
                        "the provider overflowed (%s); rebuilding for a smaller window", exc
                    )
                    harder = True
                    ledger = after_overflow(ledger)  # a ratio under 1 was wrong for this call
            finally:
                self._known.update(guard.models)
            rebuilds += 1
            try:
                result = yield from self._build(history, ledger, call, target, called, harder)
            except ContextWindowExceededError as err:
                raise _too_little_left(err, called, target) from failure
        self._builds.drop(key)
        called = learned(called, guard.last, configured)
        received = guard.last.tokens if guard.last is not None and guard.last.added else None
        if received is not None:  # the request changed inside: the report says what was sent
            result.report.received_tokens = received
        state_messages = list((request.state or {}).get("messages") or [])
        removals, ledger = yield from self.memory.plan_removals(state_messages, result, None)
        if received is not None:  # the reply's usage is of what the model received
            received_prompt(ledger, received, guard.last.parts if guard.last else None)
        set_called(ledger, called if called != NOTHING_LEARNED else None)
        return _with_report(response, result, ledger, removals)

    def _target(self, model: Any, called: Mapping[str, Any]) -> Target:
        """What to build for: `model`, or the smaller-window model `called` names, if known.

        The ledger names the model with the smallest window seen (a fallback); when this
        process has seen it, the build counts with its counter from the first attempt, so a
        fallback call is not refused and rebuilt on every step. Another process learns it
        again from one refusal.
        """
        for seen in self._known.models():
            if seen is not model and same_model(called, seen):
                return Target(seen, self.memory)
        return Target(model, self.memory)

    def _retarget(self, target: Target, received: Received) -> Target:
        """After a refusal: the model counted with a counter other than the build's, if any."""
        model = received.model
        if received.added is not None or model is None or model is target.model:
            return target
        return Target(model, self.memory)

    def _build(
        self,
        history: list[BaseMessage],
        ledger: Any,
        call: Call,
        target: Target,
        called: Mapping[str, Any],
        harder: bool = False,
    ) -> Plan[BuildResult]:
        return self.memory.plan_build(
            history,
            ledger,
            None,
            tools=call.tools,
            harder=harder,
            model=target.model,
            window=target.window(called),
        )

    def _sent_recall(self, sent: ModelRequest[Any]) -> str | None:
        """The name of `recall` when `sent` binds it (the guard then checks it stays bound)."""
        recall = self.tools[0] if self.tools else None
        return recall.name if recall is not None and recall in sent.tools else None

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


def _cannot_fit(
    result: BuildResult, refusal: CallRefused, rebuilds: int, cause: BaseException
) -> NoReturn:
    """The call was rebuilt for everything the refusals taught and is still refused.

    The error's type names the cause: `ContextWindowExceededError` only when the prompt is
    over the called model's budget, `ModelCallRefusedError` otherwise.
    """
    received = refusal.received
    if received.tokens > received.limit:
        _fail(
            result,
            f"after {rebuilds} rebuild(s) for what the model receives, the called model still "
            f"receives {received.tokens:,} tokens, over its budget of {received.limit:,} "
            f"(window {received.window:,}); make the middleware inside ContextMiddleware add "
            "less, or call a model with a larger window",
            cause,
        )
    report = result.report
    why = (
        f"after {rebuilds} rebuild(s) the model call is still refused: {refusal}; the prompt "
        "names recall(ref=...) in text langgraph_ctx does not own while the call binds no "
        "recall tool. Bind the recall tool (memory.recall_tool()) or set expose_recall=False"
    )
    report.fail(why)
    raise ModelCallRefusedError(why, report) from cause


def _too_little_left(
    err: ContextWindowExceededError, called: Mapping[str, Any], target: Target
) -> ContextWindowExceededError:
    """The build for what the model receives failed: say so when inner middleware are why."""
    if not called.get("added"):
        return err
    window = target.window({**called, "added": 0})
    msg = (
        f"middleware inside ContextMiddleware adds {called['added']:,} tokens to each model "
        f"call, which leaves too little of the called model's window ({window:,} tokens) for "
        "the conversation; make it add less, or call a model with a larger window"
    )
    return ContextWindowExceededError(msg, err.report)


def _fail(result: BuildResult, why: str, cause: BaseException) -> NoReturn:
    """Fail the build: its report says why and travels on `ContextWindowExceededError`."""
    report = result.report
    report.fail(why)
    raise ContextWindowExceededError(str(report.error), report) from cause


SEARCH_SHARE = 0.05
"""Most of the window the search tool's schema may cost for the middleware to bind it."""


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
