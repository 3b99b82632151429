"""`ContextManager`: turns what the graph holds into what the model receives.

Pure and deterministic: same messages and ledger in, same prompt out, byte for byte. The only
I/O (memory search, archive writes, summarizer and extractor calls) goes through effects, so
`build` and `abuild` share one body (`plan`).

Staged degradation, when the assembled prompt passes the trigger (DESIGN part 2):
drop retrieved memory (over the limit only) -> prune old tool outputs (attempt 1) -> compact
large tool outputs -> shrink the window one turn/block at a time, pruning again after each
shrink, auto-compacting at the first fit -> `ContextWindowExceededError` with the report.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langgraph_ctx._assembly import (
    Skill,
    ToolPolicy,
    check_tool_policy,
    coerce_skills,
    filter_tools,
    is_base_system,
    is_summary_message,
    render_skills,
)
from langgraph_ctx._effects import Effect, Plan, arun_plan, run_plan
from langgraph_ctx._render import RenderCache
from langgraph_ctx._workspace import Resources, SummaryPlacement, Workspace
from langgraph_ctx.errors import (
    ConfigError,
    ContextWindowExceededError,
    HistoryTooLongError,
    InvalidMessagesError,
)
from langgraph_ctx.ledger import ContextLedger, repair_ledger
from langgraph_ctx.messages import coerce_messages, text_of, with_id
from langgraph_ctx.report import ContextBudget, ContextCostReport
from langgraph_ctx.strategies import (
    REDUCE_STAGES_FROM,
    STAGE_COMPACT,
    STAGE_DROP_MEMORY,
    SlidingWindow,
    Strategy,
    strategies_from_config,
)
from langgraph_ctx.tokens import TiktokenCounter, TokenCounter


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What one build returns."""

    messages: list[BaseMessage]
    """The prompt to send to the model."""
    tools: list[Any]
    """The tools to bind (after `tool_policy`)."""
    state: dict[str, Any]
    """The ledger to persist (JSON-able, keyed by message ids)."""
    report: ContextCostReport
    """The `context_cost` report."""

    @property
    def removable_ids(self) -> list[str]:
        """Ids summarized with an insurance dump: safe to remove from live state."""
        summary = self.state.get("summary") or {}
        return list(summary.get("covered_ids", [])) if summary.get("dump_refs") else []


class ContextManager:
    """The context pipeline: assembly, pruning, compaction, window, summaries, the report.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> cm = ContextManager(budget=ContextBudget(context_window_tokens=8_000))
        >>> result = cm.build([SystemMessage("Be brief."), HumanMessage("hi")])
        >>> [m.type for m in result.messages], result.report.ok
        (['system', 'human'], True)

    Args:
        budget: The token budget (or give `context_window_tokens` / `model`).
        context_window_tokens: Shorthand for `ContextBudget(context_window_tokens=...)`.
        reserved_output_tokens: Tokens kept for the reply (with the shorthand).
        model: A chat model: its `profile["max_input_tokens"]` sets the window when no number
            is given.
        strategies: Strategy objects or configs; default `[SlidingWindow()]`.
        token_counter: Any `Sequence[BaseMessage] -> int`; default exact `TiktokenCounter`.
        archive: A thread-bound `Archive` for compaction, insurance dumps and recall.
        store: A LangGraph `BaseStore` searched for memory when `build(memory=None)`.
        memory_namespace: Namespace searched in `store`.
        memory_search_limit: At most this many memory items reach the prompt.
        skills: Skills advertised in an `<available_skills>` fragment.
        injections: Text fragments always added to the system prompt.
        tool_policy: Predicate on tools, or `{"allow": [...]}` / `{"deny": [...]}`.
        summarizer: A `Summarizer` or a chat model used to summarize; None uses the
            deterministic fallback summary when a summary is needed.
        redact: Text -> text, applied to everything a summary is made from (the summarizer's
            prompt and the fallback's input) and to every insurance dump before it is written,
            so a secret it removes reaches neither. Same as `Summarizer(redact=...)`.
        extractor: An `EntityExtractor` for the entity-extraction strategy.
        auto_compact: Summarize what leaves the window (and insure it in the archive first).
        summary_placement: `"separate"` (a system message after the base prompt) or
            `"merged"` (inside it, for providers that accept one system message).
        protect_turns: Pruning leaves the last N user turns alone.
        prune_errors: Also prune error tool results.
        max_messages: Safety limit on the history size examined.
    """

    def __init__(
        self,
        *,
        budget: ContextBudget | None = None,
        context_window_tokens: int | None = None,
        reserved_output_tokens: int = 0,
        model: Any = None,
        strategies: Sequence[Any] | Mapping[str, Any] | str | None = None,
        token_counter: TokenCounter | None = None,
        archive: Any = None,
        store: Any = None,
        memory_namespace: tuple[str, ...] = ("memories",),
        memory_search_limit: int = 5,
        skills: Sequence[Skill | Mapping[str, Any]] | None = None,
        injections: Sequence[str] | None = None,
        tool_policy: ToolPolicy | None = None,
        summarizer: Any = None,
        redact: Callable[[str], str] | None = None,
        extractor: Any = None,
        auto_compact: bool = False,
        summary_placement: SummaryPlacement = "separate",
        protect_turns: int = 2,
        prune_errors: bool = False,
        max_messages: int = 20_000,
    ) -> None:
        if budget is None:
            from langgraph_ctx.tokens import context_window_for

            window = context_window_for(model, explicit=context_window_tokens)
            budget = ContextBudget(
                context_window_tokens=window, reserved_output_tokens=reserved_output_tokens
            )
        if summary_placement not in ("separate", "merged"):
            msg = f"summary_placement must be 'separate' or 'merged', got {summary_placement!r}"
            raise ConfigError(msg)
        counts = {
            "protect_turns": protect_turns,
            "memory_search_limit": memory_search_limit,
            "max_messages": max_messages,
        }
        for name, value in counts.items():
            if not isinstance(value, int) or isinstance(value, bool):
                msg = f"{name} must be a whole number, got {type(value).__name__} {value!r}"
                raise ConfigError(msg)
        if token_counter is not None and not callable(token_counter):
            msg = (
                f"token_counter must be callable on a message list, got "
                f"{type(token_counter).__name__} {token_counter!r}; pass TiktokenCounter(...), "
                "ApproximateCounter() or any Sequence[BaseMessage] -> int"
            )
            raise ConfigError(msg)
        check_tool_policy(tool_policy)
        if protect_turns < 0 or memory_search_limit < 0 or max_messages < 1:
            msg = (
                "protect_turns and memory_search_limit must be >= 0 and max_messages >= 1, got "
                f"{protect_turns}, {memory_search_limit}, {max_messages}"
            )
            raise ConfigError(msg)
        built = strategies_from_config(strategies) if strategies is not None else [SlidingWindow()]
        self.budget = budget
        self.strategies: list[Strategy] = sorted(built, key=lambda s: s.stage)
        self.token_counter: TokenCounter = token_counter or TiktokenCounter(
            getattr(model, "model_name", None) or "gpt-4o"
        )
        self.archive = archive
        self.store = store
        self.memory_namespace = memory_namespace
        self.memory_search_limit = memory_search_limit
        self.skills = coerce_skills(skills)
        self.injections = list(injections or ())
        self.tool_policy = tool_policy
        self.summarizer = _coerce_summarizer(summarizer, redact)
        self.extractor = extractor
        self.auto_compact = auto_compact
        self.summary_placement: SummaryPlacement = summary_placement
        self.protect_turns = protect_turns
        self.prune_errors = prune_errors
        self.max_messages = max_messages
        self._render_cache = RenderCache()

    # --- public entry points -----------------------------------------------------------

    def build(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[Any] | None = None,
        memory: Sequence[str] | None = None,
        injections: Sequence[str] | None = None,
        state: Mapping[str, Any] | None = None,
        archive: Any = None,
    ) -> BuildResult:
        """Build the prompt for one model call.

        Args:
            messages: The history as the graph holds it (never mutated).
            tools: Tools the model may call; filtered by `tool_policy`, counted in the budget.
            memory: Retrieved memory items; None searches `store` when one is configured.
            injections: Extra system-prompt fragments for this call.
            state: The ledger persisted by the previous build (`BuildResult.state`).
            archive: A thread-bound archive overriding the manager's.

        Bad input is either repaired in the prompt (never in state) and reported as a
        `repair` decision, or refused with a typed error: orphan tool results and unanswered
        tool calls are repaired (`repair_messages`); dicts, tuples and strings are coerced like
        LangGraph's `add_messages`; ledger parts of the wrong shape are dropped.

        Raises:
            ContextWindowExceededError: The prompt cannot fit; `.report` says what was tried.
            HistoryTooLongError: More messages than `max_messages`.
            InvalidMessagesError: No conversation message, an item that is not a message, or
                two messages with one id.
            ConfigError: `state` is not a dict.
        """
        return run_plan(
            self.plan(
                messages,
                tools=tools,
                memory=memory,
                injections=injections,
                state=state,
                archive=archive,
            )
        )

    async def abuild(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[Any] | None = None,
        memory: Sequence[str] | None = None,
        injections: Sequence[str] | None = None,
        state: Mapping[str, Any] | None = None,
        archive: Any = None,
    ) -> BuildResult:
        """Async twin of `build` (same plan, async effects)."""
        return await arun_plan(
            self.plan(
                messages,
                tools=tools,
                memory=memory,
                injections=injections,
                state=state,
                archive=archive,
            )
        )

    # --- the plan ------------------------------------------------------------------------

    def plan(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[Any] | None = None,
        memory: Sequence[str] | None = None,
        injections: Sequence[str] | None = None,
        state: Mapping[str, Any] | None = None,
        archive: Any = None,
    ) -> Plan[BuildResult]:
        """The build as a generator of effects (drive it with `run_plan` / `arun_plan`)."""
        messages = coerce_messages(messages)
        if len(messages) > self.max_messages:
            msg = (
                f"the history has {len(messages)} messages, over max_messages={self.max_messages}"
                "; summarize or archive older turns first, or raise max_messages"
            )
            raise HistoryTooLongError(msg)
        ledger, repairs = repair_ledger(state)
        base, history = _split_base(messages, ledger)
        if not history:
            what = f"{len(messages)} system message(s) only" if messages else "it is empty"
            msg = (
                f"the history has no conversation to send ({what}). The model needs at least "
                "one user message; pass the conversation, e.g. "
                "[SystemMessage('...'), HumanMessage('...')]"
            )
            raise InvalidMessagesError(msg, ["no_conversation"])
        tools_out = filter_tools(tools, self.tool_policy)
        items = list(memory) if memory is not None else (yield from self._search_memory(history))
        archive = archive if archive is not None else self.archive
        fragments = ([render_skills(self.skills)] if self.skills else []) + self.injections
        work = Workspace(
            history=history,
            base=base,
            base_offset=len(messages) - len(history),
            render_cache=self._render_cache,
            ledger=ledger,
            budget=self.budget,
            counter=self.token_counter,
            tool_tokens=self._count_tools(tools_out),
            static_fragments=fragments + list(injections or ()),
            memory_items=items[: self.memory_search_limit],
            resources=self._resources(archive),
            summary_placement=self.summary_placement,
            auto_compact=self.auto_compact,
            protect_turns=self.protect_turns,
            prune_errors=self.prune_errors,
            repairs=repairs,
        )
        early = [s for s in self.strategies if s.stage <= STAGE_DROP_MEMORY]
        later = [s for s in self.strategies if s.stage > STAGE_DROP_MEMORY]
        for strategy in early:  # extraction, dynamic summarization: every call
            yield from strategy.run(work)
        if work.tokens > work.budget.limit:  # stage 25: retrieved memory goes first
            work.drop_memory()
        triggered = work.tokens > work.budget.trigger_tokens
        if triggered:  # stage 30: the first pruning attempt
            yield from work.prune()
        for strategy in later:
            if strategy.stage < REDUCE_STAGES_FROM or triggered:
                yield from strategy.run(work)
        if work.restore_memory() and work.tokens > work.budget.trigger_tokens:
            # Memory went first, but the edits made room for it; it outranks recent history,
            # so cut the history instead. Building again on this state then changes nothing.
            yield from work.prune()
            for strategy in self.strategies:
                if strategy.stage >= REDUCE_STAGES_FROM:
                    yield from strategy.run(work)
        return self._finish(work, tools_out)

    # --- helpers -------------------------------------------------------------------------

    def _finish(self, work: Workspace, tools: list[Any]) -> BuildResult:
        work.reconcile()  # the persisted ledger names only what the prompt shows
        prompt = work.render()
        work.tokens = work.count_full()
        report = work.report
        report.tokens, report.messages_out = work.tokens, len(prompt)
        if work.tokens > work.budget.limit:
            report.ok = False
            report.error = (
                f"the prompt needs {work.tokens} tokens but the limit is {work.budget.limit} "
                f"(window {work.budget.context_window_tokens} - reserved "
                f"{work.budget.reserved_output_tokens}); tool schemas take {work.tool_tokens}. "
                + self._advice(report)
            )
            work.decide("error", work.tokens, detail={"reason": report.error})
            work.ledger["last_report"] = report.to_dict()
            raise ContextWindowExceededError(report.error, report)
        work.ledger["last_report"] = report.to_dict()
        return BuildResult(messages=prompt, tools=tools, state=dict(work.ledger), report=report)

    def _advice(self, report: ContextCostReport) -> str:
        """What to do about a prompt that cannot fit, given what was configured and tried."""
        advice = "Raise context_window_tokens, reserve fewer output tokens, shorten the system "
        if any(s.stage == STAGE_COMPACT for s in self.strategies) and self.auto_compact:
            advice += "prompt or tools, or split the oversized message."
        else:
            advice += "prompt or tools, or add Compaction()/auto_compact so large outputs can go."
        skipped = [
            str(d.detail["reason"])
            for d in report.decisions
            if d.kind == "skip" and d.detail.get("reason")
        ]
        if skipped:  # e.g. an archive write failed, so nothing could be compacted away
            advice += f" Skipped on the way: {'; '.join(dict.fromkeys(skipped))}."
        return advice

    def _count_tools(self, tools: list[Any]) -> int:
        if not tools:
            return 0
        count_tools = getattr(self.token_counter, "count_tools", None)
        if callable(count_tools):
            return int(count_tools(tools))
        from langchain_core.utils.function_calling import convert_to_openai_tool

        schemas = json.dumps([convert_to_openai_tool(t) for t in tools], sort_keys=True)
        return self.token_counter([SystemMessage(schemas)]) - self.token_counter([])

    def _search_memory(self, history: list[BaseMessage]) -> Plan[list[str]]:
        if self.store is None or self.memory_search_limit == 0:
            return []
        query = next((text_of(m) for m in reversed(history) if isinstance(m, HumanMessage)), "")
        store, ns, limit = self.store, self.memory_namespace, self.memory_search_limit
        items = yield Effect(
            "store.search",
            lambda: store.search(ns, query=query or None, limit=limit),
            lambda: store.asearch(ns, query=query or None, limit=limit),
        )
        return [_memory_text(item.value) for item in items]

    def dump_effect(self, archive: Any, messages: Sequence[BaseMessage]) -> Effect:
        """The effect writing `messages` to `archive` as one insurance dump; returns its ref.

        The one place a dump is written: with a redaction hook set, the dump holds the redacted
        copies (what the summary was made from), never the secret.
        """
        dump = self.summarizer.redact_messages(messages)
        return Effect(
            "archive.put_messages",
            lambda: archive.put_messages(dump),
            lambda: archive.aput_messages(dump),
        )

    def _resources(self, archive: Any) -> Resources:
        resources = Resources()
        if archive is not None:
            resources.archive_messages = lambda msgs: _archive_effect(archive, msgs)
            resources.dump_messages = lambda msgs: self.dump_effect(archive, msgs)
        summarizer = self.summarizer
        resources.summarize = lambda msgs, prev: Effect(
            "summarizer",
            lambda: summarizer.summarize(msgs, previous=prev),
            lambda: summarizer.asummarize(msgs, previous=prev),
        )
        extractor = self.extractor
        if extractor is not None:
            resources.extract = lambda msgs, values: Effect(
                "extractor",
                lambda: extractor.extract(msgs, values),
                lambda: extractor.aextract(msgs, values),
            )
        return resources


def _split_base(
    messages: list[BaseMessage], ledger: ContextLedger
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Leading system/developer messages form the base; a summary we wrote is adopted."""
    i = 0
    base: list[BaseMessage] = []
    while i < len(messages) and isinstance(messages[i], SystemMessage):
        msg = messages[i]
        if is_summary_message(msg):
            if not (ledger.get("summary") or {}).get("text"):
                text = text_of(msg).removeprefix("<summary>\n").removesuffix("\n</summary>")
                ledger["summary"] = {
                    "text": text,
                    "covered_ids": [],
                    "dump_refs": [],
                    "source": "input",
                    "updates": 0,
                }
        elif is_base_system(msg):
            base.append(with_id(msg, i))
        else:
            break
        i += 1
    return base, messages[i:]


def _memory_text(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("text", "content", "memory"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _archive_effect(archive: Any, messages: list[BaseMessage]) -> Effect:
    # put_message also indexes the message id, so recall and restore work by id.
    def run() -> dict[str, str]:
        return {m.id or "": archive.put_message(m) for m in messages}

    async def arun() -> dict[str, str]:
        return {m.id or "": await archive.aput_message(m) for m in messages}

    return Effect("archive.put_message", run, arun)


def _coerce_summarizer(summarizer: Any, redact: Callable[[str], str] | None) -> Any:
    from langgraph_ctx.summarize import Summarizer

    if summarizer is None:
        return Summarizer(redact=redact)
    if hasattr(summarizer, "invoke") and not isinstance(summarizer, Summarizer):
        return Summarizer(model=summarizer, redact=redact)
    if not isinstance(summarizer, Summarizer):
        msg = f"summarizer must be a Summarizer or a chat model, got {type(summarizer).__name__}"
        raise ConfigError(msg)
    if redact is None or summarizer.redact is redact:
        return summarizer
    if summarizer.redact is not None:
        msg = (
            "redact= is given twice, to ContextManager and to its Summarizer, with different "
            "functions; give it in one place"
        )
        raise ConfigError(msg)
    return dataclasses.replace(summarizer, redact=redact)
