"""The benchmarks' side of the replay: the fake summarizer, the recorded runs, timings.

The call-by-call replay itself is `langgraph_ctx_tools.replay.engine.replay` (the one engine that
`langgraph-ctx frontier` uses too); `replay` here runs it with the benchmarks' conditions: the
exact `TiktokenCounter("gpt-4o")` for every system and metric, progress lines on long runs,
and optionally the providers' own converters (`tests.providers`) as a second validity judge.

The sections that compare systems give every system that summarizes (ours too) a fresh
instance of one summarizer, the summary condition's (`--summaries`: `same`, the deterministic
summary; `shape`, the conversation's shape only; `langgraph_ctx_tools.replay.summary_models`), and
name the condition in their tables' titles (`condition_note`). `FactEchoModel`, a fake chat
model answering with the planted facts it saw, stays for the sections that replay ours alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage

from benchmarks import trajectories
from benchmarks._progress import EVERY_SECONDS, progress
from benchmarks.synthetic import FACT_RE
from langgraph_ctx.messages import text_of
from langgraph_ctx.tokens import TiktokenCounter
from langgraph_ctx_tools.replay import engine
from langgraph_ctx_tools.replay.engine import CallRecord, ReplayResult, System
from langgraph_ctx_tools.replay.models import RecordingModel
from langgraph_ctx_tools.replay.summary_models import SUMMARY_CONDITIONS

__all__ = [
    "CallRecord",
    "FactEchoModel",
    "READS",
    "ReplayResult",
    "System",
    "condition_note",
    "summaries_of",
    "load_trajectories",
    "probe_time_at",
    "replay",
    "time_at",
]


_COUNTER = TiktokenCounter("gpt-4o")


def counter() -> TiktokenCounter:
    """The one exact gpt-4o counter every system and metric shares (per-message cache)."""
    return _COUNTER


# --- the fake summarizer ---------------------------------------------------------------


class FactEchoModel(RecordingModel):
    """A fake summarizer: answers with every planted fact (`FACT-nnnn: ...`) in its input.

    One fact per line, each once, in order of first appearance; nothing else. With no fact in
    its input it answers with an empty text. Facts are found anywhere in a line (transcript
    renderers put `Human: ` or `<message ...>` before a message's first line), which is the
    brief's "lines starting with FACT-" made robust to those prefixes.

    Every call's input is recorded (`RecordingModel.calls`), so summarizer calls and their
    input tokens are measured the same way for every system.
    """

    @property
    def _llm_type(self) -> str:
        return "fact-echo"

    def reply_text(self, messages: Sequence[BaseMessage]) -> str:
        """The planted facts of the input, once each, in order."""
        seen: dict[str, None] = {}
        for message in messages:
            for fact in FACT_RE.findall(text_of(message)):
                seen.setdefault(fact, None)
        return "\n".join(seen)

    def input_tokens(self) -> int:
        """Exact gpt-4o tokens of every input sent so far."""
        return self.usage(counter())[1]

    def output_tokens(self) -> int:
        """Exact gpt-4o tokens of every answer written so far."""
        return self.usage(counter())[2]


def make_model(window: int) -> FactEchoModel:
    """A fresh fake summarizer whose profile advertises `window` input tokens."""
    return FactEchoModel(profile={"max_input_tokens": window})


def summaries_of(args: object) -> str:
    """The summary condition `args` names (`--summaries`), `"same"` by default."""
    return str(getattr(args, "summaries", None) or "same")


READS = "reads"
"""The benchmarks' third summary condition (`--summaries reads`, the cost section): every
system's summarizer is `benchmarks.cost.SummaryModel`, which writes each planted fact whose key
it read, as a model that keeps what it is shown would; the synthetic run's facts goal is
measured under it (under `same` and `shape` no summary carries the facts' sentences)."""

_BENCHMARK_CONDITIONS = {
    **SUMMARY_CONDITIONS,
    READS: "keeps what it reads: every system's summarizer writes the planted facts it read",
}


def condition_note(condition: str) -> str:
    """How a table's title names the summary condition every system ran under."""
    return f"summaries: {_BENCHMARK_CONDITIONS[condition]}"


# --- the replay ------------------------------------------------------------------------------


def replay(
    system: System,
    messages: Sequence[BaseMessage],
    *,
    limit: int,
    facts: Sequence[str] = (),
    measure: bool = True,
    providers: bool = False,
) -> ReplayResult:
    """`langgraph_ctx_tools.replay.engine.replay` under the benchmarks' conditions.

    Args:
        system: The system under test (fresh: it keeps state across calls).
        messages: The recorded run; a model call happens before each `AIMessage`.
        limit: The prompt budget in tokens (overruns are counted against it).
        facts: Planted fact lines to look for in the final prompt and the recoverable texts.
        measure: Measure prompts (False: record timings only).
        providers: Also judge each prompt with the OpenAI and Anthropic LangChain
            converters (`tests.providers`); their problems count as invalid.
    """
    judge = None
    if providers:
        from tests.providers import provider_problems

        judge = provider_problems
    began = shown_at = time.perf_counter()

    def on_call(i: int) -> None:
        nonlocal shown_at
        if time.perf_counter() - shown_at > EVERY_SECONDS:
            shown_at = time.perf_counter()
            progress(f"  {system.name}: message {i:,} of {len(messages):,}")

    result = engine.replay(
        system,
        messages,
        limit=limit,
        counter=counter(),
        facts=facts,
        measure=measure,
        judge=judge,
        on_call=on_call,
    )
    if (took := time.perf_counter() - began) > EVERY_SECONDS:
        progress(f"  {system.name}: {len(messages):,} messages done in {took:.1f} s")
    return result


def _nearest(indices: Sequence[int], size: int, around: int) -> list[int] | None:
    nearest = sorted(indices, key=lambda i: abs(i - size))[:around]
    if not nearest or abs(nearest[0] - size) > max(10, size // 10):
        return None
    return nearest


def time_at(result: ReplayResult, size: int, *, around: int = 15) -> float | None:
    """Median policy ms of the `around` calls whose history length is nearest `size`.

    None when the run never got within 10% of `size`.
    """
    by_len = {c.history_len: c.ms for c in result.calls if c.error is None}
    nearest = _nearest(list(by_len), size, around)
    return None if nearest is None else statistics.median(by_len[i] for i in nearest)


def probe_time_at(
    make: Callable[[], System], messages: Sequence[BaseMessage], size: int, *, around: int = 15
) -> float | None:
    """Median policy ms of a stateless system's call at the `around` AI turns nearest `size`.

    Only for systems whose prompt depends on the history alone (no state carried between
    calls), where one fresh call at position i costs what the i-th call of a replay costs.
    """
    turns = [i for i, m in enumerate(messages) if i > 0 and isinstance(m, AIMessage)]
    nearest = _nearest(turns, size, around)
    if nearest is None:
        return None
    times = []
    for i in nearest:
        system = make()
        history = list(messages[:i])
        start = time.perf_counter()
        system.step(history)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


# --- data ----------------------------------------------------------------------------------


def load_trajectories(limit: int | None = None) -> list[tuple[str, list[BaseMessage]]]:
    """The recorded runs of `data/trajectories` (`benchmarks.trajectories`), smallest first.

    Messages get deterministic ids (`<run name>-<index>`) where they have none, as a graph's
    `add_messages` would give them ids; middlewares that assign ids in place then leave the
    shared message objects alone.
    """
    runs: list[tuple[str, list[BaseMessage]]] = []
    for name, messages in trajectories.load_trajectories().items():
        for i, m in enumerate(messages):
            if m.id is None:
                m.id = f"{name}-{i:05d}"
        runs.append((name, messages))
    runs.sort(key=lambda run: (len(run[1]), run[0]))
    if limit is not None and limit < len(runs):
        # Spread the sample over sizes instead of taking only the shortest runs.
        step = len(runs) / limit
        runs = [runs[int(k * step + step / 2)] for k in range(limit)]
    return runs
