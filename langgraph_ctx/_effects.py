"""Sync and async from one body: plans are generators that yield effects as plain data.

An effect is a frozen dataclass that says WHAT I/O to do (call this model with these messages,
put these bytes under this key), never how: it holds no closure. A plan is a generator that
decides everything on plain data and yields an effect whenever it needs I/O; plans compose with
`x = yield from other_plan(...)`, so the archive's, the summarizer's and the pipeline's plans
nest into one generator.

`run_plan` and `arun_plan` are the only two drivers, one loop (`_drive`) run two ways. Each
performs an effect through one dispatch table (effect type -> sync function, async function)
and sends the result back in.

The failure rule: when performing an effect raises an `Exception`, the driver throws it into
the plan at the `yield`, and the plan decides (retry, fall back, convert, or let it propagate
out of the driver). Drivers never swallow, convert or log an error. The one error a driver makes
itself is the model timeout: `CallModel.timeout` is enforced by the driver (sync: the call runs
in a daemon thread with the caller's contextvars; async: `asyncio.wait_for`), which then throws
the builtin `TimeoutError` into the plan like any other failure.

The effects here are the ones any layer's plans use (a model, a backend, a store, a handler, a
method of an object with async twins of its own, e.g. the summary preparer's `start` and
`astart`); what the effects mean to their owner stays with it (the marks of the package's
internal model calls: `summaries/internal_calls.py`; a build's `Resources`: `prompt/view.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

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
    """`store.search(namespace, query=..., limit=..., offset=...)` (or `asearch`); the items."""

    store: Any
    namespace: tuple[str, ...]
    query: str | None
    limit: int
    offset: int = 0


@dataclass(frozen=True, slots=True)
class CallHandler(Effect):
    """`handler(request)`, awaited when it returns an awaitable; returns its result."""

    handler: Callable[[Any], Any]
    request: Any
    within: Callable[[], AbstractContextManager[Any]] | None = None
    """A context entered around the call and, async, around its await too (the call guard
    of `graph/guard.py` is active there); None: none."""


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
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the call."""


def _timed_out(timeout: float | None) -> TimeoutError:
    return TimeoutError(f"model did not answer within {timeout}s")


def _call_model(effect: CallModel) -> Any:
    model, messages, config = effect.model, effect.messages, effect.config
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
    call = effect.model.ainvoke(effect.messages, effect.config)
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
    result = getattr(effect.target, effect.name)(*effect.args, **effect.kwargs)
    return list(result) if effect.collect else result


async def _acall_method(effect: MethodCall) -> Any:
    result = getattr(effect.target, "a" + effect.name)(*effect.args, **effect.kwargs)
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
        lambda e: e.store.search(e.namespace, query=e.query, limit=e.limit, offset=e.offset),
        lambda e: e.store.asearch(e.namespace, query=e.query, limit=e.limit, offset=e.offset),
    ),
    CallHandler: (_call_handler, _acall_handler),
    MethodCall: (_call_method, _acall_method),
}


def _performers(effect: Any) -> tuple[_Sync, _Async]:
    if type(effect) not in _DISPATCH:
        msg = f"a plan yielded {effect!r}; effects are {', '.join(t.__name__ for t in _DISPATCH)}"
        raise TypeError(msg)
    return _DISPATCH[type(effect)]


def run_plan(plan: Plan[T]) -> T:
    """Drive a plan synchronously: perform each effect, send its result or throw its error."""
    drive = _drive(plan, asynchronous=False)
    try:
        drive.send(None)  # never suspends: no effect is awaited
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    drive.close()  # pragma: no cover - unreachable
    raise RuntimeError("the sync driver awaited")  # pragma: no cover


async def arun_plan(plan: Plan[T]) -> T:
    """Drive a plan asynchronously: the same loop as `run_plan`, awaiting each effect."""
    return await _drive(plan, asynchronous=True)


async def _drive(plan: Plan[T], *, asynchronous: bool) -> T:
    """The one loop of both drivers; `run_plan` runs it as a coroutine that never awaits."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        perform = _performers(effect)[asynchronous]
        try:
            result = perform(effect)
            value, error = (await result if asynchronous else result), None
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

    async def asynchronous(*args: P.args, **kwargs: P.kwargs) -> T:
        return await arun_plan(plan(*args, **kwargs))

    _dress(asynchronous, plan, "a" + name, adoc or f"Async twin of `{name}`.")
    return synchronous(plan, doc=doc, name=name), asynchronous


def synchronous(plan: Callable[P, Plan[T]], *, doc: str, name: str | None = None) -> Callable[P, T]:
    """The sync callable of a plan function (`run_plan` of it), named and signed as `both`'s.

    For an operation whose async callers compose the plan itself (`yield from`) and drive it
    with `arun_plan`, so an async twin would be called by nothing.
    """

    def sync(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_plan(plan(*args, **kwargs))

    _dress(sync, plan, name or plan.__name__.lstrip("_").removeprefix("plan_"), doc)
    return sync


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
