"""Archive search on a real PostgresStore (runs when LANGGRAPH_CTX_TEST_POSTGRES_URI is set)."""

from __future__ import annotations

import re
import uuid

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.store.postgres import PostgresStore

from langgraph_ctx.archive import Archive, EntryCache, StoreBackend, make_search_tool
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.archive.sql_store import StoreSql, listing_op
from tests.conftest import call, drive

pytestmark = pytest.mark.postgres

HIT = re.compile(r"^> (\d+): (.*)$", re.MULTILINE)
RECALL = re.compile(r'recall\(ref="([^"]+)", start_line=(\d+), end_line=(\d+)\)')


@pytest.fixture
def thread_id() -> str:
    """A thread of its own for each test, so tests share the session database safely."""
    return f"pg-{uuid.uuid4().hex}"


async def test_search_on_postgres(postgres_store: PostgresStore, thread_id: str, mode: str) -> None:
    archive = Archive(postgres_store, thread_id=thread_id)
    other = Archive(postgres_store, thread_id=f"{thread_id}-other")
    log = "\n".join(f"step {n}: ok" for n in range(30)) + "\nERROR: connection refused\nend"
    for target in (archive, other):
        await drive(
            target.plan_put_message(ToolMessage(log, tool_call_id="c1", id="m1")), mode=mode
        )
    await drive(
        archive.plan_put_message(AIMessage("the connection refused me", id="a1")), mode=mode
    )
    dump = [ToolMessage("pg: connection was refused", tool_call_id="c2", name="psql", id="m2")]
    await drive(archive.plan_put_messages(dump), mode=mode)
    tool = make_search_tool(archive, max_chars=3_000, cache=EntryCache())
    answer = await call(tool, "invoke", {"query": "connection refused"}, mode=mode)
    assert [m.group(2) for m in HIT.finditer(answer)] == [
        "ERROR: connection refused",  # the phrase: tool output before the agent's turn
        "the connection refused me",  # (written last)
        "Tool: pg: connection was refused",  # every word, in the dump
    ]
    assert set(re.findall(r'ref="lgctx:([^:]+):', answer)) == {thread_id}
    recall = make_recall_tool(archive)
    for m, (ref, start, end) in zip(HIT.finditer(answer), RECALL.findall(answer), strict=True):
        number = int(m.group(1))
        shown = await call(
            recall, "invoke", {"ref": ref, "start_line": number, "end_line": number}, mode=mode
        )
        assert shown.split("\n", 1)[1].rstrip("\n") == m.group(2)
        assert int(start) <= number <= int(end)


def test_keys_only_listing_matches_search_paging(
    postgres_store: PostgresStore, thread_id: str
) -> None:
    archive = Archive(postgres_store, thread_id=thread_id)
    for n in range(30):
        archive.put_message(ToolMessage(f"out {n}", tool_call_id=f"c{n}"))
    namespace = ("langgraph_ctx", thread_id, "message")
    listing = listing_op(postgres_store, namespace)
    assert listing is not None  # not the fallback
    assert StoreSql(postgres_store).run(listing, write=False, bounded=False)
    fast = StoreBackend(postgres_store).keys(namespace)
    paged = {item.key for item in postgres_store.search(namespace, limit=100)}
    assert len(fast) == 30 and set(fast) == paged
