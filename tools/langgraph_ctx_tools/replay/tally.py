"""The frontier's rows: each setting of ours, and each alternative, replayed on the same threads.

Recorded threads are replayed call by call through the one engine
(`langgraph_ctx_tools.replay.engine.replay`): each setting of ours as a `PipelineSystem` (as
`ContextMemory` runs it: the ledger carried from call to call, an in-process archive, the
messages a summary covers removed once they are in an insurance dump), and each alternative a
team would pick instead (`ALTERNATIVES`: tool-safe `trim_messages` filling the budget,
LangChain's `SummarizationMiddleware`, deepagents' stack) through its own code, at its best
documented setting. A `Tally` adds up one row's `ReplayResult`s over the threads. No model is
called unless one is named: every row that summarizes (ours and the alternatives) then gets a
fresh instance of the one summarizer of the summary condition (`Terms.summaries`,
`replay.summary_models`); a named model is given to every row the same way.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx_tools.replay.anchors import LCSummarizationAnchor, TrimMessagesAnchor
from langgraph_ctx_tools.replay.engine import ReplayResult, RunNeeds, System, replay
from langgraph_ctx_tools.replay.measure import DEFAULT_CACHE_PRICE, effective_cost
from langgraph_ctx_tools.replay.models import metered
from langgraph_ctx_tools.replay.pipeline_system import PipelineSystem
from langgraph_ctx_tools.replay.settings import Setting
from langgraph_ctx_tools.replay.summary_models import SUMMARY_CONDITIONS, condition_model

__all__ = [
    "ALTERNATIVES",
    "Alternative",
    "Tally",
    "MIN_COST_SAVING",
    "MIN_RECALL_GAIN",
    "Terms",
    "buys_something",
    "pareto_front",
    "recommend",
    "replay_row",
    "runner_up",
    "system_for",
]


@dataclass
class Terms:
    """What every setting is replayed with: the window, the counter, the summarizer."""

    window: int
    reserved: int
    counter: Callable[[Sequence[BaseMessage]], int]
    summarizer: Any = None
    """A chat model writing every row's summaries; None: the condition's (`summaries`)."""
    cache_price: float = DEFAULT_CACHE_PRICE
    summaries: str = "same"
    """The summary condition when no model is named (`SUMMARY_CONDITIONS`): `"same"`, every
    row's summaries are the deterministic summary; `"shape"`, no summary keeps a line."""

    def __post_init__(self) -> None:
        if self.summaries not in SUMMARY_CONDITIONS:
            msg = (
                f"summaries={self.summaries!r} is not a summary condition; "
                f"use one of {sorted(SUMMARY_CONDITIONS)}"
            )
            raise ValueError(msg)

    @property
    def condition(self) -> str:
        """The summary condition every row ran under: `"same"`, `"shape"` or `"model"`."""
        return "model" if self.summarizer is not None else self.summaries

    def summary_model(self) -> Any:
        """The summarizer of one system: the named model (metered), else a fresh condition one."""
        if self.summarizer is not None:
            return metered(self.summarizer, self.counter)
        return condition_model(self.summaries, self.limit)

    @property
    def limit(self) -> int:
        """The prompt budget: the window less the reserved output, never below 0."""
        return max(0, self.window - self.reserved)


@dataclass
class Tally:
    """One row's totals over every thread replayed: a setting of ours, or an alternative."""

    setting: Setting | None
    """The setting of ours (None: an alternative)."""
    alternative: Alternative | None = None
    """The alternative this row replays (None: a setting of ours)."""
    calls: int = 0
    tokens: int = 0
    reusable: int = 0
    summarizer_tokens: int = 0
    summarizer_calls: int = 0
    over_budget: int = 0
    """Prompts over the budget, and calls the system could not fit (it raised)."""
    refused: int = 0
    """Calls the pipeline could not fit into the budget (`ContextWindowExceededError`)."""
    invalid: int = 0
    recall_hits: int = 0
    recall_total: int = 0
    strict_hits: int = 0
    """As `recall_hits`, paths and dotted names only (`measure.path_names_in`)."""
    strict_total: int = 0
    search_hits: int = 0
    """Names used but no longer shown that one search found (`measure.one_search`)."""
    search_total: int = 0
    """Names used whose lines the prompt no longer showed."""
    removed: int = 0
    """Messages whose content left the prompt (shortened, excerpted, pruned, summarized)."""
    restorable: int = 0
    """Of those, how many the archive or the history gives back byte for byte."""
    restorable_measured: bool = False
    """Whether the system says what left its prompt and what comes back (ours, deepagents'
    eviction); the others' rows show no share."""
    summary_fallbacks: int = 0
    """Summaries of ours the summarizer model did not write: our validation rejected its
    answer (or no slot was free) and the deterministic fallback stood in."""
    fallback_reason: str | None = None
    """Why the first of them fell back."""
    errors: Counter[str] = field(default_factory=Counter)
    """First line of each error the system raised, and how often."""

    @property
    def label(self) -> str:
        """The row's name."""
        if self.setting is not None:
            return self.setting.label
        assert self.alternative is not None
        return self.alternative.label

    @property
    def is_defaults(self) -> bool:
        """Whether this row is our defaults."""
        return self.setting is not None and self.setting.is_defaults

    def add(self, result: ReplayResult) -> None:
        """Add one thread's replay to the row."""
        refused = result.error_kinds.get(ContextWindowExceededError.__name__, 0)
        self.calls += len(result.calls)
        self.tokens += result.total_tokens
        self.reusable += result.reusable_tokens
        self.refused += refused
        self.over_budget += result.overruns + refused
        self.summarizer_calls += result.summarizer_calls
        self.summarizer_tokens += result.summarizer_tokens
        self.invalid += result.invalid
        self.recall_hits += result.recall_hits
        self.recall_total += result.recall_total
        self.strict_hits += result.strict_hits
        self.strict_total += result.strict_total
        self.search_hits += result.search_hits
        self.search_total += result.search_total
        if "removed" in result.extra:
            self.restorable_measured = True
        self.removed += int(result.extra.get("removed", 0))
        self.restorable += int(result.extra.get("restorable", 0))
        self.summary_fallbacks += int(result.extra.get("summary_fallbacks", 0))
        self.fallback_reason = self.fallback_reason or result.extra.get("fallback_reason")
        self.errors.update(result.error_lines)

    def cost(self, cache_price: float = DEFAULT_CACHE_PRICE) -> float:
        """Effective cost: uncached + `cache_price` x reusable + the summarizer's tokens."""
        return effective_cost(
            self.tokens, self.reusable, self.summarizer_tokens, cache_price=cache_price
        )

    @property
    def recall(self) -> float | None:
        """Next-step recall, 0-1 (None: the next steps used no name from a tool output)."""
        return self.recall_hits / self.recall_total if self.recall_total else None

    @property
    def one_search(self) -> float | None:
        """One-search recall, 0-1 (None: every name used was still shown)."""
        return self.search_hits / self.search_total if self.search_total else None

    @property
    def restorable_share(self) -> float | None:
        """Share of what left the prompt that restores byte for byte.

        1 when nothing left; None when the system does not say what left.
        """
        if not self.restorable_measured:
            return None
        return self.restorable / self.removed if self.removed else 1.0

    @property
    def within_budget(self) -> bool:
        """No prompt over the budget, none refused, none a provider would reject."""
        return self.over_budget == 0 and self.invalid == 0


@dataclass(frozen=True)
class Alternative:
    """What a team would pick instead of us, at its best documented setting."""

    label: str
    make: Callable[[Terms, Any], System]
    """Builds a fresh system for one thread from the terms and the summarizer model."""
    needs: str | None = None
    """The package it needs, when it is optional (a row says how to install it)."""

    @property
    def missing(self) -> str | None:
        """How to install what it needs, when that is not installed (None: ready)."""
        if self.needs is None or importlib.util.find_spec(self.needs) is not None:
            return None
        return f"not installed: pip install {self.needs}"


ANCHOR_TRIGGER = 0.9
"""The share of the limit at which the summarizing and editing alternatives act."""
ANCHOR_KEEP = 0.25
"""The share of the limit LangChain's `SummarizationMiddleware` keeps after a summary."""
DEEPAGENTS_EVICT_TOKENS = 20_000
"""deepagents' default `tool_token_limit_before_evict`."""


def _lc_summarization(terms: Terms, model: Any) -> System:
    limit = terms.limit
    return LCSummarizationAnchor(
        limit=limit,
        trigger=int(ANCHOR_TRIGGER * limit),
        keep=int(ANCHOR_KEEP * limit),
        model=model,
        trim_tokens_to_summarize=None,  # its 4,000 finds no user turn to cut at in a tool loop
        counter=terms.counter,
    )


def _deepagents(terms: Terms, model: Any) -> System:
    from langgraph_ctx_tools.replay.anchors_deepagents import DeepagentsAgentAnchor

    return DeepagentsAgentAnchor(
        limit=terms.limit,
        evict_tokens=DEEPAGENTS_EVICT_TOKENS,
        model=model,
        counter=terms.counter,
    )


ALTERNATIVES: tuple[Alternative, ...] = (
    Alternative(
        "alt: trim_messages, tool-safe",
        lambda terms, model: TrimMessagesAnchor(
            limit=terms.limit, tool_safe=True, counter=terms.counter
        ),
    ),
    Alternative("alt: LC SummarizationMiddleware", _lc_summarization),
    Alternative("alt: deepagents", _deepagents, needs="deepagents"),
)
"""The alternatives `langgraph-ctx frontier` replays beside our settings (the settings of
`python -m benchmarks cost`: trim fills the budget; LangChain's middleware summarizes at 0.9
of the limit and keeps 0.25 of it; deepagents evicts at its default 20,000 tokens, then
summarizes at its own defaults)."""


def system_for(tally: Tally, terms: Terms) -> System:
    """A fresh system replaying `tally`'s row on one thread, with `terms.summary_model()`."""
    model = terms.summary_model()
    setting = tally.setting
    if setting is None:
        assert tally.alternative is not None
        return tally.alternative.make(terms, model)
    return PipelineSystem(
        setting.label,
        budget=setting.budget_for(terms.window, terms.reserved),
        counter=terms.counter,
        strategies=setting.strategy_list(),
        model=model,
        remove_summarized=True,  # as ContextMemory does with a durable archive
        thread_id="frontier",
        options=setting.manager_options(),
    )


def replay_row(
    tally: Tally,
    messages: Sequence[BaseMessage],
    terms: Terms,
    *,
    needs: RunNeeds,
    on_call: Callable[[], None] | None = None,
) -> None:
    """Replay one thread under `tally`'s row and add what it measured to `tally`.

    Args:
        tally: The row's totals, added to.
        messages: The recorded thread (every message with an id).
        terms: Window, counter, summarizer, cache price.
        needs: `RunNeeds.of(messages)`, computed once for every row.
        on_call: Called after each model call (progress).
    """
    result = replay(
        system_for(tally, terms),
        messages,
        limit=terms.limit,
        counter=terms.counter,
        needs=needs,
        on_call=None if on_call is None else lambda _i: on_call(),
    )
    tally.add(result)


DEFAULT_MAX_COST = 1.0
"""The most a recommended setting may cost, as a ratio to the defaults' cost (`--max-cost`)."""


MIN_RECALL_GAIN = 0.01
"""The least gain in next-step recall (1 point) for which a setting is recommended over the
defaults, at no more than `--max-cost` times their cost. A change of configuration costs its
user a review and a new run; under a point is under one name in a hundred the next steps use,
within what another set of the same agent's threads would move. Not fitted to any runs."""
MIN_COST_SAVING = 0.02
"""The least saving (2% of the defaults' effective cost) for which a setting that shows no
less recall is recommended. The effective cost takes the cache's hits as the replay measured
them; a real provider's hits move by more than that, so a smaller saving may not be one."""


def buys_something(tally: Tally, base: Tally, cache_price: float, max_cost: float) -> bool:
    """Whether `tally` gains enough over the defaults `base` to be worth changing to.

    At least `MIN_RECALL_GAIN` more next-step recall at no more than `max_cost` times the
    defaults' cost, or at least `MIN_COST_SAVING` lower cost at no less recall; and every
    prompt within the budget and valid.
    """
    if not tally.within_budget or tally.setting is None or tally is base:
        return False
    cost, base_cost = tally.cost(cache_price), base.cost(cache_price)
    gain = (tally.recall or 0.0) - (base.recall or 0.0)
    if gain >= MIN_RECALL_GAIN - 1e-12 and cost <= max_cost * base_cost + 1e-9:
        return True
    return gain >= -1e-12 and cost <= (1 - MIN_COST_SAVING) * base_cost + 1e-9


def recommend(
    tallies: Sequence[Tally], cache_price: float, max_cost: float = DEFAULT_MAX_COST
) -> Tally | None:
    """The setting to run: a change only when it buys something, else the defaults.

    When the defaults qualify (no prompt over the budget, none refused or invalid, within
    `max_cost`), a setting is picked over them only if it `buys_something`; of those the best
    next-step recall wins, ties to the cheaper; none: the defaults. When they do not (they
    overflow, or `max_cost` is under 1), the best recall among the settings that qualify,
    ties to the cheaper; without a defaults row the cost is not capped. The alternatives are
    not ours to apply: never recommended. None when no setting qualifies.
    """
    fitting = [t for t in tallies if t.within_budget and t.setting is not None]
    base = next((t for t in tallies if t.is_defaults), None)
    if base is not None:
        cap = max_cost * base.cost(cache_price) + 1e-9
        fitting = [t for t in fitting if t.cost(cache_price) <= cap]
        if base in fitting:
            fitting = [
                base,
                *(t for t in fitting if buys_something(t, base, cache_price, max_cost)),
            ]
    if not fitting:
        return None
    return min(
        fitting,
        key=lambda t: (-(t.recall or 0.0), t.cost(cache_price), not t.is_defaults),
    )


def runner_up(
    tallies: Sequence[Tally], base: Tally, cache_price: float, max_cost: float = DEFAULT_MAX_COST
) -> Tally | None:
    """When the defaults are kept: the nearest miss, the setting a user would look at next.

    The cheapest setting that gains enough but costs over `max_cost` times the defaults (a
    higher `--max-cost` picks it); else, of those within it that show more recall than the
    defaults, or as much for less, but under the least gains, the best recall (ties to the
    cheaper). None: every other setting shows less recall, or as much for no less.
    """
    ours = [t for t in tallies if t.within_budget and t.setting is not None and t is not base]
    priced = [t for t in ours if buys_something(t, base, cache_price, float("inf"))]
    if priced:
        return min(priced, key=lambda t: (t.cost(cache_price), -(t.recall or 0.0)))
    recall, cost = base.recall or 0.0, base.cost(cache_price)
    better = [
        t
        for t in ours
        if (t.recall or 0.0) > recall
        or ((t.recall or 0.0) == recall and t.cost(cache_price) < cost)
    ]
    return min(better, key=lambda t: (-(t.recall or 0.0), t.cost(cache_price)), default=None)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indexes of the points no other point beats, cheapest first.

    A point `(cost, recall)` is beaten by one that costs no more and shows no less, and is
    better in one of the two. Of equal points the first is on the front (one label for them).
    """
    front: list[int] = []
    for i, (cost, recall) in enumerate(points):
        beaten = any(
            (c <= cost and r >= recall and (c < cost or r > recall))
            or ((c, r) == (cost, recall) and j < i)
            for j, (c, r) in enumerate(points)
            if j != i
        )
        if not beaten:
            front.append(i)
    return sorted(front, key=lambda i: points[i])
