"""What a UI shows: the full history of a thread whose state a hint rebuild emptied.

A real `create_agent` agent on SQLite (checkpointer and store), a model that reports its prompt
tokens, a rebuild after every turn past half the window and `remove_summarized`: the state keeps
a few messages, the archive the rest. `get_full_history`, `get_history_page` and the wire path
of `langgraph_ctx.graph.client` (the thread state as JSON plus the store's dumps) give back every
message, in order, byte for byte.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive import Archive, encode_message
from langgraph_ctx.archive.dumps import all_dump_refs
from langgraph_ctx.archive.history import ahistory_page, history_page
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.graph.client import state_messages
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.strategies import SlidingWindow
from tests.conftest import run
from tests.integration.server.graphs import read_log, step

PARTS = 7


WRITERS = {
    # A hint rebuild after every turn past half the window, summarized messages removed.
    "rebuild": {"hint_threshold": 0.5, "remove_summarized": True},
    # The rebuild alone: its dumps repeat the kept request and answer of the one before.
    "rebuild-keep": {"hint_threshold": 0.5, "remove_summarized": False},
    # No rebuild: summaries of what leaves the window, removed from the state.
    "summaries": {
        "hint_threshold": 1.0,
        "remove_summarized": True,
        "strategies": [SlidingWindow(summarize=True)],
    },
}


@pytest.fixture(scope="module", params=list(WRITERS))
def thread(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One thread: the agent, its memory, its store and every message it produced."""
    path = str(tmp_path_factory.mktemp("ui") / "thread.sqlite")
    with SqliteSaver.from_conn_string(path) as saver, SqliteStore.from_conn_string(path) as store:
        store.setup()
        options = {"strategies": [SlidingWindow()], **WRITERS[request.param]}
        memory = ContextMemory(context_window_tokens=6_000, **options)
        counter = memory.manager.token_counter
        model = ScriptedChatModel(messages=itertools.repeat(step), usage_counter=counter)
        agent = create_agent(
            model, [read_log], middleware=[memory.middleware()], checkpointer=saver, store=store
        )
        config: Any = {"configurable": {"thread_id": "ui-thread"}}
        produced: dict[str, BaseMessage] = {}  # every message, latest version, first-seen order
        for part in range(1, PARTS + 1):
            request = {"messages": [HumanMessage(f"read part {part}")]}
            for values in agent.stream(request, config, stream_mode="values"):
                produced.update({m.id: m for m in values["messages"]})
        yield {
            "agent": agent,
            "memory": memory,
            "config": config,
            "store": store,
            "path": path,
            "all": produced,
        }


def encoded(messages: list[BaseMessage]) -> list[bytes]:
    return [encode_message(m) for m in messages]


def test_the_full_history_is_every_message_after_the_state_was_emptied(
    thread: dict[str, Any],
) -> None:
    agent, memory, config = thread["agent"], thread["memory"], thread["config"]
    values = agent.get_state(config).values
    produced = list(thread["all"].values())
    assert len(values["messages"]) < len(produced) / 3, "no rebuild emptied the state"
    archive = memory.archive_for(config, graph=agent)
    assert len(all_dump_refs(values["context_ledger"], archive)) >= 2
    history = memory.get_full_history(agent, config)
    assert encoded(history) == encoded(produced)


async def test_pages_are_slices_of_the_full_history(thread: dict[str, Any], mode: str) -> None:
    agent, memory, config = thread["agent"], thread["memory"], thread["config"]
    values = agent.get_state(config).values
    messages, ledger = values["messages"], values["context_ledger"]
    if mode == "sync":
        await check_pages(memory, agent, config, mode, messages, ledger, thread["store"])
    else:  # the same file through the async store
        async with AsyncSqliteStore.from_conn_string(thread["path"]) as store:
            await check_pages(memory, agent, config, mode, messages, ledger, store)


async def check_pages(
    memory: ContextMemory,
    agent: Any,
    config: Any,
    mode: str,
    messages: list[BaseMessage],
    ledger: dict[str, Any],
    store: Any,
) -> None:
    archive = Archive(store, thread_id="ui-thread")
    full = encoded(memory.get_full_history(agent, config))
    ids = [m.id for m in memory.get_full_history(agent, config)]
    for limit in (1, 2, 5, len(full), len(full) + 3):
        last = await run(mode, history_page, ahistory_page, messages, ledger, archive, limit=limit)
        assert encoded(last) == full[-limit:]
        for cut, before in enumerate(ids):
            page = await run(
                mode, history_page, ahistory_page, messages, ledger, archive,
                limit=limit, before=before,
            )  # fmt: skip
            assert encoded(page) == full[max(0, cut - limit) : cut], (limit, cut)
    everything = await run(mode, history_page, ahistory_page, messages, ledger, archive)
    assert encoded(everything) == full
    assert encoded(memory.get_history_page(agent, config, limit=4)) == full[-4:]


def test_the_last_page_reads_only_the_newest_dump(thread: dict[str, Any]) -> None:
    """The last page reads the newest dumps, newest first, and only until the oldest one read
    ends before the page: one read when the page follows the newest dump's last message, two
    when a rebuild dumped the page's own turn.

    A dump repeats the request and answer the previous rebuild kept, without what lay between
    them, and nothing in it says where its repeats end; so its messages are certain in place
    only once the dump before it is read (the page then follows that dump's last message).
    """
    agent, memory, config = thread["agent"], thread["memory"], thread["config"]
    values = agent.get_state(config).values
    archive = memory.archive_for(config, graph=agent)
    every = all_dump_refs(values["context_ledger"], archive)
    full = [m.id for m in memory.get_full_history(agent, config)]
    start = len(full) - 3  # where the last page of 3 begins
    needed = next(
        k for k in range(1, len(every) + 1) if full.index(archive.read(every[-k])[-1].id) < start
    )
    assert needed <= 2, "the last page of a long thread costs one or two reads"
    reads: list[str] = []
    original = archive.plan_read

    def counting(ref: str) -> Any:
        reads.append(ref)
        return original(ref)

    archive.plan_read = counting  # type: ignore[method-assign]
    history_page(values["messages"], values["context_ledger"], archive, limit=3)
    assert reads == every[-needed:][::-1]
    reads.clear()
    history_page(values["messages"], values["context_ledger"], archive)
    dumps = [r for r in reads if ":text:" not in r]  # less the dump index chain
    assert dumps == all_dump_refs(values["context_ledger"], archive)  # each dump once, in order


def test_the_wire_state_gives_the_same_bytes(thread: dict[str, Any]) -> None:
    """What `langgraph_ctx.graph.client` does with the server's JSON: same messages, same bytes."""
    agent, memory, config = thread["agent"], thread["memory"], thread["config"]
    values = agent.get_state(config).values
    wire = json.loads(
        json.dumps(
            {
                "messages": [m.model_dump() for m in values["messages"]],
                "context_ledger": values["context_ledger"],
            }
        )
    )
    messages, ledger = state_messages(wire)
    archive = Archive(thread["store"], thread_id="ui-thread")
    assert encoded(history_page(messages, ledger, archive)) == encoded(
        memory.get_full_history(agent, config)
    )


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"limit": 0}, ["limit must be >= 1", "0"]),
        ({"limit": True}, ["limit", "bool"]),
        ({"before": ""}, ["before", "message id"]),
        ({"before": "no-such-message"}, ["no-such-message", "not the id of a message"]),
    ],
)
def test_bad_page_arguments_say_what_to_pass(
    thread: dict[str, Any], options: dict[str, Any], words: list[str]
) -> None:
    agent, memory, config = thread["agent"], thread["memory"], thread["config"]
    with pytest.raises(ConfigError) as caught:
        memory.get_history_page(agent, config, **options)
    for word in words:
        assert word in str(caught.value)


def test_state_messages_refuses_what_is_not_a_thread_state() -> None:
    with pytest.raises(ConfigError, match="thread state's values"):
        state_messages([])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a serialized message"):
        state_messages({"messages": [{"content": "no type"}]})


def test_a_thread_without_dumps_pages_its_live_state() -> None:
    memory = ContextMemory(context_window_tokens=6_000)
    archive = memory.archive_for({"configurable": {"thread_id": "t"}})
    assert history_page([], None, archive, limit=3) == []
    live = [HumanMessage(f"q{n}", id=f"h{n}") for n in range(5)]
    assert history_page(live, None, archive, limit=2, before="h3") == live[1:3]
