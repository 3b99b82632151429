"""The two search paths `python -m benchmarks search` compares, and how each store is opened.

* `scan`: today's path without the database index: `search_archive` lists the thread's keys
  and reads and decodes every entry it has not decoded before into the process `EntryCache`.
  The archive is written and searched through `StoreBackend(store, index_lines=False)`, so
  its database holds no table of ours.
* `index`: the line index of issue 52 (`archive.line_index`), the default `StoreBackend(store)`
  of a SQL store: each archived entry's lines go to tables of ours in the store's database,
  and a word or phrase search asks the database for candidate lines.

Each path gets its own database, built with the same outputs in the same run, so the two
columns compare the same data, the same queries and the same machine. A tree without the
index (`StoreBackend` has no `index_lines`) measures `scan` alone, and the table says so.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

from langgraph_ctx.archive import StoreBackend

HAS_INDEX = "index_lines" in inspect.signature(StoreBackend).parameters
"""Whether this tree indexes lines (issue 52's `StoreBackend(..., index_lines=...)`)."""

PATHS: list[str] = ["scan", "index"] if HAS_INDEX else ["scan"]
"""The paths this tree can measure, `scan` first."""


def archive_backend(store: Any, path: str) -> StoreBackend:
    """The backend an `Archive` of `path` writes and searches `store` through."""
    if not HAS_INDEX:
        return StoreBackend(store)
    return StoreBackend(store, index_lines=path == "index")  # type: ignore[call-arg,unused-ignore]


@contextlib.contextmanager
def open_store(backend: str, conn: str, path: str) -> Iterator[Any]:
    """A store on the `backend` database `conn` as a worker of `path` opens it (no setup)."""
    if path not in PATHS:
        msg = f"unknown search path {path!r}; this tree has {', '.join(PATHS)}"
        raise ValueError(msg)
    if backend == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(conn) as store:
            yield store
    elif backend == "postgres":
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(conn) as store:
            yield store
    else:
        msg = f"unknown backend {backend!r}; use sqlite or postgres"
        raise ValueError(msg)


def set_up(store: Any, path: str) -> StoreBackend:
    """Create the store's tables, and for `index` the index's own (otherwise made on first
    use), as a deployment would; the backend that archives into it."""
    store.setup()
    backend = archive_backend(store, path)
    index = getattr(backend, "line_index", None)
    if index is not None and not index.setup():
        msg = f"the line index could not be set up in {type(store).__name__}; see the log"
        raise RuntimeError(msg)
    return backend


def bound_seconds(path: str) -> float:
    """How long one search on `path` may take by its own bounds (a query matching everything)."""
    from langgraph_ctx.archive.ranking import SEARCH_SECONDS
    from langgraph_ctx.archive.search import READ_SECONDS

    return READ_SECONDS + SEARCH_SECONDS


def database_bytes(backend: str, store: Any) -> int:
    """What a database's tables and indexes take: SQLite's pages (`dbstat`), PostgreSQL's
    `pg_database_size`."""
    if backend == "sqlite":
        with store.lock:
            row = store.conn.execute("SELECT SUM(pgsize) FROM dbstat").fetchone()
        return int(row[0])
    with store._cursor() as cur:  # the store's own connection handling (upstream's helper)
        cur.execute("SELECT pg_database_size(current_database()) AS size")
        found = cur.fetchone()
    return int(found["size"] if isinstance(found, dict) else found[0])


def index_bytes(with_index: Any, without: Any) -> int:
    """Bytes the index adds: the index path's database less the scan path's, same threads."""
    return database_bytes(with_index.backend, with_index.store) - database_bytes(
        without.backend, without.store
    )
