"""Checkpoint databases the commands open: read-only ones truly read-only, all read as data.

`read_checkpoints` is what `inspect` and `frontier` use on a database they are handed: a
SQLite file through a `mode=ro` URI (with `immutable=1` when no `-wal` file says a writer may
be at work, so SQLite creates no `-wal` or `-shm` file either), never set up, never switched
to WAL; a PostgreSQL URI in read-only transactions. `write_checkpoints` is what `demo` and
`replay` record into: set up on a new or empty file, or on a checkpoint database, and refused
on a SQLite file that holds something else (it is not ours to add tables to).

Both read checkpoints with `StrictSerializer` (see `langgraph_ctx.graph.serde`): a file can
name a type to construct, and nothing a file names is imported or called unless a LangGraph
agent's state holds that type.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_ctx.errors import ArchiveError, InputError, shorten
from langgraph_ctx.graph.serde import StrictSerializer

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
    graph had no other (None when the database has none)."""


def is_postgres(db: str | Path) -> bool:
    """Whether `db` is a PostgreSQL URI rather than a SQLite file."""
    return str(db).startswith(("postgresql://", "postgres://"))


@contextlib.contextmanager
def read_checkpoints(db: str | Path) -> Iterator[Opened]:
    """Open `db` (a SQLite file or a PostgreSQL URI) to read only; nothing is created or written.

    Raises:
        InputError: No such file, not a SQLite database, no checkpoints table, no connection.
    """
    opener = _read_postgres if is_postgres(db) else _read_sqlite
    with opener(str(db)) as opened:
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
        with contextlib.closing(_read_only_connection(path)) as probe:
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
    except Exception as exc:  # sqlite3 or psycopg: no such table, a damaged file
        msg = f"not a checkpoint database: {shorten(str(exc))}"
        raise InputError(msg) from exc


def _read_only_connection(path: Path) -> sqlite3.Connection:
    # `mode=ro` alone still creates -wal and -shm files beside a WAL database when there are
    # none; `immutable=1` reads the file as it is. With a -wal file present a writer may be at
    # work (or left committed pages there), so only `mode=ro` reads them.
    wal = path.with_name(path.name + "-wal")
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    return sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True, check_same_thread=False)


def _tables(conn: sqlite3.Connection, db: str) -> set[str]:
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        msg = f"{db} is not a checkpoint database (not even SQLite: {exc})"
        raise InputError(msg) from exc


@contextlib.contextmanager
def _read_sqlite(db: str) -> Iterator[Opened]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    path = Path(db)
    if not path.is_file():
        msg = (
            f"no checkpoint database at {db}; pass a SQLite checkpoint file or a postgresql:// URI"
        )
        raise InputError(msg)
    conn = _read_only_connection(path)
    try:
        tables = _tables(conn, db)
        if "checkpoints" not in tables:
            msg = f"{db} is not a checkpoint database: it has no checkpoints table"
            raise InputError(msg)
        saver = SqliteSaver(conn, serde=StrictSerializer())
        saver.is_setup = True  # the tables are there; setup would write
        store = None
        if "store" in tables:
            store = SqliteStore(conn)
            store.is_setup = True
        yield Opened(saver, store)
    finally:
        conn.close()


@contextlib.contextmanager
def _read_postgres(uri: str) -> Iterator[Opened]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row
    except ImportError:
        msg = (
            'a PostgreSQL database needs the postgres extra: pip install "langgraph-ctx[postgres]"'
        )
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
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        msg = f"cannot read the PostgreSQL database: {shorten(first, 200)}"
        raise InputError(msg) from exc
    with conn:
        tables = {
            r["tablename"]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
        if "checkpoints" not in tables:
            msg = (
                "the PostgreSQL database has no checkpoints table: it is not a checkpoint database"
            )
            raise InputError(msg)
        saver = PostgresSaver(conn, serde=StrictSerializer())
        yield Opened(saver, PostgresStore(conn) if "store" in tables else None)


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
