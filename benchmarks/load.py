"""Load: many threads through ONE `ContextMemory` under `create_agent`, summaries prepared ahead.

50 and 200 threads run at once through one agent graph (`langchain.agents.create_agent` with
`memory.middleware()`, one `InMemorySaver`), async (`asyncio.gather` over the threads) and sync
(a thread pool, one worker per thread), with `prepare_summaries=True`. The agent's model is the
package's `ScriptedChatModel` (its answer a function of the prompt: a tool call per step, a
final answer after `STEPS` steps), paced `PACE` s per call like a real provider; each tool
returns a file of ~500 tokens, so with a `WINDOW`-token window every thread summarizes several
times. The summarizer is latency.py's `SlowSummaryModel` (`DELAY` s per call), counting its
calls in flight under a lock.

Per run the table gives: errors (must be 0); whether every thread's full history
(`ContextMemory.get_full_history`: live state plus archive) equals everything the thread
produced, in order; the added latency of each model call at p50 / p95 / max (the time spent
inside `ContextMiddleware.wrap_model_call` minus the inner model handler, measured by two
timing middlewares around it); the summaries taken prepared or made in the call, and how many
of all summaries were the deterministic one because the cap left no slot free
(`SummarySlots.busy`); and the peak number of summarizer calls in flight, counted in the fake
summarizer (every call, background or in a build), which must not pass the cap. Each size and
mode runs with the caps in `CAPS`: 4, the default (`DEFAULT_MAX_IN_FLIGHT`) and none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import itertools
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from benchmarks._progress import EVERY_SECONDS, progress
from benchmarks._table import fmt_duration, fmt_int, print_table
from benchmarks.latency import Run, SlowSummaryModel
from benchmarks.replay import counter
from langgraph_ctx import ContextMemory
from langgraph_ctx.messages import text_of
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.summaries.slots import DEFAULT_MAX_IN_FLIGHT

DELAY = 1.0
"""Seconds every summarizer call takes."""
PACE = 0.5
"""Seconds every call of the agent's model takes."""
WINDOW = 6_000
"""The context window of the memory, in tokens."""
STEPS = 5
"""Tool calls per user turn (then a final answer)."""
TURNS = 6
"""User turns per thread: `TURNS * (STEPS + 1)` model calls."""
LINES = 40
"""Lines of every file the tool returns (~500 tokens)."""
CAPS: tuple[int | None, ...] = (4, DEFAULT_MAX_IN_FLIGHT, None)
"""`max_summaries_in_flight` of the runs: a low cap, the default, no cap."""


class InFlight:
    """Calls in flight, counted under a lock, with the peak."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.calls = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        """A call starts."""
        with self._lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        """A call ends."""
        with self._lock:
            self.now -= 1


class CountingSummaryModel(SlowSummaryModel):
    """latency.py's `SlowSummaryModel` counting its calls in flight (`flight`)."""

    _flight: InFlight = PrivateAttr(default_factory=InFlight)

    @property
    def flight(self) -> InFlight:
        """The calls in flight and their peak."""
        return self._flight

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._flight.enter()
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            self._flight.leave()

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._flight.enter()
        try:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        finally:
            self._flight.leave()


# --- the agent -------------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return "\n".join(
        f"{path}:{n}: value_{n} = compute({n}, scale={n % 7}) # checked by step {path}"
        for n in range(LINES)
    )


_STEP = re.compile(r"^(?P<thread>t\d+)\.(?P<turn>\d+)\.(?P<k>\d+)$")
_ASK = re.compile(r"\[(?P<thread>t\d+) turn (?P<turn>\d+)\]")


def reply(prompt: list[BaseMessage]) -> AIMessage:
    """The agent's next step, from the newest message of the prompt: a tool call, or done."""
    last = prompt[-1]
    if isinstance(last, ToolMessage) and (step := _STEP.match(last.tool_call_id)):
        thread, turn, k = step["thread"], int(step["turn"]), int(step["k"]) + 1
    elif isinstance(last, HumanMessage) and (ask := _ASK.search(text_of(last))):
        thread, turn, k = ask["thread"], int(ask["turn"]), 0
    else:
        msg = f"unexpected newest message {last!r}"
        raise AssertionError(msg)
    if k == STEPS:
        return AIMessage(f"Turn {turn} done.", id=f"{thread}.ai.{turn}.{k}")
    call = {"name": "read_file", "args": {"path": f"{thread}/src/m{turn}_{k}.py"}}
    return AIMessage(
        f"Reading part {k}.",
        id=f"{thread}.ai.{turn}.{k}",
        tool_calls=[{**call, "id": f"{thread}.{turn}.{k}"}],
    )


_CELL: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "langgraph_ctx_load_inner", default=None
)


class OuterTimer(AgentMiddleware):  # type: ignore[type-arg]
    """Outside `ContextMiddleware`: its time minus the inner handler's is the added latency."""

    def __init__(self, added: list[float]) -> None:
        super().__init__()
        self.added = added

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Time the call (`ContextMiddleware` and the model)."""
        cell = [0.0]
        token = _CELL.set(cell)
        started = time.perf_counter()
        try:
            return handler(request)
        finally:
            self.added.append(time.perf_counter() - started - cell[0])
            _CELL.reset(token)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async twin of `wrap_model_call`."""
        cell = [0.0]
        token = _CELL.set(cell)
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            self.added.append(time.perf_counter() - started - cell[0])
            _CELL.reset(token)


class InnerTimer(AgentMiddleware):  # type: ignore[type-arg]
    """Inside `ContextMiddleware`: the model handler's own time (every attempt)."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Time the model handler."""
        started = time.perf_counter()
        try:
            return handler(request)
        finally:
            cell = _CELL.get()
            if cell is not None:
                cell[0] += time.perf_counter() - started

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async twin of `wrap_model_call`."""
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            cell = _CELL.get()
            if cell is not None:
                cell[0] += time.perf_counter() - started


# --- one run ---------------------------------------------------------------------------


@dataclass
class LoadRun:
    """One run's measurements."""

    threads: int
    mode: str
    cap: int | None
    added: Run = field(default_factory=lambda: Run("added"))
    errors: list[str] = field(default_factory=list)
    complete: int = 0
    """Threads whose full history is everything they produced, in order."""
    prepared: int = 0
    in_call: int = 0
    peak: int = 0
    """The most summarizer calls at once, counted in the fake summarizer."""
    peak_background: int = 0
    summarizer_calls: int = 0
    summaries: int = 0
    """Summaries the memory made (`SummarySlots.calls + busy`): LLM or deterministic."""
    busy: int = 0
    """Summaries that were the deterministic one because no slot was free."""
    seconds: float = 0.0


@dataclass
class _Thread:
    """What one thread produced, in order, and the summaries its builds reported."""

    produced: list[BaseMessage] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    summaries: set[str] = field(default_factory=set)
    prepared: int = 0
    in_call: int = 0

    def note(self, chunk: Mapping[str, Any]) -> None:
        """Keep the new messages and summaries of one `stream_mode="updates"` chunk."""
        for value in chunk.values():  # a node's update, or a list of them
            for update in value if isinstance(value, list) else [value]:
                if isinstance(update, Mapping):
                    self._note(update)

    def _note(self, update: Mapping[str, Any]) -> None:
        messages = update.get("messages") or []
        for m in messages if isinstance(messages, list) else [messages]:
            if isinstance(m, BaseMessage) and not isinstance(m, RemoveMessage):
                self.add(m)
        report = (update.get("context_ledger") or {}).get("last_report") or {}
        for decision in report.get("decisions") or []:
            detail = decision.get("detail") or {}
            key = str(detail.get("dump_ref") or decision.get("message_ids"))
            if decision.get("kind") != "auto_compact" or key in self.summaries:
                continue  # a report seen twice (a later update of the same ledger)
            self.summaries.add(key)
            if detail.get("ahead") == "prepared":
                self.prepared += 1
            else:
                self.in_call += 1

    def add(self, message: BaseMessage) -> None:
        """Keep `message` unless it replaces one kept already (same key)."""
        key = _key(message)
        if key not in self.seen:
            self.seen.add(key)
            self.produced.append(message)


def _key(m: BaseMessage) -> tuple[str, str]:
    return (m.type, m.tool_call_id if isinstance(m, ToolMessage) else str(m.id))


def _same(full: Iterable[BaseMessage], produced: list[BaseMessage]) -> bool:
    """Whether the full history (system messages aside) is `produced`, in order, whole."""
    rebuilt = [m for m in full if not isinstance(m, SystemMessage)]
    if [_key(m) for m in rebuilt] != [_key(m) for m in produced]:
        return False
    for a, b in zip(rebuilt, produced, strict=True):
        if text_of(a) != text_of(b):
            return False
        if [c["id"] for c in getattr(a, "tool_calls", [])] != [
            c["id"] for c in getattr(b, "tool_calls", [])
        ]:
            return False
    return True


def _ask(name: str, turn: int) -> HumanMessage:
    return HumanMessage(
        f"[{name} turn {turn}] Read the files of module {turn} and tell me what they compute.",
        id=f"{name}.h.{turn}",
    )


def _agent(cap: int | None, turns: int) -> tuple[Any, ContextMemory, CountingSummaryModel, Run]:
    model = ScriptedChatModel(messages=itertools.repeat(reply), fallback=None, delay=PACE)
    summarizer = CountingSummaryModel(delay=DELAY, profile={"max_input_tokens": 128_000})
    memory = ContextMemory(
        model=model,
        context_window_tokens=WINDOW,
        token_counter=counter(),
        summarizer=summarizer,
        prepare_summaries=True,
        max_summaries_in_flight=cap,
        expose_recall=False,
    )
    added = Run("added")
    agent = create_agent(
        model,
        [read_file],
        system_prompt="You are a careful coding agent.",
        middleware=[OuterTimer(added.times), memory.middleware(), InnerTimer()],
        checkpointer=InMemorySaver(),
    )
    return agent, memory, summarizer, added


def _ticker(run: LoadRun, stop: threading.Event, calls: int) -> None:
    while not stop.wait(EVERY_SECONDS):
        progress(f"  {fmt_int(len(run.added.times))} of {fmt_int(calls)} model calls")


def measure(threads: int, mode: str, cap: int | None, turns: int) -> LoadRun:
    """Run `threads` threads of `turns` turns at once through one memory; their figures."""
    agent, memory, summarizer, added = _agent(cap, turns)
    run = LoadRun(threads, mode, cap, added=added)
    names = [f"t{n}" for n in range(threads)]
    configs: dict[str, RunnableConfig] = {
        name: {"configurable": {"thread_id": name}} for name in names
    }
    seen = {name: _Thread() for name in names}
    stop = threading.Event()
    threading.Thread(
        target=_ticker, args=(run, stop, threads * turns * (STEPS + 1)), daemon=True
    ).start()
    started = time.perf_counter()

    def one(name: str) -> None:
        try:
            for turn in range(turns):
                ask = _ask(name, turn)
                seen[name].add(ask)
                for chunk in agent.stream(
                    {"messages": [ask]}, configs[name], stream_mode="updates"
                ):
                    seen[name].note(chunk)
        except Exception as exc:  # counted and shown: the run must have none
            run.errors.append(f"{name}: {type(exc).__name__}: {exc}")

    async def aone(name: str) -> None:
        try:
            for turn in range(turns):
                ask = _ask(name, turn)
                seen[name].add(ask)
                async for chunk in agent.astream(
                    {"messages": [ask]}, configs[name], stream_mode="updates"
                ):
                    seen[name].note(chunk)
        except Exception as exc:  # counted and shown: the run must have none
            run.errors.append(f"{name}: {type(exc).__name__}: {exc}")

    async def aall() -> None:
        await asyncio.gather(*(aone(name) for name in names))
        run.seconds = time.perf_counter() - started
        for name in names:
            full = await memory.aget_full_history(agent, configs[name], strict=True)
            run.complete += _same(full, seen[name].produced)

    try:
        if mode == "async":
            asyncio.run(aall())
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                list(pool.map(one, names))
            run.seconds = time.perf_counter() - started
            for name in names:
                full = memory.get_full_history(agent, configs[name], strict=True)
                run.complete += _same(full, seen[name].produced)
    finally:
        stop.set()
    run.prepared = sum(t.prepared for t in seen.values())
    run.in_call = sum(t.in_call for t in seen.values())
    run.peak = summarizer.flight.peak
    run.peak_background = memory.manager.preparer.peak_background if memory.manager.preparer else 0
    run.summarizer_calls = summarizer.flight.calls
    slots = memory.manager.slots
    run.summaries, run.busy = slots.calls + slots.busy, slots.busy
    if cap is not None and run.peak > cap:
        run.errors.append(f"{run.peak} summarizer calls in flight, over the cap of {cap}")
    return run


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def run(args: argparse.Namespace) -> None:
    """Print the load table (`--quick`: 10 threads, 2 turns, the default cap only)."""
    sizes: tuple[int, ...]
    caps: tuple[int | None, ...]
    if args.quick:
        sizes, turns, caps = (10,), 2, (DEFAULT_MAX_IN_FLIGHT,)
    else:
        sizes, turns, caps = (50, 200), TURNS, CAPS
    # Warm-up, discarded: imports, the tokenizer's tables (about a second), compiled patterns.
    # Without it the first row's calls paid them (10 threads async, --quick: p95 0.7 s).
    measure(2, "sync", DEFAULT_MAX_IN_FLIGHT, 1)
    rows = []
    for threads in sizes:
        for mode in ("async", "sync"):
            for cap in caps:
                progress(f"load: {threads} threads, {mode}, cap {cap}, {turns} turns")
                r = measure(threads, mode, cap, turns)
                for error in r.errors[:5]:
                    progress(f"  error: {error}")
                rows.append(
                    [
                        f"{threads} threads, {mode}",
                        "none" if cap is None else str(cap),
                        fmt_int(len(r.added.times)),
                        fmt_int(len(r.errors)),
                        f"{r.complete} of {threads}",
                        fmt_duration(r.added.percentile(0.5)),
                        fmt_duration(r.added.percentile(0.95)),
                        fmt_duration(max(r.added.times, default=0.0)),
                        f"{r.prepared} / {r.in_call}",
                        f"{r.busy} of {r.summaries} ({_share(r.busy, r.summaries)})",
                        f"{r.peak} / {r.peak_background}",
                        f"{r.seconds:.0f} s",
                    ]
                )
    print_table(
        f"Load: threads at once through one ContextMemory under create_agent, prepare_summaries="
        f"True (window {WINDOW:,}, {turns} turns x {STEPS + 1} model calls per thread)",
        [
            "run",
            "cap",
            "model calls",
            "errors",
            "full history complete",
            "added p50",
            "added p95",
            "added max",
            "summaries prepared / in the call",
            "deterministic: no slot free",
            "peak in flight: all / background",
            "wall",
        ],
        rows,
        notes=[
            f"agent model: ScriptedChatModel, {PACE:g} s per call, one tool call per step "
            f"(a ~500-token file), {STEPS} steps then an answer; summarizer: SlowSummaryModel, "
            f"{DELAY:g} s per call.",
            "cap: ContextMemory(max_summaries_in_flight=...); none: no cap.",
            "full history complete: get_full_history (live state plus archive, system prompt "
            "aside) equals every message the thread produced, in order, ids and text.",
            "added: time inside ContextMiddleware.wrap_model_call minus the model handler's "
            "(after_agent, which runs once per turn, not counted).",
            "summaries in the call: the build at the trigger summarized itself (its "
            "preparation not ready, or withdrawn while waiting for a slot).",
            "deterministic: summaries (prepared, in the call, rebuilds) that were the "
            "deterministic one because every slot was taken (SummarySlots.busy), of all the "
            "summaries the memory made.",
            "peak in flight, all: the most summarizer calls at once, counted in the fake "
            "summarizer under a lock (background preparations and summaries made in the "
            "call), never above the cap; background: the preparations among them "
            "(SummarySlots.peak_background).",
        ],
    )
