"""`ContextManager`: turns what the graph holds into what the model receives.

Pure and deterministic: same messages and ledger in, same prompt out, byte for byte. The only
I/O (memory search, archive writes, summarizer and extractor calls) goes through effects, so
`build` and `abuild` share one body (`plan`).

A build assembles a `PromptView` (base system prompt, tool schemas, retrieved memory, the
history window and the ledger of earlier edits), runs the strategies of its list on it in
order (see `langgraph_ctx.strategies` for the default list and what each does), and renders
the prompt. A prompt still over the limit raises `ContextWindowExceededError` with the report.

Its options are checked in `options`, the steps around the strategies are `steps`, and what a
build returns is `result.BuildResult`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langgraph_ctx._effects import Plan, SearchStore, both
from langgraph_ctx.archive.dumps import plan_spill_dump_refs
from langgraph_ctx.checks import check_bool, check_callable, check_int, check_list
from langgraph_ctx.errors import ConfigError, InvalidMessagesError
from langgraph_ctx.ledger.repair import repair_ledger
from langgraph_ctx.ledger.summary import adopt_summary, spill_now
from langgraph_ctx.messages.base import split_base
from langgraph_ctx.messages.blocks import is_user_input
from langgraph_ctx.messages.content import text_of
from langgraph_ctx.messages.validation import coerce_messages
from langgraph_ctx.pipeline.options import (
    check_archive,
    coerce_summarizer,
    prepare_ahead,
)
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.pipeline.steps import (
    calibrated_counter,
    examined,
    finish,
    plan_spill_within_budget,
    thread_key,
)
from langgraph_ctx.prompt.assembly import (
    Skill,
    ToolPolicy,
    check_tool_policy,
    coerce_skills,
    filter_tools,
    render_skills,
    search_tool_name,
)
from langgraph_ctx.prompt.render import RenderCache, split_summary_body
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.prompt.view import PromptView, Resources, SummaryPlacement
from langgraph_ctx.strategies import (
    DropMemory,
    Strategy,
    apply_strategy,
    default_strategies,
    strategies_from_config,
)
from langgraph_ctx.summaries.preparer import AheadBinding
from langgraph_ctx.summaries.slots import DEFAULT_MAX_IN_FLIGHT, SummarySlots
from langgraph_ctx.tokens.counter import TokenCounter, check_tools, count_tool_tokens
from langgraph_ctx.tokens.models import counter_for_model

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.store.base import BaseStore

    from langgraph_ctx.archive.archive import Archive
    from langgraph_ctx.summaries.extract import EntityExtractor
    from langgraph_ctx.summaries.summarizer import Summarizer


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
        strategies: Strategy objects or configs, run in this order on every build; default
            `default_strategies(summarize=False)` (the manager may have no archive to insure
            a summary with; `ContextMemory`, which always has one, summarizes by default).
        token_counter: Any `Sequence[BaseMessage] -> int`; default `counter_for_model(model)`:
            exact `TiktokenCounter` for OpenAI models (and without a model), else an
            `ApproximateCounter` for the model's provider, calibrated from real usage.
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
        summary_placement: `"after_task"` (after the pinned task, as a user message: a
            fold rewrites the prompt from the summary on, so the task before it stays in the
            provider's cache), `"separate"` (a system message
            after the base prompt) or `"merged"` (inside it).
        max_messages: At most this many of the newest messages are examined per build (the
            base prompt aside); older ones stay in state and in the full history, but no
            prompt shows them. The window's recorded start bounds the work first.
        prepare_summaries: Prepare the next summary in the background once the prompt passes
            `trigger - 0.05` of the limit, so the model call that reaches the trigger does not
            wait for the summarizer (`langgraph_ctx.strategies.ahead`); sets `prepare_at` on each
            `SlidingWindow(summarize=True)` that has none. Off by default: the cut a
            preparation fixes early leaves more in the window, so the next cut (and the break
            of the cached prefix) comes sooner, which costs effective cost; turn it on when a
            stalled call costs more than those tokens (docs/benchmarks.md, latency).
        max_summaries_in_flight: Summarizer calls at once, at most, across every thread of
            this manager (None: no cap), for the summarizer provider's rate limit: the
            summaries made in a build and in a rebuild, and those prepared in the background
            (`prepare_summaries`), all hold one of these slots while they run
            (`langgraph_ctx.summaries.slots`). A build never waits for a slot: when a summary
            is due and none is free, the deterministic summary stands in (the one a failing
            summarizer falls back to; the insurance dump is written first), and the report's
            decision says `summarizer busy: ...`. A preparation waits for one in the
            background, oldest first. Default `summaries.slots.DEFAULT_MAX_IN_FLIGHT` (why:
            there; measured: docs/benchmarks.md, load); raise it, or pass None, for many busy
            threads on a provider that allows it.
    """

    def __init__(
        self,
        *,
        budget: ContextBudget | None = None,
        context_window_tokens: int | None = None,
        reserved_output_tokens: int = 0,
        model: BaseChatModel | None = None,
        strategies: Sequence[Strategy | Mapping[str, Any]] | Mapping[str, Any] | str | None = None,
        token_counter: TokenCounter | None = None,
        archive: Archive | None = None,
        store: BaseStore | None = None,
        memory_namespace: tuple[str, ...] = ("memories",),
        memory_search_limit: int = 5,
        skills: Sequence[Skill | Mapping[str, Any]] | None = None,
        injections: Sequence[str] | None = None,
        tool_policy: ToolPolicy | None = None,
        summarizer: Summarizer | BaseChatModel | None = None,
        redact: Callable[[str], str] | None = None,
        extractor: EntityExtractor | None = None,
        summary_placement: SummaryPlacement = "after_task",
        max_messages: int = 20_000,
        prepare_summaries: bool = False,
        max_summaries_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if budget is None:
            from langgraph_ctx.tokens.models import context_window_for

            window = context_window_for(model, explicit=context_window_tokens)
            budget = ContextBudget(
                context_window_tokens=window, reserved_output_tokens=reserved_output_tokens
            )
        if summary_placement not in ("after_task", "separate", "merged"):
            msg = (
                "summary_placement must be 'after_task', 'separate' or 'merged', got "
                f"{summary_placement!r}"
            )
            raise ConfigError(msg)
        check_int("memory_search_limit", memory_search_limit, example=5)
        check_int("max_messages", max_messages, minimum=1, example=20_000)
        check_callable(
            "token_counter",
            token_counter,
            what="callable on a message list",
            optional=True,
            example='TiktokenCounter("gpt-4o")',
            note="or ApproximateCounter(), or any Sequence[BaseMessage] -> int",
        )
        check_tool_policy(tool_policy)
        check_list("injections", injections, "strings, e.g. ['Answer in French.']")
        check_archive(archive)
        check_callable(
            "redact",
            redact,
            what="a function from text to text",
            optional=True,
            example="lambda text: text.replace(secret, '***')",
        )
        check_bool("prepare_summaries", prepare_summaries)
        check_int(
            "max_summaries_in_flight",
            max_summaries_in_flight,
            minimum=1,
            optional=True,
            example=DEFAULT_MAX_IN_FLIGHT,
            note="summarizer calls at once; None: no cap",
        )
        if not isinstance(memory_namespace, tuple) or not all(
            isinstance(part, str) for part in memory_namespace
        ):
            msg = (
                f"memory_namespace must be a tuple of strings, got "
                f"{type(memory_namespace).__name__} {memory_namespace!r}; pass e.g. "
                f"{(memory_namespace,) if isinstance(memory_namespace, str) else ('memories',)!r}"
            )
            raise ConfigError(msg)
        self.budget = budget
        self.strategies: list[Strategy] = (
            strategies_from_config(strategies)
            if strategies is not None
            else default_strategies(summarize=False)
        )
        self.token_counter: TokenCounter = token_counter or counter_for_model(model)
        self.calibrates = True
        """Scale `token_counter` by the ledger's learned ratio and keep learning it (off for a
        copy counting another model's call, whose counter the ratio was not learned for)."""
        self.archive = archive
        self.store = store
        self.memory_namespace = memory_namespace
        self.memory_search_limit = memory_search_limit
        self.skills = coerce_skills(skills)
        self.injections = list(injections or ())
        self.tool_policy = tool_policy
        self.summarizer = coerce_summarizer(summarizer, redact, self.token_counter)
        self.extractor = extractor
        self.summary_placement: SummaryPlacement = summary_placement
        self.max_messages = max_messages
        self._render_cache = RenderCache()
        self.slots = SummarySlots(max_summaries_in_flight)
        """The cap on this manager's summarizer calls in flight, in builds and background."""
        self.strategies, self.preparer = prepare_ahead(
            self.strategies, budget, prepare_summaries, self.slots
        )

    # --- the plan, and `build` / `abuild` driving it --------------------------------------

    def plan(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[Any] | None = None,
        memory: Sequence[str] | None = None,
        injections: Sequence[str] | None = None,
        state: Mapping[str, Any] | None = None,
        archive: Archive | None = None,
    ) -> Plan[BuildResult]:
        """The build as a generator of effects (drive it with `run_plan` / `arun_plan`)."""
        given = messages
        messages, skipped = examined(messages, state, self.max_messages)
        messages = coerce_messages(messages)
        check_tools(tools)
        check_list("memory", memory, "strings, e.g. ['the user prefers metric units']")
        check_list("injections", injections, "strings, e.g. ['Answer in French.']")
        check_archive(archive)
        ledger, repairs = repair_ledger(state)
        archive = archive if archive is not None else self.archive
        spill_error = None
        summary_before = ledger.get("summary") or {}
        if archive is not None and spill_now(ledger):
            spill_error = yield from plan_spill_dump_refs(ledger, archive)
        base, adopted, history = split_base(
            messages, user_form=self.summary_placement == "after_task"
        )
        adopt_summary(ledger, *split_summary_body(adopted))
        if not history:
            what = f"{len(messages)} system message(s) only" if messages else "it is empty"
            msg = (
                f"the history has no conversation to send ({what}). The model needs at least "
                "one user message; pass the conversation, e.g. "
                "[SystemMessage('...'), HumanMessage('...')]"
            )
            raise InvalidMessagesError(msg, ["no_conversation"])
        counter, calibrated = calibrated_counter(
            self.token_counter, self.calibrates, ledger, history
        )
        tools_out = filter_tools(tools, self.tool_policy)
        items = list(memory) if memory is not None else (yield from self._search_memory(history))
        fragments = ([render_skills(self.skills)] if self.skills else []) + self.injections
        resources = self._resources(archive)
        if self.preparer is not None and resources.summarize is not None:
            resources.ahead = AheadBinding(
                self.preparer,
                thread_key(archive, history),
                self.summarizer.plan,
                self._wait(),
                resources.summarize,
            )
        view = PromptView(
            history=history,
            base=base,
            base_offset=len(messages) - len(history) + skipped,
            render_cache=self._render_cache,
            ledger=ledger,
            budget=self.budget,
            counter=counter,
            tool_tokens=count_tool_tokens(counter, tools_out),
            static_fragments=fragments + list(injections or ()),
            memory_items=items[: self.memory_search_limit],
            resources=resources,
            summary_placement=self.summary_placement,
            search_tool=search_tool_name(tools_out),
            strategies=self.strategies,
            repairs=repairs,
        )
        if spill_error is not None:
            view.record("skip", view.tokens, detail={"reason": spill_error})
        for strategy in self.strategies:
            yield from apply_strategy(strategy, view)
        if view.restore_memory() and view.tokens > view.trigger:
            # Memory went first, but the strategies after `DropMemory` made room for it; it
            # outranks recent history, so they run again to cut the history instead. Building
            # again on this state then changes nothing.
            at = next(i for i, s in enumerate(self.strategies) if isinstance(s, DropMemory))
            for strategy in self.strategies[at + 1 :]:
                yield from apply_strategy(strategy, view)
        if archive is not None and (view.ledger.get("summary") or {}).get(
            "updates", 0
        ) != summary_before.get("updates", 0):
            # The summary message changed in this build anyway: older dump refs go to the
            # index now, so the prompt does not change again on the next call for it.
            yield from plan_spill_within_budget(view, archive)
        view.report.messages_in += skipped
        return finish(view, tools_out, calibrated, given, self.strategies)

    build, abuild = both(
        plan,
        name="build",
        doc="""Build the prompt for one model call.

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
            InvalidMessagesError: No conversation message, an item that is not a message, or
                two messages with one id.
            ConfigError: `state` is not a dict.
        """,
        adoc="Async twin of `build` (same plan, async effects).",
    )

    # --- helpers -------------------------------------------------------------------------

    def _wait(self) -> float | None:
        """How long a build at the trigger waits for a preparation still running.

        As long as summarizing the span anew may take (each attempt's time limit): waiting
        for the preparation is never slower than starting over.
        """
        timeout = self.summarizer.timeout_seconds
        return None if timeout is None else timeout * (1 + self.summarizer.retries)

    def _search_memory(self, history: list[BaseMessage]) -> Plan[list[str]]:
        if self.store is None or self.memory_search_limit == 0:
            return []
        query = next((text_of(m) for m in reversed(history) if is_user_input(m)), "")
        limit = self.memory_search_limit
        items = yield SearchStore(self.store, self.memory_namespace, query or None, limit)
        return [_memory_text(item.value) for item in items]

    def plan_dump(self, archive: Archive, messages: Sequence[BaseMessage]) -> Plan[str]:
        """Write `messages` to `archive` as one insurance dump; the plan returns its ref.

        The one place a dump is written: with a redaction hook set, the dump holds the redacted
        copies (what the summary was made from), never the secret.
        """
        ref: str = yield from archive.plan_put_messages(self.summarizer.redact_messages(messages))
        return ref

    def _resources(self, archive: Archive | None) -> Resources:
        # Every summary a build or a rebuild makes holds a slot of the cap, or is the
        # deterministic one when none is free (`SummarySlots.plan`): never a wait.
        resources = Resources(summarize=self.slots.gate(self.summarizer))
        if archive is not None:
            resources.archive_messages = lambda msgs: _plan_archive(archive, msgs)
            resources.dump_messages = lambda msgs: self.plan_dump(archive, msgs)
        if self.extractor is not None:
            resources.extract = self.extractor.plan
        return resources


def _memory_text(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("text", "content", "memory"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _plan_archive(archive: Archive, messages: list[BaseMessage]) -> Plan[dict[str, str]]:
    # put_message also indexes the message id, so recall and restore work by id.
    refs: dict[str, str] = {}
    for m in messages:
        refs[m.id or ""] = yield from archive.plan_put_message(m)
    return refs
