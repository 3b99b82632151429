"""`DynamicSummarization` keeps "nothing is removed without a summary".

Under the trigger nothing forces its cut: it cuts the oldest turns only to put a summary in
their place. When the insurance dump fails (an archive whose writes raise), no summary may be
written, so the prompt keeps those turns; the report says why, nothing leaves the state, and a
rerun on the build's own state gives the same prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx.archive import Archive
from langgraph_ctx.messages import validate_messages
from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.strategies import DynamicSummarization
from langgraph_ctx.tokens import TiktokenCounter
from tests.conftest import make_strategies, run

COUNTER = TiktokenCounter("gpt-4o")


class RaisingStore(InMemoryStore):
    """An `InMemoryStore` whose writes fail (a full disk, a lost connection)."""

    def batch(self, ops: Any) -> Any:
        """Refuse every put; reads go through."""
        if any(type(op).__name__ == "PutOp" for op in ops):
            raise OSError("disk full")
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        """Async `batch`."""
        return self.batch(ops)


def history() -> list[BaseMessage]:
    """Three finished turns and a new question: two turns over `threshold_turns=2`."""
    return [
        SystemMessage("You are helpful.", id="sys"),
        HumanMessage("first question", id="h1"),
        AIMessage("first answer", id="a1"),
        HumanMessage("second question", id="h2"),
        AIMessage("second answer", id="a2"),
        HumanMessage("third question", id="h3"),
        AIMessage("third answer", id="a3"),
        HumanMessage("fourth question", id="h4"),
    ]


def manager(store: InMemoryStore) -> ContextManager:
    """Dynamic summarization first, far under the trigger, archive in `store`."""
    return ContextManager(
        budget=ContextBudget(context_window_tokens=20_000),
        token_counter=COUNTER,
        strategies=make_strategies(first=[DynamicSummarization(threshold_turns=2, turns=1)]),
        archive=Archive(store, thread_id="t"),
    )


def dump(messages: Sequence[BaseMessage]) -> str:
    """The messages as comparable JSON."""
    return json.dumps([m.model_dump() for m in messages], sort_keys=True, default=str)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failed_insurance_dump_cuts_nothing_from_the_prompt(mode: str) -> None:
    messages = history()
    before = dump(messages)
    cm = manager(RaisingStore())
    result = await run(mode, cm.build, cm.abuild, messages)
    assert validate_messages(result.messages) == []
    assert [m.id for m in result.messages] == [m.id for m in messages], "nothing cut"
    assert not (result.state.get("summary") or {}).get("text"), "no summary was written"
    assert "shrink" not in result.report.kinds(), "no cut reported"
    assert "insurance dump failed" in json.dumps(result.report.to_dict()), "the report says why"
    assert dump(messages) == before, "the state is untouched"
    rerun = await run(mode, cm.build, cm.abuild, messages, state=result.state)
    assert dump(rerun.messages) == dump(result.messages), "idempotent on its state"
    assert rerun.report.edits() == []


def test_with_a_working_archive_the_same_cut_is_summarized() -> None:
    """The control: the same build with an archive that works cuts and summarizes."""
    messages = history()
    cm = manager(InMemoryStore())
    result = cm.build(messages)
    assert {"shrink", "summarize"} <= set(result.report.kinds())
    assert (result.state.get("summary") or {}).get("text")
    assert [m.id for m in result.messages if m.id in {"h1", "a1"}] == []
    rerun = cm.build(messages, state=result.state)
    assert dump(rerun.messages) == dump(result.messages)


def test_a_cut_skipped_for_want_of_room_stands_and_a_rerun_changes_nothing() -> None:
    """Regression (the property test that made 472f63f be reverted, window 386): a dynamic cut
    with no room for a summary stands, since the budget needs it anyway; taking it back made a
    rerun on the build's own state cut and summarize differently."""
    from langchain_core.messages import ToolMessage

    from tests.strategies import Setup

    output = (
        "   0 def handler(event, context):\n"
        "   1     return {'statusCode': 200, 'body': json.dumps(result)}\n"
        "   2 ERROR tests/test_api.py::test_login - AssertionError: 401 != 200\n"
        "   3 drwxr-xr-x  5 dev dev  4096"
    )

    def calls(*ids: str) -> list[dict[str, Any]]:
        return [{"name": "read_file", "args": {}, "id": i, "type": "tool_call"} for i in ids]

    def result(content: Any, mid: str, call: str, status: str = "success") -> ToolMessage:
        return ToolMessage(content, name="read_file", id=mid, tool_call_id=call, status=status)

    image: list[str | dict[Any, Any]] = [
        {"type": "image_url", "image_url": {"url": "https://example.com/0.png"}}
    ]
    messages: list[BaseMessage] = [
        SystemMessage("0", id="sys-0"),
        HumanMessage(image, id="human-1"),
        HumanMessage("", id="empty-0"),
        HumanMessage([{"type": "text", "text": "0"}], id="human-2"),
        AIMessage("", id="ai-6", tool_calls=calls("call-3", "call-4", "call-5")),
        result("", "tool-7", "call-3"),
        result("", "tool-8", "call-4", "error"),
        result("", "tool-9", "call-5", "error"),
        HumanMessage("0", id="human-10"),
        AIMessage("0", id="ai-11"),
        AIMessage("", id="ai-14", tool_calls=calls("call-12", "call-13")),
        result("", "tool-15", "call-12", "error"),
        result("", "tool-16", "call-13"),
        AIMessage("", id="ai-20", tool_calls=calls("call-17", "call-18", "call-19")),
        result(output, "tool-21", "call-17"),
        result("", "tool-22", "call-18", "error"),
        result(output, "tool-23", "call-19"),
    ]
    setup = Setup(
        counter="tiktoken",
        window=386,
        reserved=0,
        auto_compact=False,
        compaction=False,
        placement="separate",
        tools=False,
        memory=(),
        protect_turns=0,
        prune_errors=False,
        dynamic=True,
        n_tools=1,
    )
    cm = setup.manager(InMemoryStore())
    built = setup.build(cm, messages)
    reasons = [d.detail.get("reason") for d in built.report.decisions]
    assert "dynamic_summarization" in reasons, reasons
    assert "no room for a summary within the limit" in reasons, reasons
    assert validate_messages(built.messages) == []
    rerun = setup.build(cm, messages, built.state)
    assert dump(rerun.messages) == dump(built.messages), "idempotent on its state"
    assert rerun.report.edits() == []
