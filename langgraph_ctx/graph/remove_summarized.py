"""`remove_summarized`: summarized messages leave the live state, by id, once archived.

Two functions `ContextMemory.plan_removals` composes, each given exactly what it reads: whether
the messages leave in this run (`removes_in_run`: the option, or by default whether the archive
lasts as long as the checkpoints), and the removal itself (`plan_removal`): the messages a
summary covers (`pipeline.summarized_removal`) are removed from the thread's state only
after the span they sit in is written to the archive as one more insurance dump, so the full
history keeps every one in its place. A dump that fails leaves them live and says why in the
report.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import RemoveMessage
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
from langgraph_ctx.pipeline.result import BuildResult
from langgraph_ctx.pipeline.summarized_removal import SummarizedRemoval


def removes_in_run(
    remove_summarized: bool | None,
    configured: ArchiveBackend | BaseStore | None,
    config: RunnableConfig | None,
) -> bool:
    """Whether summarized messages leave the live state in this run.

    `remove_summarized` decides when set. None: unless the archive lives in this process while
    the checkpoints do not (`configured`, the archive or store given to the memory, is an
    `InMemoryStore`, and the run's checkpointer is durable), where a restart would lose them.
    `config` is the run's (None: the current run's).
    """
    if remove_summarized is not None:
        return remove_summarized
    if not isinstance(configured, InMemoryStore):
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


def plan_removal(
    manager: ContextManager, archive: Archive, removal: SummarizedRemoval, result: BuildResult
) -> Plan[tuple[list[RemoveMessage], dict[str, Any]]]:
    """Dump `removal`'s span to `archive`, then remove its messages; the ledger to persist.

    The span, from the first to the last removed message with one kept neighbour on each side,
    keeps every removed message in its place in the full history (a summary's own dump leaves
    out the turn's pinned task: it stays live). When the dump fails nothing leaves the state:
    a later build removes the messages once the archive works again, and the report says why.
    """
    try:
        ref = yield from manager.plan_dump(archive, removal.span)
    except Exception as exc:  # nothing leaves the state without its archive copy
        return [], _skipped(result, removal.ids, exc)
    return [RemoveMessage(id=mid) for mid in removal.ids], removal.ledger_after(result.state, ref)


def _skipped(result: BuildResult, ids: list[str], exc: Exception) -> dict[str, Any]:
    """The ledger to persist when the removal dump failed: its report says why."""
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
