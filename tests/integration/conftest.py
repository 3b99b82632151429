"""Postgres fixtures: a throwaway database per test session, on the server the env names.

Set `LANGGRAPH_CTX_TEST_POSTGRES_URI` (e.g. `postgresql://postgres@127.0.0.1:5432/postgres`)
to run these tests. When it is set, an unreachable server is an error, never a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
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
