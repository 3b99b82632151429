"""`remove_summarized`: summarized messages leave the live state, by id, once archived.

`ContextMemory` inherits `plan_removals` from `Removals`: the messages a summary covers are
removed from the thread's state only after the span they sit in is written to the archive as
one more insurance dump, so the full history keeps every one in its place. A dump that fails
leaves them live and says why in the report (`_skip_removals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_ctx._effects import Plan
from langgraph_ctx.archive._backends import ArchiveBackend
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.graph.persistence import graph_persistence
from langgraph_ctx.ledger.edits import set_last_report
from langgraph_ctx.pipeline.manager import ContextManager
from langgraph_ctx.pipeline.removal import summarized_removal
from langgraph_ctx.pipeline.result import BuildResult


class _Removing(Protocol):
    """What the removals use of a `ContextMemory`."""

    manager: ContextManager
    remove_summarized: bool | None
    _archive: ArchiveBackend | BaseStore | None
    _store: BaseStore | None

    def archive_for(self, config: RunnableConfig | None = None, *, graph: Any = None) -> Archive:
        """The thread's archive (`ContextMemory.archive_for`)."""
        ...

    def _removes(self, config: RunnableConfig | None) -> bool: ...


class Removals:
    """The removals of `ContextMemory` (see the module)."""

    def plan_removals(
        self: _Removing,
        messages: Sequence[BaseMessage],
        result: BuildResult,
        config: RunnableConfig | None,
    ) -> Plan[tuple[list[RemoveMessage], dict[str, Any]]]:
        """With `remove_summarized`: remove the summarized messages still in `messages`.

        Returns the `RemoveMessage`s (by id, only for messages present, so a later build never
        removes twice) and the ledger to persist. Before anything goes, the span of `messages`
        from the first to the last removed one, with one kept neighbour on each side, is
        archived as one more dump: a summary's own dump leaves out the turn's pinned task (it
        stays live), and this span keeps every removed message in its place in the full
        history.
        """
        if not self._removes(config) or not result.removable_ids:
            return [], result.state
        removal = summarized_removal(messages, result.removable_ids)
        if removal is None:
            return [], result.state
        try:
            ref = yield from self.manager.plan_dump(self.archive_for(config), removal.span)
        except Exception as exc:  # nothing leaves the state without its archive copy
            return [], _skip_removals(result, removal.ids, exc)
        return [RemoveMessage(id=mid) for mid in removal.ids], removal.ledger_after(
            result.state, ref
        )

    def _removes(self: _Removing, config: RunnableConfig | None) -> bool:
        """Whether summarized messages leave the live state in this run (`remove_summarized`)."""
        if self.remove_summarized is not None:
            return self.remove_summarized
        backend = self._archive if self._archive is not None else self._store
        if not isinstance(backend, InMemoryStore):
            # The graph's own store, the checkpointer's database, a directory or a durable
            # store: it lasts as long as the checkpoints do (`archive_for` never gives durable
            # checkpoints an in-process archive).
            return True
        if config is None:
            try:
                config = get_config()
            except RuntimeError:
                config = {}
        _, checkpointer = graph_persistence(dict((config or {}).get("configurable") or {}), None)
        return checkpointer is None or isinstance(checkpointer, InMemorySaver)


def _skip_removals(result: BuildResult, ids: list[str], exc: Exception) -> dict[str, Any]:
    """The ledger to persist when the removal dump failed.

    The messages stay live (a later build removes them once the archive works again) and the
    report says why.
    """
    report = result.report
    report.record(
        "skip",
        tokens_before=report.tokens,
        tokens_after=report.tokens,
        message_ids=ids,
        detail={"reason": f"remove_summarized: dump failed: {type(exc).__name__}: {exc}"},
    )
    state = dict(result.state)
    set_last_report(state, report.to_dict())
    return state
