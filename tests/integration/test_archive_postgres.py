"""The archive on a real PostgresStore (runs when LANGGRAPH_CTX_TEST_POSTGRES_URI is set)."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.store.postgres import PostgresStore

from benchmarks.trajectories import read_trajectory, trajectory_files
from langgraph_ctx.archive import (
    Archive,
    ArchiveRef,
    StoreBackend,
    encode_message,
    encode_messages,
)
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.errors import (
    ArchiveAccessError,
    ArchiveCorruptError,
    ArchiveEntryNotFoundError,
)
from langgraph_ctx.messages import ensure_ids
from tests.conftest import call, drive

pytestmark = pytest.mark.postgres


@pytest.fixture
def thread_id() -> str:
    """A thread of its own for each test, so tests share the session database safely."""
    return f"pg-{uuid.uuid4().hex}"


@pytest.mark.trajectories
async def test_trajectories_round_trip(
    postgres_store: PostgresStore, thread_id: str, mode: str
) -> None:
    archive = Archive(postgres_store, thread_id=thread_id)
    for path in trajectory_files():
        original = read_trajectory(path)
        messages = ensure_ids(original)
        for msg in messages:
            assert msg.id is not None
            ref = await drive(archive.plan_put_message(msg), mode=mode)
            restored = await drive(archive.plan_restore(ref), mode=mode)
            assert restored == msg
            assert encode_message(restored) == encode_message(msg)
            assert await drive(archive.plan_restore(msg.id), mode=mode) == msg
        dump = await drive(archive.plan_put_messages(original), mode=mode)
        restored_list = await drive(archive.plan_read(dump), mode=mode)
        assert restored_list == original
        assert encode_messages(restored_list) == encode_messages(original)


async def test_round_trip_edge_content(
    postgres_store: PostgresStore, thread_id: str, mode: str
) -> None:
    archive = Archive(postgres_store, thread_id=thread_id, user_id="user@example.com")
    msgs = [
        HumanMessage([{"type": "text", "text": "héllo ✓ \U0001f600"}]),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "ls"}, "id": "c1"}]),
        ToolMessage("NUL \x00 in output, lone \ud800\n" * 50, tool_call_id="c1", id="tm"),
    ]
    for msg in msgs:
        ref = await drive(archive.plan_put_message(msg), mode=mode)
        assert encode_message(await drive(archive.plan_restore(ref), mode=mode)) == (
            encode_message(msg)
        )
    text = "raw NUL \x00 and \udc80"
    assert await drive(archive.plan_read(archive.put_text(text)), mode=mode) == text


async def test_double_write_keeps_one_item(
    postgres_store: PostgresStore, thread_id: str, mode: str
) -> None:
    archive = Archive(postgres_store, thread_id=thread_id)
    msg = ToolMessage("same", tool_call_id="c1", id="m1")
    first = await drive(archive.plan_put_message(msg), mode=mode)
    second = await drive(archive.plan_put_message(msg), mode=mode)
    assert first == second
    items = postgres_store.search(("langgraph_ctx", thread_id, "message"))
    assert [item.key for item in items] == [ArchiveRef.parse(first).digest]


async def test_missing_corrupt_and_foreign(
    postgres_store: PostgresStore, thread_id: str, mode: str
) -> None:
    archive = Archive(postgres_store, thread_id=thread_id)
    with pytest.raises(ArchiveEntryNotFoundError):
        await drive(archive.plan_read(f"lgctx:{thread_id}:text:{'0' * 64}"), mode=mode)
    ref = await drive(archive.plan_put_message(ToolMessage("output", tool_call_id="c")), mode=mode)
    with pytest.raises(ArchiveAccessError):
        await drive(Archive(postgres_store, thread_id="other").plan_restore(ref), mode=mode)
    namespace, key = ("langgraph_ctx", thread_id, "message"), ArchiveRef.parse(ref).digest
    data = StoreBackend(postgres_store).get(namespace, key)
    assert data is not None
    StoreBackend(postgres_store).put(namespace, key, data.replace(b"output", b"0utput"))
    with pytest.raises(ArchiveCorruptError):
        await drive(archive.plan_restore(ref), mode=mode)


async def test_recall_tool(postgres_store: PostgresStore, thread_id: str, mode: str) -> None:
    archive = Archive(postgres_store, thread_id=thread_id)
    text = "".join(f"row {i}\n" for i in range(1000))
    ref = archive.put_message(ToolMessage(text, tool_call_id="c", id="big"))
    tool = make_recall_tool(archive, max_chars=50)
    args = {"ref": "big", "start_line": 3, "end_line": 4}
    out = await call(tool, "invoke", args, mode=mode)
    assert out.split("\n", 1)[1] == "row 2\nrow 3\n"
    other = make_recall_tool(Archive(postgres_store, thread_id="other"))
    denied = await call(other, "invoke", {"ref": ref}, mode=mode)
    assert "belongs to another thread" in denied
