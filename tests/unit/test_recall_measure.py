"""The benchmark's next-step recall measure (langgraph_ctx_tools.replay.measure): what it counts."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_ctx_tools.replay.measure import NextStepRecall, names_in


def test_names_are_paths_identifiers_numbers_and_hex_ids() -> None:
    text = "open src/io/reader.py, call parse_rows() on rowCount 123456 at commit 3fa9c1d2 then"
    assert {"src/io/reader.py", "parse_rows", "rowCount", "123456", "3fa9c1d2"} <= names_in(text)
    assert not {"open", "call", "then", "commit"} & names_in(text)


def test_recall_counts_names_from_tool_output_shown_as_whole_lines() -> None:
    output = "def parse_rows(stream):\n    return [decode_row(r) for r in stream]\n"
    run: list[BaseMessage] = [
        SystemMessage("sys"),
        HumanMessage("Fix decode_row in the parser."),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "cat p.py"}, "id": "c1"}]),
        ToolMessage(output, tool_call_id="c1"),
        AIMessage("parse_rows calls decode_row; edit parse_rows."),
    ]
    needs = NextStepRecall.of(run).needs[4]
    # decode_row came from the user first: not a name the output taught.
    assert [n.name for n in needs] == ["parse_rows"]
    whole = NextStepRecall.of(run)
    assert whole.score(4, run[:4]) == (1, 1)
    cut = [*run[:3], ToolMessage("def parse_rows(str", tool_call_id="c1")]
    partial = NextStepRecall.of(run)
    assert partial.score(4, cut) == (0, 1), "a partial line does not count"
