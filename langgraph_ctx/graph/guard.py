"""The call guard: a callback handler that counts what the model actually receives.

`ContextMiddleware` builds a request and passes it to the next handler. Middleware placed after
it in `create_agent(middleware=[...])` (inside it) may change that request before the model
sees it: `TodoListMiddleware` and `dynamic_prompt` add to the system prompt, a tool selector
drops tools (`recall` among them), `ModelFallbackMiddleware` calls another model with a smaller
window. The build cannot count what it never sees, so the guard watches the call itself.

For the span of the inner handler (`CallGuard.active`, entered by the effect runner around the
`CallHandler` effect, sync or async alike) the guard is a callback handler of the run (set in
the config context, as LangChain propagates callbacks to nested runs). At the start of each
chat model run of a model the request carried (the built-for one or one an inner middleware put
in with `request.override(model=...)`), it counts the messages and tools the model received
with that model's counter (`Received`). A prompt over the called model's budget, or one whose
placeholders name `recall` while `recall` is not bound, is refused before anything reaches the
provider (`CallRefused`); what the middleware learns from it, and whether to rebuild, is
`graph/attempts.py`'s. Calls that pass are measured too, so the next builds
leave room in advance and a refusal is the exception.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables.config import var_child_runnable_config

from langgraph_ctx.graph.attempts import (
    CallRefused,
    ModelTerms,
    Received,
    Target,
    model_identity,
)
from langgraph_ctx.prompt.assembly import tool_name
from langgraph_ctx.prompt.render import references_recall
from langgraph_ctx.summaries.internal_calls import internal_metadata
from langgraph_ctx.tokens.counter import count_tool_tokens

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from langgraph_ctx.pipeline.result import BuildResult
    from langgraph_ctx.tokens.counter import TokenCounter

_active_guard: contextvars.ContextVar[CallGuard | None] = contextvars.ContextVar(
    "langgraph_ctx_call_guard", default=None
)


class GuardedRequest(ModelRequest[Any]):
    """A `ModelRequest` whose derived requests tell the active guard which model they carry."""

    def override(self, **overrides: Any) -> ModelRequest[Any]:
        """`ModelRequest.override`; a model put in is made known to the guard."""
        guard = _active_guard.get()
        if guard is not None and overrides.get("model") is not None:
            guard.know(overrides["model"])
        return super().override(**overrides)


class CallGuard(BaseCallbackHandler):
    """Counts each agent model call inside the handler and refuses one that cannot fit.

    Args:
        terms: Where the counter and window of a model other than the target are looked up.
        target: The model the build was made for, with its counter and window.
        reserved: The output tokens reserved in every model's window.
        sent: The messages the build sent, system message first.
        sent_tools: The tools the build sent (bound or counted).
        sent_tokens: The build's count of `sent` and `sent_tools` (its report's `tokens`).
        recall_tool: The name of the `recall` tool, or None when the agent has none.
        ratios: The calibration ratios per part the build counted with (its report's), if any.
    """

    raise_error = True
    run_inline = True

    def __init__(
        self,
        terms: ModelTerms,
        target: Target,
        reserved: int,
        sent: Sequence[BaseMessage],
        sent_tools: Sequence[Any],
        sent_tokens: int,
        recall_tool: str | None,
        ratios: Mapping[str, float] | None = None,
    ) -> None:
        self.terms, self.target, self.reserved = terms, target, reserved
        counter = target.counter
        with_ratios = getattr(counter, "with_ratios", None)
        self.built_counter = with_ratios(ratios) if ratios and callable(with_ratios) else counter
        self.model = target.model
        self.models: list[Any] = [target.model]
        self.sent, self.sent_tools, self.sent_tokens = sent, sent_tools, sent_tokens
        self.recall_tool = recall_tool
        self.last: Received | None = None
        """The last agent call received, for the ledger."""
        self.refusal: CallRefused | None = None
        """The last call refused (a fallback middleware may raise another error after it)."""

    @classmethod
    def of_build(
        cls,
        terms: ModelTerms,
        target: Target,
        reserved: int,
        result: BuildResult,
        sent: ModelRequest[Any],
        recall: Any,
    ) -> CallGuard:
        """The guard of `sent`, the request made of `result` (a build for `target`).

        `recall` is the agent's `recall` tool (None when it has none): checked to stay bound
        when `sent` binds it.
        """
        bound = recall.name if recall is not None and recall in sent.tools else None
        return cls(
            terms,
            target,
            reserved,
            result.messages,
            result.tools,
            result.report.tokens,
            bound,
            ratios=result.report.calibration_ratios,
        )

    def know(self, model: Any) -> None:
        """A model an inner middleware put into the request (a fallback)."""
        if all(model is not m for m in self.models):
            self.models.append(model)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Count the call; raise `CallRefused` before the provider sees a call that cannot fit."""
        models = self._called(serialized, metadata or {})
        if not models or _is_internal(metadata or {}) or not messages:
            return
        tools = list((kwargs.get("invocation_params") or {}).get("tools") or [])
        received = self.measure(models, messages[0], tools)
        self.last = received
        if received.refused:
            self.refusal = CallRefused(received)
            raise self.refusal

    def measure(
        self, models: Sequence[Any], prompt: Sequence[BaseMessage], tools: Sequence[Any]
    ) -> Received:
        """The call to one of `models` (ambiguous: the smallest window) with this prompt."""
        windows = {id(m): self._window(m) for m in models}
        called = min(models, key=lambda m: windows[id(m)])
        window = windows[id(called)]
        counter = self.target.counter if called is self.model else self.terms.counter_for(called)
        names = [tool_name(t) for t in tools]
        added, unchanged, parts = None, False, None
        if any(m is self.model for m in models) and counter is self.target.counter:
            tokens, parts = self._received_tokens(prompt, tools, names)
            added = max(0, tokens - self.sent_tokens)
            # The build fits its own window by its own count; a call that adds nothing to it
            # is never refused on counting noise.
            unchanged = tokens <= self.sent_tokens and window >= self.target.window
        else:  # another model's call: counted whole, with its own counter
            tokens = counter(list(prompt)) + _tool_tokens(counter, tools, self.sent_tools)
        return Received(
            tokens=tokens,
            limit=max(0, window - self.reserved),
            window=window,
            added=added,
            unchanged=unchanged,
            recall_bound=self.recall_tool is None or self.recall_tool in names,
            names_recall=references_recall(prompt),
            parts=parts,
            model=called,
            counter=counter,
        )

    def _window(self, model: Any) -> int:
        return self.target.window if model is self.model else self.terms.window_for(model)

    def _received_tokens(
        self, prompt: Sequence[BaseMessage], tools: Sequence[Any], names: list[str]
    ) -> tuple[int, dict[str, float] | None]:
        """What the built-for model receives, and the raw estimate by part of what changed.

        The build's count, plus what differs from it; the difference's raw parts are what the
        calibration pairs the reply's count with (`Received.parts`).

        Counted as the build counted (the thread's calibration ratios). The messages the build
        sent arrive as the same objects (LangChain copies only those it reformats for tracing),
        so only the others are counted: checking a call costs little however long the prompt.
        """
        counter = self.built_counter
        sent_ids, got_ids = {id(m) for m in self.sent}, {id(m) for m in prompt}
        new = [m for m in prompt if id(m) not in sent_ids]
        gone = [m for m in self.sent if id(m) not in got_ids]
        tokens = self.sent_tokens + _message_tokens(counter, new) - _message_tokens(counter, gone)
        changed = sorted(names) != sorted(tool_name(t) for t in self.sent_tools)
        if changed:
            sent_tools = count_tool_tokens(counter, self.sent_tools)
            tokens += _tool_tokens(counter, tools, self.sent_tools) - sent_tools
        plus = _raw_parts(counter, new, tools if changed else ())
        minus = _raw_parts(counter, gone, self.sent_tools if changed else ())
        if plus is None or minus is None:
            return tokens, None
        return tokens, {p: plus[p] - minus.get(p, 0.0) for p in plus}

    def _called(self, serialized: Mapping[str, Any], metadata: Mapping[str, Any]) -> list[Any]:
        """The known models this run may be (same class, provider and model name)."""
        ident = (serialized or {}).get("id") or [None]
        key = (ident[-1], metadata.get("ls_provider"), metadata.get("ls_model_name"))
        return [m for m in self.models if model_identity(m) == key]

    @contextmanager
    def active(self) -> Iterator[None]:
        """This guard as a callback of the current run's config, and as the active guard.

        The effect runner enters it around the inner handler's call and, async, its await
        (`CallHandler.within`): the one sync/async mechanism.
        """
        config = dict(var_child_runnable_config.get() or {})
        config["callbacks"] = _with_handler(config.get("callbacks"), self)
        config_token = var_child_runnable_config.set(config)  # type: ignore[arg-type]
        guard_token = _active_guard.set(self)
        try:
            yield
        finally:
            _active_guard.reset(guard_token)
            var_child_runnable_config.reset(config_token)


def _with_handler(callbacks: Any, handler: BaseCallbackHandler) -> Any:
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        return manager
    return [*(callbacks or []), handler]


def guarded(request: Any) -> Any:
    """`request` as a `GuardedRequest` (same fields), so derived requests report their model."""
    if isinstance(request, GuardedRequest) or not isinstance(request, ModelRequest):
        return request
    return GuardedRequest(**{f.name: getattr(request, f.name) for f in fields(request)})


def _is_internal(metadata: Mapping[str, Any]) -> bool:
    """A call another middleware marks as its own internal call (not the agent's answer)."""
    marks = internal_metadata()
    return bool(marks) and all(metadata.get(k) == v for k, v in marks.items())


def _message_tokens(counter: TokenCounter, messages: Sequence[BaseMessage]) -> int:
    """What `messages` add to a prompt (without the prompt's own fixed overhead)."""
    return counter(list(messages)) - counter([]) if messages else 0


def _raw_parts(
    counter: TokenCounter, messages: Sequence[BaseMessage], tools: Sequence[Any]
) -> dict[str, float] | None:
    """`counter.raw_parts(messages, tools)`, None for a counter without it or unreadable tools."""
    raw_parts = getattr(counter, "raw_parts", None)
    if not callable(raw_parts):
        return None
    try:
        return dict(raw_parts(list(messages), list(tools)))
    except Exception:  # a provider-native tool (a server tool) the converter does not read
        return None


def _tool_tokens(counter: TokenCounter, tools: Sequence[Any], fallback: Sequence[Any]) -> int:
    """The received tools' tokens; the sent ones' when a provider's tool format cannot be read."""
    try:
        return count_tool_tokens(counter, tools)
    except Exception:  # a provider-native tool (a server tool) the converter does not read
        return count_tool_tokens(counter, fallback)
