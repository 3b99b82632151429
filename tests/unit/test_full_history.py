"""`full_history`: live state plus the archive's insurance dumps give back the whole thread."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import Archive
from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive.history import afull_history, full_history
from langgraph_ctx.errors import ArchiveError
from tests.conftest import make_conversation, run


async def test_full_history_merges_dumps_and_live_state_in_order(mode: str) -> None:
    messages = make_conversation(4, long_output=500)
    archive = Archive(InMemoryStore(), thread_id="t")
    # Two summaries took the oldest messages out of live state, each after its dump.
    first = archive.put_messages(messages[1:6])
    second = archive.put_messages(messages[6:12])
    live = [messages[0], *messages[12:]]  # the system prompt stays; the rest left by id
    ledger = {"summary": {"text": "...", "dump_refs": [first, second]}}
    rebuilt = await run(mode, full_history, afull_history, live, ledger, archive)
    assert [encode_message(m) for m in rebuilt] == [encode_message(m) for m in messages]


def test_full_history_without_dumps_is_the_live_state() -> None:
    messages = make_conversation(2)
    archive = Archive(InMemoryStore(), thread_id="t")
    assert full_history(messages, None, archive) == messages


async def test_an_unreadable_dump_hides_nothing_else(mode: str) -> None:
    """Issue 13 item 2: one dump the archive cannot give back must not hide the rest.

    The live messages and every readable dump come back in order; the result names the dump it
    could not read and why, and `strict=True` raises instead.
    """
    messages = make_conversation(4, long_output=500)
    archive = Archive(InMemoryStore(), thread_id="t")
    first = archive.put_messages(messages[1:6])
    lost = "lgctx:t:messages:" + "0" * 64  # named by the ledger, gone from the archive
    live = [messages[0], *messages[12:]]
    ledger = {"summary": {"text": "...", "dump_refs": [first, lost]}}
    rebuilt = await run(mode, full_history, afull_history, live, ledger, archive)
    expected = [messages[0], *messages[1:6], *messages[12:]]
    assert [encode_message(m) for m in rebuilt] == [encode_message(m) for m in expected]
    assert [ref for ref, _ in rebuilt.unreadable] == [lost]
    assert "not found" in rebuilt.unreadable[0][1].lower() or lost in rebuilt.unreadable[0][1]
    with pytest.raises(ArchiveError):
        full_history(live, ledger, archive, strict=True)


def test_a_complete_history_names_nothing_unreadable() -> None:
    messages = make_conversation(2)
    archive = Archive(InMemoryStore(), thread_id="t")
    assert full_history(messages, None, archive).unreadable == []
