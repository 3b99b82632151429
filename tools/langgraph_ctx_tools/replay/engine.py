"""The one replay engine: drive a context-management system through a recorded run, measure it.

For a recorded run (a list of messages), the agent is simulated call by call: before each
`AIMessage` at index i, the system under test receives the messages added since its previous
call (`messages[last:i]`), appends them to the history it keeps (applying its own state
rewrites: our ledger and removals, a middleware's state update, a running summary, ...) and
returns the prompt it would send. The engine measures that prompt with
`langgraph_ctx_tools.replay.measure` (tokens, cache-reusable and fresh tokens, next-step and
one-search recall), counts it as an overrun over the limit and as invalid when
`validate_messages` (or the `judge`) finds a problem, records a system that raised as an error
(apart from overruns), and times the system's step against the history length.

`langgraph-ctx frontier` and the benchmarks (`python -m benchmarks cost`, `pipeline`, ...)
replay through `replay` alone, so one figure cannot come out two ways.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx_tools.replay.measure import (
    DEFAULT_CACHE_PRICE,
    NextStepRecall,
    effective_cost,
    measure_prompt,
    one_search,
    path_names_in,
    shown_text,
)

__all__ = [
    "CallRecord",
    "Judge",
    "ReplayResult",
    "RunNeeds",
    "Searchable",
    "System",
    "replay",
]

Judge = Callable[[Sequence[BaseMessage]], list[str]]
"""A second validity check of a prompt: the problems it finds (empty: valid)."""


class System(Protocol):
    """A context-management system driven by the replay."""

    name: str

    def step(self, new: list[BaseMessage]) -> list[BaseMessage]:
        """Append the new messages to the kept history; return the prompt to send (timed)."""
        ...

    def observe(self) -> None:
        """Bookkeeping after each timed step that is not part of the policy.

        For instance: recording archive references, removing what the graph's reducer would.
        """
        ...

    def summarizer_usage(self) -> tuple[int, int, int]:
        """(summarizer calls, input tokens, output tokens) so far."""
        ...

    def recoverable_texts(self) -> Iterable[str]:
        """Every text the full history could be read back from (live state and archive)."""
        ...

    def finish(
        self, original: Sequence[BaseMessage], final_prompt: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Extra metrics after the run (`removed`, `restorable`, archive bytes, notes)."""
        ...


@runtime_checkable
class Searchable(Protocol):
    """A system that puts history away where the agent can search it (`search_history`)."""

    def search(self, query: str) -> str:
        """What the agent's search answers for `query` (3 hits)."""
        ...

    def search_schema(self) -> int:
        """Tokens of the search tool's schema sent with the current call (0: not bound)."""
        ...

    def mention_tokens(self, prompt: Sequence[BaseMessage]) -> int:
        """Tokens of the prompt's lines naming the search tool."""
        ...


@dataclass(frozen=True)
class RunNeeds:
    """What each next step of a run used, under both definitions of a name.

    Worked out once per run (`of`) and shared by every system replayed on it; each replay
    scores with fresh counters (`scorers`).
    """

    names: NextStepRecall
    """Distinctive names (`measure.names_in`)."""
    strict: NextStepRecall
    """Paths and dotted names only (`measure.path_names_in`)."""

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> RunNeeds:
        """The needs of every call of `messages`."""
        return cls(NextStepRecall.of(messages), NextStepRecall.of(messages, names=path_names_in))

    def scorers(self) -> tuple[NextStepRecall, NextStepRecall]:
        """Fresh scores over these needs: (names, strict)."""
        return NextStepRecall(needs=self.names.needs), NextStepRecall(needs=self.strict.needs)


@dataclass(slots=True)
class CallRecord:
    """One model call of a replay: its time, its prompt's `PromptMeasure`, whether it raised."""

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


class _CallTotal:
    """A `ReplayResult` figure read as an attribute: `of(call)` summed over its calls."""

    def __init__(self, of: Callable[[CallRecord], int], doc: str) -> None:
        self.of = of
        self.__doc__ = doc

    @overload
    def __get__(self, result: None, owner: type[Any]) -> _CallTotal: ...
    @overload
    def __get__(self, result: ReplayResult, owner: type[Any]) -> int: ...
    def __get__(self, result: ReplayResult | None, owner: type[Any]) -> _CallTotal | int:
        if result is None:  # read on the class (`help`, introspection): the figure itself
            return self
        return sum(self.of(call) for call in result.calls)


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
    """Names the next AI message used that the prompt showed (`NextStepRecall`)."""
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
    """Planted facts the final prompt shows."""
    facts_searched: int = 0
    """Planted facts one search with the fact's key finds at the end (3 hits)."""
    facts_recoverable: int = 0
    """Planted facts the system's recoverable texts hold."""
    facts_total: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    problem_codes: Counter[str] = field(default_factory=Counter)
    """Calls per problem code of `validate_messages` (a call counts once per code)."""
    error_kinds: Counter[str] = field(default_factory=Counter)
    """Calls per exception type raised by the system."""
    error_lines: Counter[str] = field(default_factory=Counter)
    """The first line of each error the system raised, and how often."""

    total_tokens = _CallTotal(lambda c: c.tokens, "Prompt tokens summed over calls.")
    reusable_tokens = _CallTotal(
        lambda c: c.reusable, "Cache-reusable prompt tokens summed over calls."
    )
    fresh_tokens = _CallTotal(
        lambda c: c.fresh,
        "Prompt tokens of messages absent from the previous prompt (never cacheable).",
    )
    overruns = _CallTotal(lambda c: c.overrun, "Calls whose prompt was over the limit.")
    invalid = _CallTotal(lambda c: c.invalid, "Calls whose prompt broke a provider rule.")
    errors = _CallTotal(
        lambda c: c.error is not None,
        "Calls where the system raised instead of returning a prompt.",
    )
    mention_tokens = _CallTotal(
        lambda c: c.mentions,
        "Prompt tokens of the lines naming `search_history`, summed over calls.",
    )

    @property
    def summarizer_tokens(self) -> int:
        """Every token the summarizer read and wrote."""
        return self.summarizer_input_tokens + self.summarizer_output_tokens

    def cost(self, cache_price: float = DEFAULT_CACHE_PRICE) -> float:
        """Effective cost (`measure.effective_cost`).

        Uncached + `cache_price` x cache-reusable + every token the summarizer reads and writes.
        """
        return effective_cost(
            self.total_tokens, self.reusable_tokens, self.summarizer_tokens, cache_price=cache_price
        )

    @property
    def effective_cost(self) -> float:
        """`cost()` at the default cache price."""
        return self.cost()

    @property
    def search_schema_cost(self) -> float:
        """What binding `search_history` adds to `effective_cost`.

        Its schema at the cached price on every call that sends it, but at the full price on
        the call that first does, where the changed tools also cost that call's cached prefix
        its discount.
        """
        cost, bound = 0.0, False
        for call in self.calls:
            if call.schema and not bound:
                cost += call.schema + 0.9 * call.reusable
            elif call.schema:
                cost += 0.1 * call.schema
            bound = bound or bool(call.schema)
        return cost


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0].split("; ")[0]
    return f"{type(exc).__name__}: {text}"[:200]


def replay(
    system: System,
    messages: Sequence[BaseMessage],
    *,
    limit: int,
    counter: Callable[[Sequence[BaseMessage]], int],
    facts: Sequence[str] = (),
    measure: bool = True,
    judge: Judge | None = None,
    needs: RunNeeds | None = None,
    on_call: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Drive `system` through `messages` call by call and measure every prompt.

    Args:
        system: The system under test (fresh: it keeps state across calls).
        messages: The recorded run; a model call happens before each `AIMessage`.
        limit: The prompt budget in tokens (overruns are counted against it).
        counter: The token counter every prompt is measured with.
        facts: Planted fact lines to look for in the final prompt and the recoverable texts.
        measure: Measure prompts (False: record timings only).
        judge: A second validity check of each prompt (its problems count as invalid).
        needs: `RunNeeds.of(messages)`, when computed once for several systems.
        on_call: Called with the message index after each model call (progress).

    Returns:
        The per-call records and run totals.
    """
    result = ReplayResult(name=system.name, facts_total=len(facts))
    scorers: tuple[NextStepRecall, ...] = (
        (needs or RunNeeds.of(messages)).scorers() if measure else ()
    )
    # Checked once: a runtime protocol check is slow.
    searchable = system if isinstance(system, Searchable) else None
    previous: list[BaseMessage] = []
    last = 0
    prompt: list[BaseMessage] = []
    for i, message in enumerate(messages):
        if i == 0 or not isinstance(message, AIMessage):
            continue
        new, last = list(messages[last:i]), i
        start = time.perf_counter()
        try:
            prompt = system.step(new)
        except Exception as exc:  # a refusal or a crash of the system: recorded, not fatal
            ms = (time.perf_counter() - start) * 1000
            result.calls.append(CallRecord(i, ms, error=f"{type(exc).__name__}: {exc}"[:300]))
            result.error_kinds[type(exc).__name__] += 1
            result.error_lines[_first_line(exc)] += 1
            for scorer in scorers:
                scorer.skip(i)
        else:
            ms = (time.perf_counter() - start) * 1000
            system.observe()  # the harness's own bookkeeping, outside the timed step
            record = CallRecord(i, ms)
            if searchable is not None:
                record.schema = searchable.search_schema()
                record.mentions = searchable.mention_tokens(prompt)
            if scorers:
                recall, strict = scorers
                recall.score(i, prompt)
                strict.score(i, prompt)
                if searchable is not None:
                    found, missed = one_search(searchable.search, recall.needs.get(i) or [], prompt)
                    result.search_hits += found
                    result.search_total += missed
                measured = measure_prompt(previous, prompt, counter=counter, limit=limit)
                record.tokens, record.reusable = measured.tokens, measured.reusable
                record.fresh, record.overrun = measured.fresh, measured.overrun
                codes = {p.code for p in measured.problems}
                if judge is not None:
                    codes |= {f"provider: {p.split(':')[0]}" for p in judge(prompt)}
                record.invalid = bool(codes)
                result.problem_codes.update(codes)
            previous = prompt
            result.calls.append(record)
        if on_call is not None:
            on_call(i)
    result.final_prompt = list(prompt)
    calls, read, written = system.summarizer_usage()
    result.summarizer_calls = calls
    result.summarizer_input_tokens, result.summarizer_output_tokens = read, written
    if scorers:
        result.recall_hits, result.recall_total = scorers[0].hits, scorers[0].total
        result.strict_hits, result.strict_total = scorers[1].hits, scorers[1].total
    if facts:
        shown = shown_text(prompt)
        result.facts_visible = sum(f in shown for f in facts)
        stored = "\n".join(system.recoverable_texts())
        result.facts_recoverable = sum(f in stored for f in facts)
        if searchable is not None:  # the key, as an agent would look a fact up
            result.facts_searched = sum(
                fact[:80] in searchable.search(fact.split(":", 1)[0]) for fact in facts
            )
    result.extra = system.finish(messages, prompt)
    return result
