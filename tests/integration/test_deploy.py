"""Where deployed agents run: identity as the LangGraph server gives it, the archive in the
graph's own store, no silent in-process archive behind a durable checkpointer, a restart that
keeps `recall` working, and a runtime `context_schema` next to the ledger.

The real server (`langgraph dev`) is driven in `test_server.py`; these tests pin the same rules
on in-process graphs, where a failure is quicker to read.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import before_model
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.archive import NAMESPACE_ROOT, Archive
from tests.conftest import run
from tests.fakes import ScriptedChatModel
from tests.integration._agents import (
    Script,
    Seen,
    adrive,
    check_history,
    check_prompts,
    compacting_memory,
    drive,
    hand_built,
    recall_script,
    synthetic_script,
)

WINDOW = 5_000


def agent_for(memory: ContextMemory, script: Script, model: Any, **kwargs: Any) -> Any:
    middleware = [*kwargs.pop("middleware", []), memory.middleware()]
    return create_agent(
        model, script.tools(), system_prompt=script.system, middleware=middleware, **kwargs
    )


def thread(**extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:12]}", **extra}}


def archive_scopes(store: BaseStore) -> set[tuple[str, ...]]:
    """The (user, thread) or (thread,) scopes the store holds archive entries for."""
    return {ns[1:-1] for ns in store.list_namespaces(prefix=(NAMESPACE_ROOT,), limit=10_000)}


# --- identity, as the LangGraph server writes it ------------------------------------------------


def test_identity_from_a_server_config() -> None:
    store = InMemoryStore()
    # `langgraph dev` without custom auth writes an empty user id: no user scope, not an error.
    archive = Archive.from_config(store, {"configurable": {"thread_id": "t", "user_id": ""}})
    assert archive.user_id is None
    # The authenticated user wins over a user id the caller chose in `configurable`.
    served = {"thread_id": "t", "user_id": "mallory", "langgraph_auth_user_id": "alice"}
    assert Archive.from_config(store, {"configurable": served}).user_id == "alice"
    # An empty authenticated id (no auth) falls back to the caller's user id.
    plain = {"thread_id": "t", "user_id": "bob", "langgraph_auth_user_id": ""}
    assert Archive.from_config(store, {"configurable": plain}).user_id == "bob"

    class User:
        identity = "carol"

    # The user object the server hands the runtime (`Runtime.server_info.user`).
    object_only = {"thread_id": "t", "langgraph_auth_user": User()}
    assert Archive.from_config(store, {"configurable": object_only}).user_id == "carol"


async def test_server_config_runs_and_scopes_by_the_authenticated_user(mode: str) -> None:
    script = synthetic_script(turns=6, recall=False)
    store = InMemoryStore()
    memory = ContextMemory(context_window_tokens=WINDOW)
    model = ScriptedChatModel(messages=iter(script.replies * 2))  # the same run on two threads
    agent = agent_for(memory, script, model, checkpointer=InMemorySaver(), store=store)
    anonymous = thread(user_id="")
    signed_in = thread(user_id="", langgraph_auth_user_id="alice")
    for config in (anonymous, signed_in):
        await run(mode, drive, adrive, agent, script.inputs, config)
    check_prompts(model, memory)
    scopes = archive_scopes(store)
    assert (anonymous["configurable"]["thread_id"],) in scopes
    assert ("alice", signed_in["configurable"]["thread_id"]) in scopes


# --- the archive follows the graph's persistence ---------------------------------------------


def recalled(seen: Seen) -> list[ToolMessage]:
    return [m for m in seen.messages.values() if isinstance(m, ToolMessage) and m.name == "recall"]


def assert_recalled_an_original(seen: Seen) -> None:
    found = recalled(seen)
    assert len(found) == 1 and found[0].status == "success", found
    originals = [
        str(m.content)[:500]
        for m in seen.messages.values()
        if isinstance(m, ToolMessage) and m.name != "recall"
    ]
    assert any(o in str(found[0].content) for o in originals), found[0].content[:300]


async def test_create_agent_store_holds_the_archive(mode: str) -> None:
    script = recall_script()
    store = InMemoryStore()
    memory = compacting_memory()
    model = script.model()
    agent = agent_for(memory, script, model, checkpointer=InMemorySaver(), store=store)
    config = thread()
    seen = await run(mode, drive, adrive, agent, script.inputs, config)
    check_prompts(model, memory)
    assert archive_scopes(store) == {(config["configurable"]["thread_id"],)}
    assert_recalled_an_original(seen)
    check_history(memory, agent, config, seen)


def test_state_graph_store_holds_the_archive() -> None:
    script = synthetic_script(turns=4, recall=False)
    store = InMemoryStore()
    memory = ContextMemory(context_window_tokens=WINDOW)
    model = script.model()
    graph = hand_built(memory, model, script.tools()).compile(
        checkpointer=InMemorySaver(), store=store
    )
    config = thread()
    seen = drive(graph, script.inputs, config)
    check_prompts(model, memory)
    assert archive_scopes(store) == {(config["configurable"]["thread_id"],)}
    check_history(memory, graph, config, seen)


def test_durable_checkpointer_without_a_store_keeps_the_archive_in_its_database(
    tmp_path: Path,
) -> None:
    """No store and no archive=: the archive goes into the SqliteSaver's own file (a custom
    durable checkpointer is refused instead: tests/integration/test_durable_archive.py)."""
    script = recall_script()
    memory = compacting_memory()
    db = tmp_path / "threads.sqlite"
    config = thread()
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        model = script.model()
        agent = agent_for(memory, script, model, checkpointer=SqliteSaver(conn))
        seen = drive(agent, script.inputs, config)
        check_prompts(model, memory)
        assert_recalled_an_original(seen)
        check_history(memory, agent, config, seen)
    finally:
        conn.close()
    with SqliteStore.from_conn_string(str(db)) as store:
        assert archive_scopes(store) == {(config["configurable"]["thread_id"],)}


def test_recall_after_a_restart_with_a_persistent_store(tmp_path: Path) -> None:
    script = recall_script()
    config = thread()
    db, archive_db = tmp_path / "threads.sqlite", tmp_path / "store.sqlite"

    def start(skip: int) -> tuple[Any, Any, Any]:
        conn = sqlite3.connect(db, check_same_thread=False)
        store_conn = sqlite3.connect(archive_db, check_same_thread=False, isolation_level=None)
        store = SqliteStore(store_conn)
        store.setup()
        memory = compacting_memory()  # a new process: a new memory
        model = script.model(skip=skip)
        agent = agent_for(memory, script, model, checkpointer=SqliteSaver(conn), store=store)
        return (conn, store_conn), memory, (agent, model)

    conns, memory, (agent, model) = start(0)
    seen = drive(agent, script.inputs[:-1], config)
    check_prompts(model, memory)
    for conn in conns:
        conn.close()
    done = len(model.prompts)

    conns, memory, (agent, model) = start(done)
    seen = drive(agent, script.inputs[-1:], config, seen)
    check_prompts(model, memory)
    assert_recalled_an_original(seen)
    call = next(
        tc
        for m in seen.messages.values()
        if isinstance(m, AIMessage)
        for tc in m.tool_calls
        if tc["name"] == "recall"
    )
    restored = memory.restore(call["args"]["ref"], config, graph=agent)
    assert str(restored.content)[:500] in str(recalled(seen)[0].content)
    check_history(memory, agent, config, seen)
    for conn in conns:
        conn.close()


# --- a runtime context next to the ledger -------------------------------------------------------


@dataclass
class UserContext:
    user_name: str


def test_runtime_context_schema_and_the_ledger_coexist() -> None:
    script = synthetic_script(turns=2, recall=False)
    memory = ContextMemory(context_window_tokens=WINDOW)
    seen_context: list[Any] = []

    @before_model
    def remember(state: Any, runtime: Any) -> None:
        seen_context.append(runtime.context)

    agent = agent_for(
        memory,
        script,
        script.model(),
        middleware=[remember],
        context_schema=UserContext,
        checkpointer=InMemorySaver(),
    )
    config = thread()
    for human in script.inputs:
        agent.invoke({"messages": [human]}, config, context=UserContext(user_name="ada"))
    values = agent.get_state(config).values
    assert values["context_ledger"]["last_report"]["tokens"] > 0
    assert "context" not in values
    assert seen_context and all(c == UserContext(user_name="ada") for c in seen_context)
    last = values["messages"][-1]
    assert isinstance(last, AIMessage) and last.response_metadata["context_cost"]["tokens"] > 0
    assert isinstance(values["messages"][0], HumanMessage)
