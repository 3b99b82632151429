"""The archive of a graph with a durable checkpointer and no store: next to its checkpoints.

A thread's checkpoints point into its archive, so the archive must last as long as they do.
When the graph has a store, the store holds it (`ContextMemory.archive_for`); when it has
none, `checkpointer_archive` keeps it in the checkpointer's own database, through LangGraph's
own stores:

| checkpointer | the archive |
|---|---|
| `SqliteSaver`, `AsyncSqliteSaver` on a file | a `SqliteStore` on its own connection to the file |
| the same on `:memory:` | an `InMemoryStore`: the checkpoints are in-process too |
| `PostgresSaver`, `ShallowPostgresSaver` | a `PostgresStore` in the same database |
| `AsyncPostgresSaver`, `AsyncShallowPostgresSaver` | an `AsyncPostgresStore` in it |

The store never shares the saver's connection. The saver's lock guards that connection, and
its `list()` holds the lock while the caller iterates, so sharing the lock could deadlock a
caller reading the archive inside such a loop; not sharing it would race the saver on the
connection (a SQLite transaction, a psycopg pipeline, which two threads can not share). So a
SQLite store opens its own connection to the saver's file, and a Postgres store its own to the
saver's database, with the saver connection's parameters (`conn.info`), or shares the saver's
pool, which hands each user a connection of its own. The store is derived once per
checkpointer (a `WeakKeyDictionary`), opened on first use and set up once; an open that fails
fails that archive operation (an `ArchiveError`, which the strategies survive) and is tried
again on the next. A durable checkpointer of any other kind gets a `ConfigError` naming what
to pass instead.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.base.batch import AsyncBatchedBaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_ctx._ids import RefKind
from langgraph_ctx.archive._backends import Namespace, StoreBackend
from langgraph_ctx.archive.line_index import Entry, LineIndex
from langgraph_ctx.errors import ConfigError

# The checkpointers whose database can hold the archive: (module, class) -> kind. A class is
# looked up only in a module already imported: an instance of it implies its module is.
_KINDS: dict[tuple[str, str], str] = {
    ("langgraph.checkpoint.sqlite", "SqliteSaver"): "sqlite",
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver"): "async sqlite",
    ("langgraph.checkpoint.postgres", "PostgresSaver"): "postgres",
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver"): "async postgres",
    ("langgraph.checkpoint.postgres.shallow", "ShallowPostgresSaver"): "postgres",
    ("langgraph.checkpoint.postgres.shallow", "AsyncShallowPostgresSaver"): "async postgres",
}

_DERIVED: weakref.WeakKeyDictionary[BaseCheckpointSaver[Any], CheckpointerArchive] = (
    weakref.WeakKeyDictionary()
)
_DERIVED_LOCK = threading.Lock()


def checkpointer_archive(checkpointer: Any) -> CheckpointerArchive | None:
    """The archive kept in `checkpointer`'s database; None when its checkpoints are in-process.

    None for no checkpointer and for an `InMemorySaver` (the caller keeps an in-process
    archive, as short-lived as the checkpoints). The same object for the same checkpointer,
    however many memories and graphs share it.

    Raises:
        ConfigError: A durable checkpointer of a kind whose database the archive cannot
            share (say what to pass instead).
    """
    if not isinstance(checkpointer, BaseCheckpointSaver) or isinstance(checkpointer, InMemorySaver):
        return None
    kind = _kind(checkpointer)
    if kind is None:
        raise ConfigError(no_durable_archive(checkpointer))
    with _DERIVED_LOCK:
        archive = _DERIVED.get(checkpointer)
        if archive is None:
            archive = _DERIVED[checkpointer] = _derive(kind, checkpointer)
    return archive


def no_durable_archive(checkpointer: Any) -> str:
    """What to pass when the archive cannot live next to `checkpointer`'s checkpoints."""
    return (
        f"the graph's checkpointer ({type(checkpointer).__name__}) outlives this process, the "
        "graph has no store and ContextMemory got no archive=, and the archive can not be kept "
        "in that checkpointer's own database (as it is for SqliteSaver and PostgresSaver); an "
        "in-process archive would be lost on restart while the checkpoints still point into "
        "it. Give the graph a durable store (create_agent(..., store=store) or "
        "builder.compile(checkpointer=..., store=store), e.g. a SqliteStore or PostgresStore), "
        "or pass ContextMemory(archive='path/to/archive-dir') or ContextMemory(archive=store)"
    )


def _kind(checkpointer: BaseCheckpointSaver[Any]) -> str | None:
    for (module, name), kind in _KINDS.items():
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(checkpointer, cls):
            return kind
    return None


def _derive(kind: str, checkpointer: Any) -> CheckpointerArchive:
    # The openers hold the saver's connection, never the saver: the cache's value must not
    # keep its key alive.
    conn = checkpointer.conn
    if kind == "sqlite":
        return CheckpointerArchive(open_store=lambda: _sqlite_store(_sqlite_file(conn)))
    if kind == "async sqlite":

        async def aopen_sqlite() -> BaseStore:
            async with conn.execute("PRAGMA database_list") as cursor:
                rows = await cursor.fetchall()
            return await asyncio.to_thread(_sqlite_store, _main_file(rows))

        return CheckpointerArchive(aopen_store=aopen_sqlite, loop=checkpointer.loop)
    if kind == "postgres":
        return CheckpointerArchive(open_store=lambda: _postgres_store(conn))
    return CheckpointerArchive(aopen_store=lambda: _apostgres_store(conn), loop=checkpointer.loop)


def _sqlite_file(conn: sqlite3.Connection) -> str:
    # Read without the saver's lock (see the module): a read of the connection's own
    # metadata, which opens no transaction.
    return _main_file(conn.execute("PRAGMA database_list").fetchall())


def _main_file(rows: Any) -> str:
    """The file of the `main` database in `PRAGMA database_list` rows; "" when in memory."""
    return next((str(file or "") for _, name, file in rows if name == "main"), "")


def _sqlite_store(file: str) -> BaseStore:
    """A set-up `SqliteStore` on a connection of its own to `file`; in memory for ""."""
    if not file:
        return InMemoryStore()
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    weakref.finalize(store, conn.close)  # when the store goes (with its checkpointer)
    store.setup()
    return store


def _postgres_store(conn: Any) -> BaseStore:
    """A set-up `PostgresStore` on the saver's pool, or on a connection of its own."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    if not isinstance(conn, psycopg.Connection):  # a pool
        store = PostgresStore(conn)
    else:
        own = psycopg.Connection.connect(_conninfo(conn), **_postgres_options())
        store = PostgresStore(own)
        weakref.finalize(store, own.close)
    store.setup()
    return store


async def _apostgres_store(conn: Any) -> BaseStore:
    """A set-up `AsyncPostgresStore` on the saver's pool, or on a connection of its own."""
    import psycopg
    from langgraph.store.postgres.aio import AsyncPostgresStore

    if not isinstance(conn, psycopg.AsyncConnection):  # a pool
        store = AsyncPostgresStore(conn)
    else:
        own = await psycopg.AsyncConnection.connect(_conninfo(conn), **_postgres_options())
        store = AsyncPostgresStore(own)
        weakref.finalize(store, own.pgconn.finish)  # closes the socket; no loop needed
    await store.setup()
    return store


def _conninfo(conn: Any) -> str:
    """The parameters the saver's connection was opened with (`dsn` leaves out the password)."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(conn.info.dsn, password=conn.info.password or None)


def _postgres_options() -> dict[str, Any]:
    """What LangGraph's Postgres savers and stores open their connections with."""
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


class CheckpointerArchive:
    """An `ArchiveBackend` in a durable checkpointer's database (see the module).

    The store is opened on first use: `open_store` for a sync checkpointer, `aopen_store` on
    the event loop of an async one (`loop`). A sync store serves the async methods from a
    worker thread; an async store serves the sync methods from other threads, as LangGraph's
    async savers do, and refuses them on its event loop's own thread.

    Args:
        open_store: Opens and sets up the store (a sync checkpointer).
        aopen_store: Opens and sets up the store on `loop` (an async checkpointer).
        loop: The async checkpointer's event loop.
    """

    def __init__(
        self,
        *,
        open_store: Callable[[], BaseStore] | None = None,
        aopen_store: Callable[[], Awaitable[BaseStore]] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._open, self._aopen, self._loop = open_store, aopen_store, loop
        self._backend: StoreBackend | None = None
        self._native = False  # the store has async methods of its own (AsyncPostgresStore)
        self._lock = threading.Lock()
        self._alock = asyncio.Lock()

    @property
    def store(self) -> BaseStore | None:
        """The store, once opened."""
        return None if self._backend is None else self._backend.store

    @property
    def line_index(self) -> LineIndex | None:
        """The search index in the store's database, once the store is open."""
        return None if self._backend is None else self._backend.line_index

    def put(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Store `data` under `namespace`/`key`."""
        self._ready().put(namespace, key, data)

    def get(self, namespace: Namespace, key: str) -> bytes | None:
        """The bytes under `namespace`/`key`, or `None`."""
        return self._ready().get(namespace, key)

    async def aput(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Async `put`."""
        await self._acall("put", namespace, key, data)

    def put_indexed(
        self, namespace: Namespace, key: str, data: bytes, indexed: tuple[str, RefKind, Entry]
    ) -> None:
        """`put`, the entry indexed for search in the same transaction (`StoreBackend`'s)."""
        self._ready().put_indexed(namespace, key, data, indexed)

    async def aput_indexed(
        self, namespace: Namespace, key: str, data: bytes, indexed: tuple[str, RefKind, Entry]
    ) -> None:
        """Async `put_indexed`."""
        await self._acall("put_indexed", namespace, key, data, indexed)

    async def aget(self, namespace: Namespace, key: str) -> bytes | None:
        """Async `get`."""
        found: bytes | None = await self._acall("get", namespace, key)
        return found

    def keys(self, namespace: Namespace) -> list[str]:
        """The keys under `namespace`, newest first (searching the archive lists them)."""
        return self._ready().keys(namespace)

    async def akeys(self, namespace: Namespace) -> list[str]:
        """Async `keys`."""
        keys: list[str] = await self._acall("keys", namespace)
        return keys

    async def _acall(self, name: str, *args: Any) -> Any:
        """The backend's `a<name>(*args)`, or its `<name>` from a worker thread.

        The async method where the store has async methods of its own (`AsyncPostgresStore`);
        SqliteStore has none, so its sync method runs off the event loop.
        """
        backend = await self._aready()
        if self._native:
            return await getattr(backend, "a" + name)(*args)
        return await asyncio.to_thread(getattr(backend, name), *args)

    def _ready(self) -> StoreBackend:
        if self._backend is not None:
            return self._backend
        if self._open is None:  # an async checkpointer: open on its loop
            return self._on_loop(self._aready())
        with self._lock:
            if self._backend is None:
                self._backend = StoreBackend(self._open())
        return self._backend

    async def _aready(self) -> StoreBackend:
        if self._backend is not None:
            return self._backend
        if self._aopen is None:
            return await asyncio.to_thread(self._ready)
        async with self._alock:
            if self._backend is None:
                store = await self._aopen()
                self._native = isinstance(store, AsyncBatchedBaseStore)
                self._backend = StoreBackend(store)
        return self._backend

    def _on_loop(self, coroutine: Coroutine[Any, Any, StoreBackend]) -> StoreBackend:
        """Run `coroutine` on the async checkpointer's loop, from another thread."""
        assert self._loop is not None  # set for every async checkpointer
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coroutine.close()
            msg = (
                "the archive of an async checkpointer is opened on its event loop; from that "
                "loop use the async interface (graph.ainvoke, memory.aget_full_history, ...)"
            )
            raise asyncio.InvalidStateError(msg)
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()
