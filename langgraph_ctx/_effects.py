"""Sync and async from one body: plans are generators that yield effects as plain data.

An effect is a frozen dataclass that says WHAT I/O to do (call this model with these messages,
put these bytes under this key), never how: it holds no closure. A plan is a generator that
decides everything on plain data and yields an effect whenever it needs I/O; plans compose with
`x = yield from other_plan(...)`, so the archive's, the summarizer's and the pipeline's plans
nest into one generator.

`run_plan` and `arun_plan` are the only two drivers. Each performs an effect through one
dispatch table (effect type -> sync function, async function) and sends the result back in.

The failure rule: when performing an effect raises an `Exception`, the driver throws it into
the plan at the `yield`, and the plan decides (retry, fall back, convert, or let it propagate
out of the driver). Drivers never swallow, convert or log an error. The one error a driver makes
itself is the model timeout: `CallModel.timeout` is enforced by the driver (sync: the call runs
in a daemon thread with the caller's contextvars; async: `asyncio.wait_for`), which then throws
the builtin `TimeoutError` into the plan like any other failure.

Every `CallModel` is a call internal to the package (summarizer, entity extractor), never the
agent's own answer, so the driver marks it by LangChain's convention for internal calls
(`internal_call_config`): the `nostream` tag keeps it out of LangGraph's `messages` stream (and
the server's `messages-tuple`), `internal_call_metadata()` out of the v3 event stream's
`run.messages` (with `InternalCallTransformer` declared on the middleware), `lc_source` names
it, and a chat model is called with streaming disabled, so `astream_events` v2 carries no
token of it either.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

T = TypeVar("T")
P = ParamSpec("P")

Plan = Generator["Effect", Any, T]
"""A generator that yields effects and returns its result."""


@dataclass(frozen=True, slots=True)
class Effect:
    """Base class of the effects: plain data describing one piece of I/O."""


@dataclass(frozen=True, slots=True)
class CallModel(Effect):
    """Call `model.invoke(messages, config)` (or `ainvoke`); returns the model's raw output."""

    model: Any
    messages: Any
    config: Any = None
    timeout: float | None = None
    """Seconds to wait; the driver raises `TimeoutError` after it. `None` waits forever."""
    source: str = "langgraph_ctx"
    """What the call is for (`lc_source` in the run metadata), e.g. `"summarization"`."""


@dataclass(frozen=True, slots=True)
class BackendPut(Effect):
    """`backend.put(namespace, key, data)` (or `aput`) of an `ArchiveBackend`; returns None."""

    backend: Any
    namespace: tuple[str, ...]
    key: str
    data: bytes


@dataclass(frozen=True, slots=True)
class BackendGet(Effect):
    """`backend.get(namespace, key)` (or `aget`); returns the bytes, or None when absent."""

    backend: Any
    namespace: tuple[str, ...]
    key: str


@dataclass(frozen=True, slots=True)
class BackendKeys(Effect):
    """`backend.keys(namespace)` (or `akeys`); returns the keys, newest write first.

    A backend with `keys` but no `akeys` is listed in a worker thread under `arun_plan`.
    """

    backend: Any
    namespace: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SearchStore(Effect):
    """`store.search(namespace, query=..., limit=...)` (or `asearch`); returns the items."""

    store: Any
    namespace: tuple[str, ...]
    query: str | None
    limit: int


@dataclass(frozen=True, slots=True)
class CallHandler(Effect):
    """`handler(request)`, awaited when it returns an awaitable; returns its result."""

    handler: Callable[[Any], Any]
    request: Any
    within: Callable[[], AbstractContextManager[Any]] | None = None
    """A context entered around the call and, async, around its await too (the call guard
    of `graph/guard.py` is active there); None: none."""


@dataclass(frozen=True, slots=True)
class PrepareSummary(Effect):
    """Start summarizing `messages` in the background (`preparer.start` or `astart`).

    Sync drivers start a worker thread, async drivers an asyncio task; returns whether a
    preparation started (one runs per thread at a time; the same span is not started twice).
    """

    preparer: Any
    """The `SummaryPreparer` that keeps the preparation."""
    key: str
    """The thread the span belongs to."""
    digest: str
    """Names the span and the summary it folds into (`strategies.ahead_span.span_digest`)."""
    summarize: Callable[[list[BaseMessage], str | None], Plan[Any]]
    """The summarizer's plan factory, run in the background."""
    messages: tuple[BaseMessage, ...]
    """The span to summarize."""
    previous: str | None
    """The running summary to fold into."""


@dataclass(frozen=True, slots=True)
class AwaitPrepared(Effect):
    """The prepared `SummaryOutcome` of `digest`, waiting up to `timeout` s; None if none."""

    preparer: Any
    """The `SummaryPreparer` that keeps the preparation."""
    key: str
    """The thread the span belongs to."""
    digest: str
    """The span wanted (see `PrepareSummary.digest`)."""
    timeout: float | None
    """Longest wait for a preparation still running; `None` waits until it ends."""


@dataclass(frozen=True, slots=True)
class AwaitLoad(Effect):
    """Wait up to `timeout` s for another search's load of an archive entry (`EntryCache`).

    Returns the decoded entry, or None when that load failed or still runs.
    """

    load: Any
    """The `EntryLoad` under way (sync: `wait`, async: `await_done`)."""
    timeout: float
    """Longest wait, in seconds."""


@dataclass(frozen=True, slots=True)
class MethodCall(Effect):
    """`target.<name>(*args)` (async: `target.a<name>(*args)`, awaited); returns its result.

    For an object with async twins of its own, e.g. a compiled graph's `get_state` and
    `aget_state`.
    """

    target: Any
    name: str
    """The sync method, e.g. `"get_state"`; its async twin is `"a" + name`."""
    args: tuple[Any, ...] = ()
    collect: bool = False
    """The method returns an iterator (async: an async iterator): return its items as a list."""


@dataclass(kw_only=True)
class Resources:
    """What a build may use for I/O, as plan factories (None when not configured)."""

    archive_messages: Callable[[list[BaseMessage]], Plan[dict[str, str]]] | None = None
    """Write messages one by one, index them by id; the plan returns their refs by id."""
    dump_messages: Callable[[list[BaseMessage]], Plan[str]] | None = None
    """Write a list as one insurance dump; the plan returns its ref."""
    summarize: Callable[[list[BaseMessage], str | None], Plan[Any]] | None = None
    """Summarize messages, folding a previous summary; the plan returns a `SummaryOutcome`."""
    extract: Callable[[list[BaseMessage], dict[str, Any] | None], Plan[dict[str, Any]]] | None = (
        None
    )
    """Update entity state from recent messages; the plan returns the new values."""
    ahead: Any = None
    """The thread's `AheadBinding` when summaries are prepared ahead (`strategies.ahead`)."""


def _timed_out(timeout: float | None) -> TimeoutError:
    return TimeoutError(f"summarizer model did not answer within {timeout}s")


INTERNAL_TAG = "nostream"
"""LangGraph's tag for calls whose tokens users should not see streamed (`TAG_NOSTREAM`)."""


def internal_call_config(config: Any, source: str) -> dict[str, Any]:
    """`config` marked as an internal call: the `nostream` tag, `lc_source`, internal metadata.

    Args:
        config: The caller's `RunnableConfig` (tags, metadata, run name), or None.
        source: The `lc_source` value, e.g. `"summarization"`.

    Returns:
        A new config; the caller's tags and metadata are kept.
    """
    out = dict(config or {})
    tags = list(out.get("tags") or [])
    out["tags"] = tags if INTERNAL_TAG in tags else [*tags, INTERNAL_TAG]
    out["metadata"] = {
        **dict(out.get("metadata") or {}),
        "lc_source": source,
        **internal_metadata(),
    }
    return out


def internal_metadata() -> dict[str, Any]:
    """LangChain's metadata marking an internal call (`internal_call_metadata()`), or {}."""
    try:
        from langchain.agents.middleware.internal_call_transformer import (
            internal_call_metadata,
        )
    except ImportError:  # an older langchain without the convention: the tag still works
        return {}
    return internal_call_metadata()


def _invoke_args(effect: CallModel) -> tuple[Any, Any]:
    """The model and config of an internal call (see the module docstring).

    A chat model that could stream is called through a copy with `disable_streaming=True`
    (langchain-core's own opt-out, honoured before any provider code runs; the copy shares the
    client), so no streaming callback handler gets a token of it.
    """
    from langchain_core.language_models import BaseChatModel

    model = effect.model
    if isinstance(model, BaseChatModel) and model.disable_streaming is not True:
        model = model.model_copy(update={"disable_streaming": True})
    return model, internal_call_config(effect.config, effect.source)


def _call_model(effect: CallModel) -> Any:
    messages = effect.messages
    model, config = _invoke_args(effect)
    if effect.timeout is None:
        return model.invoke(messages, config)
    # A daemon thread rather than an executor: a hung provider call cannot be cancelled, and
    # executor threads are joined at interpreter exit. copy_context keeps the caller's run tree
    # (callbacks, parent run) attached to the call.
    context = contextvars.copy_context()
    box: list[Any] = []

    def target() -> None:
        try:
            box.append(context.run(model.invoke, messages, config))
        except BaseException as exc:  # handed to the caller's thread below
            box.append(exc)

    worker = threading.Thread(target=target, name="langgraph_ctx-model", daemon=True)
    worker.start()
    worker.join(effect.timeout)
    if not box:
        raise _timed_out(effect.timeout)
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


async def _acall_model(effect: CallModel) -> Any:
    model, config = _invoke_args(effect)
    call = model.ainvoke(effect.messages, config)
    try:
        return await asyncio.wait_for(call, effect.timeout)
    except asyncio.TimeoutError:  # also raised when the model itself times out
        if effect.timeout is None:
            raise
        raise _timed_out(effect.timeout) from None


async def _akeys(effect: BackendKeys) -> Any:
    akeys = getattr(effect.backend, "akeys", None)
    if akeys is None:  # a user's backend that lists only synchronously
        return await asyncio.to_thread(effect.backend.keys, effect.namespace)
    return await akeys(effect.namespace)


def _call_handler(effect: CallHandler) -> Any:
    with effect.within() if effect.within is not None else nullcontext():
        return effect.handler(effect.request)


async def _acall_handler(effect: CallHandler) -> Any:
    with effect.within() if effect.within is not None else nullcontext():
        result = effect.handler(effect.request)
        return await result if inspect.isawaitable(result) else result


def _call_method(effect: MethodCall) -> Any:
    result = getattr(effect.target, effect.name)(*effect.args)
    return list(result) if effect.collect else result


async def _acall_method(effect: MethodCall) -> Any:
    result = getattr(effect.target, "a" + effect.name)(*effect.args)
    return [item async for item in result] if effect.collect else await result


_Sync = Callable[[Any], Any]
_Async = Callable[[Any], Awaitable[Any]]
_DISPATCH: dict[type[Effect], tuple[_Sync, _Async]] = {
    CallModel: (_call_model, _acall_model),
    BackendPut: (
        lambda e: e.backend.put(e.namespace, e.key, e.data),
        lambda e: e.backend.aput(e.namespace, e.key, e.data),
    ),
    BackendGet: (
        lambda e: e.backend.get(e.namespace, e.key),
        lambda e: e.backend.aget(e.namespace, e.key),
    ),
    BackendKeys: (lambda e: e.backend.keys(e.namespace), _akeys),
    SearchStore: (
        lambda e: e.store.search(e.namespace, query=e.query, limit=e.limit),
        lambda e: e.store.asearch(e.namespace, query=e.query, limit=e.limit),
    ),
    CallHandler: (_call_handler, _acall_handler),
    PrepareSummary: (lambda e: e.preparer.start(e), lambda e: e.preparer.astart(e)),
    AwaitPrepared: (lambda e: e.preparer.wait(e), lambda e: e.preparer.await_prepared(e)),
    AwaitLoad: (lambda e: e.load.wait(e.timeout), lambda e: e.load.await_done(e.timeout)),
    MethodCall: (_call_method, _acall_method),
}


def _performers(effect: Any) -> tuple[_Sync, _Async]:
    if type(effect) not in _DISPATCH:
        msg = f"a plan yielded {effect!r}; effects are {', '.join(t.__name__ for t in _DISPATCH)}"
        raise TypeError(msg)
    return _DISPATCH[type(effect)]


def run_plan(plan: Plan[T]) -> T:
    """Drive a plan synchronously: perform each effect, send its result or throw its error."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        perform = _performers(effect)[0]
        try:
            value, error = perform(effect), None
        except Exception as exc:  # thrown into the plan, which decides
            value, error = None, exc


async def arun_plan(plan: Plan[T]) -> T:
    """Drive a plan asynchronously: the same loop as `run_plan`, awaiting each effect."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        perform = _performers(effect)[1]
        try:
            value, error = await perform(effect), None
        except Exception as exc:  # thrown into the plan, which decides
            value, error = None, exc


def both(
    plan: Callable[P, Plan[T]], *, doc: str, adoc: str | None = None, name: str | None = None
) -> tuple[Callable[P, T], Callable[P, Coroutine[Any, Any, T]]]:
    """The sync and the async callable of a plan function: `run_plan` and `arun_plan` of it.

    `search, asearch = both(plan_search, doc="...")` writes a twin once. Both are plain
    functions, so in a class body they bind as methods (`build, abuild = both(plan, ...)`).
    They are named `name` and `"a" + name` (default: the plan's name without `_` and
    `plan_`), documented by `doc` and `adoc` (default: "Async twin of `name`."), and carry the
    plan's signature with the plan's result as their return, for `help()`, `inspect` and
    `typing.get_type_hints`; type checkers see the parameters through `ParamSpec`.
    """
    name = name or plan.__name__.lstrip("_").removeprefix("plan_")

    def sync(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_plan(plan(*args, **kwargs))

    async def asynchronous(*args: P.args, **kwargs: P.kwargs) -> T:
        return await arun_plan(plan(*args, **kwargs))

    adoc = adoc or f"Async twin of `{name}`."
    _dress(sync, plan, name, doc)
    _dress(asynchronous, plan, "a" + name, adoc)
    return sync, asynchronous


def _dress(fn: Callable[..., Any], plan: Callable[..., Any], name: str, doc: str) -> None:
    """Name, document and sign `fn` as the public twin of `plan` (see `both`)."""
    signature = inspect.signature(plan)
    result = signature.return_annotation
    if isinstance(result, str) and result.startswith("Plan[") and result.endswith("]"):
        result = result[5:-1]  # `from __future__ import annotations`: a string
    elif getattr(result, "__args__", None) and len(result.__args__) == 3:
        result = result.__args__[2]  # Generator[Effect, Any, T]
    else:
        result = inspect.Signature.empty
    fn.__name__ = name
    fn.__qualname__ = ".".join([*plan.__qualname__.split(".")[:-1], name])
    fn.__module__ = plan.__module__
    fn.__doc__ = doc
    fn.__wrapped__ = plan  # type: ignore[attr-defined]  # get_type_hints: the plan's globals
    fn.__signature__ = signature.replace(return_annotation=result)  # type: ignore[attr-defined]
    annotations = dict(getattr(plan, "__annotations__", {}))
    if result is inspect.Signature.empty:
        annotations.pop("return", None)
    else:
        annotations["return"] = result
    fn.__annotations__ = annotations
