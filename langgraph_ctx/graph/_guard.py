"""What the model actually received: the guard around `ContextMiddleware`'s inner handler.

`ContextMiddleware` builds a request and passes it to the next handler. Middleware placed after
it in `create_agent(middleware=[...])` (inside it) may change that request before the model
sees it: `TodoListMiddleware` and `dynamic_prompt` add to the system prompt, a tool selector
drops tools (`recall` among them), `ModelFallbackMiddleware` calls another model with a smaller
window. The build cannot count what it never sees, so the guard watches the call itself.

For the span of the inner handler the guard is a callback handler of the run (set in the
config context, as LangChain propagates callbacks to nested runs). At the start of each chat
model run of a model the request carried (the built-for one or one an inner middleware put in
with `request.override(model=...)`), it counts the messages and tools the model received with
that model's counter. A prompt over the called model's budget, or one whose placeholders name
`recall` while `recall` is not bound, is refused before anything reaches the provider
(`CallRefused`); the middleware learns from it (`CalledEntry` in the ledger: the tokens the
inner middleware add, the smallest window called, whether `recall` is bound), rebuilds and
calls again. Calls that pass are measured too, so the next builds leave room in advance and a
refusal is the exception.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables.config import var_child_runnable_config

from langgraph_ctx._effects import internal_metadata
from langgraph_ctx.ledger.schema import CalledEntry
from langgraph_ctx.prompt.assembly import tool_name
from langgraph_ctx.prompt.render import references_recall
from langgraph_ctx.tokens._providers import ls_params
from langgraph_ctx.tokens.counter import count_tool_tokens

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from langgraph_ctx.graph.memory import ContextMemory
    from langgraph_ctx.tokens.counter import TokenCounter

_active_guard: contextvars.ContextVar[CallGuard | None] = contextvars.ContextVar(
    "langgraph_ctx_call_guard", default=None
)


@dataclass(frozen=True, slots=True)
class Received:
    """One model call as the model received it."""

    tokens: int
    """Messages and tools, counted with the called model's counter."""
    limit: int
    """The called model's budget (its window minus the reserved output)."""
    window: int
    """The called model's window."""
    added: int | None
    """Tokens over what the build sent (the built-for model only; None for another model)."""
    unchanged: bool
    """The built-for model received no more than the build, in the window it was built for."""
    recall_bound: bool
    """The call binds the `recall` tool (True when the agent has none to bind)."""
    names_recall: bool
    """The prompt tells the model to call `recall(ref=...)`."""
    parts: Mapping[str, float] | None = None
    """The raw estimate by part of what the built-for model received over the build (the
    calibration pairs the reply's count with it); None when unknown or another model's."""
    model: Any = field(default=None, compare=False, repr=False)
    """The model called (of the ambiguous ones, the one with the smallest window)."""

    @property
    def recall_unbound(self) -> bool:
        """The prompt names `recall(ref=...)` but the call binds no `recall` tool."""
        return self.names_recall and not self.recall_bound

    @property
    def refused(self) -> bool:
        """Whether the call must not reach the provider."""
        return (self.tokens > self.limit and not self.unchanged) or self.recall_unbound


class CallRefused(Exception):
    """Raised before a model call that does not fit what the model received (see module)."""

    def __init__(self, received: Received) -> None:
        why = (
            f"{received.tokens} tokens over the called model's budget of {received.limit}"
            if received.tokens > received.limit
            else "the prompt names recall(ref=...) but the call binds no recall tool"
        )
        super().__init__(
            f"langgraph_ctx refused a model call a middleware inside ContextMiddleware changed: "
            f"{why}; rebuilding for what the model receives"
        )
        self.received = received


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
        memory: Whose budget, counters and windows apply.
        model: The model the build was made for (the request's).
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
        memory: ContextMemory,
        model: Any,
        sent: Sequence[BaseMessage],
        sent_tools: Sequence[Any],
        sent_tokens: int,
        recall_tool: str | None,
        ratios: Mapping[str, float] | None = None,
    ) -> None:
        self.memory = memory
        counter = memory.counter_for(model)
        with_ratios = getattr(counter, "with_ratios", None)
        self.built_counter = with_ratios(ratios) if ratios and callable(with_ratios) else counter
        self.model = model
        self.models: list[Any] = [model]
        self.sent, self.sent_tools, self.sent_tokens = sent, sent_tools, sent_tokens
        self.recall_tool = recall_tool
        self.last: Received | None = None
        """The last agent call received, for the ledger."""
        self.refusal: CallRefused | None = None
        """The last call refused (a fallback middleware may raise another error after it)."""

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
        windows = {id(m): self.memory.window_for(m) for m in models}
        called = min(models, key=lambda m: windows[id(m)])
        window = windows[id(called)]
        counter = self.memory.counter_for(called)
        names = [tool_name(t) for t in tools]
        added, unchanged, parts = None, False, None
        if any(m is self.model for m in models) and counter is self.memory.counter_for(self.model):
            tokens, parts = self._received_tokens(prompt, tools, names)
            added = max(0, tokens - self.sent_tokens)
            # The build fits its own window by its own count; a call that adds nothing to it
            # is never refused on counting noise.
            unchanged = tokens <= self.sent_tokens and window >= self.memory.window_for(self.model)
        else:  # another model's call: counted whole, with its own counter
            tokens = counter(list(prompt)) + _tool_tokens(counter, tools, self.sent_tools)
        reserved = self.memory.manager.budget.reserved_output_tokens
        return Received(
            tokens=tokens,
            limit=max(0, window - reserved),
            window=window,
            added=added,
            unchanged=unchanged,
            recall_bound=self.recall_tool is None or self.recall_tool in names,
            names_recall=references_recall(prompt),
            parts=parts,
            model=called,
        )

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
        return [m for m in self.models if _identity(m) == key]

    def around(self, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """`handler` run with this guard among the run's callbacks (sync or async alike)."""

        def call(request: Any) -> Any:
            request = _guarded(request)
            with self._active():
                result = handler(request)
            if not inspect.isawaitable(result):
                return result
            return self._awaited(result)

        return call

    async def _awaited(self, result: Any) -> Any:
        with self._active():
            return await result

    @contextmanager
    def _active(self) -> Iterator[None]:
        """This guard as a callback of the current run's config, and as the active guard."""
        config = dict(var_child_runnable_config.get() or {})
        config["callbacks"] = _with_handler(config.get("callbacks"), self)
        config_token = var_child_runnable_config.set(config)  # type: ignore[arg-type]
        guard_token = _active_guard.set(self)
        try:
            yield
        finally:
            _active_guard.reset(guard_token)
            var_child_runnable_config.reset(config_token)


NOTHING_LEARNED: CalledEntry = {"added": 0, "window": None, "recall_unbound": False}
"""The ledger's `called` before any call taught anything (not stored: None in the ledger)."""


def learned(
    entry: Mapping[str, Any] | None,
    received: Received | None,
    configured: int,
    *,
    refused: bool = False,
) -> CalledEntry:
    """`entry` (the ledger's `called`) updated with one call the model received.

    After a call that passed (`refused=False`), the tokens the inner middleware added are the
    latest measured (a dynamic prompt may grow or shrink) and `recall` is unbound when the
    call's tools lacked it. After a refusal, what was learned only tightens (`refused=True`:
    the larger addition, recall unbound if either says so), so the rebuilds of one model call
    never go back to a prompt already refused. Either way a window smaller than the
    `configured` one is kept as the smallest seen, with the identity of the model that has it
    (a fallback model may be called again: the next builds are made for it).
    """
    old = entry or {}
    new: CalledEntry = {
        "added": int(old.get("added", 0)),
        "window": old.get("window"),
        "recall_unbound": bool(old.get("recall_unbound", False)),
    }
    if old.get("model") is not None:
        new["model"] = list(old["model"])
    if received is None:
        return new
    if received.added is not None:
        new["added"] = max(new["added"], received.added) if refused else received.added
    if received.window < min(configured, new["window"] or configured):
        new["window"] = received.window
        if received.model is not None:
            new["model"] = identity_of(received.model)
    unbound = not received.recall_bound
    new["recall_unbound"] = (new["recall_unbound"] or unbound) if refused else unbound
    return new


def same_model(entry: Mapping[str, Any] | None, model: Any) -> bool:
    """Whether `model` is the one the ledger's `called` names as having the smallest window."""
    named = (entry or {}).get("model")
    return named is not None and identity_of(model) == list(named)


def identity_of(model: Any) -> list[str | None]:
    """A model's class, provider and model name, as JSON (the ledger keeps it)."""
    return [None if x is None else str(x) for x in _identity(model)]


def effective_window(entry: Mapping[str, Any] | None, window: int) -> int:
    """The window to build for: the smallest called, less what the inner middleware add."""
    if not entry:
        return window
    smallest = min(window, entry.get("window") or window)
    return max(1, smallest - int(entry.get("added", 0)))


def _with_handler(callbacks: Any, handler: BaseCallbackHandler) -> Any:
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        return manager
    return [*(callbacks or []), handler]


def _guarded(request: Any) -> Any:
    """`request` as a `GuardedRequest` (same fields), so derived requests report their model."""
    if isinstance(request, GuardedRequest) or not isinstance(request, ModelRequest):
        return request
    return GuardedRequest(**{f.name: getattr(request, f.name) for f in fields(request)})


def _identity(model: Any) -> tuple[Any, Any, Any]:
    params = ls_params(model)
    return (type(model).__name__, params.get("ls_provider"), params.get("ls_model_name"))


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
