"""Archiving into the search index (issue 52): the item and its lines in one transaction.

An entry archived through a `StoreBackend` that keeps a line index is written with its index
rows in the store's own transaction (one commit per entry, as without the index); its lines
are stored exactly as searched, whatever they hold; the item is written as `store.put`
writes it (its TTL too); and when the index part fails, the entry is archived anyway. On
SQLite (sync and async stores) and PostgreSQL (when LANGGRAPH_CTX_TEST_POSTGRES_URI is set).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import ToolMessage
from langgraph.store.base import BaseStore

from langgraph_ctx._effects import arun_plan
from langgraph_ctx.archive import Archive, EntryCache, StoreBackend
from langgraph_ctx.archive import search_archive as scan_search
from langgraph_ctx.archive.line_index import LineIndex
from langgraph_ctx.archive.matching import searchable_entry

HOSTILE_LINES = [
    'say "hi" \\ and \\" then',
    "tab\there, cr\rthere, bell\x07, escape\x1b[31m",
    '{"json": [1, 2, {"x": null}]}',
    "straße ΣΑΣ İstanbul ﬁle",
    "emoji 🙂 and a NUL \x00 byte",
    "a lone surrogate \ud800 here",
    "",
    "   ",
    "' OR 1=1 -- ; DROP TABLE store;",
    "\u2028line separator\u2029",
]


@pytest.fixture
def store(sql_store: BaseStore) -> BaseStore:
    """The set-up SQL store of this mode (`sql_store`)."""
    return sql_store


async def put(archive: Archive, message: ToolMessage, mode: str) -> str:
    if mode == "sync":
        return await asyncio.to_thread(archive.put_message, message)
    return await arun_plan(archive.plan_put_message(message))


async def query(store: BaseStore, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql` (`?` placeholders) on the store's own connection."""
    index = LineIndex(store)
    if index.dialect == "postgres":
        sql = sql.replace("?", "%s")
    conn: Any = store.conn  # type: ignore[attr-defined]
    if index._sql.kind == "sqlite":
        with store.lock:  # type: ignore[attr-defined]
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    if index._sql.kind == "postgres":
        with conn.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
            return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]
    if index._sql.kind == "asqlite":
        async with conn.execute(sql, params) as cursor:
            return [tuple(r) for r in await cursor.fetchall()]
    async with conn.cursor() as acur:
        await acur.execute(sql, params)
        if not acur.description:
            return []
        return [
            tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in await acur.fetchall()
        ]


async def indexed_lines(store: BaseStore, namespace: tuple[str, ...], key: str) -> list[Any]:
    """`(line number, text, folded)` of one entry's rows, in order."""
    number = "l.id & 4294967295" if LineIndex(store).dialect == "sqlite" else "l.line_no"
    on = "l.id >> 32 = e.id" if LineIndex(store).dialect == "sqlite" else "l.entry_id = e.id"
    return await query(
        store,
        f"SELECT {number}, l.text, l.folded FROM lgctx_entries AS e JOIN lgctx_lines AS l"
        f" ON {on} WHERE e.prefix = ? AND e.key = ? ORDER BY 1",
        ".".join(namespace),
        key,
    )


async def test_lines_are_stored_as_searched_whatever_they_hold(store: BaseStore, mode: str) -> None:
    archive = Archive(StoreBackend(store), thread_id=f"w-{uuid.uuid4().hex}")
    message = ToolMessage("\n".join(HOSTILE_LINES), tool_call_id="c1", name="bash")
    ref = await put(archive, message, mode)
    key = ref.rsplit(":", 1)[1]
    rows = await indexed_lines(store, archive.namespace("message"), key)
    entry = searchable_entry(ref, "message", message)
    texts = entry.text.split("\n")
    folded = entry.folded.split("\n")
    held = [t.replace("\x00", "\ufffd").replace("\ud800", "\ufffd") for t in texts]
    held_folded = [f.replace("\x00", "\ufffd").replace("\ud800", "\ufffd") for f in folded]
    assert [n for n, _, _ in rows] == list(range(entry.n_lines))
    assert [t for _, t, _ in rows] == held
    assert [t if f is None else f for _, t, f in rows] == held_folded
    assert [f for _, t, f in rows if f is not None and f == t] == []  # NULL when unchanged


async def test_an_entry_and_its_lines_are_written_together(store: BaseStore, mode: str) -> None:
    """The entry is indexed the moment it is archived, and a worker with the index reads no
    entry to answer."""
    archive = Archive(StoreBackend(store), thread_id=f"t-{uuid.uuid4().hex}")
    refs = [
        await put(
            archive, ToolMessage(f"line one\nflush_batch {n} failed", tool_call_id=f"c{n}"), mode
        )
        for n in range(3)
    ]
    namespace = archive.namespace("message")
    for ref in refs:
        rows = await indexed_lines(store, namespace, ref.rsplit(":", 1)[1])
        assert [t for _, t, _ in rows][1].startswith("flush_batch")
    if mode == "sync":
        restored = await asyncio.to_thread(archive.restore, refs[0])
    else:
        restored = await arun_plan(archive.plan_restore(refs[0]))
    assert restored.content == "line one\nflush_batch 0 failed"


def test_one_commit_per_archived_entry_as_without_the_index(tmp_path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    commits: dict[str, int] = {}
    for path in ("scan", "index"):
        with SqliteStore.from_conn_string(str(tmp_path / f"{path}.db")) as sqlite_store:
            sqlite_store.setup()
            backend = StoreBackend(sqlite_store, index_lines=path == "index")
            if backend.line_index is not None:
                assert backend.line_index.setup()
            archive = Archive(backend, thread_id="t")
            seen: list[str] = []
            sqlite_store.conn.set_trace_callback(seen.append)
            for n in range(5):
                archive.put_message(ToolMessage(f"out {n}\nline", tool_call_id=f"c{n}", id=f"m{n}"))
            sqlite_store.conn.set_trace_callback(None)
            commits[path] = sum(s.strip().upper() == "COMMIT" for s in seen)
            if path == "index":
                assert sqlite_store.conn.execute(
                    "SELECT count(*) FROM lgctx_entries"
                ).fetchone() == (5,)
    assert commits["index"] == commits["scan"] == 10  # the entry, its message id


def test_the_item_is_written_as_put_writes_it_ttl_included(tmp_path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    rows = {}
    for path in ("scan", "index"):
        with SqliteStore.from_conn_string(
            str(tmp_path / f"{path}.db"), ttl={"default_ttl": 30}
        ) as sqlite_store:
            sqlite_store.setup()
            archive = Archive(
                StoreBackend(sqlite_store, index_lines=path == "index"), thread_id="t"
            )
            archive.put_text("some\ntext")
            rows[path] = sqlite_store.conn.execute(
                "SELECT prefix, key, value, ttl_minutes, expires_at IS NOT NULL FROM store"
            ).fetchall()
    assert rows["index"] == rows["scan"]
    assert rows["index"][0][3] == 30 and rows["index"][0][4] == 1


async def test_an_entry_is_archived_when_indexing_it_fails(store: BaseStore, mode: str) -> None:
    backend = StoreBackend(store)
    index = backend.line_index
    assert index is not None
    if mode == "sync":
        assert await asyncio.to_thread(index.setup)
    else:
        assert await index.asetup()
    await query(store, "ALTER TABLE lgctx_lines RENAME TO lgctx_lines_away")
    try:
        archive = Archive(backend, thread_id=f"f-{uuid.uuid4().hex}")
        message = ToolMessage("kept anyway\nflush_batch", tool_call_id="c1", name="bash")
        ref = await put(archive, message, mode)
        if mode == "sync":
            assert (await asyncio.to_thread(archive.restore, ref)).content == message.content
        else:
            assert (await arun_plan(archive.plan_restore(ref))).content == message.content
    finally:
        await query(store, "ALTER TABLE lgctx_lines_away RENAME TO lgctx_lines")
    prefix = ".".join(archive.namespace("message"))
    count = "SELECT count(*) FROM lgctx_entries WHERE prefix = ?"
    assert await query(store, count, prefix) == [(0,)]  # rolled back
    cache = EntryCache()
    if mode == "sync":
        found = await asyncio.to_thread(scan_search, archive, "flush_batch", cache=cache)
    else:
        from langgraph_ctx.archive import asearch_archive

        found = await asearch_archive(archive, "flush_batch", cache=cache)
    assert "flush_batch" in found  # the search indexes what it found missing


def test_a_backend_with_a_put_of_its_own_keeps_it_and_is_indexed_after(tmp_path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    class Logged(StoreBackend):
        puts: ClassVar[list[str]] = []

        def put(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
            self.puts.append(key)
            super().put(namespace, key, data)

    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as sqlite_store:
        sqlite_store.setup()
        backend = Logged(sqlite_store)
        archive = Archive(backend, thread_id="t")
        ref = archive.put_text("its own\nput")
        key = ref.rsplit(":", 1)[1]
        assert key in backend.puts
        rows = asyncio.run(indexed_lines(sqlite_store, archive.namespace("text"), key))
        assert [t for _, t, _ in rows] == ["its own", "put"]


def test_a_backend_with_an_aput_of_its_own_keeps_it_in_both_modes(tmp_path: Path) -> None:
    # `put_indexed` is one plan for both drivers: a subclass overriding either write keeps its
    # own in both (the index's transaction writes as `store.put` does, which it does not).
    from langgraph.store.sqlite import SqliteStore

    class Logged(StoreBackend):
        aputs: ClassVar[list[str]] = []

        async def aput(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
            self.aputs.append(key)
            self.put(namespace, key, data)  # SqliteStore has no async methods of its own

    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as sqlite_store:
        sqlite_store.setup()
        backend = Logged(sqlite_store)
        archive = Archive(backend, thread_id="t")
        ref = asyncio.run(arun_plan(archive.plan_put_text("its own\naput")))
        key = ref.rsplit(":", 1)[1]
        assert backend.aputs == [key]
        rows = asyncio.run(indexed_lines(sqlite_store, archive.namespace("text"), key))
        assert [t for _, t, _ in rows] == ["its own", "aput"]
        sync_ref = archive.put_text("written\nsync")  # its own class: indexed after, not in one
        sync_rows = asyncio.run(
            indexed_lines(sqlite_store, archive.namespace("text"), sync_ref.rsplit(":", 1)[1])
        )
        assert [t for _, t, _ in sync_rows] == ["written", "sync"]
