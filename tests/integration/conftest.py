"""Postgres fixtures: a throwaway database per test session, on the server the env names.

Set `LANGGRAPH_CTX_TEST_POSTGRES_URI` (e.g. `postgresql://postgres@127.0.0.1:5432/postgres`)
to run these tests. When it is set, an unreachable server is an error, never a skip.

The `checkpointer` / `checkpointer_backend` fixtures (end of file) run a test over an
in-memory saver, a SQLite file and a fresh Postgres database (the last only with the env var).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.postgres import PostgresStore
from psycopg import sql
from psycopg.conninfo import make_conninfo

POSTGRES_ENV = "LANGGRAPH_CTX_TEST_POSTGRES_URI"


@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    """Connection string of a fresh database, dropped at the end of the session."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"set {POSTGRES_ENV} to run the Postgres tests")
    name = f"lgctx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(base, dbname=name)
    finally:
        with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def postgres_store(postgres_uri: str) -> Iterator[PostgresStore]:
    """A set-up `PostgresStore` on the session's throwaway database."""
    with PostgresStore.from_conn_string(postgres_uri) as store:
        store.setup()
        yield store


# --- checkpointers for the end-to-end graph tests --------------------------------------------


@contextmanager
def fresh_database(base: str) -> Iterator[str]:
    """A new, empty database on the server `base` names; dropped on exit.

    An unreachable server raises (psycopg's `OperationalError`): set the env var only where a
    server runs.
    """
    name = f"lgctx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(base, dbname=name)
    finally:
        with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


@dataclass
class CheckpointerBackend:
    """Opens checkpointers on one storage; each `open()` is a new object (a "restart").

    `persistent` is False for the in-memory saver, where every `open()` hands back the one
    instance (there is nothing to reconnect to).
    """

    name: str
    target: str | None = None
    """The SQLite file or the Postgres connection string."""
    _memory: InMemorySaver | None = None

    @property
    def persistent(self) -> bool:
        return self.name != "memory"

    @contextmanager
    def open(self) -> Iterator[BaseCheckpointSaver[Any]]:
        if self.name == "memory":
            assert self._memory is not None
            yield self._memory
        elif self.name == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            with SqliteSaver.from_conn_string(str(self.target)) as saver:
                yield saver
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            with PostgresSaver.from_conn_string(str(self.target)) as saver:
                saver.setup()
                yield saver

    @asynccontextmanager
    async def aopen(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        if self.name == "memory":
            assert self._memory is not None
            yield self._memory
        elif self.name == "sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async with AsyncSqliteSaver.from_conn_string(str(self.target)) as saver:
                yield saver
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            async with AsyncPostgresSaver.from_conn_string(str(self.target)) as saver:
                await saver.setup()
                yield saver


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def checkpointer_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[CheckpointerBackend]:
    """A checkpointer storage: in memory, a SQLite file, or a fresh Postgres database.

    The Postgres param is skipped when `LANGGRAPH_CTX_TEST_POSTGRES_URI` is unset and fails
    when it is set but the server cannot be reached.
    """
    if request.param == "memory":
        yield CheckpointerBackend("memory", _memory=InMemorySaver())
    elif request.param == "sqlite":
        yield CheckpointerBackend("sqlite", str(tmp_path / "checkpoints.sqlite"))
    else:
        base = os.environ.get(POSTGRES_ENV)
        if not base:
            pytest.skip(f"set {POSTGRES_ENV} to run the Postgres checkpointer")
        with fresh_database(base) as uri:
            yield CheckpointerBackend("postgres", uri)


@pytest.fixture
def checkpointer(checkpointer_backend: CheckpointerBackend) -> Iterator[BaseCheckpointSaver[Any]]:
    """A sync checkpointer over each backend (see `checkpointer_backend`)."""
    with checkpointer_backend.open() as saver:
        yield saver


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_store(
    request: pytest.FixtureRequest, tmp_path: Path, mode: str
) -> AsyncIterator[BaseStore]:
    """A set-up SQLite or PostgreSQL store: sync for the sync mode, async for the async one."""
    if request.param == "sqlite":
        if mode == "sync":
            from langgraph.store.sqlite import SqliteStore

            with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as sync_store:
                sync_store.setup()
                yield sync_store
        else:
            from langgraph.store.sqlite.aio import AsyncSqliteStore

            async with AsyncSqliteStore.from_conn_string(str(tmp_path / "s.db")) as astore:
                await astore.setup()
                yield astore
        return
    uri = request.getfixturevalue("postgres_uri")
    if mode == "sync":
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(uri) as pg:
            pg.setup()
            yield pg
    else:
        from langgraph.store.postgres.aio import AsyncPostgresStore

        async with AsyncPostgresStore.from_conn_string(uri) as apg:
            await apg.setup()
            yield apg
