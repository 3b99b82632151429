"""The call guard: what the model actually received (`graph/guard.py`), learned into the
ledger (`graph/attempts.py`)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ApproximateCounter, ContextMemory
from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.graph.attempts import CalledModel, CallRefused, Target
from langgraph_ctx.graph.guard import CallGuard
from langgraph_ctx.ledger import repair_ledger
from langgraph_ctx.prompt.render import (
    compacted_text,
    pruned_text,
    references_recall,
    replace_text,
    summary_message_for,
    without_recall_calls,
)
from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.tokens import get_counter

COUNTER = get_counter("gpt-4o")
ENTRY = {"tool": "read_file", "chars": 5_000, "input": "{}", "preview": "hello", "ref": "r"}


def test_placeholders_and_summary_notes_stop_naming_recall() -> None:
    tool_out = ToolMessage("x" * 50, tool_call_id="c1", name="read_file", id="m1")
    compacted = replace_text(tool_out, compacted_text("m1", ENTRY), compacted=True)
    pruned = replace_text(tool_out, pruned_text("m1", ENTRY), pruned=True)
    summary = summary_message_for("<completed>x</completed>", 3, ["d1"], dump_index="i1")
    merged = SystemMessage('You help.\n<summary>\nx\n</summary>\n[archived: a: recall(ref="d1")]')
    user = HumanMessage('What does recall(ref="m1") return?')  # the user's words stay
    out = without_recall_calls([merged, summary, user, compacted, pruned])
    assert not references_recall([out[0], out[1], out[3], out[4]])
    assert out[2] is user
    assert "Archived as m1." in str(out[3].content)
    assert "archived as m1" in str(out[4].content)
    assert "d1" in str(out[1].content) and "i1" in str(out[1].content)
    assert str(out[0].content).startswith("You help.")
    assert out[3].additional_kwargs == compacted.additional_kwargs  # still our placeholder
    assert isinstance(out[3], ToolMessage) and out[3].tool_call_id == "c1"


def test_a_summary_that_cut_a_reference_short_stops_naming_recall() -> None:
    # A deterministic summary copied a shortened turn's note and cut it mid-reference.
    text = (
        '<current_state>Let me check. [shortened; whole turn: recall(ref="lc_run…</current_state>'
    )
    summary = summary_message_for(text, 3, [], dump_index=None)
    assert references_recall([summary])
    (out,) = without_recall_calls([summary])
    assert not references_recall([out])
    assert "lc_run…" in str(out.content)


def test_only_our_pieces_name_recall() -> None:
    # A user or a tool quoting a reference does not make the prompt tell the model to call it.
    user = HumanMessage('What does recall(ref="m1") return?')
    tool_out = ToolMessage('see recall(ref="abc")', tool_call_id="c1", id="m2")
    assert not references_recall([user, tool_out])


def test_untagged_tool_output_naming_recall_is_left_alone() -> None:
    tool_out = ToolMessage('see recall(ref="abc")', tool_call_id="c1", id="m2")
    assert without_recall_calls([tool_out])[0] is tool_out


def test_learning_from_calls() -> None:
    nothing = CalledModel.from_ledger(None)
    assert nothing.after_pass(None, 8_000) == nothing == CalledModel()
    assert nothing.to_ledger() is None  # nothing learned: not stored
    assert nothing.build_window(8_000) == 8_000
    entry = {"added": 300, "window": 5_000, "recall_unbound": False}
    assert CalledModel.from_ledger(entry).build_window(8_000) == 4_700
    assert CalledModel.from_ledger(entry).to_ledger() == entry  # the ledger's JSON, as it was
    assert CalledModel(added=50_000).build_window(8_000) == 1  # never zero or negative


def test_a_malformed_called_entry_is_dropped_with_a_note() -> None:
    ledger, repairs = repair_ledger({"called": {"added": -3}})
    assert ledger.get("called") is None
    assert any("ledger['called']" in r for r in repairs)
    good = {"added": 12, "window": 4_000, "recall_unbound": True}
    assert repair_ledger({"called": good})[0]["called"] == good


def guard(window: int = 1_000, recall: str | None = "recall") -> CallGuard:
    model = ScriptedChatModel(profile={"max_input_tokens": window})
    memory = ContextMemory(model=model, token_counter=COUNTER)
    sent = [SystemMessage("You help."), HumanMessage("hi")]
    reserved = memory.manager.budget.reserved_output_tokens
    return CallGuard(memory, Target.of(model, memory), reserved, sent, [], COUNTER(sent), recall)


def test_the_guard_refuses_a_call_over_the_called_models_budget() -> None:
    g = guard()
    model = g.model
    fits = g.measure([model], [SystemMessage("You help. " * 10), HumanMessage("hi")], [])
    assert not fits.refused and fits.added is not None and fits.added > 0
    over = g.measure([model], [SystemMessage("word " * 2_000), HumanMessage("hi")], [])
    assert over.refused and over.tokens > over.limit == 1_000


def test_the_guard_refuses_a_call_naming_recall_without_binding_it() -> None:
    g = guard()
    tool_out = ToolMessage("x" * 50, tool_call_id="c1", name="read_file", id="m1")
    note = replace_text(tool_out, pruned_text("m1", ENTRY), pruned=True)
    unbound = g.measure([g.model], [note], [])
    assert unbound.recall_unbound and unbound.refused
    recall_schema = {"type": "function", "function": {"name": "recall", "parameters": {}}}
    assert not g.measure([g.model], [note], [recall_schema]).refused
    assert not guard(recall=None).measure([g.model], [note], []).refused  # none was sent


def test_an_ambiguous_call_is_held_to_the_smallest_window() -> None:
    g = guard(window=8_000)
    small = ScriptedChatModel(profile={"max_input_tokens": 2_000})
    g.know(small)
    received = g.measure([g.model, small], [HumanMessage("hi")], [])
    assert received.window == 2_000


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "the file " * 300


class Padding(AgentMiddleware[Any, Any]):
    """Adds `words` words to the system prompt of every call (a middleware inside ours)."""

    def __init__(self, words: int) -> None:
        super().__init__()
        self.words = words

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        base = request.system_message.text if request.system_message else ""
        padded = SystemMessage(base + " pad" * self.words)
        return handler(request.override(system_message=padded))


def agent_model(window: int) -> ScriptedChatModel:
    def step(prompt: list[Any]) -> AIMessage:
        call = {"name": "read_file", "args": {"path": "a"}, "id": f"c-{uuid.uuid4().hex[:8]}"}
        return AIMessage("", tool_calls=[call])

    replies = itertools.cycle([step, step, lambda prompt: AIMessage("done")])
    return ScriptedChatModel(
        messages=replies, profile={"max_input_tokens": window}, usage_counter=COUNTER
    )


def run_padded(words: int, window: int = 3_000) -> tuple[ScriptedChatModel, dict[str, Any]]:
    model = agent_model(window)
    memory = ContextMemory(model=model, token_counter=COUNTER)
    agent = create_agent(
        model,
        [read_file],
        system_prompt="You read files.",
        middleware=[memory.middleware(), Padding(words)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(4):
        agent.invoke({"messages": [HumanMessage(f"turn {turn}: read a")]}, config)
    return model, agent.get_state(config).values


def test_a_middleware_inside_ours_that_adds_to_the_prompt_stays_within_the_budget() -> None:
    model, state = run_padded(words=600)
    sizes = [
        COUNTER(p) + COUNTER.count_tools(t)
        for p, t in zip(model.prompts, model.prompt_tools, strict=True)
    ]
    assert max(sizes) <= 3_000
    assert max(sizes) > 2_000  # the run pressed on the window
    assert state["context_ledger"]["called"]["added"] >= 600


def test_a_middleware_inside_ours_that_adds_more_than_the_window_is_a_clear_error() -> None:
    with pytest.raises(ContextWindowExceededError) as raised:
        run_padded(words=5_000)
    assert isinstance(raised.value.__cause__, CallRefused) or "receives" in str(raised.value)


def test_a_calibrated_build_is_not_refused_when_nothing_inside_changes_it() -> None:
    """A provider that counts 0.7x our raw estimate: the build, scaled by the learned ratio,
    fills more raw tokens than the limit; the guard counts as the build did (same ratio) and
    never refuses a call nothing changed."""
    counter = ApproximateCounter(provider="anthropic")
    model = agent_model(3_000)
    model.usage_counter, model.usage_scale = counter, 0.7
    memory = ContextMemory(model=model, token_counter=counter)
    agent = create_agent(
        model,
        [read_file],
        system_prompt="You read files.",
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(8):
        agent.invoke({"messages": [HumanMessage(f"turn {turn}: read a")]}, config)
    ledger = agent.get_state(config).values["context_ledger"]
    assert ledger["calibration"]["ratio"] == pytest.approx(0.7, rel=0.05)
    assert ledger.get("called") is None  # nothing refused, nothing learned
    sent = zip(model.prompts, model.prompt_tools, strict=True)
    raw = [counter(p) + counter.count_tools(t) for p, t in sent]
    assert max(raw) > 3_000  # raw estimates over the window: the ratio let the build grow


def test_a_call_is_counted_from_the_build_plus_what_differs() -> None:
    """The guard counts only the messages that differ from the build (the rest arrive as the
    same objects): the same total as counting the whole prompt."""
    g = guard(window=100_000)
    sent = list(g.sent)
    assert g.measure([g.model], sent, []).tokens == COUNTER(sent)
    changed = [SystemMessage("You help. " + "rule " * 300), *sent[1:], HumanMessage("more")]
    received = g.measure([g.model], changed, [])
    assert received.tokens == COUNTER(changed)
    assert received.added == COUNTER(changed) - COUNTER(sent)
    schema = {
        "type": "function",
        "function": {"name": "todo", "description": "Plan.", "parameters": {}},
    }
    with_tool = g.measure([g.model], sent, [schema])
    assert with_tool.tokens == COUNTER(sent) + COUNTER.count_tools([schema])


def test_what_a_middleware_inside_adds_is_measured_by_part() -> None:
    """With an approximate counter the guard also gives the raw estimate by part of what the
    model received over the build: the calibration pairs the reply's count with the prompt
    received, part by part (text added to the system prompt is text, a tool added is schema)."""
    counter = ApproximateCounter(provider="unknown", method="pieces")
    model = ScriptedChatModel(profile={"max_input_tokens": 100_000})
    memory = ContextMemory(model=model, token_counter=counter)
    sent = [SystemMessage("You help."), HumanMessage("hi")]
    reserved = memory.manager.budget.reserved_output_tokens
    g = CallGuard(memory, Target.of(model, memory), reserved, sent, [], counter(sent), None)
    changed = [SystemMessage("You help. " + "rule " * 300), sent[1]]
    schema = {"type": "function", "function": {"name": "todo", "description": "Plan."}}
    received = g.measure([model], changed, [schema])
    assert received.parts is not None
    grown = counter.raw_parts(changed, [schema])
    built = counter.raw_parts(sent)
    assert received.parts == pytest.approx({p: grown[p] - built[p] for p in grown})
    assert received.parts["text"] > 0 and received.parts["tools"] > 0
    assert received.parts["calls"] == received.parts["frame"] == 0
