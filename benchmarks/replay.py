"""Call-by-call replay of a recorded agent run through a context-management system.

For a trajectory (a list of messages), the agent is simulated call by call: before each
`AIMessage` at index i, the system under test receives the messages added since its previous
call (`messages[last:i]`), appends them to the history it keeps (applying its own state
rewrites: our ledger, a middleware's state update, langmem's running summary, ...) and returns
the prompt it would send. The replay then measures that prompt:

* tokens: exact `TiktokenCounter("gpt-4o")` count of the prompt (tool schemas excluded: the
  recorded runs carry none);
* cache-reusable tokens: tokens of the longest run of leading messages equal (as the provider
  sees them: role, content, name, tool-call id, tool calls) to the previous call's prompt,
  counted message by message;
* overrun: prompt tokens over the limit; invalid: `validate_messages(prompt)` is not empty;
* errors: the system raised instead of returning a prompt (counted apart from overruns);
* policy time: wall time of the system's step, in ms, recorded against the history length.

Summarizer work is measured on `FactEchoModel`, a fake chat model every system gets its own
instance of: it records each call's input and answers with the planted facts it saw.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from benchmarks import trajectories
from benchmarks._progress import EVERY_SECONDS, progress
from benchmarks.synthetic import FACT_RE
from langgraph_ctx.messages import text_of
from langgraph_ctx.replay.measure import (
    NextStepRecall,
    effective_cost,
    measure_prompt,
    one_search,
    path_names_in,
)
from langgraph_ctx.tokens import TiktokenCounter

__all__ = [
    "CallRecord",
    "FactEchoModel",
    "ReplayResult",
    "System",
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


class FactEchoModel(BaseChatModel):
    """A fake summarizer: answers with every planted fact (`FACT-nnnn: ...`) in its input.

    One fact per line, each once, in order of first appearance; nothing else. With no fact in
    its input it answers with an empty text. Facts are found anywhere in a line (transcript
    renderers put `Human: ` or `<message ...>` before a message's first line), which is the
    brief's "lines starting with FACT-" made robust to those prefixes.

    Every call's input is recorded on the instance (`calls`), so summarizer calls and their
    input tokens can be measured the same way for every system.
    """

    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _replies: list[BaseMessage] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fact-echo"

    def _on_reply(self, result: ChatResult) -> ChatResult:
        self._replies.extend(g.message for g in result.generations)
        return result

    def output_tokens(self) -> int:
        """Exact gpt-4o tokens of every answer written so far (what the summarizer wrote)."""
        return sum(counter().count_message(m) for m in self._replies)

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Inputs of every call so far."""
        return self._calls

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(list(messages))
        seen: dict[str, None] = {}
        for message in messages:
            for fact in FACT_RE.findall(text_of(message)):
                seen.setdefault(fact, None)
        reply = AIMessage("\n".join(seen))
        return self._on_reply(ChatResult(generations=[ChatGeneration(message=reply)]))

    def input_tokens(self) -> int:
        """Exact gpt-4o tokens of every input sent so far."""
        return sum(counter()(call) for call in self._calls)


def make_model(window: int) -> FactEchoModel:
    """A fresh fake summarizer whose profile advertises `window` input tokens."""
    return FactEchoModel(profile={"max_input_tokens": window})


# --- systems -----------------------------------------------------------------------------


class System(Protocol):
    """A context-management system driven by the replay."""

    name: str
    model: FactEchoModel | None

    def step(self, new_messages: list[BaseMessage]) -> list[BaseMessage]:
        """Append the new messages to the kept history; return the prompt to send.

        A system may also define `observe()`, called after each timed step for bookkeeping
        that is not part of the policy (e.g. recording archive references).
        """
        ...

    def recoverable_texts(self) -> Iterable[str]:
        """Every text the full history could be read back from (live state and archive)."""
        ...

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Extra metrics after the run (restorability, archive bytes, notes)."""
        ...


# --- metrics -------------------------------------------------------------------------------


@dataclass(slots=True)
class CallRecord:
    """One model call of a replay."""

    history_len: int
    ms: float
    tokens: int = 0
    reusable: int = 0
    fresh: int = 0
    overrun: bool = False
    invalid: bool = False
    error: str | None = None
    schema: int = 0
    """Tokens of the `search_history` schema sent with the call (0: not bound)."""
    mentions: int = 0
    """Tokens of the prompt's lines naming `search_history` (excerpts, the summary's note)."""


@dataclass(slots=True)
class ReplayResult:
    """Everything measured for one system on one run."""

    name: str
    calls: list[CallRecord] = field(default_factory=list)
    final_prompt: list[BaseMessage] = field(default_factory=list)
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    recall_hits: int = 0
    """Names the next AI message used that the prompt showed (`langgraph_ctx.replay.measure`)."""
    recall_total: int = 0
    """Names the next AI message used that first came from an earlier tool output."""
    strict_hits: int = 0
    """As `recall_hits`, with paths and dotted names only (`path_names_in`)."""
    strict_total: int = 0
    """As `recall_total`, with paths and dotted names only."""
    search_hits: int = 0
    """Names used but no longer shown whose source line one search (the system's `search`,
    the name as the query) returned among its first 3 hits."""
    search_total: int = 0
    """Names the next AI message used whose lines the prompt no longer showed."""
    facts_visible: int = 0
    facts_searched: int = 0
    """Planted facts one search with the fact's key (`FACT-0001`) finds at the end (3 hits)."""
    facts_recoverable: int = 0
    facts_total: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    invalid_examples: list[str] = field(default_factory=list)
    problem_codes: Counter[str] = field(default_factory=Counter)
    """Calls per problem code of `validate_messages` (a call counts once per code)."""
    error_kinds: Counter[str] = field(default_factory=Counter)
    """Calls per exception type raised by the system."""

    @property
    def total_tokens(self) -> int:
        """Prompt tokens summed over calls."""
        return sum(c.tokens for c in self.calls)

    @property
    def reusable_tokens(self) -> int:
        """Cache-reusable prompt tokens summed over calls."""
        return sum(c.reusable for c in self.calls)

    @property
    def fresh_tokens(self) -> int:
        """Prompt tokens of messages absent from the previous prompt (never cacheable)."""
        return sum(c.fresh for c in self.calls)

    @property
    def overruns(self) -> int:
        """Calls whose prompt was over the limit."""
        return sum(c.overrun for c in self.calls)

    @property
    def invalid(self) -> int:
        """Calls whose prompt broke a provider rule."""
        return sum(c.invalid for c in self.calls)

    @property
    def errors(self) -> int:
        """Calls where the system raised instead of returning a prompt."""
        return sum(c.error is not None for c in self.calls)

    @property
    def effective_cost(self) -> float:
        """Uncached + 0.1 x cache-reusable + every token the summarizer reads and writes."""
        summarizer = self.summarizer_input_tokens + self.summarizer_output_tokens
        return effective_cost(self.total_tokens, self.reusable_tokens, summarizer)

    @property
    def mention_tokens(self) -> int:
        """Prompt tokens of the lines naming `search_history`, summed over calls."""
        return sum(c.mentions for c in self.calls)

    @property
    def search_schema_cost(self) -> float:
        """What binding `search_history` adds to `effective_cost`: its schema at the cached
        price on every call that sends it, but at the full price on the call that first does,
        where the changed tools also cost that call's cached prefix its discount."""
        cost, bound = 0.0, False
        for call in self.calls:
            if call.schema and not bound:
                cost += call.schema + 0.9 * call.reusable
            elif call.schema:
                cost += 0.1 * call.schema
            bound = bound or bool(call.schema)
        return cost

    @property
    def recall(self) -> float | None:
        """Next-step recall: the share of used names the prompts showed (None: none used)."""
        return self.recall_hits / self.recall_total if self.recall_total else None


def replay(
    system: System,
    messages: Sequence[BaseMessage],
    *,
    limit: int,
    facts: Sequence[str] = (),
    measure: bool = True,
    providers: bool = False,
) -> ReplayResult:
    """Drive `system` through `messages` call by call and measure every prompt.

    Args:
        system: The system under test (fresh: it keeps state across calls).
        messages: The recorded run; a model call happens before each `AIMessage`.
        limit: The prompt budget in tokens (overruns are counted against it).
        facts: Planted fact lines to look for in the final prompt and the recoverable texts.
        measure: Measure prompts (False: record timings only).
        providers: Also judge each prompt with the OpenAI and Anthropic LangChain
            converters (`tests.providers`); their problems count as invalid.

    Returns:
        The per-call records and run totals.
    """
    count = counter()
    result = ReplayResult(name=system.name, facts_total=len(facts))
    recall = NextStepRecall.of(messages) if measure else None
    strict = NextStepRecall.of(messages, names=path_names_in) if measure else None
    previous: list[BaseMessage] = []
    last = 0
    prompt: list[BaseMessage] = []
    began = shown_at = time.perf_counter()
    for i, message in enumerate(messages):
        if i == 0 or not isinstance(message, AIMessage):
            continue
        if time.perf_counter() - shown_at > EVERY_SECONDS:
            shown_at = time.perf_counter()
            progress(f"  {system.name}: message {i:,} of {len(messages):,}")
        new = list(messages[last:i])
        last = i
        start = time.perf_counter()
        try:
            prompt = system.step(new)
        except Exception as exc:  # a refusal or a crash of the system: recorded, not fatal
            ms = (time.perf_counter() - start) * 1000
            result.calls.append(CallRecord(i, ms, error=f"{type(exc).__name__}: {exc}"[:300]))
            result.error_kinds[type(exc).__name__] += 1
            if recall is not None and strict is not None:
                recall.skip(i)
                strict.skip(i)
            continue
        ms = (time.perf_counter() - start) * 1000
        observe = getattr(system, "observe", None)
        if observe is not None:  # the harness's own bookkeeping, outside the timed step
            observe()
        record = CallRecord(i, ms)
        schema = getattr(system, "search_schema", None)
        record.schema = schema() if schema is not None else 0
        mentions = getattr(system, "mention_tokens", None)
        record.mentions = mentions(prompt) if mentions is not None else 0
        if recall is not None and strict is not None:
            recall.score(i, prompt)
            strict.score(i, prompt)
            search = getattr(system, "search", None)
            if search is not None:
                found, missed = one_search(search, recall.needs.get(i) or [], prompt)
                result.search_hits += found
                result.search_total += missed
        if measure:
            measured = measure_prompt(previous, prompt, counter=count, limit=limit)
            record.tokens, record.reusable = measured.tokens, measured.reusable
            record.fresh, record.overrun = measured.fresh, measured.overrun
            problems = measured.problems
            codes = {p.code for p in problems}
            if providers:
                from tests.providers import provider_problems

                found = provider_problems(prompt)
                codes |= {f"provider: {p.split(':')[0]}" for p in found}
                problems = [*problems, *found]  # type: ignore[list-item]
            record.invalid = bool(problems)
            result.problem_codes.update(codes)
            if problems and len(result.invalid_examples) < 3:
                result.invalid_examples.append(f"call@{i}: {problems[0]}")
        previous = prompt
        result.calls.append(record)
    result.final_prompt = list(prompt)
    model = system.model
    if model is not None:
        result.summarizer_calls = len(model.calls)
        result.summarizer_input_tokens = model.input_tokens()
        result.summarizer_output_tokens = model.output_tokens()
    if recall is not None and strict is not None:
        result.recall_hits, result.recall_total = recall.hits, recall.total
        result.strict_hits, result.strict_total = strict.hits, strict.total
    if facts:
        shown = "\n".join(text_of(m) for m in prompt)
        result.facts_visible = sum(f in shown for f in facts)
        stored = "\n".join(system.recoverable_texts())
        result.facts_recoverable = sum(f in stored for f in facts)
        search = getattr(system, "search", None)
        if search is not None:  # the key, as an agent would look a fact up
            result.facts_searched = sum(
                fact[:80] in search(fact.split(":", 1)[0]) for fact in facts
            )
    result.extra = system.finish(messages, prompt)
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
