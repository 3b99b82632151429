"""Message shapes real agents produce that the providers refuse, repaired in the prompt only.

Each case is judged three ways: LangChain's OpenAI converter and Anthropic converter with the
rules each provider documents (`tests.providers`), and our own `validate_messages`, which must
agree with them: it flags the raw history and passes the prompt. The state is never touched,
and the build reports what it changed as its `repair` decision.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langgraph_ctx import ContextManager, repair_messages, validate_messages
from langgraph_ctx.messages import get_tag, text_of
from tests.providers import provider_problems


def build(history: Sequence[BaseMessage]) -> Any:
    """Build on `history`: the raw list is refused, the prompt accepted, the state untouched."""
    assert provider_problems(history), "the case must be one the providers refuse"
    assert validate_messages(history, provider="all"), "our validator agrees with them"
    before = [m.model_dump() for m in history]
    cm = ContextManager(context_window_tokens=4_000)
    result = cm.build(history)
    assert provider_problems(result.messages) == []
    assert validate_messages(result.messages, provider="all") == []
    assert [m.model_dump() for m in history] == before, "the state is never repaired"
    assert "repair" in result.report.kinds()
    again = cm.build(history, state=copy.deepcopy(result.state))
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in result.messages]
    fed_back = cm.build(result.messages)
    assert [m.model_dump() for m in fed_back.messages] == [
        m.model_dump() for m in result.messages
    ], "building on its own output changes nothing"
    return result


def repair_lines(result: Any) -> list[str]:
    (decision,) = [d for d in result.report.decisions if d.kind == "repair"]
    return list(decision.detail["messages"])


def invalid_call(call_id: str | None = "c1") -> dict[str, Any]:
    return {
        "type": "invalid_tool_call",
        "id": call_id,
        "name": "bash",
        "args": '{"cmd": "ls',
        "error": "Function bash arguments are not valid JSON",
    }


def test_invalid_tool_call_is_answered_with_an_error() -> None:
    history: list[BaseMessage] = [
        HumanMessage("list the files", id="h1"),
        AIMessage("", invalid_tool_calls=[invalid_call()], id="a1"),
        HumanMessage("and now?", id="h2"),
    ]
    result = build(history)
    answer = result.messages[2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "c1"
    assert answer.status == "error" and get_tag(answer)["repair"] == "invalid_call"
    assert "not valid JSON" in text_of(answer)
    assert any("c1" in line for line in repair_lines(result))


def test_invalid_tool_call_beside_a_valid_one_is_answered_too() -> None:
    call = {"name": "bash", "args": {"cmd": "pwd"}, "id": "c0", "type": "tool_call"}
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=[call], invalid_tool_calls=[invalid_call()], id="a1"),
        ToolMessage("/repo", tool_call_id="c0", name="bash", id="t0"),
    ]
    result = build(history)
    assert [getattr(m, "tool_call_id", None) for m in result.messages[2:]] == ["c0", "c1"]


@pytest.mark.parametrize("answered", [True, False])
def test_call_without_id_gets_an_id_its_answer_shares(answered: bool) -> None:
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": None}], id="a1"),
    ]
    if answered:
        history.append(ToolMessage("out", tool_call_id="", name="bash", id="t1"))
    history.append(AIMessage("done", id="a2"))
    result = build(history)
    ai, answer = result.messages[1], result.messages[2]
    assert isinstance(ai, AIMessage) and isinstance(answer, ToolMessage)
    call_id = ai.tool_calls[0]["id"]
    assert call_id and call_id.startswith("lgctx-call-")
    assert answer.tool_call_id == call_id
    assert text_of(answer) == "out" if answered else answer.status == "error"
    assert (answer.id == "t1") is answered


@pytest.mark.parametrize(
    "content",
    [[{"type": "text", "text": ""}], "  \n\t", [{"type": "text", "text": " "}, "\n"]],
    ids=["empty-block", "whitespace", "whitespace-blocks"],
)
def test_blank_user_message_gets_a_placeholder(content: Any) -> None:
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("on it", id="a1"),
        HumanMessage(content, id="blank"),
    ]
    result = build(history)
    shown = result.messages[-1]
    assert shown.id == "blank" and text_of(shown) == "[empty message]"
    assert get_tag(shown)["was"] == "empty"


@pytest.mark.parametrize("answers", [2, 1])
def test_two_calls_with_one_id_are_told_apart(answers: int) -> None:
    calls = [
        {"name": "read", "args": {"path": p}, "id": "dup", "type": "tool_call"}
        for p in ("a.py", "b.py")
    ]
    history: list[BaseMessage] = [
        HumanMessage("read both", id="h1"),
        AIMessage("", tool_calls=calls, id="a1"),
    ]
    history += [
        ToolMessage(f"file {n}", tool_call_id="dup", name="read", id=f"t{n}")
        for n in range(answers)
    ]
    result = build(history)
    ai = result.messages[1]
    assert isinstance(ai, AIMessage)
    first, second = (tc["id"] for tc in ai.tool_calls)
    assert first == "dup" and second and second.startswith("lgctx-call-")
    answer_ids = [m.tool_call_id for m in result.messages[2:4]]  # type: ignore[attr-defined]
    assert answer_ids == [first, second]
    assert text_of(result.messages[2]) == "file 0"
    if answers == 2:
        assert text_of(result.messages[3]) == "file 1", "the second answer stays in the prompt"


@pytest.mark.parametrize("answered", [True, False])
def test_tool_use_block_without_tool_calls_is_paired(answered: bool) -> None:
    content = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
    ]
    history: list[BaseMessage] = [HumanMessage("go", id="h1"), AIMessage(content, id="a1")]
    if answered:
        history.append(ToolMessage("a.py", tool_call_id="toolu_1", name="bash", id="t1"))
    history.append(HumanMessage("next", id="h2"))
    result = build(history)
    ai, answer = result.messages[1], result.messages[2]
    assert isinstance(ai, AIMessage) and [tc["id"] for tc in ai.tool_calls] == ["toolu_1"]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "toolu_1"
    assert (answer.id == "t1") is answered


def test_repair_messages_fixes_each_shape_on_its_own() -> None:
    """The owner, called directly: one pass repairs every shape and lists each change."""
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("", invalid_tool_calls=[invalid_call(None)], id="a1"),
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": None}] * 2, id="a2"),
        ToolMessage("one", tool_call_id="", id="t1"),
    ]
    fixed = repair_messages(history)
    assert provider_problems(fixed.messages) == []
    assert validate_messages(fixed.messages) == []
    assert len(fixed.actions) >= 4
