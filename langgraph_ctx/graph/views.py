"""The thread views of a `ContextMemory`: a thread read through a compiled graph's checkpointer.

What the model would receive next (`get_live_context`), the thread's complete history, whole or
a page at a time (`get_full_history`, `get_history_page`: `langgraph_ctx.archive.history`),
every report its checkpoints hold (`get_reports`) and one archived message (`restore`), each
with its async twin. `ContextMemory` inherits them from `ThreadViews`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_ctx._effects import Plan, arun_plan, run_plan
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.history import (
    FullHistory,
    afull_history,
    ahistory_page,
    full_history,
    history_page,
)
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.prompt.report import ContextCostReport


class _Memory(Protocol):
    """What the thread views use of a `ContextMemory`."""

    def archive_for(self, config: RunnableConfig | None = None, *, graph: Any = None) -> Archive:
        """The thread's archive (`ContextMemory.archive_for`)."""
        ...

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
    ) -> Plan[BuildResult]:
        """The pipeline build for one model call (`ContextMemory.plan_build`)."""
        ...


class ThreadViews:
    """The thread views of `ContextMemory` (see the module)."""

    def get_live_context(self: _Memory, graph: Any, config: RunnableConfig) -> BuildResult:
        """What the model would receive next on this thread."""
        values = graph.get_state(config).values
        return run_plan(
            self.plan_build(values.get("messages", []), values.get("context_ledger"), config)
        )

    async def aget_live_context(self: _Memory, graph: Any, config: RunnableConfig) -> BuildResult:
        """Async twin of `get_live_context`."""
        values = (await graph.aget_state(config)).values
        return await arun_plan(
            self.plan_build(values.get("messages", []), values.get("context_ledger"), config)
        )

    def get_full_history(
        self: _Memory, graph: Any, config: RunnableConfig, *, strict: bool = False
    ) -> FullHistory:
        """The thread's complete history, in order: live state plus archive (`full_history`).

        A dump the archive cannot give back hides only its own messages: they are named in the
        result's `unreadable` (or, with `strict=True`, the archive's error is raised).
        """
        values = graph.get_state(config).values
        archive = self.archive_for(config, graph=graph)
        return full_history(
            values.get("messages", []), values.get("context_ledger"), archive, strict=strict
        )

    async def aget_full_history(
        self: _Memory, graph: Any, config: RunnableConfig, *, strict: bool = False
    ) -> FullHistory:
        """Async twin of `get_full_history`."""
        values = (await graph.aget_state(config)).values
        archive = self.archive_for(config, graph=graph)
        return await afull_history(
            values.get("messages", []), values.get("context_ledger"), archive, strict=strict
        )

    def get_history_page(
        self: _Memory,
        graph: Any,
        config: RunnableConfig,
        *,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[BaseMessage]:
        """A page of the thread's full history for a UI (`history.history_page`).

        The last `limit` messages, or the `limit` messages before the message `before`.
        """
        values = graph.get_state(config).values
        archive = self.archive_for(config, graph=graph)
        messages, ledger = values.get("messages", []), values.get("context_ledger")
        return history_page(messages, ledger, archive, limit=limit, before=before)

    async def aget_history_page(
        self: _Memory,
        graph: Any,
        config: RunnableConfig,
        *,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[BaseMessage]:
        """Async twin of `get_history_page`."""
        values = (await graph.aget_state(config)).values
        archive = self.archive_for(config, graph=graph)
        messages, ledger = values.get("messages", []), values.get("context_ledger")
        return await ahistory_page(messages, ledger, archive, limit=limit, before=before)

    def get_reports(self: _Memory, graph: Any, config: RunnableConfig) -> list[ContextCostReport]:
        """Every distinct report the thread's checkpoints hold, oldest first."""
        snapshots = list(graph.get_state_history(config))
        return _reports(s.values for s in reversed(snapshots))

    async def aget_reports(
        self: _Memory, graph: Any, config: RunnableConfig
    ) -> list[ContextCostReport]:
        """Async twin of `get_reports`."""
        snapshots = [s async for s in graph.aget_state_history(config)]
        return _reports(s.values for s in reversed(snapshots))

    def restore(
        self: _Memory, ref_or_message_id: str, config: RunnableConfig, *, graph: Any = None
    ) -> BaseMessage:
        """One archived message of the thread, byte for byte.

        Pass the compiled `graph` when the archive is the graph's store.
        """
        return self.archive_for(config, graph=graph).restore(ref_or_message_id)

    async def arestore(
        self: _Memory, ref_or_message_id: str, config: RunnableConfig, *, graph: Any = None
    ) -> BaseMessage:
        """Async twin of `restore`."""
        return await self.archive_for(config, graph=graph).arestore(ref_or_message_id)


def _reports(states: Any) -> list[ContextCostReport]:
    reports: list[ContextCostReport] = []
    last: Any = None
    for values in states:
        report = (values.get("context_ledger") or {}).get("last_report")
        if report and report != last:
            reports.append(ContextCostReport.from_dict(report))
            last = report
    return reports
