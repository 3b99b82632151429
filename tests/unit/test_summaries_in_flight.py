"""The cap on summarizer calls in flight (`max_summaries_in_flight`, `SummarySlots`).

With a cap of 2 and many threads preparing at once, never more than 2 summarizer calls run,
every preparation still lands, and a build never waits for a slot: at the trigger, one still
waiting is withdrawn and the build summarizes in its own call, as when nothing is ready.

The cap counts every summarizer call of the manager, those builds make in the model call
included: with 10 threads whose summaries come due at once, 2 reach the summarizer and the
others get the deterministic summary at once, their reports saying the summarizer was busy.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from benchmarks.load import InFlight
from langgraph_ctx import ContextManager, ContextMemory
from langgraph_ctx._effects import CallHandler, MethodCall, arun_plan, run_plan
from langgraph_ctx.archive import Archive, StoreBackend
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.pipeline import BuildResult
from langgraph_ctx.strategies import default_strategies
from langgraph_ctx.summaries.preparer import SpanToPrepare, SpanWanted, SummaryPreparer
from langgraph_ctx.summaries.slots import DEFAULT_MAX_IN_FLIGHT, SummarySlots
from langgraph_ctx.summaries.summarizer import Summarizer
from tests.unit.test_ahead import (
    SlowSummarizer,
    _grow_until,
    _kinds,
    _manager,
    _settle,
    _start,
    _step,
)

CAP = 2
THREADS = 10


class CountedSummarizer(SlowSummarizer):
    """`SlowSummarizer` counting its calls in flight (`counter`)."""

    counter: Any = None

    def _generate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> Any:
        self.counter.enter()
        try:
            return super()._generate(messages, *a, **k)
        finally:
            self.counter.leave()

    async def _agenerate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> Any:
        self.counter.enter()
        try:
            return await super()._agenerate(messages, *a, **k)
        finally:
            self.counter.leave()


def _slow_plan(counter: InFlight, mode: str, delay: float = 0.05) -> Any:
    """A summarize plan factory whose one effect takes `delay` s (slept or awaited)."""

    def sleep(request: str) -> str:
        counter.enter()
        try:
            time.sleep(delay)
        finally:
            counter.leave()
        return request

    async def asleep(request: str) -> str:
        counter.enter()
        try:
            await asyncio.sleep(delay)
        finally:
            counter.leave()
        return request

    def plan(messages: list[BaseMessage], previous: str | None) -> Any:
        handler = sleep if mode == "sync" else asleep
        return (yield CallHandler(handler, f"summary of {messages[0].id}"))

    return plan


def _effect(preparer: SummaryPreparer, key: str, plan: Any) -> SpanToPrepare:
    return SpanToPrepare(key, f"d-{key}", plan, (HumanMessage("x", id=key),), None)


async def _done(preparer: SummaryPreparer, mode: str) -> None:
    if mode == "sync":
        assert preparer.join(30)
        return
    for _ in range(600):
        with preparer._lock:
            preps = list(preparer._preps.values())
        if all(p.done.is_set() for p in preps):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the preparations did not end")


def _take(preparer: SummaryPreparer, key: str) -> Any:
    def plan() -> Any:
        return (yield MethodCall(preparer, "wait_prepared", (SpanWanted(key, f"d-{key}", 0),)))

    return plan()


async def test_the_preparer_runs_at_most_the_cap_and_every_summary_lands(mode: str) -> None:
    counter = InFlight()
    preparer = SummaryPreparer(max_in_flight=CAP)
    plan = _slow_plan(counter, mode)
    keys = [f"t{n}" for n in range(THREADS)]
    started = time.perf_counter()
    for key in keys:
        if mode == "sync":
            assert preparer.start(_effect(preparer, key, plan))
        else:
            assert await preparer.astart(_effect(preparer, key, plan))
    assert time.perf_counter() - started < 0.5  # starting never waits for a slot
    await _done(preparer, mode)
    assert counter.calls == THREADS
    assert counter.peak == CAP
    assert preparer.peak_in_flight == CAP
    for key in keys:
        assert run_plan(_take(preparer, key)) == f"summary of {key}"
    assert preparer.slots.in_flight == 0


async def test_no_cap_runs_them_all_at_once(mode: str) -> None:
    counter = InFlight()
    preparer = SummaryPreparer(max_in_flight=None)
    plan = _slow_plan(counter, mode, delay=0.3)
    for n in range(THREADS):
        if mode == "sync":
            preparer.start(_effect(preparer, f"t{n}", plan))
        else:
            await preparer.astart(_effect(preparer, f"t{n}", plan))
    await _done(preparer, mode)
    assert counter.peak == THREADS


async def test_a_build_never_waits_for_a_slot(mode: str) -> None:
    """At the trigger, a preparation still waiting for a slot is withdrawn: None at once."""
    counter = InFlight()
    preparer = SummaryPreparer(max_in_flight=1)
    release = threading.Event()

    def blocking(messages: list[BaseMessage], previous: str | None) -> Any:
        release.wait(10)
        return "first"
        yield  # a plan

    waiting = _slow_plan(counter, mode)
    preparer.start(_effect(preparer, "a", blocking))  # holds the one slot in a worker thread
    if mode == "sync":
        assert preparer.start(_effect(preparer, "b", waiting))
    else:
        assert await preparer.astart(_effect(preparer, "b", waiting))
    assert preparer.pending("b") == "d-b"
    started = time.perf_counter()
    effect = SpanWanted("b", "d-b", 10)  # would wait 10 s for a running one
    if mode == "sync":
        outcome = preparer.wait_prepared(effect)
    else:
        outcome = await preparer.await_prepared(effect)
    assert outcome is None and time.perf_counter() - started < 0.5
    assert preparer.pending("b") is None  # withdrawn: the build summarizes it itself
    release.set()
    assert preparer.join(5)
    await asyncio.sleep(0.1)
    assert counter.calls == 0  # the withdrawn preparation never called the summarizer
    assert run_plan(_take(preparer, "a")) == "first"
    assert preparer.slots.in_flight == 0


async def test_many_threads_of_one_manager_get_their_prepared_summaries(mode: str) -> None:
    """End to end: a shared manager with a cap of 2; every thread takes its prepared summary."""
    counter = InFlight()
    model = CountedSummarizer(delay=0.15, counter=counter)
    manager = _manager(model, max_summaries_in_flight=CAP)
    assert manager.preparer is not None and manager.preparer.max_in_flight == CAP
    threads: dict[str, dict[str, Any]] = {}
    for n in range(6):  # each thread reaches its preparation; the summaries queue for 2 slots
        prefix = f"p{n}-"
        manager.archive = Archive(StoreBackend(InMemoryStore()), thread_id=prefix)
        messages = _start(prefix)
        _, state, _ = await _grow_until(manager, messages, None, "prepare", mode, prefix)
        threads[prefix] = {"messages": messages, "state": state, "archive": manager.archive}
    await _settle(manager, mode)
    if mode == "async":  # `_settle` gives up after 5 s; the queue may need longer
        for _ in range(200):
            if counter.calls >= len(threads) and counter.now == 0:
                break
            await asyncio.sleep(0.05)
    assert counter.calls == len(threads)
    assert counter.peak == CAP  # they queued, and never more than the cap ran
    for prefix, thread in threads.items():
        manager.archive = thread["archive"]
        result, _, took = await _grow_until(
            manager, thread["messages"], thread["state"], "auto_compact", mode, prefix
        )
        assert _kinds(result)["auto_compact"].detail["ahead"] == "prepared"
        assert took < model.delay
    assert counter.calls == len(threads)  # no summary was made again in a model call
    assert counter.peak <= CAP


@pytest.mark.parametrize("bad", [0, -1, 1.5, "4", True])
def test_the_cap_is_checked(bad: Any) -> None:
    with pytest.raises(ConfigError, match="max_summaries_in_flight"):
        ContextMemory(context_window_tokens=8_000, max_summaries_in_flight=bad)
    with pytest.raises(ConfigError, match="max_summaries_in_flight"):
        ContextManager(context_window_tokens=8_000, max_summaries_in_flight=bad)


def test_the_cap_reaches_the_preparer() -> None:
    memory = ContextMemory(context_window_tokens=8_000, prepare_summaries=True)
    assert memory.manager.preparer is not None
    assert memory.manager.preparer.max_in_flight == DEFAULT_MAX_IN_FLIGHT
    memory = ContextMemory(
        context_window_tokens=8_000,
        prepare_summaries=True,
        max_summaries_in_flight=None,
        strategies=default_strategies(),
    )
    assert memory.manager.preparer is not None
    assert memory.manager.preparer.max_in_flight is None


def test_async_preparations_across_event_loops_share_the_cap() -> None:
    """Two event loops in two threads, one preparer: the cap holds across both."""
    counter = InFlight()
    preparer = SummaryPreparer(max_in_flight=CAP)
    plan = _slow_plan(counter, "async")

    async def one_loop(prefix: str) -> None:
        for n in range(5):
            await preparer.astart(_effect(preparer, f"{prefix}{n}", plan))
        await _done(preparer, "async")
        for n in range(5):
            assert await arun_plan(_take(preparer, f"{prefix}{n}")) == f"summary of {prefix}{n}"

    errors: list[BaseException] = []

    def run(prefix: str) -> None:
        try:
            asyncio.run(one_loop(prefix))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(p,)) for p in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert not errors
    assert counter.calls == 10 and counter.peak <= CAP


# --- summaries made in the model call count too --------------------------------------------

BUSY = "summarizer busy"


def _over_the_trigger(prefix: str) -> list[BaseMessage]:
    """A history past the trigger of `_manager`'s 40-token window: the build summarizes."""
    messages = _start(prefix)
    for k in range(24):
        messages += _step(prefix, k)
    return messages


def _archive(prefix: str) -> Archive:
    return Archive(StoreBackend(InMemoryStore()), thread_id=prefix)


def _has_summary(result: BuildResult) -> bool:
    return any("<summary>" in str(m.content) for m in result.messages)


def _summaries(result: BuildResult) -> list[Any]:
    return [d for d in result.report.decisions if d.kind == "auto_compact"]


async def _all_at_once(
    manager: ContextManager, histories: dict[str, list[BaseMessage]], mode: str
) -> dict[str, tuple[BuildResult, float]]:
    """Build every history at the same moment (threads behind a barrier, or one gather)."""
    out: dict[str, tuple[BuildResult, float]] = {}

    def timed_build(prefix: str) -> None:
        started = time.perf_counter()
        result = manager.build(histories[prefix], archive=_archive(prefix))
        out[prefix] = (result, time.perf_counter() - started)

    async def atimed_build(prefix: str) -> None:
        started = time.perf_counter()
        result = await manager.abuild(histories[prefix], archive=_archive(prefix))
        out[prefix] = (result, time.perf_counter() - started)

    if mode == "async":
        await asyncio.gather(*(atimed_build(p) for p in histories))
        return out
    barrier = threading.Barrier(len(histories))
    errors: list[BaseException] = []

    def run(prefix: str) -> None:
        try:
            barrier.wait(10)
            timed_build(prefix)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(p,)) for p in histories]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert not errors
    return out


@pytest.mark.parametrize("prepare", [False, True], ids=["prepare_off", "prepare_on"])
async def test_summaries_due_in_the_call_stay_within_the_cap(mode: str, prepare: bool) -> None:
    """10 threads past the trigger at once, cap 2: 2 summarizer calls, 8 deterministic ones."""
    counter = InFlight()
    model = CountedSummarizer(delay=0.6, counter=counter)
    manager = _manager(model, prepare=prepare, max_summaries_in_flight=CAP)
    histories = {f"c{n}-": _over_the_trigger(f"c{n}-") for n in range(THREADS)}
    results = await _all_at_once(manager, histories, mode)
    assert counter.peak <= CAP  # the summarizer's own count
    assert manager.slots.peak_in_flight <= CAP
    busy, made = [], []
    for prefix, (result, took) in results.items():
        assert _has_summary(result), prefix  # every prompt has one: the model's or ours
        decisions = _summaries(result)
        assert decisions, prefix
        first = decisions[0].detail
        if first["source"] == "fallback":
            assert BUSY in first["error"] and f"max_summaries_in_flight={CAP}" in first["error"]
            assert first["model_calls"] == 0 and first["dump_ref"]  # insured, never called
            busy.append((prefix, took))
        else:
            made.append(prefix)
    assert busy, "with 10 summaries due at once and 2 slots, some found the summarizer busy"
    calls = sum(d.detail["model_calls"] for r, _ in results.values() for d in _summaries(r))
    assert counter.calls == calls  # the fallen-back ones never reached the summarizer
    assert manager.slots.busy >= len(busy)
    assert manager.slots.in_flight == 0
    # nothing waited for a slot: a fallen-back build does not take the summarizer's delay
    assert min(took for _, took in busy) < model.delay


async def test_a_withdrawn_preparation_with_no_slot_free_gets_the_deterministic_summary(
    mode: str,
) -> None:
    """At the trigger, a preparation still queued is withdrawn; the call finds no slot free."""
    counter = InFlight()
    model = CountedSummarizer(delay=1.5, counter=counter)
    manager = _manager(model, max_summaries_in_flight=CAP)
    threads: dict[str, dict[str, Any]] = {}
    for n in range(THREADS):  # 2 preparations run, 8 wait for a slot
        prefix = f"w{n}-"
        manager.archive = _archive(prefix)
        messages = _start(prefix)
        _, state, _ = await _grow_until(manager, messages, None, "prepare", mode, prefix)
        threads[prefix] = {"messages": messages, "state": state, "archive": manager.archive}
    assert manager.preparer is not None
    for _ in range(40):  # the first two preparations hold both slots
        if counter.now == CAP:
            break
        await asyncio.sleep(0.05)
    assert counter.now == CAP
    fell_back = 0
    for prefix in list(threads)[CAP:]:  # the queued ones reach their triggers first
        thread = threads[prefix]
        manager.archive = thread["archive"]
        result, _, took = await _grow_until(
            manager, thread["messages"], thread["state"], "auto_compact", mode, prefix
        )
        detail = _kinds(result)["auto_compact"].detail
        assert detail["ahead"] == "not ready: summarized now"
        assert _has_summary(result)
        if detail["source"] == "fallback":
            assert BUSY in detail["error"] and detail["model_calls"] == 0
            assert took < model.delay
            fell_back += 1
    assert fell_back == THREADS - CAP  # both slots were held by the running preparations
    await _settle(manager, mode)
    assert counter.calls == CAP and counter.peak <= CAP  # only the two preparations ran
    for prefix in list(threads)[:CAP]:
        thread = threads[prefix]
        manager.archive = thread["archive"]
        result, _, _ = await _grow_until(
            manager, thread["messages"], thread["state"], "auto_compact", mode, prefix
        )
        assert _kinds(result)["auto_compact"].detail["ahead"] == "prepared"
    assert counter.calls == CAP and manager.slots.peak_in_flight <= CAP


async def test_the_slots_gate_a_summarizer_plan(mode: str) -> None:
    """`SummarySlots.plan`: a slot per model summary; none free: the deterministic one."""
    counter = InFlight()
    summarizer = Summarizer(model=CountedSummarizer(delay=0.01, counter=counter))
    slots = SummarySlots(1)
    span = [HumanMessage("fix the parser in src/parse.py", id="h")]
    drive = run_plan if mode == "sync" else None

    async def summarize() -> Any:
        plan = slots.plan(summarizer, span, None)
        return drive(plan) if drive is not None else await arun_plan(plan)

    outcome = await summarize()
    assert outcome.source == "model" and slots.calls == 1 and slots.in_flight == 0
    assert slots.try_take() is None  # someone else holds the one slot
    outcome = await summarize()
    assert outcome.source == "fallback" and BUSY in outcome.error
    assert "src/parse.py" in outcome.text  # the deterministic summary of the span
    assert counter.calls == 1 and slots.busy == 1
    slots.release(background=False)
    assert (await summarize()).source == "model"
    assert SummarySlots(None).try_take() is None  # no cap: always a slot
    no_model = slots.plan(Summarizer(), span, None)
    assert run_plan(no_model).source == "fallback" and slots.busy == 1  # no model: no slot


def test_every_summary_of_a_manager_shares_its_slots() -> None:
    """Builds, rebuilds and the preparer hold the manager's one `SummarySlots`."""
    manager = ContextManager(
        context_window_tokens=8_000,
        strategies=default_strategies(),
        prepare_summaries=True,
        max_summaries_in_flight=3,
    )
    assert manager.preparer is not None and manager.preparer.slots is manager.slots
    assert manager.slots.max_in_flight == 3
    resources = manager._resources(None)
    assert resources.summarize is not None
    gate: Any = resources.summarize  # `manager.slots.gate(manager.summarizer)`
    assert gate.func.__self__ is manager.slots and gate.args == (manager.summarizer,)


def test_past_max_threads_the_oldest_preparation_is_forgotten_and_withdrawn_if_queued() -> None:
    """`max_threads` bounds the preparations kept (the `LRUCache` of the preparer): the least
    recently started is dropped; one still waiting for a slot is withdrawn (it never calls the
    summarizer), one already running is let finish."""
    gate, called = threading.Event(), []

    def plan(messages: list[BaseMessage], previous: str | None) -> Any:
        called.append(messages[0].id)
        gate.wait(10)  # t0 holds the one slot until released
        return None
        yield  # a plan: a generator that performs no effect

    preparer = SummaryPreparer(max_threads=2, max_in_flight=1)
    for n in range(4):
        assert preparer.start(_effect(preparer, f"t{n}", plan))
        time.sleep(0.1)  # t0 holds the slot before the others queue
    assert [preparer.pending(f"t{n}") for n in range(4)] == [None, None, "d-t2", "d-t3"]
    gate.set()
    assert preparer.join(30)
    time.sleep(0.2)  # t0, forgotten, ends on its own
    assert sorted(called) == ["t0", "t2", "t3"]  # t1 was withdrawn while it queued
