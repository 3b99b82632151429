"""`ContextMemory`: the component users create once and hand to their graph.

It holds the pipeline (`ContextManager`), the archive backend and the rebuild policy, and
gives every integration point: a node before the model, a node after a turn, a `create_agent`
middleware (`graph/middleware.py`), a `create_react_agent` pre-model hook, the `recall` and
search tools, and the thread views: a thread read through a compiled graph's checkpointer,
each with its async twin (the history itself is read by `langgraph_ctx.archive.history`).
Every shell drives the same per-call plans (`plan_build`, `plan_removals`: with
`graph/remove_summarized.py`, `plan_after_turn`), so sync and async are written once.

Example:
    >>> from langgraph_ctx import ContextMemory
    >>> memory = ContextMemory(context_window_tokens=32_000)
    >>> memory.manager.budget.limit
    32000
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_ctx._effects import MethodCall, Plan, both
from langgraph_ctx.archive._backends import ArchiveBackend
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.history import FullHistory, plan_full_history, plan_history_page
from langgraph_ctx.checks import check_bool, check_number, check_str
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.graph.durable import checkpointer_archive
from langgraph_ctx.graph.middleware import ContextMiddleware
from langgraph_ctx.graph.persistence import archive_backend, config_of, graph_persistence, in_run
from langgraph_ctx.graph.remove_summarized import plan_removal, removes_in_run
from langgraph_ctx.pipeline.manager import ContextManager
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.pipeline.summarized_removal import summarized_removal
from langgraph_ctx.prompt.report import REPORT_KEY, ContextCostReport, attach_report
from langgraph_ctx.strategies import Strategy, default_strategies
from langgraph_ctx.summaries.rebuild import plan_rebuild
from langgraph_ctx.summaries.slots import DEFAULT_MAX_IN_FLIGHT
from langgraph_ctx.tokens._calibration import after_overflow
from langgraph_ctx.tokens.counter import TokenCounter, check_tools
from langgraph_ctx.tokens.models import CallCounters

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langgraph_ctx.summaries.summarizer import Summarizer


_MANAGER_OPTIONS = frozenset(inspect.signature(ContextManager).parameters)
"""What `ContextMemory(**manager_options)` may pass on to `ContextManager`."""


class ContextMemory:
    """The checkpointer-aware context component.

    Args:
        model: The chat model the agent uses; its profile sets the window when no number is
            given, and it picks the token counter (`counter_for_model`: its provider and name).
            A call to another model (a fallback) gets that model's window when it is smaller
            (`window_for`) and that model's counter (`counter_for`).
        context_window_tokens: The window in tokens (wins over the model profile).
        reserved_output_tokens: Tokens kept free for the reply.
        strategies: Strategies or configs, run in order; default `default_strategies()`
            (drop memory, prune, compact, then a window that summarizes what leaves it).
        archive: Where archived content goes: an `ArchiveBackend`, a LangGraph `BaseStore`,
            or a directory path. Default: the graph's own persistence (see `archive_for`):
            the run's store when the graph has one (`create_agent(..., store=)`,
            `compile(store=)`, the LangGraph server's store); else, under a durable
            checkpointer, its own database (`SqliteSaver`, `PostgresSaver` and their async
            twins: a LangGraph store next to the checkpoints, so a restart finds both); else
            an in-process `InMemoryStore`, as short-lived as in-memory checkpoints. A durable
            checkpointer of another kind, with no store, gets a `ConfigError` at the first
            call, before anything is written.
        store: A `BaseStore` searched for memory (`<relevant_context>`); also the archive
            when `archive` is not given.
        summarizer: A `Summarizer` or chat model; None uses the deterministic summary.
        hint_threshold: Rebuild after a turn whose real prompt passed this share of the window.
        remove_summarized: Remove summarized messages from live state, by id, once they are in
            the archive (`get_full_history` and `get_history_page` keep them in place), so
            checkpoints stay small however long the thread runs. None (the default): remove
            them unless the archive lives in this process while the checkpoints do not (an
            `InMemoryStore` given as `archive=`/`store=` with a durable checkpointer), where
            a restart would lose them. True/False: always/never.
        expose_recall: The middleware gives the agent the `recall` tool.
        expose_search: With `recall`, the middleware gives the agent the search tool
            (`search_history`: finds the lines of what left the prompt; `search_tool()`).
        max_summaries_in_flight: Summarizer calls at once, at most, across every thread this
            memory serves (None: no cap), for the summarizer provider's rate limit: summaries
            made in the model call, in a rebuild and in the background alike. The agent never
            waits for a slot: a summary due with none free is the deterministic one, and the
            `context_cost` report says `summarizer busy: ...`. Default
            `summaries.slots.DEFAULT_MAX_IN_FLIGHT`. See `ContextManager`.
        **manager_options: Passed to `ContextManager` (token_counter, skills, tool_policy, ...).
    """

    def __init__(
        self,
        *,
        model: BaseChatModel | None = None,
        context_window_tokens: int | None = None,
        reserved_output_tokens: int = 0,
        strategies: Sequence[Strategy | Mapping[str, Any]] | Mapping[str, Any] | str | None = None,
        archive: ArchiveBackend | BaseStore | str | os.PathLike[str] | None = None,
        store: BaseStore | None = None,
        summarizer: Summarizer | BaseChatModel | None = None,
        hint_threshold: float = 0.8,
        remove_summarized: bool | None = None,
        expose_recall: bool = True,
        expose_search: bool = True,
        max_summaries_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
        **manager_options: Any,
    ) -> None:
        # Every option is checked before anything is made: a bad one leaves nothing behind.
        check_number("hint_threshold", hint_threshold, gt=0, le=1, example=0.8)
        check_bool("remove_summarized", remove_summarized, optional=True)
        check_bool("expose_recall", expose_recall)
        check_bool("expose_search", expose_search)
        unknown = sorted(set(manager_options) - _MANAGER_OPTIONS)
        if unknown:
            msg = (
                f"unknown option(s) {unknown} for ContextMemory; it takes its own options and "
                f"those of ContextManager: {sorted(_MANAGER_OPTIONS)}"
            )
            raise ConfigError(msg)
        backend = archive_backend(archive)
        self.manager = ContextManager(
            model=model,
            context_window_tokens=context_window_tokens,
            reserved_output_tokens=reserved_output_tokens,
            strategies=strategies if strategies is not None else default_strategies(),
            store=store,
            summarizer=summarizer,
            max_summaries_in_flight=max_summaries_in_flight,
            **manager_options,
        )
        self.model = model
        self._archive = backend
        self._store = store
        # The archive of graphs whose checkpoints live in this process too (no checkpointer,
        # or an InMemorySaver): it lives exactly as long as what points into it.
        self._local = InMemoryStore()
        self._explicit_counter = manager_options.get("token_counter") is not None
        self._call_counters = CallCounters()
        self.hint_threshold = hint_threshold
        self.remove_summarized = remove_summarized
        self.expose_recall = expose_recall
        self.expose_search = expose_search

    # --- archive ---------------------------------------------------------------------------

    def archive_for(self, config: RunnableConfig | None = None, *, graph: Any = None) -> Archive:
        """The archive of the thread named by `config` (default: the current run's config).

        The backend is, in order: `ContextMemory(archive=...)`, `ContextMemory(store=...)`,
        the run's store (`runtime.store`, what `get_store()` returns inside a node; or
        `graph.store` when a compiled `graph` is given, as the thread views do), the durable
        checkpointer's own database (`checkpointer_archive`: a `SqliteStore` on the
        `SqliteSaver`'s file, a `PostgresStore` on the `PostgresSaver`'s connection, ...),
        and, when the checkpointer keeps its checkpoints in this process too (none, an
        `InMemorySaver`, SQLite's `:memory:`), an in-process `InMemoryStore`. The user scope is
        read by `config_identity`.

        Raises:
            ConfigError: The config names no thread (`configurable.thread_id`): a graph with no
                checkpointer is invoked without one unless the caller passes it, and the archive
                is one conversation's, so there is none to use (never one shared by every such
                invocation). Or the checkpointer is durable but of a kind whose database the
                archive can not share (a custom saver), and there is no store and no
                `archive=`: an in-process archive would be lost on restart while the
                checkpoints still point into it.
        """
        if config is None:
            try:
                config = get_config()
            except RuntimeError:
                config = {}
        # No default thread: a graph with no checkpointer runs without one, and a shared
        # default would give every such invocation, whoever made it, the same archive (one
        # user's search_history found another's archived secrets). `config_identity` refuses.
        configurable = dict((config or {}).get("configurable") or {})
        backend, where = self._backend_for(configurable, graph)
        return Archive.from_config(backend, config_of(configurable), where=where)

    def _backend_for(
        self, configurable: Mapping[str, Any], graph: Any
    ) -> tuple[ArchiveBackend | BaseStore, str]:
        """The backend `archive_for` uses, and which of its rules chose it (for errors)."""
        if self._archive is not None:
            return self._archive, f"ContextMemory(archive=...) ({_kind(self._archive)})"
        if self._store is not None:
            return self._store, f"ContextMemory(store=...) ({_kind(self._store)})"
        store, checkpointer = graph_persistence(configurable, graph)
        whose = "the graph's" if graph is not None else "the run's"
        if store is not None:
            return store, f"{whose} store ({_kind(store)})"
        durable = checkpointer_archive(checkpointer)
        if durable is not None:
            return durable, f"{whose} checkpointer's database ({_kind(checkpointer)})"
        if graph is None and not in_run(configurable):
            # Outside a run and without the graph, its store and checkpointer are unknown: a
            # memory does not remember those of a graph it ran under (one memory may serve
            # graphs with different stores, and a process that never ran the graph would
            # answer otherwise), so the error names the fix.
            return self._local, (
                "this memory's in-process archive, the archive of graphs with no store and "
                "in-memory checkpoints; no archive= or store= was given to ContextMemory, and "
                "without graph= (outside a run) the graph's store and checkpointer are unknown. "
                "When the graph has a store (create_agent(..., store=...), compile(store=...), "
                "the LangGraph server's) or a durable checkpointer, pass the compiled graph: "
                "memory.restore(ref_or_message_id, config, graph=agent), "
                "memory.archive_for(config, graph=agent)"
            )
        return self._local, (
            "this memory's in-process archive (the graph has no store and keeps its "
            "checkpoints in this process)"
        )

    def recall_tool(self, *, name: str = "recall", max_chars: int = 20_000) -> BaseTool:
        """The `recall` tool, reading the archive of whichever thread calls it.

        Called with no thread (outside a run, or in a run whose config names none), it answers
        with a tool error saying `configurable.thread_id` is needed; so does `search_tool()`.
        """
        from langgraph_ctx.archive.recall import make_recall_tool

        return make_recall_tool(lambda: self.archive_for(None), name=name, max_chars=max_chars)

    def search_tool(self, *, name: str = "search_history", max_chars: int = 4_000) -> BaseTool:
        """The search tool over the archive of whichever thread calls it.

        It finds lines of what left the prompt (excerpted outputs, shortened turns, summarized
        messages) by words, a "quoted phrase" or a pattern, each hit with the `recall` call
        that reads around it. `ContextMiddleware` binds it beside `recall` whenever the prompt
        references the archive; a hand-built graph binds both (`recall_tool()` and this).
        """
        from langgraph_ctx.archive.search import make_search_tool

        return make_search_tool(lambda: self.archive_for(None), name=name, max_chars=max_chars)

    # --- plans shared by every integration ----------------------------------------------

    def plan_build(
        self,
        messages: Sequence[BaseMessage],
        ledger: Mapping[str, Any] | None,
        config: RunnableConfig | None,
        *,
        tools: Sequence[Any] | None = None,
        harder: bool = False,
        model: Any = None,
        window: int | None = None,
        counter: TokenCounter | None = None,
    ) -> Plan[BuildResult]:
        """The pipeline build for one model call of a thread.

        Tool calls a superseded run left unanswered (a new input reached the thread before the
        tools ran: two runs racing on one thread, or a message sent during an interrupt, after
        which LangGraph drops the pending tool tasks) are answered in the prompt view by the
        build's repair step (`repair_messages`), so the prompt stays valid and the state is
        not touched.

        Args:
            messages: The history, system prompt first when there is one.
            ledger: The thread's ledger.
            config: The run's config (names the thread's archive); None: the current run's.
            tools: The tools the model is bound to (counted in the budget).
            harder: After a provider overflow: assume a 30% smaller window, and count at least
                as the counter does (the overflow refuted every calibration ratio under 1).
            model: The model about to be called, when known (`window_for`, `counter_for`).
            window: The window to build for; None: `window_for(model)`. The middleware passes
                less when what the model receives is more than the build (see `graph/guard.py`).
            counter: The counter to count with; None: `counter_for(model)` (the middleware
                passes the one it looked up for the call).
        """
        window = self.window_for(model) if window is None else window
        counter = self.counter_for(model) if counter is None else counter
        manager = self._manager_for(window, harder, counter)
        if harder:
            ledger = after_overflow(ledger)  # type: ignore[arg-type]
        return manager.plan(messages, tools=tools, state=ledger, archive=self.archive_for(config))

    def counter_for(self, model: Any = None) -> TokenCounter:
        """The token counter of a call to `model`: the configured one, or the model's own.

        A call to another model than the configured one (a fallback, a model chosen at run
        time) is counted with `counter_for_model(model)` (its provider family and name), one
        counter per family and name, kept for the next calls. A `token_counter=` given to the
        memory counts every call, whatever the model; so does the configured counter for the
        configured model or a model of the same family and name. A memory configured without
        a model counts a call to a Claude or Gemini model with that provider's counter (never
        OpenAI's tokenizer for them, which under-counts Claude), and any other
        call with its default counter (the demo and the replay rely on that for their fake
        models). Only the configured counter is calibrated from the provider's usage (the
        ledger holds one ratio per thread).
        """
        return self._call_counters.counter_for(
            model,
            configured_model=self.model,
            configured=self.manager.token_counter,
            explicit=self._explicit_counter,
        )

    def window_for(self, model: Any = None) -> int:
        """The window of a call to `model`: the configured one, or the model's when smaller.

        A call may go to another model than the one the memory was configured for (a fallback,
        a model chosen at run time); its profile's `max_input_tokens`, when it has one and it
        is smaller, bounds the call. The configured model itself, or a model without a
        profile, gets the configured window.
        """
        return self._call_counters.window_for(
            model, configured_model=self.model, configured=self.manager.budget.context_window_tokens
        )

    def _manager_for(self, window: int, harder: bool, counter: TokenCounter) -> ContextManager:
        # After a provider overflow our count was too optimistic: assume a 30% smaller window.
        if harder:
            window = int(window * 0.7)
        budget = self.manager.budget
        if window == budget.context_window_tokens and counter is self.manager.token_counter:
            return self.manager
        import copy
        import dataclasses

        other = copy.copy(self.manager)
        other.budget = dataclasses.replace(budget, context_window_tokens=window)
        if counter is not self.manager.token_counter:
            other.token_counter, other.calibrates = counter, False
        return other

    def plan_after_turn(
        self,
        messages: Sequence[BaseMessage],
        ledger: Mapping[str, Any] | None,
        config: RunnableConfig | None,
    ) -> Plan[dict[str, Any]]:
        """Attach the last report to the newest AI message; rebuild from a hint when due."""
        update: dict[str, Any] = {}
        ledger_dict = dict(ledger or {})
        newest = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        report = ledger_dict.get("last_report")
        if newest is not None and report and REPORT_KEY not in newest.response_metadata:
            update["messages"] = [attach_report(newest, report)]
        archive = self.archive_for(config)
        resources = self.manager._resources(archive)
        result = yield from plan_rebuild(
            messages,
            ledger_dict,
            window_tokens=self.manager.budget.context_window_tokens,
            threshold=self.hint_threshold,
            resources=resources,
        )
        if result is not None:
            update["context_ledger"] = result.state
            if result.remove_ids:
                update["messages"] = [
                    *update.get("messages", []),
                    *(RemoveMessage(id=i) for i in result.remove_ids),
                ]
        return update

    def plan_removals(
        self,
        messages: Sequence[BaseMessage],
        result: BuildResult,
        config: RunnableConfig | None,
    ) -> Plan[tuple[list[RemoveMessage], dict[str, Any]]]:
        """With `remove_summarized`: remove the summarized messages still in `messages`.

        Returns the `RemoveMessage`s (by id, only for messages present, so a later build never
        removes twice) and the ledger to persist. Before anything goes, the span of `messages`
        from the first to the last removed one, with one kept neighbour on each side, is
        archived as one more dump (`graph/remove_summarized.py`); when that dump fails the
        messages stay live and the report says why.
        """
        if not result.removable_ids or not self._removes(config):
            return [], result.state
        removal = summarized_removal(messages, result.removable_ids)
        if removal is None:
            return [], result.state
        return (yield from plan_removal(self.manager, self.archive_for(config), removal, result))

    def _removes(self, config: RunnableConfig | None) -> bool:
        """Whether summarized messages leave the live state in this run (`remove_summarized`)."""
        configured = self._archive if self._archive is not None else self._store
        return removes_in_run(self.remove_summarized, configured, config)

    def _plan_build_update(
        self,
        messages: Sequence[BaseMessage],
        result: BuildResult,
        config: RunnableConfig | None,
        output_key: str,
    ) -> Plan[dict[str, Any]]:
        removals, ledger = yield from self.plan_removals(messages, result, config)
        update: dict[str, Any] = {output_key: result.messages, "context_ledger": ledger}
        if removals:
            update["messages"] = removals
        return update

    # --- LangGraph nodes ---------------------------------------------------------------

    def node(
        self, *, tools: Sequence[Any] | None = None, output_key: str = "llm_input_messages"
    ) -> RunnableLambda[Any, dict[str, Any]]:
        """A node to put before the model node: writes the model's input and the ledger.

        Also the `pre_model_hook` of `create_react_agent` (with `state_schema=ContextReactState`
        so the ledger has a channel).

        Args:
            tools: The tools the model is bound to (counted in the budget).
            output_key: State key the built messages go to.

        Raises:
            ConfigError: `tools` is not a list of tools, or `output_key` not a state key.
        """
        check_tools(tools)
        check_str("output_key", output_key, example="llm_input_messages")

        def plan(state: Mapping[str, Any], config: RunnableConfig) -> Plan[dict[str, Any]]:
            result = yield from self.plan_build(
                state["messages"], state.get("context_ledger"), config, tools=tools
            )
            return (
                yield from self._plan_build_update(state["messages"], result, config, output_key)
            )

        run, arun = both(plan, name="context", doc="The context node.")
        return RunnableLambda(run, afunc=arun, name="context")

    def after_turn_node(self) -> RunnableLambda[Any, dict[str, Any]]:
        """A node to put after the model (or after a turn): report onto the AI message, rebuild."""

        def plan(state: Mapping[str, Any], config: RunnableConfig) -> Plan[dict[str, Any]]:
            return (
                yield from self.plan_after_turn(
                    state["messages"], state.get("context_ledger"), config
                )
            )

        run, arun = both(plan, name="context_after_turn", doc="The after-turn node.")
        return RunnableLambda(run, afunc=arun, name="context_after_turn")

    def middleware(self) -> ContextMiddleware:
        """A `ContextMiddleware` for `langchain.agents.create_agent`."""
        return ContextMiddleware(self)

    # --- thread views (read through a compiled graph's checkpointer) -------------------

    def _plan_get_live_context(self, graph: Any, config: RunnableConfig) -> Plan[BuildResult]:
        thread = yield from _plan_thread(graph, config)
        return (yield from self.plan_build(*thread, config))

    get_live_context, aget_live_context = both(
        _plan_get_live_context,
        doc="What the model would receive next on this thread.",
    )

    def _plan_get_full_history(
        self, graph: Any, config: RunnableConfig, *, strict: bool = False
    ) -> Plan[FullHistory]:
        thread = yield from _plan_thread(graph, config)
        archive = self.archive_for(config, graph=graph)
        return (yield from plan_full_history(*thread, archive, strict=strict))

    get_full_history, aget_full_history = both(
        _plan_get_full_history,
        doc="""The thread's complete history, in order: live state plus archive (`full_history`).

        A dump the archive cannot give back hides only its own messages: they are named in the
        result's `unreadable` (or, with `strict=True`, the archive's error is raised).
        """,
    )

    def _plan_get_history_page(
        self,
        graph: Any,
        config: RunnableConfig,
        *,
        limit: int | None = None,
        before: str | None = None,
    ) -> Plan[list[BaseMessage]]:
        thread = yield from _plan_thread(graph, config)
        archive = self.archive_for(config, graph=graph)
        return (yield from plan_history_page(*thread, archive, limit=limit, before=before))

    get_history_page, aget_history_page = both(
        _plan_get_history_page,
        doc="""A page of the thread's full history for a UI (`history.history_page`).

        The last `limit` messages, or the `limit` messages before the message `before`.
        """,
    )

    def _plan_get_reports(
        self, graph: Any, config: RunnableConfig
    ) -> Plan[list[ContextCostReport]]:
        snapshots = yield MethodCall(graph, "get_state_history", (config,), collect=True)
        return _reports(snapshots)

    get_reports, aget_reports = both(
        _plan_get_reports,
        doc="Every distinct report the thread's checkpoints hold, oldest first.",
    )

    def _plan_restore(
        self, ref_or_message_id: str, config: RunnableConfig, *, graph: Any = None
    ) -> Plan[BaseMessage]:
        return (yield from self.archive_for(config, graph=graph).plan_restore(ref_or_message_id))

    restore, arestore = both(
        _plan_restore,
        doc="""One archived message of the thread, byte for byte.

        Pass the compiled `graph` when the archive is the graph's store.
        """,
    )


def _kind(obj: Any) -> str:
    return type(obj).__name__


def _plan_thread(
    graph: Any, config: RunnableConfig
) -> Plan[tuple[Sequence[BaseMessage], Mapping[str, Any] | None]]:
    """The thread's messages and ledger, from the graph's state (`get_state`)."""
    snapshot = yield MethodCall(graph, "get_state", (config,))
    values = snapshot.values
    return values.get("messages", []), values.get("context_ledger")


def _reports(snapshots: Sequence[Any]) -> list[ContextCostReport]:
    """The distinct reports of a thread's state snapshots (newest first), oldest first."""
    reports: list[ContextCostReport] = []
    last: Any = None
    for snapshot in reversed(snapshots):
        report = (snapshot.values.get("context_ledger") or {}).get("last_report")
        if report and report != last:
            reports.append(ContextCostReport.from_dict(report))
            last = report
    return reports
