"""One archive per conversation (issue 50, break 1).

A `create_agent` graph with the memory's middleware and no checkpointer is a stateless agent:
LangGraph asks for no thread id, and before this change every invocation without one archived
under the thread `default`, so one user's `search_history("api_key")` found another user's
archived `api_key=...` line and `recall` read it (in the memory's own store and in a shared
`store=`). Now a memory used without `configurable.thread_id` refuses with a `ConfigError`
naming it, before anything is archived; conversations with their own thread ids never read each
other's archive; and the search and recall tools called outside a run answer that a thread is
needed. Real graphs, real stores; only the chat model is scripted.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory, ContextState
from langgraph_ctx.archive import NAMESPACE_ROOT
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import text_of
from tests.fakes import ScriptedChatModel

WINDOW = 4_000
SECRET = "api_key=SECRET-OF-ALICE-4f9c2e"
RECALL_RE = re.compile(r'recall\(ref="([^"]+)"\)')


@tool
def read_config(path: str) -> str:
    """Read a configuration file."""
    lines = [f"option_{i:03} = value {i * 7 % 13} (set in review {i})" for i in range(160)]
    lines[80] = SECRET
    return "\n".join(lines)


def alice_script() -> list[Any]:
    """Alice reads her configuration (the output is archived as it arrives), then answers."""
    call = {"name": "read_config", "args": {"path": "alice.env"}, "id": "read-1"}
    return [AIMessage("", tool_calls=[call]), "Read it."]


def bob_script(alice_refs: list[str], seen: list[str]) -> list[Any]:
    """Bob searches for `api_key`, then recalls each of Alice's references; `seen` gets the
    answers."""

    def search(prompt: list[BaseMessage]) -> AIMessage:
        call = {"name": "search_history", "args": {"query": "api_key"}, "id": "search"}
        return AIMessage("", tool_calls=[call])

    def recall(ref: str) -> Callable[[list[BaseMessage]], AIMessage]:
        def step(prompt: list[BaseMessage]) -> AIMessage:
            seen.append(text_of(prompt[-1]))
            call = {"name": "recall", "args": {"ref": ref}, "id": f"recall-{len(seen)}"}
            return AIMessage("", tool_calls=[call])

        return step

    def answer(prompt: list[BaseMessage]) -> AIMessage:
        seen.append(text_of(prompt[-1]))
        return AIMessage("Nothing found.")

    return [search, *(recall(ref) for ref in alice_refs), answer]


def stateless_agent(memory: ContextMemory, script: list[Any]) -> tuple[Any, ScriptedChatModel]:
    """A `create_agent` graph with the memory's middleware and no checkpointer."""
    model = ScriptedChatModel(messages=iter(script))
    return create_agent(model, [read_config], middleware=[memory.middleware()]), model


def archived_namespaces(store: InMemoryStore) -> list[tuple[str, ...]]:
    return list(store.list_namespaces(prefix=(NAMESPACE_ROOT,)))


STORES = pytest.mark.parametrize("shared_store", [False, True], ids=["own-store", "store="])


def memory_and_store(shared_store: bool) -> tuple[ContextMemory, InMemoryStore]:
    """A memory archiving in its own in-process store, or in a `store=` shared by graphs."""
    if shared_store:
        store = InMemoryStore()
        return ContextMemory(context_window_tokens=WINDOW, store=store), store
    memory = ContextMemory(context_window_tokens=WINDOW)
    return memory, memory._local


@STORES
def test_two_users_of_a_stateless_agent_without_a_thread_share_nothing(
    shared_store: bool,
) -> None:
    memory, store = memory_and_store(shared_store)
    alice, _ = stateless_agent(memory, alice_script())
    seen: list[str] = []
    bob, _ = stateless_agent(memory, bob_script(["lgctx:default:message:" + "0" * 64], seen))
    refusals: list[str] = []
    for agent, words in ((alice, "show my config"), (bob, "what is the api key?")):
        try:
            agent.invoke({"messages": [HumanMessage(words)]})  # no config: no thread id
        except ConfigError as exc:
            refusals.append(str(exc))
    assert not any(SECRET in text for text in seen), "Bob read Alice's archived secret"
    # Neither invocation ran on a shared default thread: each refused, saying what to pass.
    assert len(refusals) == 2
    for message in refusals:
        assert "configurable.thread_id" in message and "\n" not in message
        assert "conversation" in message
    assert archived_namespaces(store) == [], "something was archived without a thread"


@STORES
def test_conversations_with_their_own_thread_ids_never_read_each_other(
    shared_store: bool,
) -> None:
    memory, store = memory_and_store(shared_store)
    alice, alice_model = stateless_agent(memory, alice_script())
    alice_thread = f"alice-{uuid.uuid4().hex}"
    alice_config: Any = {"configurable": {"thread_id": alice_thread}}
    alice.invoke({"messages": [HumanMessage("show my config")]}, alice_config)
    # Her output left the prompt (archived): the prompt's recall call names its message id.
    [message_id] = set(RECALL_RE.findall(text_of(alice_model.prompts[-1][-1])))
    ref = memory.archive_for(alice_config).lookup(message_id)
    assert ref is not None and SECRET in text_of(memory.archive_for(alice_config).read(ref))
    assert (NAMESPACE_ROOT, alice_thread, "message") in archived_namespaces(store)  # the one
    seen: list[str] = []
    bob, _ = stateless_agent(memory, bob_script([message_id, ref], seen))
    bob_thread = f"bob-{uuid.uuid4().hex}"
    bob_config: Any = {"configurable": {"thread_id": bob_thread}}
    bob.invoke({"messages": [HumanMessage("what is the api key?")]}, bob_config)
    searched, by_id, by_ref = seen
    assert not any(SECRET in text for text in seen), "Bob read Alice's archived secret"
    assert "0 entries searched" in searched
    assert f"nor the id of a message archived in thread {bob_thread!r}" in by_id
    assert "belongs to another thread" in by_ref


@pytest.mark.parametrize("config", [None, {"configurable": {}}], ids=["no-config", "no-thread"])
def test_the_tools_called_outside_a_run_say_a_thread_is_needed(config: Any) -> None:
    memory = ContextMemory(context_window_tokens=WINDOW)
    search, recall = memory.search_tool(), memory.recall_tool()
    for tool_, args in (
        (search, {"query": "api_key"}),
        (recall, {"ref": "lgctx:default:message:" + "0" * 64}),
    ):
        call = {"name": tool_.name, "args": args, "id": "c1", "type": "tool_call"}
        answer = tool_.invoke(call, config)
        assert isinstance(answer, ToolMessage) and answer.status == "error"
        text = text_of(answer)
        assert "entries searched" not in text and "not found" not in text
        assert text.startswith(f"{tool_.name} failed: the run config has no ")
        assert "configurable.thread_id" in text and "\n" not in text


def test_the_tools_in_a_run_without_a_thread_say_a_thread_is_needed() -> None:
    """A hand-built graph that binds the tools without the memory's node or middleware."""
    memory = ContextMemory(context_window_tokens=WINDOW)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([memory.search_tool(), memory.recall_tool()]))
    graph.add_edge(START, "tools")
    calls = [
        {"name": "search_history", "args": {"query": "api_key"}, "id": "s1"},
        {"name": "recall", "args": {"ref": "lgctx:default:message:" + "0" * 64}, "id": "r1"},
    ]
    out = graph.compile().invoke({"messages": [AIMessage("", tool_calls=calls)]})
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["error", "error"]
    for answer, name in zip(answers, ("search_history", "recall"), strict=True):
        assert text_of(answer).startswith(f"{name} failed: the run config has no ")


def test_the_node_without_a_thread_refuses_before_archiving() -> None:
    """The same refusal from `memory.node()` in a hand-built graph with no checkpointer."""
    memory = ContextMemory(context_window_tokens=WINDOW)
    graph = StateGraph(ContextState)
    graph.add_node("context", memory.node())
    graph.add_node("model", lambda state: {"messages": [AIMessage("ok")]})
    graph.add_edge(START, "context")
    graph.add_edge("context", "model")
    long_output = ToolMessage(read_config.invoke({"path": "a"}), tool_call_id="c1", name="r")
    call = AIMessage("", tool_calls=[{"name": "r", "args": {}, "id": "c1"}])
    with pytest.raises(ConfigError, match=r"no configurable\.thread_id"):
        graph.compile().invoke({"messages": [HumanMessage("go"), call, long_output]})
    assert archived_namespaces(memory._local) == []


def test_the_search_index_never_answers_with_another_threads_lines(tmp_path: Any) -> None:
    """Issue 52: with the archive in SQLite, search asks the database's line index, which
    holds every thread's lines in one table; Bob's search for Alice's secret, as words, as a
    phrase or as SQL and FTS syntax, finds nothing, and reads no entry of hers."""
    from langgraph.store.sqlite import SqliteStore

    from langgraph_ctx.archive import Archive, EntryCache, StoreBackend, search_archive
    from langgraph_ctx.archive.index_search import line_index_of

    with SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store:
        store.setup()
        alice = Archive(StoreBackend(store), thread_id="alice")
        bob = Archive(StoreBackend(store), thread_id="bob")
        alice.put_message(ToolMessage(f"config:\n{SECRET}\nend", tool_call_id="c1", name="cat"))
        bob.put_message(ToolMessage("config:\nnothing here\nend", tool_call_id="c2", name="cat"))
        assert line_index_of(bob) is not None
        for query in ("api_key", '"SECRET-OF-ALICE"', "%SECRET%", '" OR "api', "api* NEAR(key"):
            answer = search_archive(bob, query, cache=EntryCache())
            assert "SECRET" not in answer.upper().replace(query.upper(), "")
            assert "no line matches" in answer
        assert "SECRET-OF-ALICE" in search_archive(alice, "api_key", cache=EntryCache())
