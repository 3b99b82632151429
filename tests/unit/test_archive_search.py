"""Searching one thread's archive (issue 40) on InMemoryStore, a directory and a SQLite file."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langgraph_ctx.archive import (
    Archive,
    ArchiveBackend,
    DirectoryBackend,
    EntryCache,
    StoreBackend,
    asearch_archive,
    make_search_tool,
    search_archive,
)
from langgraph_ctx.archive.matching import parse_query
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.errors import ArchiveError
from langgraph_ctx.graph.client import SdkStoreBackend
from tests.conftest import call, drive, run

BUILD_LOG = "\n".join(
    [
        "$ make test",
        "compiling 12 modules",
        "linking libfoo.so",
        "starting postgres on port 5432",
        "running 48 tests",
        "test_db_connect ... FAILED",
        "ERROR: connection refused on port 5432",
        "Traceback (most recent call last):",
        '  File "db.py", line 10, in connect',
        "47 passed, 1 failed",
    ]
)
PYTEST_LOG = "\n".join(
    [
        "collected 3 items",
        "tests/test_api.py::test_get PASSED",
        "the connection was refused by the proxy",
        "tests/test_api.py::test_post PASSED",
        "retry refused after 3 attempts",
    ]
)


@pytest.fixture(params=["memory", "directory", "sqlite"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, mode: str
) -> AsyncIterator[ArchiveBackend]:
    if request.param == "memory":
        yield StoreBackend(InMemoryStore())
    elif request.param == "directory":
        yield DirectoryBackend(tmp_path / "archive")
    elif mode == "sync":  # SqliteStore is sync only; the async twin is AsyncSqliteStore
        with SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store:
            store.setup()
            yield StoreBackend(store)
    else:
        async with AsyncSqliteStore.from_conn_string(str(tmp_path / "store.db")) as astore:
            await astore.setup()
            yield StoreBackend(astore)


async def put(archive: Archive, message: BaseMessage | list[BaseMessage], mode: str) -> str:
    if isinstance(message, list):
        return str(await drive(archive.plan_put_messages(message), mode=mode))
    return str(await drive(archive.plan_put_message(message), mode=mode))


async def fill(archive: Archive, mode: str) -> dict[str, str]:
    """A thread's archive as compaction and summarization leave it; returns refs by name."""
    refs = {}
    refs["dump"] = await put(
        archive,
        [
            HumanMessage("please run the tests", id="h-1"),
            AIMessage(
                "",
                id="ai-0",
                tool_calls=[{"name": "grep", "args": {"pattern": "port"}, "id": "call-3"}],
            ),
            ToolMessage(
                "config.yaml:3: port: 5432\n"
                "log.txt:88: port 5432 connection refused\n"
                "log.txt:90: ok",
                tool_call_id="call-3",
                name="grep",
                id="tm-3",
            ),
            AIMessage("the server is down", id="ai-2"),
        ],
        mode,
    )
    build = ToolMessage(BUILD_LOG, tool_call_id="call-1", name="bash", id="tm-1")
    refs["build"] = await put(archive, build, mode)
    pytest_out = ToolMessage(PYTEST_LOG, tool_call_id="call-2", name="pytest", id="tm-2")
    refs["pytest"] = await put(archive, pytest_out, mode)
    turn = AIMessage("Earlier the connection refused me twice; I will retry.", id="ai-1")
    refs["turn"] = await put(archive, turn, mode)
    return refs


HIT = re.compile(r"^> (\d+): (.*)$", re.MULTILINE)
RECALL = re.compile(r'recall\(ref="([^"]+)", start_line=(\d+), end_line=(\d+)\)')


def hits(answer: str) -> list[str]:
    return [m.group(2) for m in HIT.finditer(answer)]


async def search(archive: Archive, query: str, mode: str, **kwargs: Any) -> str:
    kwargs.setdefault("cache", EntryCache())
    return await run(mode, search_archive, asearch_archive, archive, query, **kwargs)


# --- ranking ---------------------------------------------------------------------------------


async def test_phrase_before_all_words_before_some(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    answer = await search(archive, "connection refused", mode, limit=30)
    assert answer.startswith("search_history: 5 matching lines for 'connection refused'")
    assert hits(answer) == [
        # the phrase: tool output (the single message, then the dump's), then the agent's turn
        "ERROR: connection refused on port 5432",
        "log.txt:88: port 5432 connection refused",
        "Earlier the connection refused me twice; I will retry.",
        # every word, not as one phrase
        "the connection was refused by the proxy",
        # some words
        "retry refused after 3 attempts",
    ]


async def test_quoted_phrase_is_required_and_words_rank(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    answer = await search(archive, '"port 5432" refused', mode)
    assert hits(answer) == [
        "ERROR: connection refused on port 5432",
        "log.txt:88: port 5432 connection refused",
        "starting postgres on port 5432",  # the phrase without the word
    ]  # "port: 5432" and lines with "refused" alone lack the phrase


async def test_newer_entries_first_among_equals(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    for n in range(3):
        out = ToolMessage(f"run {n}\nstatus: flaky on try {n}", tool_call_id=f"c{n}", id=f"m{n}")
        await put(archive, out, mode)
        await asyncio.sleep(0.05)  # file times are coarser than one write
    answer = await search(archive, "flaky", mode)
    assert re.findall(r"message (m\d)", answer) == ["m2", "m1", "m0"]


async def test_a_name_of_its_own_before_a_longer_name_holding_it(
    backend: ArchiveBackend, mode: str
) -> None:
    """`flush_batch` asked for: where it is defined beats the paths and dotted names holding it."""
    archive = Archive(backend, thread_id="t1")
    source = "class Jobs:\n    def flush_batch(self, rows):\n        return rows"
    await put(archive, ToolMessage(source, tool_call_id="c1", id="m1"), mode)
    await asyncio.sleep(0.05)
    listing = "src/app/flush_batch.py\njobs.flush_batch: 3 runs\ntests/test_flush_batch_2.py"
    await put(archive, ToolMessage(listing, tool_call_id="c2", id="m2"), mode)
    answer = await search(archive, "flush_batch", mode, limit=4)
    assert hits(answer)[0] == "    def flush_batch(self, rows):"  # older, but the name itself
    assert set(hits(answer)[1:]) == set(listing.splitlines())
    # A sentence ending on the name still counts as the name.
    said = ToolMessage("we call flush_batch.", tool_call_id="c3", id="m3")
    await put(archive, said, mode)
    assert hits(await search(archive, "flush_batch", mode))[:2] == [
        "we call flush_batch.",  # newest of the two where it stands alone
        "    def flush_batch(self, rows):",
    ]


# --- line numbers are recall's ---------------------------------------------------------------


async def test_each_hit_is_on_the_line_recall_shows(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    recall = make_recall_tool(archive)
    answer = await search(archive, "connection refused port", mode, limit=30)
    numbers = [int(m.group(1)) for m in HIT.finditer(answer)]
    calls = RECALL.findall(answer)
    assert len(numbers) == len(calls) == len(hits(answer)) > 3
    for number, line, (ref, start, end) in zip(numbers, hits(answer), calls, strict=True):
        assert int(start) <= number <= int(end)
        shown = await call(
            recall, "invoke", {"ref": ref, "start_line": number, "end_line": number}, mode=mode
        )
        assert shown.split("\n", 1)[1].rstrip("\n") == line
        around = await call(
            recall,
            "invoke",
            {"ref": ref, "start_line": int(start), "end_line": int(end)},
            mode=mode,
        )
        assert line in around


async def test_a_dump_line_names_its_message(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    refs = await fill(archive, mode)
    answer = await search(archive, "log.txt:88", mode)
    assert "summarized message 3 of 4 (tool output of grep, call call-3, message tm-3)" in answer
    assert f'recall(ref="{refs["dump"]}", start_line=3, end_line=5)' in answer
    assert "> 4: log.txt:88: port 5432 connection refused" in answer


# --- filters and scope -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "tool", "expected"),
    [
        ("tool", None, {"tool output of bash", "tool output of pytest"}),
        ("turn", None, {"AI turn"}),
        ("summarized", None, {"summarized message"}),
        ("any", "pytest", {"tool output of pytest"}),
        ("summarized", "grep", {"summarized message"}),
    ],
)
async def test_filters(
    backend: ArchiveBackend, mode: str, kind: str, tool: str | None, expected: set[str]
) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    answer = await search(archive, "connection refused port", mode, kind=kind, tool=tool, limit=30)
    heads = re.findall(r"^\[\d+\] (summarized message|AI turn|tool output of \w+)", answer, re.M)
    assert heads and set(heads) == expected


async def test_another_threads_archive_is_never_searched(
    backend: ArchiveBackend, mode: str
) -> None:
    mine, other = Archive(backend, thread_id="t1"), Archive(backend, thread_id="t2")
    await fill(mine, mode)
    await fill(other, mode)
    await put(other, ToolMessage("secret only-in-t2", tool_call_id="x", id="x"), mode)
    # A thread label equal to a user label: the store's prefix search would reach it.
    nested = Archive(backend, thread_id="message", user_id="t1")
    await put(nested, ToolMessage("secret nested-user", tool_call_id="y", id="y"), mode)
    assert "no line matches" in await search(mine, "secret", mode)
    answer = await search(mine, "connection", mode, limit=30)
    assert set(re.findall(r'ref="(lgctx:[^:]+):', answer)) == {"lgctx:t1"}
    assert "only-in-t2" in await search(other, "secret", mode)


# --- bounded, deterministic -----------------------------------------------------------------


async def test_hostile_inputs_give_one_bounded_line(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    await put(archive, ToolMessage("a" * 100_000 + "b", tool_call_id="c-aaa", id="m-aaa"), mode)
    cases = {
        "x" * 1_000_000: "characters long",
        "": "empty",
        '""': "empty",
        " ".join(f"w{n}" for n in range(50)): "over 20",
    }
    for query, said in cases.items():
        answer = await search(archive, query, mode)
        assert said in answer and "\n" not in answer and len(answer) < 300
    bad = await search(archive, "(unclosed", mode, regex=True)
    assert "not a valid regular expression" in bad and "\n" not in bad
    slow = await search(archive, "(a+)+$", mode, regex=True)
    assert "ran out of time" in slow and "\n" not in slow


async def test_regex_matches_lines(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    answer = await search(archive, r"^\d+ passed, \d+ failed$", mode, regex=True)
    assert hits(answer) == ["47 passed, 1 failed"]


async def test_answer_stays_within_max_chars(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    lines = "\n".join(f"line {n} needle " + "x" * 300 for n in range(200))
    await put(archive, ToolMessage(lines, tool_call_id="c", id="m"), mode)
    answer = await search(archive, "needle", mode, limit=30, max_chars=1_500)
    assert len(answer) <= 1_500
    assert answer.startswith("search_history: 200 matching lines")
    assert re.search(r"\[\d+ more matching lines not shown", answer)
    assert all(len(line) <= 210 for line in hits(answer))


async def test_same_query_same_bytes(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    cache = EntryCache()
    answers = {
        await search(archive, "connection refused port", mode, cache=cache) for _ in range(2)
    }
    answers.add(await search(archive, "connection refused port", mode, cache=EntryCache()))
    assert len(answers) == 1


async def test_repeated_lines_show_once(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await put(archive, ToolMessage("warn: disk\n" * 50, tool_call_id="c", id="m"), mode)
    answer = await search(archive, "disk", mode)
    assert hits(answer) == ["warn: disk"]
    assert "(the same line 49 more times)" in answer


async def test_a_line_read_again_shows_once_where_it_ranks_best(
    backend: ArchiveBackend, mode: str
) -> None:
    """The same file read twice: its lines are not shown twice, the slots go to other lines."""
    archive = Archive(backend, thread_id="t1")
    source = "def start():\n    start_line = None"
    for n in range(2):
        await put(archive, ToolMessage(source, tool_call_id=f"c{n}", id=f"m{n}"), mode)
        await asyncio.sleep(0.05)  # file times are coarser than one write
    await put(archive, ToolMessage("# start_line is 0-based", tool_call_id="c2", id="m2"), mode)
    answer = await search(archive, "start_line", mode, limit=2)
    assert hits(answer) == ["# start_line is 0-based", "    start_line = None"]
    assert "message m1, line 2 of 2 (the same line 1 more times)" in answer


# --- listing and the cache -------------------------------------------------------------------


class CountingBackend(DirectoryBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gets = 0

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        self.gets += 1
        return super().get(namespace, key)  # aget runs this in a worker thread


async def test_a_repeated_search_reads_only_new_entries(tmp_path: Path, mode: str) -> None:
    backend = CountingBackend(tmp_path / "archive")
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    cache = EntryCache()
    await search(archive, "refused", mode, cache=cache)
    assert backend.gets == 4
    await search(archive, "refused", mode, cache=cache)
    assert backend.gets == 4
    await put(archive, ToolMessage("refused again", tool_call_id="c9", id="m9"), mode)
    assert "refused again" in await search(archive, "refused", mode, cache=cache)
    assert backend.gets == 5


def test_the_cache_stays_within_its_bytes(tmp_path: Path) -> None:
    archive = Archive(InMemoryStore(), thread_id="t1")
    for n in range(20):
        archive.put_message(ToolMessage(f"out {n}\n" + "y" * 1_000, tool_call_id=f"c{n}"))
    cache = EntryCache(max_bytes=20_000)
    assert "out 19" in search_archive(archive, "out", cache=cache, limit=30)
    assert 0 < len(cache) < 20 and cache.bytes <= 20_000


def test_directory_keys_skip_temporary_files(tmp_path: Path) -> None:
    backend = DirectoryBackend(tmp_path)
    assert backend.keys(("ns", "missing")) == []
    backend.put(("ns",), "a", b"1")
    (tmp_path / "ns" / ".tmp-abc.part").write_bytes(b"half")
    (tmp_path / "ns" / "folder").mkdir()
    assert backend.keys(("ns",)) == ["a"]


class PutGetOnly:
    """A user's backend from before search: put/get only."""

    def __init__(self) -> None:
        self.data: dict[tuple[tuple[str, ...], str], bytes] = {}

    def put(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        self.data[namespace, key] = data

    def get(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        return self.data.get((namespace, key))

    async def aput(self, namespace: tuple[str, ...], key: str, data: bytes) -> None:
        self.put(namespace, key, data)

    async def aget(self, namespace: tuple[str, ...], key: str) -> bytes | None:
        return self.get(namespace, key)


async def test_a_backend_without_keys_says_how_to_add_them(mode: str) -> None:
    archive = Archive(PutGetOnly(), thread_id="t1")
    archive.put_message(ToolMessage("x", tool_call_id="c"))
    with pytest.raises(ArchiveError, match=r"keys\(namespace\)"):
        await search(archive, "x", mode)
    tool = make_search_tool(archive)
    answer = await call(tool, "invoke", {"query": "x"}, mode=mode)
    assert "can not list" in answer and "ListableBackend" in answer


class FakeSdkStore:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.calls: list[tuple[int, int]] = []

    def search_items(self, prefix: list[str], *, limit: int, offset: int) -> dict[str, Any]:
        self.calls.append((limit, offset))
        found = [i for i in self.items if i["namespace"][: len(prefix)] == prefix]
        return {"items": found[offset : offset + limit]}


def test_sdk_backend_pages_and_keeps_exactly_its_namespace() -> None:
    items = [
        {"namespace": ["a", "b"], "key": f"k{n:04d}", "updated_at": f"2025-01-01T00:{n // 60:02d}"}
        for n in range(1_200)
    ]
    items.append({"namespace": ["a", "b", "c"], "key": "deeper", "updated_at": "2099"})
    store = FakeSdkStore(items)
    client = type("Client", (), {"store": store})()
    keys = SdkStoreBackend(client).keys(("a", "b"))
    assert len(keys) == 1_200 and "deeper" not in keys
    assert keys[0] == "k1140" and keys[-1] == "k0059"
    assert [offset for _, offset in store.calls] == [0, 500, 1_000]


# --- the tool --------------------------------------------------------------------------------


async def test_the_tool_answers_with_tool_data(backend: ArchiveBackend, mode: str) -> None:
    archive = Archive(backend, thread_id="t1")
    await fill(archive, mode)
    tool: BaseTool = make_search_tool(lambda: archive, max_chars=2_000)
    assert tool.name == "search_history" and len(tool.description) < 300
    assert set(tool.args) == {"query", "kind", "tool", "limit", "regex"}
    answer = await call(tool, "invoke", {"query": "connection refused", "limit": 99}, mode=mode)
    assert isinstance(answer, str) and len(answer) <= 2_000
    assert hits(answer)[0] == "ERROR: connection refused on port 5432"  # tool output first
    bad = await call(tool, "invoke", {"query": "x", "kind": "nope"}, mode=mode)
    assert "kind" in bad


def test_parse_query_words_and_phrases() -> None:
    query = parse_query('Connection  "Port   5432" REFUSED connection')
    assert query.phrases == ("port 5432",)
    assert query.words == ("connection", "refused")
    assert query.whole == "connection port 5432 refused connection"
