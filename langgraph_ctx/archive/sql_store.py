"""LangGraph's SQL stores seen from inside: the one adapter onto their tables and connections.

Two uses: listing a namespace's keys alone (`listing_op`), and running our own statements
on the store's connection (`StoreSql`, for the search index of `line_index`), as the store
runs its own (its lock, its pool, its event loop).

`BaseStore` lists a namespace only through `search`, which reads every value: listing a
thread of 5,000 archived outputs (~10 MB) that way reads and decodes all of it, on SQLite
or Postgres, every search. The archive only needs the keys (entries are content-addressed,
so a search reads only keys it has not decoded before), so for `SqliteStore`, `AsyncSqliteStore`,
`PostgresStore` and `AsyncPostgresStore` this module asks the store's own table for `key`
alone, newest write first, as `search` orders it (`updated_at`; SQLite's
`INSERT OR REPLACE` gives each write a new rowid, which breaks its one-second ties). The
table layout (`store(prefix, key, updated_at, ...)` with the namespace joined by `.`) belongs
to `langgraph-checkpoint-sqlite` and `langgraph-checkpoint-postgres`: when a query fails (a
layout that changed, a table not set up) the functions return `None` and the caller pages
`search` instead.

A listing is kept per process (`LISTED_BYTES`) with the namespace's version when it was read
(`_SQLITE_VERSION`, `_POSTGRES_VERSION`: a count and what the newest write changed, read from
the store's own table in a fraction of the listing's time), and the next listing of the
namespace asks the version first: unchanged, the kept keys are the answer; changed (a write,
a re-write moving a key first, a delete, a TTL sweep, by this process or another), the keys
are read again.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from langgraph.store.base import BaseStore

from langgraph_ctx._lru import LRUCache, serial_of

logger = logging.getLogger("langgraph_ctx.archive")

T = TypeVar("T")

_SQLITE = "SELECT key FROM store WHERE prefix = ? ORDER BY updated_at DESC, rowid DESC"
_POSTGRES = "SELECT key FROM store WHERE prefix = ? ORDER BY updated_at DESC, key ASC"
_SEPARATOR = "\x1f"
_POSTGRES_LISTING = (
    "SELECT count(*), max(updated_at),"
    " sum(hashtextextended(key || ' ' || extract(epoch FROM updated_at)::text, 0)),"
    " string_agg(key, E'\\x1f' ORDER BY updated_at DESC, key ASC)"
    " FROM store WHERE prefix = ?"
)
"""A namespace's version (`_POSTGRES_VERSION`) and its keys in `_POSTGRES`'s order, joined by
`_SEPARATOR`, in one read of the table's rows."""
_SQLITE_VERSION = "SELECT count(*), max(rowid), key FROM store WHERE prefix = ?"
"""A namespace's version on SQLite, from the primary key's index alone: its item count, and
the largest rowid with its key (SQLite gives the row of `max` to the bare column). Every write
is an `INSERT OR REPLACE`, a new row past the table's largest rowid (a rowid comes back only
for the largest row once deleted, and then under another key unless the same item is written
again, which leaves the order as it was); a delete changes the count; the store changes
nothing else of a row but its expiry, which orders nothing."""
_POSTGRES_VERSION = (
    "SELECT count(*), max(updated_at),"
    " sum(hashtextextended(key || ' ' || extract(epoch FROM updated_at)::text, 0))"
    " FROM store WHERE prefix = ?"
)
"""A namespace's version on PostgreSQL: its item count, its newest `updated_at`, and a sum of
64-bit hashes of each key with its `updated_at`, which a write, a re-write (a key moving
first), a delete or a write committed late (its `updated_at` older than the newest) changes
(a write's `updated_at` is its transaction's start, so the newest alone misses a late one)."""

LISTED_BYTES = 16 * 1024 * 1024
"""Most memory the per-process listings take (each kept namespace's keys, about 120 bytes a
key), least recently listed namespace dropped first."""


class _Listing(NamedTuple):
    version: tuple[Any, ...]
    keys: list[str]


def _listing_size(key: tuple[int, str], listing: _Listing) -> int:
    strings = sum(map(sys.getsizeof, listing.keys))  # C-level: a listing may be 50,000 keys
    return sys.getsizeof(listing.keys) + strings + sys.getsizeof(key[1]) + 200


_LISTED: LRUCache[tuple[int, str], _Listing] = LRUCache(LISTED_BYTES, size=_listing_size)


def _listing_op(store: BaseStore, prefix: str, dialect: str) -> SqlOp[list[str]]:
    """The keys of `prefix`, newest write first: the kept listing while its version holds.

    On PostgreSQL a listing not kept comes in one statement with its version, the keys
    joined in one value (`_POSTGRES_LISTING`): the table's rows are read once, and one
    string split at C speed instead of a row decoded per key. A key holding the separator
    (not an archive's: its keys are digests) makes the counts differ: the rows are read.
    """
    kept = _LISTED.get((serial_of(store), prefix))
    if dialect == "sqlite":
        (version,) = yield Statement(_SQLITE_VERSION, (prefix,))
        if kept is not None and kept.version == version:
            return list(kept.keys)
        keys = [str(key) for (key,) in (yield Statement(_SQLITE, (prefix,)))]
    else:
        if kept is not None:
            (version,) = yield Statement(_POSTGRES_VERSION, (prefix,))
            if kept.version == version:
                return list(kept.keys)
        ((*counted, joined),) = yield Statement(_POSTGRES_LISTING, (prefix,))
        version = tuple(counted)
        keys = [] if joined is None else str(joined).split(_SEPARATOR)
        if len(keys) != version[0]:
            keys = [str(key) for (key,) in (yield Statement(_POSTGRES, (prefix,)))]
    _LISTED.put((serial_of(store), prefix), _Listing(tuple(version), keys))
    return list(keys)


def _prefix(namespace: tuple[str, ...]) -> str | None:
    # The stores join namespace labels with "."; a label holding one is ambiguous there.
    if any("." in part for part in namespace):
        return None
    return ".".join(namespace)


_SQL_STORES = (
    ("langgraph.store.sqlite.base", "SqliteStore", "sqlite"),
    ("langgraph.store.sqlite.aio", "AsyncSqliteStore", "asqlite"),
    ("langgraph.store.postgres.base", "PostgresStore", "postgres"),
    ("langgraph.store.postgres.aio", "AsyncPostgresStore", "apostgres"),
)
"""Each SQL store class by the module defining it, and its kind."""


def sql_store_kind(store: BaseStore) -> str | None:
    """Which SQL store `store` is ("sqlite", "asqlite", "postgres", "apostgres") or None.

    Looked up among the modules already imported: a store is an instance of a class whose
    module is loaded, and importing the others would cost a PostgreSQL deployment SQLite's
    store, which loads numpy (and its thread pool) through `sqlite_vec`.
    """
    for module, name, kind in _SQL_STORES:
        found = getattr(sys.modules.get(module), name, None)
        if found is not None and isinstance(store, found):
            return kind
    return None


def listing_op(store: BaseStore, namespace: tuple[str, ...]) -> SqlOp[list[str]] | None:
    """The op listing the keys of `namespace` in a LangGraph SQL store, newest write first.

    Run it with `StoreSql(store).run(op, write=False, bounded=False)` (or `arun`). None for
    another store, or a namespace the store's `.`-joined prefix can not name exactly: the
    caller pages `store.search` instead.
    """
    prefix, kind = _prefix(namespace), sql_store_kind(store)
    if prefix is None or kind is None:
        return None
    return _listing_op(store, prefix, "sqlite" if kind in ("sqlite", "asqlite") else "postgres")


def listing_failed(store: BaseStore, exc: Exception) -> None:
    """Log why a keys-only listing failed (a layout that changed, a table not set up)."""
    logger.debug("keys-only listing of %s failed, paging search: %s", type(store).__name__, exc)


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement with `?` placeholders (`%s` on Postgres) and bound parameters."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False
    """`params` is a sequence of parameter rows (`executemany`)."""
    native: bool = False
    """`sql` is written in the driver's own placeholders (the store's statements), as is."""
    fetch: bool = True
    """The op reads the statement's rows. False (a write whose rows nobody reads): on
    PostgreSQL the next statement is sent without waiting for this one's answer, and an
    error surfaces at the commit, so a transaction costs one round trip, not one each."""


SqlOp = Generator[Statement, list[tuple[Any, ...]], T]
"""Statements run one after the other on one connection; each gets the rows of the last."""


def put_statements(
    store: BaseStore, namespace: tuple[str, ...], key: str, value: dict[str, Any]
) -> list[Statement] | None:
    """The statements `store.put(namespace, key, value, index=False)` runs.

    To run them in a transaction of ours: an archived entry and its index rows committed at
    once. The store's own SQL (upstream's private `_prepare_batch_PUT_queries`, the one `put`
    runs), so the item is written exactly as `put` writes it (its default TTL included).
    None when the store can not give them (another version's layout, an invalid namespace,
    a write that also embeds): the caller then uses `put`.
    """
    from langgraph.store.base import PutOp, _validate_namespace

    try:
        _validate_namespace(namespace)
        ttl_config: Any = getattr(store, "ttl_config", None)
        ttl = ttl_config.get("default_ttl") if ttl_config else None
        op = PutOp(namespace, key, value, index=False, ttl=ttl)
        queries, embedding = store._prepare_batch_PUT_queries([(0, op)])  # type: ignore[attr-defined]
    except Exception as exc:
        logger.debug("%s gave no put statements: %s", type(store).__name__, exc)
        return None
    if embedding is not None:
        return None
    return [Statement(str(sql), tuple(params), native=True, fetch=False) for sql, params in queries]


class StoreSql:
    """Runs `SqlOp`s on a SQL store's own connection, as the store does, sync and async.

    A write runs in one transaction (`BEGIN IMMEDIATE` on SQLite, rolled back on error);
    the store's lock (SQLite, a Postgres connection) or pool guards it. A sync store runs
    async ops in a worker thread; an async store runs sync ops on its event loop, from
    another thread, as its own sync methods do.

    Args:
        store: A `SqliteStore`, `AsyncSqliteStore`, `PostgresStore` or `AsyncPostgresStore`.
    """

    def __init__(self, store: BaseStore) -> None:
        kind = sql_store_kind(store)
        if kind is None:
            msg = f"{type(store).__name__} is not a LangGraph SQL store"
            raise ValueError(msg)
        self.store, self.kind = store, kind
        """Which store (`sql_store_kind`)."""
        self.dialect = "sqlite" if kind in ("sqlite", "asqlite") else "postgres"
        """`sqlite` or `postgres`."""

    def _text(self, statement: Statement) -> str:
        if self.dialect == "sqlite" or statement.native:
            return statement.sql
        return statement.sql.replace("?", "%s")

    def run(self, op: SqlOp[T], *, write: bool, bounded: bool = True) -> T:
        """Run `op` on a sync store (on an async one: on its event loop, from this thread).

        `bounded`: a read on PostgreSQL stops after `READ_TIMEOUT_MS` (reads of the index;
        the store's own listing is not bounded: without it a search can not list at all).
        """
        store: Any = self.store
        if self.kind in ("asqlite", "apostgres"):
            loop = store.loop
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                op.close()
                msg = "an async store's tables are used from its own event loop: use the async API"
                raise asyncio.InvalidStateError(msg)
            done = asyncio.run_coroutine_threadsafe(
                self.arun(op, write=write, bounded=bounded), loop
            )
            return done.result()
        if self.kind == "sqlite":
            with store.lock:  # SqliteStore's own lock, as its own methods take it
                conn = store.conn
                if write:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    result = _drive(op, lambda s: _sqlite_run(conn, s))
                except BaseException:
                    if write and conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if write:
                    conn.execute("COMMIT")
                return result
        # Upstream's private helper: `pipeline=True` takes the store's lock on a shared
        # connection (without it two threads' statements interleave on one connection).
        with store._cursor(pipeline=True) as cur:
            _plain_rows(cur)

            def run(s: Statement) -> list[tuple[Any, ...]]:
                if s.many:
                    cur.executemany(self._text(s), s.params)
                    return []
                cur.execute(self._text(s), s.params)
                return _pg_rows(cur) if s.fetch else []

            with cur.connection.transaction():
                if bounded and not write:  # a read the database may not prolong
                    cur.execute(_READ_TIMEOUT, (str(READ_TIMEOUT_MS),))
                return _drive(op, run)

    async def arun(self, op: SqlOp[T], *, write: bool, bounded: bool = True) -> T:
        """Run `op` on an async store (a sync one: in a worker thread)."""
        store: Any = self.store
        if self.kind in ("sqlite", "postgres"):
            return await asyncio.to_thread(self.run, op, write=write, bounded=bounded)
        if self.kind == "asqlite":
            async with store.lock:
                conn = store.conn
                if write:
                    await conn.execute("BEGIN IMMEDIATE")

                async def run(s: Statement) -> list[tuple[Any, ...]]:
                    if s.many:
                        await conn.executemany(s.sql, s.params)
                        return []
                    async with conn.execute(s.sql, s.params) as cursor:
                        return [tuple(r) for r in await cursor.fetchall()]

                try:
                    result = await _adrive(op, run)
                except BaseException:
                    if write and conn.in_transaction:
                        await conn.execute("ROLLBACK")
                    raise
                if write:
                    await conn.execute("COMMIT")
                return result
        async with store._cursor(pipeline=True) as cur:
            _plain_rows(cur)

            async def arun(s: Statement) -> list[tuple[Any, ...]]:
                if s.many:
                    await cur.executemany(self._text(s), s.params)
                    return []
                await cur.execute(self._text(s), s.params)
                return await _apg_rows(cur) if s.fetch else []

            async with cur.connection.transaction():
                if bounded and not write:
                    await cur.execute(_READ_TIMEOUT, (str(READ_TIMEOUT_MS),))
                return await _adrive(op, arun)


def _sqlite_run(conn: Any, statement: Statement) -> list[tuple[Any, ...]]:
    if statement.many:
        conn.executemany(statement.sql, statement.params)
        return []
    return [tuple(row) for row in conn.execute(statement.sql, statement.params).fetchall()]


READ_TIMEOUT_MS = 2_000
"""Longest a read of our tables may run on PostgreSQL (`SET LOCAL statement_timeout`): the
trigram index is shared by every thread, so a word common in a large database makes its
matches costly; past this the read fails and the caller answers without it (a search scans,
within its own bounds)."""

_READ_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"


def _plain_rows(cursor: Any) -> None:
    # The stores' connections make dict rows; building a dict per row cost more than the
    # query itself when a search lists thousands of keys or lines.
    from psycopg.rows import tuple_row

    cursor.row_factory = tuple_row


def _pg_rows(cursor: Any) -> list[tuple[Any, ...]]:
    # In pipeline mode a result (and whether there is one) is known only once fetched.
    from psycopg import ProgrammingError

    try:
        return _rows(cursor.fetchall())
    except ProgrammingError as exc:  # a statement that returns no rows
        return _no_rows(exc)


async def _apg_rows(cursor: Any) -> list[tuple[Any, ...]]:
    from psycopg import ProgrammingError

    try:
        return _rows(await cursor.fetchall())
    except ProgrammingError as exc:
        return _no_rows(exc)


def _no_rows(exc: Exception) -> list[tuple[Any, ...]]:
    # psycopg says "no rows" with a bare ProgrammingError; the server's errors (a missing
    # table: UndefinedTable) are ProgrammingErrors too, with a SQLSTATE, and must not pass
    # for an empty result (in pipeline mode the transaction is then aborted, and its commit
    # would drop every write silently).
    if getattr(exc, "sqlstate", None):
        raise exc
    return []


def _rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    # The Postgres stores' cursors return dict rows; ours (`_plain_rows`) tuples, as they are.
    if not rows or type(rows[0]) is tuple:
        return rows
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]


def _drive(op: SqlOp[T], run: Callable[[Statement], list[tuple[Any, ...]]]) -> T:
    rows: list[tuple[Any, ...]] | None = None
    while True:
        try:
            statement = op.send(rows)  # type: ignore[arg-type]  # None starts it
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        rows = run(statement)


async def _adrive(op: SqlOp[T], run: Callable[[Statement], Any]) -> T:
    rows: list[tuple[Any, ...]] | None = None
    while True:
        try:
            statement = op.send(rows)  # type: ignore[arg-type]
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        rows = await run(statement)
