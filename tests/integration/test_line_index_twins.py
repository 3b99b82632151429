"""`LineIndex`'s sync and async methods, each pair derived from one op (`_twins`).

Each twin keeps its name, docstring and signature, runs the same op on a real `SqliteStore`,
and answers as before while the index is unavailable: None for a read, `[]` / `{}` for
`unstored` / `segments`, nothing written.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langgraph.store.sqlite import SqliteStore

from langgraph_ctx.archive.line_index import LineIndex
from langgraph_ctx.archive.matching import parse_query, searchable_entry

TWINS = [
    "add",
    "entries",
    "unstored",
    "segments",
    "candidates",
    "first_candidates",
    "lines",
    "forget",
]
NS = ("archive", "t")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LineIndex]:
    with SqliteStore.from_conn_string(str(tmp_path / "s.db")) as store:
        store.setup()
        line_index = LineIndex.of(store)
        assert line_index is not None
        yield line_index


@pytest.mark.parametrize("name", TWINS)
def test_each_twin_keeps_its_name_docstring_and_signature(name: str) -> None:
    sync, asynchronous = getattr(LineIndex, name), getattr(LineIndex, "a" + name)
    assert (sync.__name__, asynchronous.__name__) == (name, "a" + name)
    assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(asynchronous)
    assert sync.__doc__ and not sync.__doc__.startswith("Async")
    assert asynchronous.__doc__ == f"Async `{name}`."
    op = inspect.signature(getattr(LineIndex, f"_{name}_op"))
    for twin in (sync, asynchronous):
        assert list(inspect.signature(twin).parameters) == list(op.parameters)
        assert "SqlOp" not in str(inspect.signature(twin).return_annotation)


def test_the_twins_run_one_op_sync_and_async(index: LineIndex) -> None:
    entry = searchable_entry(
        "ref-1", "message", ToolMessage("flush batch failed", tool_call_id="c")
    )
    index.add(NS, "k1", entry)
    query = parse_query("flush")
    sync = index.first_candidates(NS, ["k1"], query, 10)
    asynchronous = asyncio.run(index.afirst_candidates(NS, ["k1"], query, 10))
    assert sync == asynchronous and sync is not None and (NS, "k1") in sync
    assert index.unstored(NS, ["k1"]) == ["k1"]  # indexed, not in the store
    asyncio.run(index.aforget(NS, ["k1"]))
    assert index.candidates([NS], query, 10) == {}


def test_an_unavailable_index_answers_as_before(index: LineIndex) -> None:
    index.available = False
    query = parse_query("flush")
    assert index.candidates([NS], query, 10) is None
    assert asyncio.run(index.afirst_candidates(NS, ["k1"], query, 10)) is None
    assert index.lines([(NS, "k1", 0)]) is None
    assert index.unstored(NS, ["k1"]) == [] == asyncio.run(index.aunstored(NS, ["k1"]))
    assert index.segments([(NS, "k1")]) == {} == asyncio.run(index.asegments([(NS, "k1")]))
    index.forget(NS, ["k1"])  # a write does nothing
    tables = "SELECT name FROM sqlite_master WHERE name = 'lgctx_entries'"
    assert index.store.conn.execute(tables).fetchall() == []  # type: ignore[attr-defined]
