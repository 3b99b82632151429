"""Keys-only listing of LangGraph's SQL stores: the one adapter onto their tables.

`BaseStore` lists a namespace only through `search`, which reads every value: listing a
thread of 5,000 archived outputs (~10 MB) that way costs 200-400 ms on SQLite or Postgres,
every search. The archive only needs the keys (entries are content-addressed, so a search
reads only keys it has not decoded before), so for `SqliteStore`, `AsyncSqliteStore`,
`PostgresStore` and `AsyncPostgresStore` this module asks the store's own table for `key`
alone, newest write first, as `search` orders it (`updated_at`; SQLite's
`INSERT OR REPLACE` gives each write a new rowid, which breaks its one-second ties). The
table layout (`store(prefix, key, updated_at, ...)` with the namespace joined by `.`) belongs
to `langgraph-checkpoint-sqlite` and `langgraph-checkpoint-postgres`: when a query fails (a
layout that changed, a table not set up) the functions return `None` and the caller pages
`search` instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.store.base import BaseStore

logger = logging.getLogger("langgraph_ctx.archive")

_SQLITE = "SELECT key FROM store WHERE prefix = ? ORDER BY updated_at DESC, rowid DESC"
_POSTGRES = "SELECT key FROM store WHERE prefix = %s ORDER BY updated_at DESC, key ASC"


def _prefix(namespace: tuple[str, ...]) -> str | None:
    # The stores join namespace labels with "."; a label holding one is ambiguous there.
    if any("." in part for part in namespace):
        return None
    return ".".join(namespace)


def _fallback(store: BaseStore, exc: Exception) -> None:
    logger.debug("keys-only listing of %s failed, paging search: %s", type(store).__name__, exc)


def _kind(store: BaseStore) -> str | None:
    """Which SQL store `store` is ("sqlite", "asqlite", "postgres", "apostgres") or None."""
    try:
        from langgraph.store.sqlite import SqliteStore
        from langgraph.store.sqlite.aio import AsyncSqliteStore
    except ImportError:  # an optional install
        pass
    else:
        if isinstance(store, SqliteStore):
            return "sqlite"
        if isinstance(store, AsyncSqliteStore):
            return "asqlite"
    try:
        from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
    except ImportError:  # an optional install
        return None
    if isinstance(store, PostgresStore):
        return "postgres"
    return "apostgres" if isinstance(store, AsyncPostgresStore) else None


def keys_by_sql(store: BaseStore, namespace: tuple[str, ...]) -> list[str] | None:
    """The keys of `namespace` in a sync SQLite or Postgres store, or None for other stores."""
    prefix, kind = _prefix(namespace), _kind(store)
    if prefix is None or kind not in ("sqlite", "postgres"):
        return None
    try:
        if kind == "sqlite":
            with store.lock:  # type: ignore[attr-defined]  # SqliteStore's own lock
                rows = store.conn.execute(_SQLITE, (prefix,)).fetchall()  # type: ignore[attr-defined]
        else:  # upstream's private helper: it handles the pool, the pipeline and the lock
            with store._cursor() as cur:  # type: ignore[attr-defined]
                cur.execute(_POSTGRES, (prefix,))
                rows = cur.fetchall()
    except Exception as exc:  # any failure (layout, setup): page search instead
        _fallback(store, exc)
        return None
    return [str(_key(row)) for row in rows]


async def akeys_by_sql(store: BaseStore, namespace: tuple[str, ...]) -> list[str] | None:
    """Async `keys_by_sql`; also lists an `AsyncPostgresStore` or an `AsyncSqliteStore`."""
    prefix, kind = _prefix(namespace), _kind(store)
    if prefix is None or kind is None:
        return None
    if kind in ("sqlite", "postgres"):  # a sync store: its connection used from a worker thread
        return await asyncio.to_thread(keys_by_sql, store, namespace)
    try:
        if kind == "asqlite":
            async with store.lock:  # type: ignore[attr-defined]  # AsyncSqliteStore's own lock
                cursor = await store.conn.execute(_SQLITE, (prefix,))  # type: ignore[attr-defined]
                rows = list(await cursor.fetchall())
        else:
            async with store._cursor() as cur:  # type: ignore[attr-defined]  # as above
                await cur.execute(_POSTGRES, (prefix,))
                rows = await cur.fetchall()
    except Exception as exc:  # any failure: page search instead
        _fallback(store, exc)
        return None
    return [str(_key(row)) for row in rows]


def _key(row: Any) -> Any:
    # The Postgres stores' cursors return dict rows; a plain tuple cursor is handled too.
    return row["key"] if isinstance(row, dict) else row[0]
