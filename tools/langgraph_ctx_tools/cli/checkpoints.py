"""Checkpoint databases the commands open: read-only ones truly read-only, all read as data.

`read_checkpoints` is what `inspect`, `view` and `frontier` use on a database they are
handed: a SQLite file through a `mode=ro` URI, never set up, never switched to WAL, nothing
created beside it (see `_read_only_connection`); a PostgreSQL URI in read-only transactions,
its store read without refreshing TTLs (a refresh is an UPDATE). Before anything is read, the
tables must have the columns LangGraph reads, and the largest value must fit the input cap and
the free memory; a value SQLite finds damaged later is one line too (`InputError`), never a
traceback. `checkpoint_values` is the one reading of a stored checkpoint, and
`CheckpointView` the view `inspect`, `view` and `frontier` read a thread through.
`write_checkpoints` is what `demo` and `replay` record into: set up on a new or empty file, or
on a checkpoint database, and refused on a SQLite file that holds something else (it is not
ours to add tables to).

Both read checkpoints with `StrictSerializer` (see `langgraph_ctx.graph.serde`): a file can
name a type to construct, and nothing a file names is imported or called unless a LangGraph
agent's state holds that type.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_ctx.errors import ArchiveError, InputError, install_extra, reason_of, shorten
from langgraph_ctx.graph.serde import StrictSerializer
from langgraph_ctx_tools.cli.inputs import MESSAGES_MEMORY_FACTOR, check_loaded_size

__all__ = [
    "Opened",
    "ReadBoth",
    "read_checkpoints",
    "thread_archive",
    "thread_ids",
    "write_checkpoints",
]


@dataclass
class Opened:
    """A checkpoint database opened by a command."""

    saver: Any
    """The checkpointer (`SqliteSaver` or `PostgresSaver`), reading with `StrictSerializer`."""
    store: Any
    """The store in the same database, where `ContextMemory` keeps a thread's archive when the
    graph had no other (None when the database has none); on PostgreSQL a reader of its items
    (`get`), as LangGraph's store writes on every read."""


def is_postgres(db: str | Path) -> bool:
    """Whether `db` is a PostgreSQL URI rather than a SQLite file."""
    return str(db).startswith(("postgresql://", "postgres://"))


@contextlib.contextmanager
def read_checkpoints(db: str | Path, threads: Sequence[str] | None = None) -> Iterator[Opened]:
    """Open `db` (a SQLite file or a PostgreSQL URI) to read only; nothing is created or written.

    Args:
        db: The database.
        threads: The threads the command reads (None: every thread): the largest stored
            value is bounded among theirs, so a value over the cap in another thread does not
            keep this one from being read (the store's values, not keyed by thread, are all
            bounded).

    Raises:
        InputError: No such file, not a SQLite database, no checkpoints table, no connection,
            a stored value over the cap.
    """
    opener = _read_postgres if is_postgres(db) else _read_sqlite
    with opener(str(db), None if threads is None else list(threads)) as opened:
        yield opened


@contextlib.contextmanager
def write_checkpoints(db: str | Path) -> Iterator[Any]:
    """A set-up `SqliteSaver` on `db` (created with its folder when missing) for a new run.

    Raises:
        InputError: `db` is a SQLite database holding other tables and no checkpoints, or not
            a SQLite database at all.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(db)
    if path.is_file() and path.stat().st_size > 0:
        with _read_only_connection(path) as probe:
            tables = _tables(probe, str(db))
        if tables and "checkpoints" not in tables:
            listed = ", ".join(sorted(tables)[:5])
            msg = (
                f"{db} is a SQLite database of something else (tables: {listed}), not a "
                "checkpoint database; pass a new --db file so it is left as it is"
            )
            raise InputError(msg)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The graph runs its nodes in worker threads: the connection is shared across them.
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        try:
            saver = SqliteSaver(conn, serde=StrictSerializer())
            saver.setup()
        except sqlite3.DatabaseError as exc:
            msg = f"{db} is not a checkpoint database: {exc}"
            raise InputError(msg) from exc
        yield saver
    finally:
        conn.close()


def thread_ids(saver: Any) -> list[str]:
    """Every thread id the checkpoint database holds, sorted."""
    try:
        rows = saver.conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
        return [str(r["thread_id"] if isinstance(r, dict) else r[0]) for r in rows]
    except InputError:  # already one line (a damaged SQLite file)
        raise
    except Exception as exc:  # sqlite3 or psycopg: no such table, a damaged file
        msg = f"not a checkpoint database: {shorten(str(exc))}"
        raise InputError(msg) from exc


# The columns LangGraph's savers and stores read, per table: a table of that name with other
# columns is someone else's (a query naming a missing column would end in a traceback).
_SQLITE_COLUMNS = {
    "checkpoints": {
        "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type",
        "checkpoint", "metadata",
    },
    "writes": {
        "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type",
        "value",
    },
}  # fmt: skip
_POSTGRES_COLUMNS = {
    "checkpoints": _SQLITE_COLUMNS["checkpoints"],
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"},
    "checkpoint_writes": {
        "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type",
        "blob",
    },
}  # fmt: skip
_STORE_COLUMNS = {"prefix", "key", "value", "created_at", "updated_at"}
# The stored values a command loads, as (table, column): bounded before any is loaded.
_SQLITE_VALUES = (("checkpoints", "checkpoint"), ("writes", "value"), ("store", "value"))
# bytea by octet_length (its size, not read); jsonb by pg_column_size (its stored size).
_POSTGRES_VALUES = (
    ("checkpoints", "pg_column_size(checkpoint)"),
    ("checkpoint_blobs", "octet_length(blob)"),
    ("checkpoint_writes", "octet_length(blob)"),
    ("store", "pg_column_size(value)"),
)


class _ReadCursor(sqlite3.Cursor):
    """A cursor whose SQLite errors (a damaged page met mid-read) are one `InputError` line."""

    def execute(self, sql: str, parameters: Any = (), /) -> _ReadCursor:
        """`sqlite3.Cursor.execute`, its errors said in one line."""
        with _damaged(self.connection):
            return super().execute(sql, parameters)

    def fetchone(self) -> Any:
        """`sqlite3.Cursor.fetchone`, its errors said in one line."""
        with _damaged(self.connection):
            return super().fetchone()

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        """`sqlite3.Cursor.fetchmany`, its errors said in one line."""
        with _damaged(self.connection):
            return super().fetchmany(size)

    def fetchall(self) -> list[Any]:
        """`sqlite3.Cursor.fetchall`, its errors said in one line."""
        with _damaged(self.connection):
            return super().fetchall()

    def __next__(self) -> Any:
        """The next row, its errors said in one line."""
        with _damaged(self.connection):
            return super().__next__()


class _ReadConnection(sqlite3.Connection):
    """A read-only connection to a handed file whose cursors are `_ReadCursor`s."""

    label = ""
    """The file as the user named it, for the error line."""

    def cursor(self, factory: Any = None) -> Any:
        """`sqlite3.Connection.cursor`, a `_ReadCursor` by default."""
        return super().cursor(factory or _ReadCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        """`sqlite3.Connection.execute` through a `_ReadCursor`."""
        return self.cursor().execute(sql, parameters)


@contextlib.contextmanager
def _damaged(conn: sqlite3.Connection) -> Iterator[None]:
    try:
        yield
    except sqlite3.DatabaseError as exc:
        name = getattr(conn, "label", "") or "the database"
        msg = (
            f"{name} cannot be read ({exc}): the file is damaged or is not a checkpoint "
            "database LangGraph wrote; nothing was written"
        )
        raise InputError(msg) from exc


@contextlib.contextmanager
def _read_only_connection(path: Path) -> Iterator[sqlite3.Connection]:
    """`path` opened to read only, nothing created or changed beside it.

    `mode=ro` alone creates -wal and -shm files beside a WAL database that has none, so:
    no -wal file: `immutable=1`, the file read as it is; a -wal and a -shm file (a writer may
    be at work): `mode=ro`, which reads the committed pages in the -wal and creates nothing;
    a -wal without a -shm (left by a crash, or copied without it; no writer is at work, as
    one keeps a -shm): the -wal's committed pages are part of the database, and reading them
    in place would create the -shm, so both files are copied to a private folder and read
    there (`immutable=1` would silently read the database without them).
    """
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    with contextlib.ExitStack() as stack:
        source, flags = path.resolve(), "mode=ro&immutable=1"
        if wal.exists() and shm.exists():
            flags = "mode=ro"
        elif wal.exists():
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lgctx-db-")))
            source, flags = folder / "handed.sqlite", "mode=ro"
            shutil.copyfile(path, source)
            shutil.copyfile(wal, folder / "handed.sqlite-wal")
        conn = sqlite3.connect(
            f"{source.as_uri()}?{flags}",
            uri=True,
            check_same_thread=False,
            factory=_ReadConnection,
        )
        stack.callback(conn.close)
        conn.label = str(path)  # type: ignore[attr-defined]
        yield conn


def _tables(conn: sqlite3.Connection, db: str) -> set[str]:
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.DatabaseError, InputError) as exc:
        cause = exc.__cause__ if isinstance(exc, InputError) else exc
        msg = f"{db} is not a checkpoint database (not even SQLite: {cause})"
        raise InputError(msg) from exc


def _check_columns(db: str, found: dict[str, set[str]], wanted: dict[str, set[str]]) -> None:
    """Refuse a table of a checkpoint table's name that lacks a column LangGraph reads."""
    for table, columns in wanted.items():
        have = found.get(table)
        if have is None:
            msg = f"{db} is not a checkpoint database: it has no {table} table"
            raise InputError(msg)
        if not columns <= have:
            lacking = ", ".join(sorted(columns - have))
            msg = (
                f"{db} is not a checkpoint database: its {table} table is another program's "
                f"(no {lacking} column)"
            )
            raise InputError(msg)


def _of_threads(table: str, threads: list[str] | None, mark: str) -> tuple[str, list[str]]:
    """The WHERE clause keeping `threads`' rows of a table (the store's, by namespace: all)."""
    if threads is None or table == "store":
        return "", []
    return f" WHERE thread_id IN ({', '.join([mark] * len(threads))})", threads


def _check_largest(db: str, largest: int | None, where: str) -> None:
    """Refuse a stored value over the input cap or too large for the free memory.

    A value holds messages the commands count (`frontier --db` counts them as it counts a
    transcript's), so it takes the transcript's factor.
    """
    if largest:
        check_loaded_size(f"{db} ({where})", largest, MESSAGES_MEMORY_FACTOR)


@contextlib.contextmanager
def _read_sqlite(db: str, threads: list[str] | None) -> Iterator[Opened]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    path = Path(db)
    if not path.is_file():
        msg = (
            f"no checkpoint database at {db}; pass a SQLite checkpoint file or a postgresql:// URI"
        )
        raise InputError(msg)
    with _read_only_connection(path) as conn:
        tables = _tables(conn, db)
        if "checkpoints" not in tables:
            msg = f"{db} is not a checkpoint database: it has no checkpoints table"
            raise InputError(msg)
        wanted = dict(_SQLITE_COLUMNS, **({"store": _STORE_COLUMNS} if "store" in tables else {}))
        # The table names come from our own list, never from the file.
        found = {
            table: {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for table in wanted
            if table in tables
        }
        _check_columns(db, found, wanted)
        for table, column in _SQLITE_VALUES:
            if table in tables:  # length() reads a value's size, not the value
                where, params = _of_threads(table, threads, "?")
                sql = f"SELECT max(length({column})) FROM {table}{where}"
                row = conn.execute(sql, params).fetchone()
                _check_largest(db, row[0], f"{table}.{column}")
        saver = SqliteSaver(conn, serde=StrictSerializer())
        saver.is_setup = True  # the tables are there; setup would write
        store = None
        if "store" in tables:
            store = SqliteStore(conn, ttl={"refresh_on_read": False})  # a refresh writes
            store.is_setup = True
        yield Opened(saver, store)


@contextlib.contextmanager
def _read_postgres(uri: str, threads: list[str] | None) -> Iterator[Opened]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
    except ImportError:
        msg = f"a PostgreSQL database needs the postgres extra: {install_extra('postgres')}"
        raise InputError(msg) from None
    try:
        # Every transaction of this session is read-only: the server refuses any write.
        conn = psycopg.Connection.connect(
            uri,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,  # type: ignore[arg-type]
            options="-c default_transaction_read_only=on",
        )
    except Exception as exc:  # cannot connect, no such database, bad URI
        msg = f"cannot read the PostgreSQL database: {shorten(reason_of(exc), 200)}"
        raise InputError(msg) from exc
    with conn:
        found: dict[str, set[str]] = {}
        for row in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public'"
        ):
            found.setdefault(row["table_name"], set()).add(row["column_name"])
        if "checkpoints" not in found:
            msg = (
                "the PostgreSQL database has no checkpoints table: it is not a checkpoint database"
            )
            raise InputError(msg)
        has_store = "store" in found
        wanted = dict(_POSTGRES_COLUMNS, **({"store": _STORE_COLUMNS} if has_store else {}))
        _check_columns("the PostgreSQL database", found, wanted)
        for table, size in _POSTGRES_VALUES:
            if table in found:
                where, params = _of_threads(table, threads, "%s")
                sql = f"SELECT max({size}) AS n FROM {table}{where}"
                found_size = conn.execute(sql, params).fetchone()
                largest = None if found_size is None else found_size["n"]
                _check_largest("the PostgreSQL database", largest, table)
        saver = PostgresSaver(conn, serde=StrictSerializer())
        yield Opened(saver, _PostgresStoreReader(conn) if has_store else None)


@dataclass(frozen=True)
class _StoredItem:
    value: Any


class _PostgresStoreReader:
    """What the commands read of a `PostgresStore`: an item's value by one plain SELECT.

    `PostgresStore.get` refreshes TTLs in the same statement (an UPDATE in a CTE, even when
    told not to refresh), which the read-only session refuses: every archived entry would
    read as unreadable.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def get(self, namespace: tuple[str, ...], key: str) -> _StoredItem | None:
        """The item at `namespace`/`key` (its `value` only), or None."""
        row = self.conn.execute(
            "SELECT value FROM store WHERE prefix = %s AND key = %s",
            (".".join(namespace), key),  # the prefix as PostgresStore writes it
        ).fetchone()
        return None if row is None else _StoredItem(row["value"])

    async def aget(self, namespace: tuple[str, ...], key: str) -> _StoredItem | None:
        """`get` (the connection is a sync one)."""
        return self.get(namespace, key)


class ReadBoth:
    """A read-only `ArchiveBackend`: an entry from `first`, else from `second`.

    A thread's archive is where its memory put it: the archive folder (`demo`, `replay` and a
    `ContextMemory(archive="dir")`) or the store in the checkpoint database (a graph with no
    store of its own). The commands read both, so no command needs to be told which.
    """

    def __init__(self, first: Any, second: Any) -> None:
        self.first = first
        self.second = second

    def put(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        """Refused: the commands that read a thread never write its archive."""
        msg = "this archive is opened to read only"
        raise ArchiveError(msg)

    async def aput(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        """Refused, like `put`."""
        self.put(namespace, key, data)

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        """The entry from the first backend that has it."""
        found: bytes | None = self.first.get(namespace, key)
        return found if found is not None else self.second.get(namespace, key)

    async def aget(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        """Async `get`."""
        found: bytes | None = await self.first.aget(namespace, key)
        return found if found is not None else await self.second.aget(namespace, key)


def thread_archive(archive_dir: Path, opened: Opened | None) -> Any:
    """Where the commands read a thread's archive: `archive_dir`, then the database's store."""
    from langgraph_ctx.archive import DirectoryBackend, StoreBackend

    folder = DirectoryBackend(archive_dir)
    if opened is None or opened.store is None:
        return folder
    return ReadBoth(folder, StoreBackend(opened.store))


class CheckpointView:
    """Just enough of a compiled graph for `ContextMemory`'s thread views, on a checkpointer.

    Lets `inspect`, `view` and `frontier` read a thread written by any graph shape.
    """

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def get_state(self, config: RunnableConfig) -> Any:
        """The newest checkpoint's values (`.values`)."""
        return _Values(checkpoint_values(self.saver.get_tuple(config)))

    def get_state_history(self, config: RunnableConfig) -> Iterator[Any]:
        """Every checkpoint's values, newest first."""
        for item in self.saver.list(config):
            yield _Values(checkpoint_values(item))


def checkpoint_values(item: Any) -> dict[str, Any]:
    """The channel values of a checkpoint read from a database (a `CheckpointTuple` or None).

    The one reading of a checkpoint the commands were handed: its row's type tag can make it
    anything the serializer reads (`null`, `bytes`), and its values anything a crafted or
    edited file holds, so the shape the commands rely on is checked here, once: the checkpoint
    and its channel values are dicts, `messages` a list of messages, `context_ledger` a dict.

    Raises:
        InputError: One line naming the checkpoint and what it holds instead.
    """
    if item is None:
        return {}
    checkpoint = item.checkpoint
    values = checkpoint.get("channel_values") if isinstance(checkpoint, Mapping) else checkpoint
    if values is None and isinstance(checkpoint, Mapping):
        return {}
    if isinstance(values, Mapping):
        problem = _values_problem(values)
        if problem is None:
            return dict(values)
    else:
        problem = f"{type(values).__name__} {shorten(values)} instead of its values (a dict)"
    configurable = (getattr(item, "config", None) or {}).get("configurable") or {}
    msg = (
        f"checkpoint {shorten(configurable.get('checkpoint_id'))} of thread "
        f"{shorten(configurable.get('thread_id'))} holds {problem}: it was not written by a "
        "LangGraph agent, or was edited since; pass a database an agent recorded"
    )
    raise InputError(msg)


@dataclass
class _Values:
    values: dict[str, Any]


def _values_problem(values: Mapping[str, Any]) -> str | None:
    """What is wrong with a checkpoint's values, in words, or None (see `checkpoint_values`)."""
    messages = values.get("messages", [])
    if not isinstance(messages, list):
        return f"messages {type(messages).__name__} {shorten(messages)}, not a list"
    for message in messages:
        if not isinstance(message, BaseMessage):
            return f"a message {type(message).__name__} {shorten(message)}, not a message"
    ledger = values.get("context_ledger")
    if ledger is not None and not isinstance(ledger, Mapping):
        return f"context_ledger {type(ledger).__name__} {shorten(ledger)}, not a dict"
    return None
