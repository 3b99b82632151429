"""The hint rebuild and the build agree on what the base system prompt is (`split_base`)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_ctx import ContextMemory
from langgraph_ctx.graph.state import ContextState
from langgraph_ctx.messages import text_of
from langgraph_ctx.messages.base import split_base

NOTE = "Use metric units from now on."


def _graph(memory: ContextMemory, seen: list[list[BaseMessage]]) -> Any:
    """context -> model -> after-turn; the model records its prompt and reports big usage."""

    def model(state: dict[str, Any]) -> dict[str, Any]:
        prompt = list(state["llm_input_messages"])
        seen.append(prompt)
        answer = AIMessage(
            f"answer {len(seen)}",
            id=f"ai-{len(seen)}",
            usage_metadata={"input_tokens": 900, "output_tokens": 5, "total_tokens": 905},
        )
        return {"messages": [answer]}

    builder = StateGraph(ContextState)
    builder.add_node("context", memory.node())
    builder.add_node("model", model)
    builder.add_node("after_turn", memory.after_turn_node())
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    builder.add_edge("model", "after_turn")
    builder.add_edge("after_turn", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_a_mid_conversation_system_message_stays_history_across_a_rebuild() -> None:
    # Before the fix the build showed the note in place as user text, while the rebuild left
    # it live (it took it for base prompt) and the next build merged it into the system prompt.
    memory = ContextMemory(context_window_tokens=1_000, hint_threshold=0.5)
    seen: list[list[BaseMessage]] = []
    graph = _graph(memory, seen)
    config: Any = {"configurable": {"thread_id": "t"}}
    first = [SystemMessage("You are terse.", id="sys"), HumanMessage("q1", id="h1")]
    graph.invoke({"messages": first}, config)
    second = [SystemMessage(NOTE, id="note"), HumanMessage("q2", id="h2")]
    graph.invoke({"messages": second}, config)
    before = seen[1]  # the prompt of turn 2, before its rebuild
    assert any(NOTE in text_of(m) and m.type == "human" for m in before)
    graph.invoke({"messages": [HumanMessage("q3", id="h3")]}, config)
    after = seen[2]
    live = graph.get_state(config).values["messages"]
    assert "note" not in {m.id for m in live}  # archived and cleared with the rest
    system = after[0]
    assert isinstance(system, SystemMessage) and text_of(system).startswith("You are terse.")
    assert NOTE not in text_of(system)  # never promoted into the base prompt
    full = memory.get_full_history(graph, config)
    assert [m.id for m in full][:4] == ["sys", "h1", "ai-1", "note"]


def test_split_base_takes_leading_system_messages_and_adopts_a_leading_summary() -> None:
    summary = SystemMessage(
        "<summary>\nearlier\n</summary>", additional_kwargs={"langgraph_ctx": {"kind": "summary"}}
    )
    tool_fallback = SystemMessage("[tool: bash] ls")
    note = SystemMessage("later note", id="n")
    messages = [SystemMessage("base"), summary, tool_fallback, HumanMessage("hi"), note]
    base, adopted, history = split_base(messages)
    assert [text_of(m) for m in base] == ["base"] and base[0].id  # a derived id
    assert adopted == "earlier"
    assert history == [tool_fallback, messages[3], note]
    assert split_base([HumanMessage("hi")]) == ([], None, [HumanMessage("hi")])
