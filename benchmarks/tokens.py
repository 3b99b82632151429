"""Token counting: throughput, and the cost of recounting a growing history.

1. Throughput on the recorded runs of `data/trajectories`: `TiktokenCounter` with a cold and
   a warm cache, `ChatOpenAI.get_num_tokens_from_messages` (the exact reference) and
   langchain-core's `count_tokens_approximately`. Tokens/s is measured in exact prompt tokens
   for every row, so the rows compare the same work.
2. Growing history: an agent appends one message and the prompt is counted again. Per-step
   time at 100, 1,000 and 5,000 messages: with the per-message cache, without it
   (`cache_size=0`), with ChatOpenAI and with `count_tokens_approximately`. The target is a
   recount whose cost does not depend on the history length.
3. Beside a busy thread: the same count alone and while another thread runs Python, for
   `TiktokenCounter` and ChatOpenAI (wall time; see `langgraph_ctx.tokens._text_tokens`).

Everything runs offline: `TIKTOKEN_CACHE_DIR` is pointed at a temporary directory primed with
the verified ranks when it is not set, so ChatOpenAI counts without downloading.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks._table import fmt_duration, fmt_int, fmt_rate, fmt_ratio, print_table
from benchmarks.trajectories import load_trajectories
from langgraph_ctx.tokens import TiktokenCounter
from langgraph_ctx.tokens._encodings import get_encoding, prime_tiktoken_cache
from langgraph_ctx.tokens._text_tokens import SHORT_CHARS

MODEL = "gpt-4o"
SIZES = (100, 1_000, 5_000)

Counter = Callable[[Sequence[BaseMessage]], int]
T = TypeVar("T")


# --- data ----------------------------------------------------------------------------------


_WORDS = [
    "config",
    "parser",
    "section",
    "value",
    "cache",
    "lock",
    "thread",
    "request",
    "response",
    "user",
    "session",
    "token",
    "handler",
    "error",
    "retry",
    "timeout",
    "path",
    "file",
    "module",
    "import",
    "return",
    "raise",
    "assert",
    "test",
    "fixture",
    "database",
    "query",
    "index",
    "migration",
    "schema",
    "field",
    "model",
    "view",
    "route",
    "payload",
    "json",
    "encode",
]
_CODE = (
    "def {a}_{b}(self, {c}: str) -> dict[str, Any]:",
    '    """Return the {a} {b} for {c}."""',
    "    if not self._{a}:",
    "        raise {A}Error(f'no {b} for {{{c}}}')",
    "    result = self._{a}.get({c}, {{}})",
    "    for key, value in sorted(result.items()):",
    "        logger.debug('%s=%s', key, value)",
    "    return {{'{a}': result, '{b}': len(result)}}",
    "class {A}{B}({A}Base):",
    "    {c}_timeout: float = 30.0",
)


def _line(rng: random.Random) -> str:
    a, b, c = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
    return rng.choice(_CODE).format(a=a, b=b, c=c, A=a.title(), B=b.title())


def _tool_output(rng: random.Random, tool: str) -> str:
    size = int(rng.lognormvariate(6.3, 0.9))  # median ~550 chars, long tail to ~10k
    size = max(80, min(size, 12_000))
    lines: list[str] = []
    total = 0
    while total < size:
        if tool == "grep":
            line = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{rng.randint(1, 900)}: "
            line += _line(rng).strip()
        elif tool == "run_tests":
            line = f"tests/test_{rng.choice(_WORDS)}.py::test_{rng.choice(_WORDS)} "
            line += rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
        else:
            line = f"{len(lines) + 1:5d}  {_line(rng)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def synthetic_history(n_messages: int, *, seed: int = 0) -> list[BaseMessage]:
    """A realistic coding-agent history of exactly `n_messages` messages, with ids.

    A system prompt, user turns, AI messages making one to three (parallel) tool calls, tool
    outputs of log-normal size (median about 550 characters), some errors, a final answer per
    turn. Deterministic for a seed. Cut at `n_messages`, so the last batch may be partial (as
    it is while tool results arrive).
    """
    rng = random.Random(seed)
    out: list[BaseMessage] = [
        SystemMessage(
            "You are a careful coding agent working in a Python repository. Use read_file, "
            "grep and run_tests; keep changes small and explain them.",
            id="sys",
        )
    ]
    turn = 0
    while len(out) < n_messages:
        turn += 1
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 40)))
        out.append(HumanMessage(f"Please look into the {words}.", id=f"h{turn}"))
        for step in range(rng.randint(2, 12)):
            calls = []
            for k in range(rng.choice((1, 1, 1, 2, 3))):
                tool = rng.choice(("read_file", "grep", "run_tests"))
                args = {"path": f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"}
                calls.append({"name": tool, "args": args, "id": f"call_{turn}_{step}_{k}"})
            note = "" if rng.random() < 0.5 else f"Checking {calls[0]['args']['path']} next."
            out.append(AIMessage(note, tool_calls=calls, id=f"ai{turn}_{step}"))
            for call in calls:
                error = rng.random() < 0.05
                text = (
                    f"Error: {call['name']} failed: FileNotFoundError: {call['args']['path']}"
                    if error
                    else _tool_output(rng, str(call["name"]))
                )
                out.append(
                    ToolMessage(
                        text,
                        tool_call_id=str(call["id"]),
                        name=str(call["name"]),
                        status="error" if error else "success",
                        id=f"t_{call['id']}",
                    )
                )
        out.append(AIMessage(f"Done: {_line(rng).strip()}", id=f"ai{turn}_final"))
    return out[:n_messages]


# --- measuring -----------------------------------------------------------------------------


@contextlib.contextmanager
def offline_tiktoken() -> Iterator[None]:
    """Point tiktoken at a primed cache for the duration, unless the user set one."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="lgctx-bench-tiktoken-") as tmp:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(prime_tiktoken_cache(tmp))
        try:
            yield
        finally:
            del os.environ["TIKTOKEN_CACHE_DIR"]


def _timed(fn: Callable[[], T], clock: Callable[[], float] = time.process_time) -> tuple[float, T]:
    # CPU time of this process by default: the counters are single-threaded and CPU-bound, and
    # on a shared machine wall time mostly measures the neighbours.
    gc.collect()
    start = clock()
    result = fn()
    return clock() - start, result


def _chat_counter() -> Counter:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=MODEL, api_key="x")  # type: ignore[arg-type]  # never called
    llm.get_num_tokens_from_messages([HumanMessage("warm up the encoding")])
    return llm.get_num_tokens_from_messages


def throughput(data: dict[str, list[BaseMessage]], *, repeat: int, source: str) -> None:
    messages = [m for msgs in data.values() for m in msgs]
    build, _ = _timed(lambda: get_encoding(TiktokenCounter(MODEL).encoding_name))
    exact = TiktokenCounter(MODEL, cache_size=0)
    exact_total = sum(exact(msgs) for msgs in data.values())
    chat = _chat_counter()

    def per_run(counter: Counter) -> Callable[[], int]:
        return lambda: sum(counter(msgs) for msgs in data.values())

    warm = TiktokenCounter(MODEL)
    per_run(warm)()
    candidates: list[tuple[str, Callable[[], Callable[[], int]]]] = [
        ("TiktokenCounter, cold cache", lambda: per_run(TiktokenCounter(MODEL))),
        ("TiktokenCounter, warm cache", lambda: per_run(warm)),
        ("ChatOpenAI.get_num_tokens_from_messages", lambda: per_run(chat)),
        ("count_tokens_approximately", lambda: per_run(count_tokens_approximately)),
    ]
    best = {label: float("inf") for label, _ in candidates}
    reported = dict.fromkeys(best, 0)
    for _ in range(repeat):  # round robin, so a busy moment does not hit one row only
        for label, make in candidates:
            seconds, reported[label] = _timed(make())
            best[label] = min(best[label], seconds)
    results = [(label, reported[label], best[label]) for label, _ in candidates]
    reference = next(t for label, _, t in results if label.startswith("ChatOpenAI"))
    rows = [
        (
            label,
            fmt_int(reported),
            "exact"
            if reported == exact_total
            else f"{(reported - exact_total) / exact_total:+.1%}",
            fmt_duration(seconds),
            fmt_rate(exact_total / seconds),
            fmt_ratio(reference / seconds),
        )
        for label, reported, seconds in results
    ]
    print_table(
        f"Counting throughput, {MODEL}: {len(data)} {source}, {fmt_int(len(messages))} "
        f"messages, {fmt_int(exact_total)} tokens (best of {repeat})",
        ["counter", "tokens counted", "vs exact", "time", "throughput", "vs ChatOpenAI"],
        rows,
        notes=[
            "time = CPU time of the process; throughput = exact prompt tokens / time, the same "
            "work for every row",
            f"offline encoding build ({TiktokenCounter(MODEL).encoding_name}, once per "
            f"process, not in the rows): {fmt_duration(build)}",
        ],
    )


def growth(*, steps: int, seed: int = 0) -> None:
    history = synthetic_history(max(SIZES), seed=seed)
    chat = _chat_counter()
    uncached = TiktokenCounter(MODEL, cache_size=0)
    methods: list[tuple[str, Callable[[], Counter]]] = [
        ("TiktokenCounter, per-message cache", lambda: TiktokenCounter(MODEL)),
        ("TiktokenCounter, cache_size=0", lambda: uncached),
        ("ChatOpenAI.get_num_tokens_from_messages", lambda: chat),
        ("count_tokens_approximately", lambda: count_tokens_approximately),
    ]
    table: dict[str, list[float]] = {}
    encoded: dict[int, float] = {}
    for label, make in methods:
        table[label] = []
        for size in SIZES:
            counter = make()
            # State before the timed steps: the history so far has been counted once (for the
            # cached counter, its cache holds every message, as after counting step by step).
            counter(history[: size - steps])
            before = getattr(counter, "encoded_messages", 0)
            prefixes = [history[:n] for n in range(size - steps + 1, size + 1)]
            times = [_timed(functools.partial(counter, prefix))[0] for prefix in prefixes]
            if isinstance(counter, TiktokenCounter) and counter is not uncached:
                encoded[size] = (counter.encoded_messages - before) / steps
            table[label].append(statistics.median(times))
    rows = [
        (label, *(fmt_duration(t) for t in times), fmt_ratio(times[-1] / times[0]))
        for label, times in table.items()
    ]
    tokens_at = {size: TiktokenCounter(MODEL)(history[:size]) for size in SIZES}
    cached = table["TiktokenCounter, per-message cache"]
    flat = cached[-1] / cached[0]
    speedup = table["ChatOpenAI.get_num_tokens_from_messages"][-1] / cached[-1]
    print_table(
        f"Recount after one new message, {MODEL}: synthetic agent run, per-step median CPU time of "
        f"{steps} steps",
        ["method", *(f"{s:,} msgs" for s in SIZES), f"{SIZES[-1]:,} vs {SIZES[0]:,}"],
        rows,
        notes=[
            "history tokens: "
            + ", ".join(f"{s:,} msgs = {fmt_int(t)}" for s, t in tokens_at.items()),
            "messages encoded per step with the cache: "
            + ", ".join(f"{s:,} msgs: {encoded[s]:g}" for s in SIZES)
            + " (without it: the whole history)",
            "target: recount after one new message independent of history length",
            f"  with the cache: {fmt_duration(cached[0])} -> {fmt_duration(cached[-1])} per step "
            f"({fmt_ratio(flat)} for {SIZES[-1] // SIZES[0]}x the messages); the encoding work "
            "is constant (one message), what grows is the per-message cache lookup",
            f"  vs ChatOpenAI at {SIZES[-1]:,} messages: {fmt_ratio(speedup)} faster",
        ],
    )


def _spin(stop: threading.Event) -> None:
    """Another thread running Python, as a busy neighbour does (a graph run, a preparation)."""
    while not stop.is_set():
        sum(range(1_000))


def beside_a_busy_thread(data: dict[str, list[BaseMessage]], *, messages: int) -> None:
    """Counting alone and beside a thread running Python: the wall time of the same count.

    tiktoken's `encode` lets go of the GIL; getting it back beside a busy thread takes the
    interpreter's switch interval (5 ms), per encode, however short the text.
    """
    sample = [m for msgs in data.values() for m in msgs][:messages]
    chat = _chat_counter()
    ours = TiktokenCounter(MODEL, cache_size=0)  # every message encoded, as ChatOpenAI does
    rows = []
    for label, counter in (
        ("TiktokenCounter, cache_size=0", ours),
        ("ChatOpenAI.get_num_tokens_from_messages", chat),
    ):
        count = functools.partial(counter, sample)
        alone, _ = _timed(count, time.perf_counter)  # wall time: the waits are the point
        stop = threading.Event()
        neighbour = threading.Thread(target=_spin, args=(stop,))
        neighbour.start()
        try:
            busy, _ = _timed(count, time.perf_counter)
        finally:
            stop.set()
            neighbour.join()
        rows.append((label, fmt_duration(alone), fmt_duration(busy), fmt_ratio(busy / alone)))
    print_table(
        f"Counting beside a busy thread, {MODEL}: the first {len(sample):,} messages of the "
        "recorded runs, every message encoded (no cache)",
        ["counter", "alone", "beside a busy thread", "slower by"],
        rows,
        notes=[
            "wall time of one count; the busy thread runs a Python loop for the whole count",
            "tiktoken's encode releases the GIL and waits up to the switch interval "
            f"({sys.getswitchinterval() * 1000:g} ms) to get it back; TiktokenCounter counts "
            f"ASCII text up to {SHORT_CHARS:,} characters holding it",
        ],
    )


def run(args: argparse.Namespace) -> None:
    """Print the token-counting tables (`args.quick`: fewer repetitions and steps)."""
    quick = bool(getattr(args, "quick", False))
    with offline_tiktoken():
        data = load_trajectories()
        throughput(data, repeat=1 if quick else 3, source="real trajectories")
        growth(steps=3 if quick else 15)
        beside_a_busy_thread(data, messages=100 if quick else 400)
