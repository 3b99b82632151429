"""The graph's own persistence, as a `ContextMemory` reads it: its store, its checkpointer.

The archive a thread gets defaults to the graph's persistence (`ContextMemory.archive_for`):
the run's store; else the checkpointer's own database when it is durable (`durable`); else an
in-process store, when the checkpoints live in this process too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore

from langgraph_ctx.archive._backends import ArchiveBackend, DirectoryBackend
from langgraph_ctx.checks import check_path
from langgraph_ctx.errors import ConfigError, shorten

__all__ = ["archive_backend", "config_of", "graph_persistence", "in_run"]

# LangGraph's run-config keys for the run's runtime (its `.store`) and its checkpointer.
_CONFIG_KEY_RUNTIME = "__pregel_runtime"


_CONFIG_KEY_CHECKPOINTER = "__pregel_checkpointer"


def config_of(configurable: Mapping[str, Any]) -> RunnableConfig:
    """A run config holding only `configurable`."""
    return {"configurable": dict(configurable)}


def graph_persistence(configurable: Mapping[str, Any], graph: Any) -> tuple[BaseStore | None, Any]:
    """The store and checkpointer of a compiled `graph`, else of the run `configurable` is of."""
    if graph is not None:
        store, checkpointer = getattr(graph, "store", None), getattr(graph, "checkpointer", None)
    else:
        runtime = configurable.get(_CONFIG_KEY_RUNTIME)
        store = getattr(runtime, "store", None)
        checkpointer = configurable.get(_CONFIG_KEY_CHECKPOINTER)
    return (store if isinstance(store, BaseStore) else None), checkpointer


def in_run(configurable: Mapping[str, Any]) -> bool:
    """Whether `configurable` is a run's (LangGraph put its runtime or checkpointer in it)."""
    return _CONFIG_KEY_RUNTIME in configurable or _CONFIG_KEY_CHECKPOINTER in configurable


def archive_backend(archive: Any) -> ArchiveBackend | BaseStore | None:
    """The backend `ContextMemory(archive=...)` names: a directory path, a store or a backend.

    Raises:
        ConfigError: An empty or bytes path, or a value of another type; the message says
            what to pass instead.
    """
    if archive is None:
        return None
    if isinstance(archive, (str, bytes, os.PathLike)):
        # "" would silently mean the working directory; a bytes path names no text directory.
        check_path(
            "archive",
            archive,
            example=".langgraph_ctx/archive",
            note="or None for the graph's store",
        )
        return DirectoryBackend(archive)  # type: ignore[arg-type]  # a text path: checked
    if isinstance(archive, (BaseStore, ArchiveBackend)):
        return archive
    msg = (
        f"archive must be an ArchiveBackend, a BaseStore or a directory path, got "
        f"{type(archive).__name__} {shorten(archive)}; pass e.g. archive=store (a BaseStore "
        "such as PostgresStore) or archive='.langgraph_ctx/archive'"
    )
    raise ConfigError(msg)
