"""`langgraph-ctx frontier`: what context management costs and hides, on a team's own threads.

Recorded threads (message JSON files, or the threads of a checkpoint database) are replayed
call by call through `ContextManager.build` under each setting (`langgraph_ctx.replay.settings`),
as `ContextMemory` runs them: the ledger carried from call to call, an in-process archive, the
messages a summary covers removed from the history once they are in its insurance dump. No
model is called: the deterministic summarizer writes the summaries unless a model is named.

Each prompt is measured as the benchmarks measure theirs (`langgraph_ctx.replay.measure`):
effective cost, next-step recall, prompts over the budget, prompts a provider would reject;
after the run, the share of what left the prompt that the archive or the history gives back
byte for byte. Inputs are read by `langgraph_ctx.cli.sources`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx.archive import Archive, StoreBackend, encode_message
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.archive.search import EntryCache, search_archive
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.ledger.edits import forget_entries
from langgraph_ctx.ledger.summary import add_dump_ref
from langgraph_ctx.replay.measure import (
    DEFAULT_CACHE_PRICE,
    NextStepRecall,
    effective_cost,
    measure_prompt,
    one_search,
    same_for_provider,
)
from langgraph_ctx.replay.settings import Setting

__all__ = ["Terms", "Tally", "recommend", "replay_setting"]


@dataclass
class Terms:
    """What every setting is replayed with: the window, the counter, the summarizer."""

    window: int
    reserved: int
    counter: Callable[[Sequence[BaseMessage]], int]
    summarizer: Any = None
    """A chat model writing the summaries; None for the deterministic summary."""
    cache_price: float = DEFAULT_CACHE_PRICE

    @property
    def limit(self) -> int:
        """The prompt budget: the window less the reserved output, never below 0."""
        return max(0, self.window - self.reserved)


@dataclass
class Tally:
    """One setting's totals over every thread replayed."""

    setting: Setting
    calls: int = 0
    tokens: int = 0
    reusable: int = 0
    summarizer_tokens: int = 0
    summarizer_calls: int = 0
    over_budget: int = 0
    """Prompts over the budget, and calls the pipeline could not fit (it raised)."""
    refused: int = 0
    """Calls the pipeline could not fit into the budget (`ContextWindowExceededError`)."""
    invalid: int = 0
    recall_hits: int = 0
    recall_total: int = 0
    search_hits: int = 0
    """Names used but no longer shown that one search found (`measure.one_search`)."""
    search_total: int = 0
    """Names used whose lines the prompt no longer showed."""
    removed: int = 0
    """Messages whose content left the prompt (shortened, excerpted, pruned, summarized)."""
    restorable: int = 0
    """Of those, how many the archive or the history gives back byte for byte."""
    errors: Counter[str] = field(default_factory=Counter)
    """First line of each error the pipeline raised, and how often."""

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
    def restorable_share(self) -> float:
        """Share of what left the prompt that restores byte for byte (1 when nothing left)."""
        return self.restorable / self.removed if self.removed else 1.0

    @property
    def within_budget(self) -> bool:
        """No prompt over the budget, none refused, none a provider would reject."""
        return self.over_budget == 0 and self.invalid == 0


class _SummarizerTokens(BaseCallbackHandler):
    """Counts what a summarizer model reads and writes (the provider's usage when given)."""

    def __init__(self, counter: Callable[[Sequence[BaseMessage]], int]) -> None:
        self.counter = counter
        self.calls = 0
        self.tokens = 0
        self._pending = 0

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        """Count the input."""
        self.calls += 1
        self._pending = sum(self.counter(batch) for batch in messages)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Count the output; the provider's usage replaces both counts when it has one."""
        pending, self._pending = self._pending, 0
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or {}
                if usage.get("input_tokens") is not None and usage.get("output_tokens"):
                    self.tokens += int(usage["input_tokens"]) + int(usage["output_tokens"])
                    pending = 0
                elif message is not None:
                    self.tokens += self.counter([message])
        self.tokens += pending


def replay_setting(
    tally: Tally,
    messages: Sequence[BaseMessage],
    terms: Terms,
    *,
    needs: NextStepRecall,
    on_call: Callable[[], None] | None = None,
) -> None:
    """Replay one thread under `tally.setting` and add what it measured to `tally`.

    Before each AI message of `messages` the pipeline builds the prompt from the history so
    far; the prompt is measured against the previous one.

    Args:
        tally: The setting's totals, added to.
        messages: The recorded thread (every message with an id).
        terms: Window, counter, summarizer, cache price.
        needs: `NextStepRecall.of(messages)` (its needs are shared, its score is not).
        on_call: Called after each model call (progress).
    """
    from langgraph_ctx.pipeline.manager import ContextManager

    setting = tally.setting
    archive = Archive(StoreBackend(InMemoryStore()), thread_id="frontier")
    summarizer = terms.summarizer
    watch = None
    if summarizer is not None:
        watch = _SummarizerTokens(terms.counter)
        summarizer.callbacks = [watch]
    manager = ContextManager(
        budget=setting.budget_for(terms.window, terms.reserved),
        strategies=setting.strategy_list(),
        token_counter=terms.counter,
        archive=archive,
        summarizer=summarizer,
    )
    recall = NextStepRecall(needs=needs.needs)
    cache = EntryCache()

    def searcher(name: str) -> str:  # what the agent's search_history answers, 3 hits
        return search_archive(archive, name, limit=3, cache=cache)

    history: list[BaseMessage] = []
    removed: dict[str, BaseMessage] = {}
    refs: dict[str, str] = {}
    ledger: dict[str, Any] | None = None
    previous: list[BaseMessage] = []
    last = 0
    for i, message in enumerate(messages):
        if i == 0 or not isinstance(message, AIMessage):
            continue
        history.extend(messages[last:i])
        last = i
        try:
            result = manager.build(history, state=ledger)
        except Exception as exc:  # a refusal, or a strategy of the user's failing
            if isinstance(exc, ContextWindowExceededError):
                tally.refused += 1
                tally.over_budget += 1
                ledger = dict(ledger or {}, last_report=exc.report.to_dict())
            text = (str(exc).strip().splitlines() or [""])[0].split("; ")[0]
            tally.errors[f"{type(exc).__name__}: {text}"[:200]] += 1
            recall.skip(i)
            tally.calls += 1
            if on_call is not None:
                on_call()
            continue
        ledger, prompt = result.state, result.messages
        recall.score(i, prompt)
        found, missed = one_search(searcher, recall.needs.get(i) or [], prompt)
        tally.search_hits += found
        tally.search_total += missed
        measured = measure_prompt(previous, prompt, counter=terms.counter, limit=terms.limit)
        tally.calls += 1
        tally.tokens += measured.tokens
        tally.reusable += measured.reusable
        tally.over_budget += measured.overrun
        tally.invalid += bool(measured.problems)
        previous = prompt
        for kind in ("pruned", "compacted"):
            for mid, entry in (ledger.get(kind) or {}).items():
                if entry.get("ref"):
                    refs[mid] = entry["ref"]
        if result.removable_ids:
            ledger = _remove_summarized(history, result.removable_ids, ledger, archive, removed)
            history = [m for m in history if m.id not in removed]
        if on_call is not None:
            on_call()
    tally.recall_hits += recall.hits
    tally.recall_total += recall.total
    if watch is not None:
        tally.summarizer_calls += watch.calls
        tally.summarizer_tokens += watch.tokens
    lost, total = _restorable(messages, previous, history, removed, refs, ledger, archive)
    tally.removed += total
    tally.restorable += total - lost


def _remove_summarized(
    history: Sequence[BaseMessage],
    ids: Sequence[str],
    ledger: dict[str, Any],
    archive: Archive,
    removed: dict[str, BaseMessage],
) -> dict[str, Any]:
    """Remove summarized messages as `ContextMemory` does with a durable archive.

    The span of the summarized messages (a kept neighbour each side) goes to the archive as
    one more dump, then they leave the history (into `removed`). Returns the ledger that
    records it.
    """
    gone = set(ids)
    at = [i for i, m in enumerate(history) if m.id and m.id in gone]
    if not at:
        return ledger
    ref = archive.put_messages(list(history[max(0, at[0] - 1) : at[-1] + 2]))
    ledger = dict(ledger)
    add_dump_ref(ledger, ref, listed=False)
    forget_entries(ledger, {history[i].id or "" for i in at})
    removed.update((history[i].id or "", history[i]) for i in at)
    return ledger


def _restorable(
    original: Sequence[BaseMessage],
    final_prompt: Sequence[BaseMessage],
    history: Sequence[BaseMessage],
    removed: dict[str, BaseMessage],
    refs: dict[str, str],
    ledger: dict[str, Any] | None,
    archive: Archive,
) -> tuple[int, int]:
    """(messages not restorable byte for byte, messages whose content left the prompt)."""
    dumped: dict[str, BaseMessage] = {}
    for ref in all_dump_refs(ledger, archive):
        for m in archive.read(ref):
            if isinstance(m, BaseMessage):
                dumped.setdefault(m.id or "", m)
    by_id = {m.id: m for m in original}
    verbatim = {m.id for m in final_prompt if m.id in by_id and same_for_provider(m, by_id[m.id])}
    live = {m.id: m for m in history}
    seen = set(live) | set(removed)
    left = [
        m
        for m in original
        if m.id in seen
        and not isinstance(m, SystemMessage)
        and (m.id not in verbatim or m.id in refs)
    ]
    lost = 0
    for m in left:
        mid = m.id or ""
        got: Any
        if mid in refs:
            got = archive.restore(refs[mid])
        elif mid in removed:
            got = dumped.get(mid)
        else:
            got = live.get(mid)
        lost += got is None or encode_message(got) != encode_message(m)
    return lost, len(left)


DEFAULT_MAX_COST = 1.0
"""The most a recommended setting may cost, as a ratio to the defaults' cost (`--max-cost`)."""


def recommend(
    tallies: Sequence[Tally], cache_price: float, max_cost: float = DEFAULT_MAX_COST
) -> Tally | None:
    """The setting with the best recall that costs at most `max_cost` times the defaults.

    Only settings with no prompt over the budget, none refused and none invalid qualify; among
    those within the cost, the best next-step recall wins, ties to the cheaper (the defaults
    on an equal cost). Without a defaults row the cost is not capped. None when no setting
    qualifies.
    """
    fitting = [t for t in tallies if t.within_budget]
    base = next((t for t in tallies if t.setting.is_defaults), None)
    if base is not None:
        cap = max_cost * base.cost(cache_price) + 1e-9
        fitting = [t for t in fitting if t.cost(cache_price) <= cap]
    if not fitting:
        return None
    return min(
        fitting,
        key=lambda t: (-(t.recall or 0.0), t.cost(cache_price), not t.setting.is_defaults),
    )


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
