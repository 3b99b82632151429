"""Search served by the database (issue 52): the line index answers as the scan does.

On SQLite (sync and async stores) and on PostgreSQL (when LANGGRAPH_CTX_TEST_POSTGRES_URI is
set; a run that sets it and cannot reach the server fails), the same archive is searched
through a backend that indexes (`StoreBackend(store)`) and one that does not
(`StoreBackend(store, index_lines=False)`, today's scan): the answers must be the same text,
hit for hit, and a worker that never saw the thread must read no entry when all are indexed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

import langgraph_ctx.archive.search as search_module
from langgraph_ctx._effects import arun_plan
from langgraph_ctx.archive import Archive, EntryCache, StoreBackend, asearch_archive, ranking
from langgraph_ctx.archive import search_archive as scan_search
from langgraph_ctx.archive.index_search import line_index_of, required_literal
from langgraph_ctx.archive.line_index import LineIndex
from langgraph_ctx.archive.matching import parse_query
from tests.unit.test_search_ranking import PIECES, WORDS

QUERIES = [
    *WORDS,
    "flush batch",
    '"flush batch"',
    '"flush" batch',
    "ss",
    "x",
    "straße port",
    "ERROR flush_batch",
]
HOSTILE = ["%", "_", "\\", '"', "' OR 1=1 --", "NEAR(", "*", "^", "AND", 'a" OR "b', "x*", "ß%_"]


class Counting(StoreBackend):
    """A `StoreBackend` that counts the entries it reads."""

    gets = 0

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        self.gets += 1
        return super().get(namespace, key)

    async def aget(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        self.gets += 1
        return await super().aget(namespace, key)


@pytest.fixture
def store(sql_store: BaseStore) -> BaseStore:
    """The set-up SQL store of this mode (`sql_store`)."""
    return sql_store


async def search_both(
    indexed: Archive, plain: Archive, query: str, mode: str, **kw: Any
) -> tuple[str, str]:
    """The answer through the index and through today's scan, each with a fresh cache."""
    kw = {"limit": 30, "max_chars": 200_000, **kw}
    if mode == "sync":
        fast = await asyncio.to_thread(scan_search, indexed, query, cache=EntryCache(), **kw)
        slow = await asyncio.to_thread(scan_search, plain, query, cache=EntryCache(), **kw)
    else:
        fast = await asearch_archive(indexed, query, cache=EntryCache(), **kw)
        slow = await asearch_archive(plain, query, cache=EntryCache(), **kw)
    return fast, slow


async def archive_all(
    archive: Archive, items: Sequence[BaseMessage | list[BaseMessage]], mode: str
) -> None:
    for item in items:
        if isinstance(item, list):
            if mode == "sync":
                await asyncio.to_thread(archive.put_messages, item)
            else:
                await arun_plan(archive.plan_put_messages(item))
        elif mode == "sync":
            await asyncio.to_thread(archive.put_message, item)
        else:
            await arun_plan(archive.plan_put_message(item))


def conversation(texts: list[str], dumps: list[list[str]]) -> list[BaseMessage | list[BaseMessage]]:
    items: list[BaseMessage | list[BaseMessage]] = []
    for n, text in enumerate(texts):
        items.append(
            ToolMessage(text, tool_call_id=f"c{n}", name="bash") if n % 3 else AIMessage(text)
        )
    for n, parts in enumerate(dumps):
        items.append(
            [ToolMessage(p, tool_call_id=f"d{n}-{i}", name="ls") for i, p in enumerate(parts)]
        )
    return items


def archives(store: BaseStore, thread: str) -> tuple[Archive, Archive, Counting]:
    backend = Counting(store)
    return (
        Archive(backend, thread_id=thread),
        Archive(StoreBackend(store, index_lines=False), thread_id=thread),
        backend,
    )


LOG = "\n".join(
    [
        "$ pytest -x",
        "def flush_batch(jobs):",
        "app/flush.py:10: ERROR flush batch failed on port 5432",
        "Straße STRASSE straße",
        "100% done_ok \\ back",
        'quote " here',
        "NEAR(a b) x* ^y AND z",
        "' OR 1=1 --",
    ]
)


async def test_the_index_answers_as_the_scan_and_reads_no_entry(
    store: BaseStore, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "langgraph_ctx.archive")
    thread = f"ix-{uuid.uuid4().hex}"
    indexed, plain, backend = archives(store, thread)
    other, _, _ = archives(store, f"{thread}-other")
    items: list[BaseMessage | list[BaseMessage]] = [
        ToolMessage(LOG + f"\nrun {n}", tool_call_id=f"c{n}", name="bash", id=f"m{n}")
        for n in range(40)
    ]
    items += [AIMessage("the flush batch failed, I will retry", id="a1")]
    items += [[ToolMessage(LOG, tool_call_id="d1", name="ls"), AIMessage("ok flush")]]
    await archive_all(indexed, items, mode)
    await archive_all(
        other, [ToolMessage("ERROR flush batch of another thread", tool_call_id="z")], mode
    )
    assert line_index_of(indexed) is not None
    for query in [*QUERIES, *HOSTILE]:
        backend.gets = 0
        fast, slow = await search_both(indexed, plain, query, mode)
        assert fast == slow, query
        assert backend.gets == 0, query  # every line came from the database
        assert "another thread" not in fast
    for kw in ({"kind": "tool"}, {"kind": "summarized"}, {"tool": "ls"}, {"limit": 3}):
        fast, slow = await search_both(indexed, plain, "flush", mode, **kw)
        assert fast == slow, kw
    assert not [r for r in caplog.records if "index" in r.getMessage()]


async def test_text_the_database_cannot_hold_answers_as_the_scan(
    store: BaseStore, mode: str
) -> None:
    # The index stores NUL and lone surrogates as U+FFFD (PostgreSQL refuses them): a query
    # holding any of the three must not be answered from the index's altered lines.
    indexed, plain, _ = archives(store, f"nul-{uuid.uuid4().hex}")
    text = "x\x00y NUL line\nx\ufffdy replacement line\nlone \ud800 surrogate\nplain"
    await archive_all(indexed, [ToolMessage(text, tool_call_id="c1", name="bash")], mode)
    for query in ["x\x00y", "x\ufffdy", "\ufffd", "\ud800", "line"]:
        fast, slow = await search_both(indexed, plain, query, mode)
        assert fast == slow, repr(query)


PATTERNS = [
    r"flush\s+batch",
    r"port \d{4}",
    r"ERROR flush",
    r"error FLUSH",
    r"STRASSE|nothing",
    r"def flush_\w+\(",
    r"\\ back",
    r"(?:flush)+ batch",
    r"straße",
    r"[fF]lush batch",
]


async def test_a_regex_query_with_a_literal_is_served_by_the_index(
    store: BaseStore, mode: str
) -> None:
    """A pattern every match of which holds a literal asks the index for the lines holding
    it and matches those; one without (or read differently here) scans. The same answers."""
    indexed, plain, backend = archives(store, f"rx-{uuid.uuid4().hex}")
    items = [ToolMessage(f"{LOG}\nrun {n}", tool_call_id=f"c{n}", name="bash") for n in range(3)]
    await archive_all(indexed, [*items, AIMessage("ERROR FLUSH of a turn")], mode)
    for pattern in PATTERNS:
        backend.gets = 0
        fast, slow = await search_both(indexed, plain, pattern, mode, regex=True)
        assert fast == slow, pattern
        served = required_literal(pattern) is not None
        assert (backend.gets == 0) == served, pattern
    fast, slow = await search_both(indexed, plain, r"flush\s+batch", mode, regex=True, kind="tool")
    assert fast == slow and "flush batch failed" in fast


def test_the_literal_a_pattern_requires() -> None:
    assert required_literal(r"port \d{5}\b") == "port "
    assert required_literal(r"Traceback \(most recent") == "traceback (most recent"
    assert required_literal(r"abcd?e") == "abc"
    assert required_literal(r"foo+bar") == "bar"
    assert required_literal(r"FIXME") == "xme"
    assert required_literal(r"(a|b)cdef") == "cdef"
    # what the `regex` module reads otherwise, or no literal sure in every match: scan
    for pattern in [
        r"abc|def",
        r"(?i)flush",
        r"[[:alpha:]]xyz",
        r"(?:port){e<=1}",
        r"\x41bcd",
        r"ab",
        r"FIXIT",  # `I` matches the dotless i case-insensitively
        r"\d+\s+\w+",
    ]:
        assert required_literal(pattern) is None, pattern


async def test_a_worker_sees_what_another_wrote_and_deleted_since_its_last_search(
    store: BaseStore, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """What a process keeps of the index (entries' line counts) is checked against the
    database at each search: entries another worker archived or deleted since are seen."""
    thread = f"ver-{uuid.uuid4().hex}"
    indexed, plain, backend = archives(store, thread)
    await archive_all(indexed, [ToolMessage("flush one", tool_call_id="c1", name="sh")], mode)
    fast, slow = await search_both(indexed, plain, "flush", mode)
    assert fast == slow and "1 matching line" in fast
    async with _other_worker(store, tmp_path, request) as other:
        written = StoreBackend(other)
        writer = Archive(written, thread_id=thread)
        for n in range(2, 5):
            await asyncio.to_thread(
                writer.put_message, ToolMessage(f"flush {n}", tool_call_id=f"c{n}", name="sh")
            )
        fast, slow = await search_both(indexed, plain, "flush", mode)
        assert fast == slow and "4 matching lines" in fast and backend.gets == 0
        namespace = indexed.namespace("message")
        newest = (await asyncio.to_thread(written.keys, namespace))[0]
        await asyncio.to_thread(other.delete, namespace, newest)
        five = ToolMessage("flush five", tool_call_id="c5", name="sh")
        await asyncio.to_thread(writer.put_message, five)
        fast, slow = await search_both(indexed, plain, "flush", mode)
        assert fast == slow and "4 matching lines" in fast and "flush five" in fast
        assert backend.gets == 0


async def test_a_kept_key_listing_follows_rewrites_and_deletes_by_another_worker(
    store: BaseStore, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A process keeps each thread's key listing behind the store's version of it: another
    worker's re-write (the entry moves first), a delete of the newest entry followed by a
    write (SQLite may give the new row the deleted one's rowid), and a write are seen, and
    the hits come in the store's order (newest write first among equals)."""
    thread = f"order-{uuid.uuid4().hex}"
    indexed, plain, _ = archives(store, thread)
    outputs = {n: ToolMessage(f"flush {n}", tool_call_id=f"c{n}", name="sh") for n in range(5)}
    await archive_all(indexed, [outputs[1], outputs[2], outputs[3]], mode)

    async def order() -> list[int]:
        fast, slow = await search_both(indexed, plain, "flush", mode)
        assert fast == slow
        found = [line.split("flush ")[1] for line in fast.splitlines() if line.startswith(">")]
        return [int(n) for n in found]

    assert await order() == [3, 2, 1]
    async with _other_worker(store, tmp_path, request) as other:
        writer = Archive(StoreBackend(other), thread_id=thread)
        await asyncio.to_thread(writer.put_message, outputs[1])
        assert await order() == [1, 3, 2]
        namespace = indexed.namespace("message")
        newest = (await asyncio.to_thread(StoreBackend(other).keys, namespace))[0]
        await asyncio.to_thread(other.delete, namespace, newest)
        await asyncio.to_thread(writer.put_message, outputs[4])
        assert await order() == [4, 3, 2]
        await asyncio.to_thread(writer.put_message, outputs[2])
        assert await order() == [2, 4, 3]


@contextlib.asynccontextmanager
async def _other_worker(
    store: BaseStore, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[BaseStore]:
    """A sync store of its own on the same database, as another worker process opens it."""
    index = LineIndex(store)
    if index.dialect == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        path = next(tmp_path.glob("s.db"))
        with SqliteStore.from_conn_string(str(path)) as other:
            yield other
        return
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(request.getfixturevalue("postgres_uri")) as pg:
        yield pg


async def test_an_archive_written_before_the_index_is_backfilled(
    store: BaseStore, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries archived without the index are read the old way, within the reading time,
    and indexed as they are read: the next searches resume where the last one stopped."""
    thread = f"bf-{uuid.uuid4().hex}"
    indexed, plain, backend = archives(store, thread)
    items = [ToolMessage(f"{LOG}\nentry {n}", tool_call_id=f"c{n}", name="bash") for n in range(12)]
    await archive_all(plain, items, mode)  # no index
    kw: dict[str, Any] = {"limit": 30, "max_chars": 200_000, "cache": EntryCache()}
    if mode == "sync":
        expected = await asyncio.to_thread(scan_search, plain, "flush batch", **kw)
    else:
        expected = await asearch_archive(plain, "flush batch", **kw)
    slow_get = backend.get
    slow_aget = backend.aget

    def get(namespace: tuple[str, ...], key: str) -> bytes | None:
        import time

        time.sleep(0.03)
        return slow_get(namespace, key)

    async def aget(namespace: tuple[str, ...], key: str) -> bytes | None:
        await asyncio.sleep(0.03)
        return await slow_aget(namespace, key)

    monkeypatch.setattr(backend, "get", get)
    monkeypatch.setattr(backend, "aget", aget)
    monkeypatch.setattr(search_module, "READ_SECONDS", 0.1)
    answers = []
    for _ in range(12):
        answers.append((await search_both(indexed, plain, "flush batch", mode))[0])
        if "PARTIAL" not in answers[-1]:
            break
    assert "PARTIAL" in answers[0] and len(answers) > 2  # a few entries per search
    assert answers[-1] == expected
    backend.gets = 0
    assert (await search_both(indexed, plain, "flush batch", mode))[0] == expected
    assert backend.gets == 0


async def test_a_deleted_or_expired_entry_leaves_the_index(store: BaseStore, mode: str) -> None:
    thread = f"del-{uuid.uuid4().hex}"
    indexed, plain, _ = archives(store, thread)
    await archive_all(
        indexed,
        [ToolMessage(f"flush gone {n}", tool_call_id=f"c{n}", name="bash") for n in range(3)],
        mode,
    )
    namespace = indexed.namespace("message")
    index = line_index_of(indexed)
    assert index is not None
    keys = (await call_index(index, "entries", [namespace], mode=mode))[namespace].lines
    assert len(keys) == 3
    first, second, _ = sorted(keys)
    if mode == "sync":
        await asyncio.to_thread(store.delete, namespace, first)
    else:
        await store.adelete(namespace, first)
    await expire(store, namespace, second, mode)
    left = (await call_index(index, "entries", [namespace], mode=mode))[namespace].lines
    assert list(left) == sorted(keys)[2:]
    flush = parse_query("flush")
    rows = await call_index(index, "candidates", [namespace], flush, 100, mode=mode)
    assert {key for _, key in rows} == set(left)
    fast, slow = await search_both(indexed, plain, "flush", mode)
    assert fast == slow and "1 matching line" in fast


async def expire(store: BaseStore, namespace: tuple[str, ...], key: str, mode: str) -> None:
    """Mark one item expired in the store's table and sweep (`sweep_ttl`)."""
    prefix = ".".join(namespace)
    index = LineIndex(store)
    past = "datetime('now', '-1 day')" if index.dialect == "sqlite" else "now() - interval '1 day'"
    sql = f"UPDATE store SET expires_at = {past} WHERE prefix = ? AND key = ?"
    if index.dialect == "postgres":
        sql = sql.replace("?", "%s")
    conn: Any = store.conn  # type: ignore[attr-defined]
    if mode == "sync":
        if index.dialect == "sqlite":
            with store.lock:  # type: ignore[attr-defined]
                conn.execute(sql, (prefix, key))
        else:
            conn.execute(sql, (prefix, key))
        await asyncio.to_thread(store.sweep_ttl)  # type: ignore[attr-defined]
    else:
        await conn.execute(sql, (prefix, key))
        await store.sweep_ttl()  # type: ignore[attr-defined]


async def call_index(index: LineIndex, name: str, *args: Any, mode: str) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(getattr(index, name), *args)
    return await getattr(index, "a" + name)(*args)


def test_in_memory_and_unavailable_indexes_scan(tmp_path: Path) -> None:
    memory = Archive(InMemoryStore(), thread_id="t")
    memory.put_message(ToolMessage(LOG, tool_call_id="c1", name="bash"))
    assert line_index_of(memory) is None
    assert "flush batch failed" in scan_search(memory, "flush batch")
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as sync_store:
        sync_store.setup()
        backend = StoreBackend(sync_store)
        assert backend.line_index is not None
        backend.line_index.available = False  # as after a failed setup (no FTS5)
        assert backend.line_index.available is False
        archive = Archive(backend, thread_id="t")
        archive.put_message(ToolMessage(LOG, tool_call_id="c1", name="bash"))
        assert "flush batch failed" in scan_search(archive, "flush batch", cache=EntryCache())
        tables = "SELECT name FROM sqlite_master WHERE name = 'lgctx_entries'"
        assert sync_store.conn.execute(tables).fetchall() == []  # nothing was indexed


def test_setup_is_idempotent_and_shared(tmp_path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as one:
        one.setup()
        assert LineIndex(one).setup() and LineIndex(one).setup()
        versions = one.conn.execute("SELECT v FROM lgctx_index_migrations").fetchall()
        assert versions == [(0,)]


@pytest.fixture(params=["sqlite", "postgres"])
async def saver(request: pytest.FixtureRequest, tmp_path: Path, mode: str) -> AsyncIterator[Any]:
    """A durable checkpointer and no store: `graph/durable.py` derives the archive's store."""
    if request.param == "sqlite":
        if mode == "sync":
            from langgraph.checkpoint.sqlite import SqliteSaver

            with SqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as sqlite_saver:
                yield sqlite_saver
        else:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as asaver:
                yield asaver
        return
    uri = request.getfixturevalue("postgres_uri")
    if mode == "sync":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(uri) as pg_saver:
            pg_saver.setup()
            yield pg_saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(uri) as apg_saver:
            await apg_saver.setup()
            yield apg_saver


async def test_the_archive_next_to_durable_checkpoints_is_indexed(saver: Any, mode: str) -> None:
    from langgraph_ctx.graph.durable import checkpointer_archive

    backend = checkpointer_archive(saver)
    assert backend is not None
    thread = f"cp-{uuid.uuid4().hex}"
    archive = Archive(backend, thread_id=thread)
    await archive_all(archive, [ToolMessage(LOG, tool_call_id="c1", name="bash")], mode)
    index = line_index_of(archive)
    assert index is not None and index.available
    store = backend.store
    assert store is not None
    indexed, plain, counted = archives(store, thread)
    # Read back from a worker thread: a SqliteStore has no async methods of its own.
    fast, slow = await search_both(indexed, plain, "flush", "sync")
    assert fast == slow and "flush batch failed" in fast
    assert counted.gets == 0  # the lines were indexed as the saver's archive wrote them


texts = st.lists(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), max_size=6)
dumps = st.lists(
    st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), min_size=1, max_size=3),
    max_size=2,
)
terms = st.lists(
    st.sampled_from([*WORDS, "flush batch", "ss", "x", "%", "_"]), min_size=1, max_size=3
)


@pytest.fixture(params=["sqlite", "postgres"])
def sync_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    """A set-up sync SQL store (hypothesis drives sync tests only)."""
    if request.param == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as sqlite_store:
            sqlite_store.setup()
            yield sqlite_store
        return
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(request.getfixturevalue("postgres_uri")) as pg:
        pg.setup()
        yield pg


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts, dumps, terms, st.booleans())
def test_generated_archives_answer_as_the_scan(
    sync_store: BaseStore,
    lines: list[str],
    dumped: list[list[str]],
    chosen: list[str],
    quoted: bool,
) -> None:
    indexed, plain, backend = archives(sync_store, f"gen-{uuid.uuid4().hex}")
    for item in conversation(lines, dumped):
        if isinstance(item, list):
            indexed.put_messages(item)
        else:
            indexed.put_message(item)
    query = " ".join(f'"{t}"' if quoted and n == 0 else t for n, t in enumerate(chosen))
    kw: dict[str, Any] = {"limit": 30, "max_chars": 200_000}
    fast = scan_search(indexed, query, cache=EntryCache(), **kw)
    assert fast == scan_search(plain, query, cache=EntryCache(), **kw)
    assert backend.gets == 0


async def test_a_query_matching_more_than_a_search_ranks_stops_where_the_scan_stops(
    store: BaseStore, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """11,250 matching lines, over `ranking.MAX_HITS`: the database's answer is capped in
    search order, and the answer is the scan's, PARTIAL, with the same counts."""
    # Both stop on the line count, never on the clock of a busy test machine.
    monkeypatch.setattr(search_module, "find_hits", partial(ranking.find_hits, budget=60.0))
    indexed, plain, backend = archives(store, f"cap-{uuid.uuid4().hex}")
    items: list[BaseMessage | list[BaseMessage]] = [
        ToolMessage(
            "\n".join(f"ok step {n}.{i} flush" for i in range(250)), tool_call_id=f"c{n}", name="sh"
        )
        for n in range(45)
    ]
    await archive_all(indexed, items, mode)
    for query in ("ok", "flush step", '"ok step"'):
        backend.gets = 0
        fast, slow = await search_both(indexed, plain, query, mode)
        assert fast == slow, query
        assert "PARTIAL: over 10,000 lines match" in fast and backend.gets == 0


def test_rows_an_item_left_behind_are_ignored_and_dropped(tmp_path: Path) -> None:
    """An item deleted where our trigger was not (dropped by hand, an older copy of the
    database): its rows never answer, and the next search drops them."""
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as sync_store:
        sync_store.setup()
        indexed, plain, _ = archives(sync_store, "t")
        gone = indexed.put_message(ToolMessage("flush one", tool_call_id="c1", name="sh"))
        indexed.put_message(ToolMessage("flush two", tool_call_id="c2", name="sh"))
        with sync_store.lock:
            sync_store.conn.execute("DROP TRIGGER lgctx_store_ad")
        sync_store.delete(indexed.namespace("message"), gone.rsplit(":", 1)[1])
        answer = scan_search(indexed, "flush", cache=EntryCache())
        assert answer == scan_search(plain, "flush", cache=EntryCache())
        assert "flush one" not in answer and "flush two" in answer
        keys = sync_store.conn.execute("SELECT key FROM lgctx_entries").fetchall()
        stored = "SELECT key FROM store WHERE prefix LIKE '%message'"
        assert keys == sync_store.conn.execute(stored).fetchall()
        assert sync_store.conn.execute("SELECT count(*) FROM lgctx_lines").fetchone() == (1,)


def test_a_read_of_the_index_on_postgresql_is_bounded_in_time(
    postgres_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The trigram index is shared by every thread: a read that would run long is cancelled by
    # the database (the search then scans, within its own bounds), a write is not.
    import psycopg
    from langgraph.store.postgres import PostgresStore

    from langgraph_ctx.archive import sql_store
    from langgraph_ctx.archive.sql_store import Statement, StoreSql

    def sleep() -> Any:
        rows = yield Statement("SELECT pg_sleep(0.5)")
        return rows

    monkeypatch.setattr(sql_store, "READ_TIMEOUT_MS", 50)
    with PostgresStore.from_conn_string(postgres_uri) as pg:
        pg.setup()
        sql = StoreSql(pg)
        with pytest.raises(psycopg.errors.QueryCanceled):
            sql.run(sleep(), write=False)
        assert len(sql.run(sleep(), write=True)) == 1  # writes keep the server's own bound
        with pg._cursor() as cur:  # the bound was the read's alone (SET LOCAL)
            cur.execute("SHOW statement_timeout")
            shown = cur.fetchone()
            assert shown is not None and shown["statement_timeout"] == "0"
