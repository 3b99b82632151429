"""The effect drivers: every effect type, sync and async; the failure rule; the model timeout."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_ctx._effects import (
    BackendGet,
    BackendPut,
    CallHandler,
    CallModel,
    MethodCall,
    Plan,
    SearchStore,
    arun_plan,
    both,
    run_plan,
    synchronous,
)
from langgraph_ctx.archive._backends import StoreBackend

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


class EchoModel:
    """A model stand-in: answers with what it was sent, after `delay` seconds."""

    def __init__(self, delay: float = 0.0, error: Exception | None = None) -> None:
        self.delay, self.error = delay, error
        self.calls: list[tuple[Any, Any]] = []

    def invoke(self, messages: Any, config: Any = None) -> Any:
        self.calls.append((messages, config))
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return ("sync", messages, REQUEST_ID.get())

    async def ainvoke(self, messages: Any, config: Any = None) -> Any:
        self.calls.append((messages, config))
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return ("async", messages, REQUEST_ID.get())


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def drive(plan: Plan[Any], mode: str) -> Any:
    return run_plan(plan) if mode == "sync" else await arun_plan(plan)


async def test_every_effect_type_is_performed(mode: str) -> None:
    store = InMemoryStore()
    store.put(("memories",), "m1", {"text": "likes tea"})
    backend = StoreBackend(InMemoryStore())
    model = EchoModel()

    async def async_handler(request: str) -> str:
        return f"async handled {request}"

    def plan() -> Plan[dict[str, Any]]:
        out: dict[str, Any] = {}
        out["model"] = yield CallModel(model, ["hi"], {"tags": ["t"]}, None)
        out["put"] = yield BackendPut(backend, ("ns",), "k", b"bytes")
        out["get"] = yield BackendGet(backend, ("ns",), "k")
        out["missing"] = yield BackendGet(backend, ("ns",), "nope")
        items = yield SearchStore(store, ("memories",), None, 5)
        out["search"] = [item.value for item in items]
        out["handler"] = yield CallHandler(lambda request: f"handled {request}", "req")
        handler = async_handler if mode == "async" else (lambda request: f"handled {request}")
        out["awaited"] = yield CallHandler(handler, "req2")
        return out

    out = await drive(plan(), mode)
    assert out["model"] == (mode, ["hi"], "none")
    assert model.calls == [(["hi"], {"tags": ["t"]})]  # as the plan gave them
    assert out["put"] is None and out["get"] == b"bytes" and out["missing"] is None
    assert out["search"] == [{"text": "likes tea"}]
    assert out["handler"] == "handled req"
    assert out["awaited"].endswith("handled req2")


async def test_a_handler_runs_within_its_context_through_its_await(mode: str) -> None:
    """`CallHandler.within` is entered around the call and, async, around its await too (the
    call guard is active while the inner handler runs, sync or async alike)."""
    active = contextvars.ContextVar("active", default=False)
    seen: list[tuple[str, bool]] = []

    @contextmanager
    def within() -> Iterator[None]:
        token = active.set(True)
        try:
            yield
        finally:
            active.reset(token)

    async def awaited(request: str) -> str:
        seen.append(("awaited", active.get()))
        return request

    def called(request: str) -> Any:
        seen.append(("called", active.get()))
        return awaited(request) if mode == "async" else request

    def plan() -> Plan[str]:
        return (yield CallHandler(called, "req", within=within))

    assert await drive(plan(), mode) == "req"
    assert all(inside for _, inside in seen) and ("called", True) in seen
    assert not active.get()


async def test_an_effect_error_is_thrown_into_the_plan(mode: str) -> None:
    model = EchoModel(error=ValueError("provider down"))

    def plan() -> Plan[str]:
        try:
            yield CallModel(model, ["hi"])
        except ValueError as exc:  # the plan decides: here, it recovers
            return f"recovered from {exc}"
        return "unreachable"

    assert await drive(plan(), mode) == "recovered from provider down"


async def test_an_error_the_plan_does_not_catch_propagates_through_nested_plans(
    mode: str,
) -> None:
    closed: list[str] = []

    def inner() -> Plan[None]:
        try:
            yield CallHandler(lambda _: 1 / 0, None)
        finally:
            closed.append("inner")

    def outer() -> Plan[None]:
        yield from inner()

    with pytest.raises(ZeroDivisionError):
        await drive(outer(), mode)
    assert closed == ["inner"]


async def test_nested_plans_compose_with_yield_from(mode: str) -> None:
    backend = StoreBackend(InMemoryStore())

    def put(key: str, data: bytes) -> Plan[str]:
        yield BackendPut(backend, ("ns",), key, data)
        return key

    def plan() -> Plan[list[bytes | None]]:
        keys = []
        for k in ("a", "b"):
            keys.append((yield from put(k, k.encode())))
        found: list[bytes | None] = []
        for k in keys:
            found.append((yield BackendGet(backend, ("ns",), k)))
        return found

    assert await drive(plan(), mode) == [b"a", b"b"]


async def test_a_slow_model_times_out_with_the_builtin_timeout_error(mode: str) -> None:
    model = EchoModel(delay=2.0)

    def plan() -> Plan[str]:
        try:
            yield CallModel(model, ["hi"], None, 0.05)
        except TimeoutError as exc:
            return str(exc)
        return "answered"

    started = time.monotonic()
    assert await drive(plan(), mode) == "model did not answer within 0.05s"
    assert time.monotonic() - started < 1.5


async def test_a_model_within_its_timeout_answers_with_the_callers_context(mode: str) -> None:
    model = EchoModel(delay=0.01)

    def plan() -> Plan[Any]:
        return (yield CallModel(model, ["hi"], None, 5.0))

    token = REQUEST_ID.set("req-7")  # the sync driver's worker thread must see it too
    try:
        assert await drive(plan(), mode) == (mode, ["hi"], "req-7")
    finally:
        REQUEST_ID.reset(token)


def test_a_model_error_within_the_timeout_reaches_the_plan() -> None:
    model = EchoModel(error=KeyError("gone"))

    def plan() -> Plan[str]:
        try:
            yield CallModel(model, ["hi"], None, 5.0)
        except KeyError as exc:
            return f"caught {exc}"
        return "answered"

    assert run_plan(plan()) == "caught 'gone'"


async def test_a_plan_that_yields_no_effect_is_refused(mode: str) -> None:
    def plan() -> Plan[None]:
        yield "not an effect"  # type: ignore[misc]

    with pytest.raises(TypeError, match="not an effect"):
        await drive(plan(), mode)


async def test_a_plan_without_effects_returns_its_value(mode: str) -> None:
    def plan() -> Plan[int]:
        return 42
        yield  # a generator with nothing to do

    assert await drive(plan(), mode) == 42


# --- both: the sync and async callables of one plan ------------------------------------------


class Graph:
    """A stand-in with async twins of its own, like a compiled graph."""

    def get_state(self, config: str) -> str:
        return f"sync {config}"

    async def aget_state(self, config: str) -> str:
        return f"async {config}"

    def get_state_history(self, config: str) -> Iterator[int]:
        yield from range(3)

    async def aget_state_history(self, config: str) -> Any:
        for n in range(3):
            yield n


class Views:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def _plan_state(self, config: str, *, history: bool = False) -> Plan[tuple[Any, ...]]:
        """Not shown: the twins have their own docstrings."""
        state = yield MethodCall(self.graph, "get_state", (config,))
        states = yield MethodCall(self.graph, "get_state_history", (config,), collect=True)
        return (state, states) if history else (state,)

    state, astate = both(_plan_state, doc="The state.")


def plan_page(n: int, *, label: str = "page") -> Plan[str]:
    """Not shown either."""
    got = yield MethodCall(Graph(), "get_state", (label,))
    return f"{got} {n}"


page, apage = both(plan_page, doc="A page.", adoc="Async page.")


async def test_both_drives_one_plan_as_a_function_and_as_a_method(mode: str) -> None:
    views = Views(Graph())
    if mode == "sync":
        assert page(3, label="x") == "sync x 3"
        assert views.state("c", history=True) == ("sync c", [0, 1, 2])
    else:
        assert await apage(3, label="x") == "async x 3"
        assert await views.astate("c", history=True) == ("async c", [0, 1, 2])


def test_both_gives_each_twin_its_name_docstring_and_the_plans_signature() -> None:
    import inspect
    import typing

    assert (page.__name__, apage.__name__) == ("page", "apage")
    assert (page.__doc__, apage.__doc__) == ("A page.", "Async page.")
    assert Views.astate.__qualname__ == "Views.astate"
    assert Views.astate.__doc__ == "Async twin of `state`."
    assert not inspect.iscoroutinefunction(page) and inspect.iscoroutinefunction(apage)
    for twin in (page, apage):
        assert str(inspect.signature(twin)) == "(n: 'int', *, label: 'str' = 'page') -> 'str'"
        assert typing.get_type_hints(twin) == {"n": int, "label": str, "return": str}
    bound = inspect.signature(Views(Graph()).astate)
    assert str(bound) == "(config: 'str', *, history: 'bool' = False) -> 'tuple[Any, ...]'"
    alone = synchronous(plan_page, doc="A page, sync only.")  # the sync half of `both`
    assert (alone.__name__, alone.__doc__) == ("page", "A page, sync only.")
    assert str(inspect.signature(alone)) == str(inspect.signature(page))
    assert alone(2) == "sync page 2"
