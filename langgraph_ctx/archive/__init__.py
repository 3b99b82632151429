"""A content-addressed, thread-scoped archive for messages that leave the prompt or the state.

Compaction externalizes large tool results here, and summarization writes its insurance dump
here before anything lossy happens. Every entry is stored under the sha256 of its canonical
bytes, so writing the same content twice is harmless and every read is verified.

Layers, from the bottom:

* `ArchiveBackend` (`_backends`): four methods that move bytes (`put`/`get` and `aput`/`aget`).
  `StoreBackend` wraps any LangGraph `BaseStore` (InMemoryStore, PostgresStore, ...);
  `DirectoryBackend` writes owner-only files atomically under a root directory.
* Pure helpers: `encode_message`/`decode_message` and friends define the canonical bytes
  (`codec`); `ArchiveRef` formats and parses references (`lgctx:<thread>:<kind>:<sha256>`).
* `Archive` (`archive`): bound to one thread (and optionally one user). Each operation is
  written once as a plan (`plan_put_message`, `plan_read`, ...) that yields
  `BackendPut`/`BackendGet` effects and turns a backend failure into an `ArchiveError`; the
  sync and async methods drive that plan with `run_plan`/`arun_plan`, and other plans compose
  it with `yield from`.
* What reads it back: the dump index of a thread's insurance dumps (`dumps`), the thread's full
  history and its pages for a UI (`history`), the agent's `recall` tool (`recall`), and the
  search over one thread's archive (`search`, with its pure core in `matching`, queries and
  entries, and `ranking`, the rule; its answer in `search_answer`; decoded entries kept in
  `entry_cache`), which needs a backend that lists (`ListableBackend`: `keys`/`akeys`).

The names above are importable from here (`from langgraph_ctx.archive import Archive`).
"""

from __future__ import annotations

from langgraph_ctx._ids import ArchiveRef, RefKind, is_archive_ref
from langgraph_ctx.archive._backends import (
    ArchiveBackend,
    DirectoryBackend,
    ListableBackend,
    StoreBackend,
)
from langgraph_ctx.archive.archive import NAMESPACE_ROOT, Archive, config_identity
from langgraph_ctx.archive.codec import (
    decode_message,
    decode_messages,
    encode_message,
    encode_messages,
)
from langgraph_ctx.archive.entry_cache import EntryCache
from langgraph_ctx.archive.search import (
    asearch_archive,
    make_search_tool,
    search_archive,
)

__all__ = [
    "NAMESPACE_ROOT",
    "Archive",
    "ArchiveBackend",
    "ArchiveRef",
    "DirectoryBackend",
    "EntryCache",
    "ListableBackend",
    "RefKind",
    "StoreBackend",
    "asearch_archive",
    "config_identity",
    "decode_message",
    "decode_messages",
    "encode_message",
    "encode_messages",
    "is_archive_ref",
    "make_search_tool",
    "search_archive",
]
