"""Added latency of a model call with a slow summarizer: summaries prepared ahead, on and off.

The agent replays the heavy-tailed workload of the cost section (`benchmarks.workload`) call by
call, paced like a real agent: between two builds it "thinks and runs tools" for `PACE`
seconds (a sleep). The summarizer is the shared fake summarizer (`benchmarks.cost.SummaryModel`)
made slow: every call sleeps `DELAY` seconds (2 s), like a small real model. The added latency
of a model call is the time `ContextManager.build` (sync) or `abuild` (async) takes: everything
the pipeline adds before the model can be called, a summarizer call included.

Four runs go side by side, sync and async with `prepare_summaries` off and on, concurrently (the
summarizer and the pacing sleep, so the runs barely share the CPU): the table gives p50 / p95 /
max over every call, the calls that landed a summary, how many waited for the summarizer, and
the summarizer input tokens. A second table gives what preparing ahead costs on the cost
section's workloads (effective cost, prepare off and on, instant summarizer).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langgraph.store.memory import InMemoryStore

from benchmarks._progress import progress
from benchmarks._table import fmt_duration, fmt_int, print_table
from benchmarks.cost import SummaryModel
from benchmarks.replay import counter
from benchmarks.workload import generate_workload
from langgraph_ctx import ContextManager
from langgraph_ctx.archive import Archive, StoreBackend
from langgraph_ctx.strategies import default_strategies
from langgraph_ctx.summaries.summarizer import Summarizer

DELAY = 2.0
"""Seconds every summarizer call takes."""
PACE = 1.0
"""Seconds the agent spends between two model calls (its model's answer, its tools)."""
GOAL = 0.050
"""The goal: p95 added latency under 50 ms with summaries prepared ahead."""


class SlowSummaryModel(SummaryModel):
    """The shared fake summarizer, taking `delay` seconds per call (sleeping, sync or async)."""

    delay: float = DELAY

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        time.sleep(self.delay)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(self.delay)
        return super()._generate(messages, stop, None, **kwargs)


@dataclass
class Run:
    """One replay's measurements."""

    label: str
    times: list[float] = field(default_factory=list)
    summary_times: list[float] = field(default_factory=list)
    prepared: int = 0
    waited: int = 0
    summarizer: SlowSummaryModel | None = None

    def percentile(self, q: float) -> float:
        ordered = sorted(self.times)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _manager(window: int, reserved: int, prepare: bool) -> tuple[ContextManager, SlowSummaryModel]:
    model = SlowSummaryModel(profile={"max_input_tokens": 128_000})
    manager = ContextManager(
        context_window_tokens=window,
        reserved_output_tokens=reserved,
        strategies=default_strategies(),
        token_counter=counter(),
        archive=Archive(StoreBackend(InMemoryStore()), thread_id=f"latency-{prepare}"),
        summarizer=Summarizer(model=model, input_window_tokens=None, token_counter=counter()),
        prepare_summaries=prepare,
    )
    return manager, model


def _calls(messages: list[BaseMessage]) -> list[int]:
    """Where the agent calls its model: before each AI message."""
    return [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and i > 1]


def _note(run: Run, result: Any, took: float) -> None:
    run.times.append(took)
    for decision in result.report.decisions:
        if decision.kind == "auto_compact" and decision.detail.get("summarizer_input_tokens"):
            run.summary_times.append(took)
            ahead = decision.detail.get("ahead")
            if ahead == "prepared":
                run.prepared += 1
            if took > 0.5 * DELAY:
                run.waited += 1
            break


def _sync(run: Run, messages: list[BaseMessage], manager: ContextManager, pace: float) -> None:
    state = None
    for i in _calls(messages):
        started = time.perf_counter()
        result = manager.build(messages[:i], state=state)
        _note(run, result, time.perf_counter() - started)
        state = result.state
        time.sleep(pace)


async def _async(
    run: Run, messages: list[BaseMessage], manager: ContextManager, pace: float
) -> None:
    state = None
    for i in _calls(messages):
        started = time.perf_counter()
        result = await manager.abuild(messages[:i], state=state)
        _note(run, result, time.perf_counter() - started)
        state = result.state
        await asyncio.sleep(pace)


def measure(*, window: int, reserved: int, steps: int, pace: float = PACE) -> dict[str, Run]:
    """Replay the workload four ways at once; the runs by label."""
    messages = generate_workload(steps=steps, seed=16).messages
    # Warm-up: imports, tokenizer tables, the counter's cache of these messages.
    ContextManager(context_window_tokens=window, token_counter=counter()).build(messages[:50])
    runs: dict[str, Run] = {}
    jobs: list[Callable[[], None]] = []
    for prepare in (False, True):
        sync_run = Run(f"sync, prepare {'on' if prepare else 'off'}")
        sync_manager, sync_run.summarizer = _manager(window, reserved, prepare)
        async_run = Run(f"async, prepare {'on' if prepare else 'off'}")
        async_manager, async_run.summarizer = _manager(window, reserved, prepare)
        runs[sync_run.label], runs[async_run.label] = sync_run, async_run
        jobs.append(lambda r=sync_run, m=sync_manager: _sync(r, messages, m, pace))
        jobs.append(lambda r=async_run, m=async_manager: asyncio.run(_async(r, messages, m, pace)))
    threads = [threading.Thread(target=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(sorted(runs.items()))


def run(args: argparse.Namespace) -> None:
    """Print the latency table (`--quick`: an 8k window and fewer steps)."""
    window, reserved, steps = (8_000, 1_000, 60) if args.quick else (16_000, 2_000, 200)
    progress(f"latency: {steps} steps at {window:,}, paced {PACE} s, summarizer {DELAY} s")
    runs = measure(window=window, reserved=reserved, steps=steps)
    off = {label.split(",")[0]: r for label, r in runs.items() if label.endswith("off")}
    rows = []
    for label, r in runs.items():
        tokens = r.summarizer.input_tokens() if r.summarizer else 0
        base = off[label.split(",")[0]]
        base_tokens = base.summarizer.input_tokens() if base.summarizer else 0
        extra = (
            f"{(tokens / base_tokens - 1) * 100:+.1f}%" if base_tokens and r is not base else "-"
        )
        rows.append(
            [
                label,
                fmt_int(len(r.times)),
                fmt_duration(r.percentile(0.5)),
                fmt_duration(r.percentile(0.95)),
                fmt_duration(max(r.times)),
                f"{len(r.summary_times)} ({r.prepared} prepared, {r.waited} waited)",
                fmt_int(tokens),
                extra,
            ]
        )
    on = [r for label, r in runs.items() if label.endswith("on")]
    met = all(r.percentile(0.95) < GOAL for r in on)
    print_table(
        f"Added latency of a model call, summarizer {DELAY:g} s per call "
        f"(window {window:,}, reserved {reserved:,}, {steps} steps, agent paced {PACE:g} s)",
        [
            "run",
            "calls",
            "p50",
            "p95",
            "max",
            "calls that summarized",
            "summarizer input",
            "vs off",
        ],
        rows,
        notes=[
            "added latency: the time of ContextManager.build / abuild before each model call "
            "(default_strategies(), Archive(InMemoryStore), Summarizer(SlowSummaryModel)).",
            "prepare on: ContextManager(prepare_summaries=True): the next summary is made in a "
            "worker thread (sync) or an asyncio task (async) once the trigger is near.",
            "waited: calls that took over half a summarizer call; prepared: summaries taken "
            "from a preparation (the others were summarized in the call).",
            f"goal: p95 under {GOAL * 1000:.0f} ms with prepare on -> "
            + ("met" if met else "MISSED"),
        ],
    )
    run_cost(args)


# --- what preparing costs ------------------------------------------------------------------


def _replay_cost(spec: Any, runs: list[Any], prepare: bool) -> dict[str, float]:
    """Effective cost of `langgraph-ctx defaults` over `runs`, with or without preparing.

    The summarizer is the cost section's (instant): which span each summary covers is decided
    by the ledger, not by timing, so the figures do not depend on the machine.
    """
    from benchmarks.pipeline import Ours
    from benchmarks.replay import replay
    from langgraph_ctx.prompt.report import ContextBudget

    totals = {"cost": 0.0, "input": 0.0, "calls": 0.0, "facts": 0.0, "facts_total": 0.0}
    budget = ContextBudget(context_window_tokens=spec.window, reserved_output_tokens=spec.reserved)
    for _, messages, facts in runs:
        model = SummaryModel(profile={"max_input_tokens": spec.limit}).with_facts(facts)
        system = Ours(
            "langgraph-ctx defaults",
            strategies=default_strategies(),
            archive=True,
            model=model,
            budget=budget,
        )
        system.manager = ContextManager(
            budget=budget,
            strategies=default_strategies(),
            token_counter=counter(),
            archive=system.archive,
            summarizer=Summarizer(model=model, timeout_seconds=None),
            prepare_summaries=prepare,
        )
        result = replay(system, messages, limit=spec.limit, facts=list(facts))
        if system.manager.preparer is not None:  # a preparation still running is paid for too
            system.manager.preparer.join(60)
        result.summarizer_calls = len(model.calls)
        result.summarizer_input_tokens = model.input_tokens()
        totals["cost"] += result.effective_cost
        totals["input"] += result.summarizer_input_tokens
        totals["calls"] += result.summarizer_calls
        totals["facts"] += result.facts_visible
        totals["facts_total"] += len(facts)
    return totals


def run_cost(args: argparse.Namespace) -> None:
    """Print what `prepare_summaries=True` costs on the cost section's workloads."""
    from benchmarks.cost import QUICK, WORKLOADS

    specs = [QUICK] if args.quick else list(WORKLOADS.values())
    rows = []
    for spec in specs:
        runs = spec.load()
        if not runs:
            continue
        progress(f"latency cost: {spec.name}")
        off, on = _replay_cost(spec, runs, False), _replay_cost(spec, runs, True)
        facts = (
            f"{int(off['facts'])} / {int(on['facts'])} of {int(on['facts_total'])}"
            if on["facts_total"]
            else "-"
        )
        rows.append(
            [
                spec.name,
                fmt_int(round(off["cost"])),
                fmt_int(round(on["cost"])),
                f"{(on['cost'] / off['cost'] - 1) * 100:+.1f}%",
                f"{fmt_int(int(off['input']))} / {fmt_int(int(on['input']))}",
                f"{int(off['calls'])} / {int(on['calls'])}",
                facts,
            ]
        )
    print_table(
        "What preparing summaries ahead costs (langgraph-ctx defaults, prepare off vs on)",
        [
            "workload",
            "eff. cost off",
            "eff. cost on",
            "change",
            "summ. input",
            "summ. calls",
            "facts kept",
        ],
        rows,
        notes=[
            "effective cost as in the cost section (uncached + 0.1 x cache-reusable + summarizer"
            " input), same SummaryModel; preparations still running at the end are counted.",
        ],
    )
