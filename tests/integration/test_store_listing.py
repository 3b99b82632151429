"""Listing a namespace's keys from a SQL store's own table (`sql_store`), on every SQL store.

A first listing on PostgreSQL comes in one statement, the keys joined by one separator; the
listing must still be the store's keys, newest write first, whatever the keys hold (the
separator, commas, non-ASCII), and the archive must keep only its digests as references.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid

import pytest
from langgraph.store.base import BaseStore

from langgraph_ctx.archive import Archive, StoreBackend
from tests.conftest import drive

ODD_KEYS = ["plain", "with\x1fseparator", "a,b,c", "ключ", "x" * 64, "A" * 64]
"""Keys a store may hold beside an archive's digests: none of them is one."""


def _digest(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


async def _write(store: BaseStore, namespace: tuple[str, ...], keys: list[str], mode: str) -> None:
    for key in keys:  # one write each, in order: the listing gives them newest first
        if mode == "sync":
            store.put(namespace, key, {"v": key}, index=False)
        else:
            await store.aput(namespace, key, {"v": key}, index=False)


async def _keys(store: BaseStore, namespace: tuple[str, ...], mode: str) -> list[str]:
    backend = StoreBackend(store)
    return backend.keys(namespace) if mode == "sync" else await backend.akeys(namespace)


async def test_keys_holding_the_separator_are_listed_whole_and_in_order(
    sql_store: BaseStore, mode: str
) -> None:
    namespace = ("langgraph_ctx", f"t-{uuid.uuid4().hex}", "message")
    keys = [_digest(0), *ODD_KEYS, _digest(1)]
    await _write(sql_store, namespace, keys, mode)
    assert await _keys(sql_store, namespace, mode) == keys[::-1]
    await _write(sql_store, namespace, ["late"], mode)  # the kept listing's version moves
    assert await _keys(sql_store, namespace, mode) == ["late", *keys[::-1]]


async def test_a_long_listing_of_digests_only(sql_store: BaseStore, mode: str) -> None:
    namespace = ("langgraph_ctx", f"t-{uuid.uuid4().hex}", "message")
    keys = [_digest(n) for n in range(300)]
    await _write(sql_store, namespace, keys, mode)
    assert await _keys(sql_store, namespace, mode) == keys[::-1]
    assert await _keys(sql_store, namespace, mode) == keys[::-1]  # the kept listing


async def test_only_digests_become_references(sql_store: BaseStore, mode: str) -> None:
    thread = f"t-{uuid.uuid4().hex}"
    archive = Archive(sql_store, thread_id=thread)
    digests = [_digest(n) for n in range(3)]
    namespace = archive.namespace("message")
    await _write(sql_store, namespace, digests, mode)
    refs = await drive(archive.plan_refs("message"), mode=mode)
    assert [ref.rsplit(":", 1)[1] for ref in refs] == digests[::-1]  # the fast check
    await _write(sql_store, namespace, ODD_KEYS, mode)
    refs = await drive(archive.plan_refs("message"), mode=mode)
    assert [ref.rsplit(":", 1)[1] for ref in refs] == digests[::-1]  # key by key


SEARCH_ON_POSTGRES = """
import sys
from langchain_core.messages import ToolMessage
from langgraph.store.postgres import PostgresStore
from langgraph_ctx.archive import Archive, search_archive

with PostgresStore.from_conn_string(sys.argv[1]) as store:
    store.setup()
    archive = Archive(store, thread_id="alone")
    archive.put_message(ToolMessage("ok\\nERROR disk full", tool_call_id="c1", name="df"))
    assert "ERROR disk full" in search_archive(archive, "disk full")
print(sorted(m for m in ("langgraph.store.sqlite", "numpy") if m in sys.modules))
"""


@pytest.mark.postgres
def test_a_postgres_deployment_does_not_load_the_sqlite_store(postgres_uri: str) -> None:
    # SQLite's store loads numpy (sqlite_vec), whose thread pool took processor time from
    # the database in a first search; telling the store's kind must not import it.
    done = subprocess.run(
        [sys.executable, "-c", SEARCH_ON_POSTGRES, postgres_uri],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
