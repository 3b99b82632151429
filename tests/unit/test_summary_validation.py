"""A summary that parrots the summarizer's instructions, or copies its input, is a failed summary.

With a small real model the summary came back as the prompt's own section descriptions inside
the four tags, and it was accepted as the running summary. The scripted model here does exactly
that (and, in a second test, pastes its input back); the summarizer falls back to the
deterministic summary and says why, in the outcome and in the build's report.
"""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langgraph_ctx import ContextManager, SlidingWindow
from langgraph_ctx.messages import text_of
from langgraph_ctx.summaries.summarizer import Summarizer
from langgraph_ctx.summaries.transcript import SUMMARY_PROMPT
from tests.fakes import ScriptedChatModel


def parroted() -> str:
    """The prompt's four sections, descriptions and all, as a small model echoes them."""
    start = SUMMARY_PROMPT.index("<completed>")
    end = SUMMARY_PROMPT.index("</notes>") + len("</notes>")
    return SUMMARY_PROMPT[start:end]


def conversation() -> list[BaseMessage]:
    listing = "\n".join(
        f"src/module_{i}.py: def handler_{i}(request): return process(request, retries={i})"
        for i in range(40)
    )
    call = {"name": "grep", "args": {"pattern": "def handler"}, "id": "call_1"}
    return [
        HumanMessage("Find every request handler and add a timeout to each.", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(listing, tool_call_id="call_1", id="t1"),
        AIMessage("There are 40 handlers; I will add timeouts next.", id="a2"),
    ]


def copied(messages: list[BaseMessage]) -> str:
    """Four sections whose bodies paste the tool output back."""
    output = text_of(messages[2])
    return (
        f"<completed>\n{output}\n</completed>\n<remaining>\n- Add timeouts.\n</remaining>\n"
        "<current_state>\n- Listing done.\n</current_state>\n<notes>\n- none\n</notes>"
    )


GOOD = (
    "<completed>\n- Listed the 40 request handlers with grep (src/module_0.py to "
    "src/module_39.py, handler_0 to handler_39).\n</completed>\n<remaining>\n- Add a timeout to "
    "each handler.\n</remaining>\n<current_state>\n- No file edited yet.\n</current_state>\n"
    "<notes>\n- Handlers call process(request, retries=N).\n</notes>"
)


def test_a_summary_parroting_the_instructions_falls_back() -> None:
    model = ScriptedChatModel(messages=iter([parroted()]), fallback=None)
    outcome = Summarizer(model=model, retries=0).summarize(conversation())
    assert outcome.source == "fallback" and outcome.model_calls == 1
    assert outcome.error is not None and "parroted the instructions" in outcome.error
    assert "What has been done" not in outcome.text


def test_a_summary_copied_from_its_input_falls_back() -> None:
    messages = conversation()
    model = ScriptedChatModel(messages=iter([copied(messages)]), fallback=None)
    outcome = Summarizer(model=model, retries=0).summarize(messages)
    assert outcome.source == "fallback"
    assert outcome.error is not None and "copied from its input" in outcome.error


def test_free_text_copy_is_rejected_too() -> None:
    messages = conversation()
    model = ScriptedChatModel(messages=iter([text_of(messages[2])]), fallback=None)
    outcome = Summarizer(model=model, retries=0).summarize(messages)
    assert outcome.source == "fallback" and "copied from its input" in str(outcome.error)


def test_a_real_summary_with_verbatim_facts_is_accepted() -> None:
    model = ScriptedChatModel(messages=iter([GOOD]), fallback=None)
    outcome = Summarizer(model=model, retries=0).summarize(conversation())
    assert outcome.source == "model" and outcome.error is None
    assert "handler_39" in outcome.text


def test_folding_keeps_the_previous_summary_verbatim_without_being_a_copy() -> None:
    # The fold repeats the previous summary's items word for word: that is the instruction,
    # not a copy, even though the request the model read holds them.
    model = ScriptedChatModel(messages=iter([GOOD]), fallback=None)
    previous = GOOD.replace("- No file edited yet.", "- Started.")
    outcome = Summarizer(model=model, retries=0).summarize(conversation(), previous=previous)
    assert outcome.source == "model"


def test_the_report_says_the_summary_was_rejected() -> None:
    history: list[BaseMessage] = []
    for turn in range(6):
        for m in conversation():
            m = m.model_copy(update={"id": f"{m.id}-{turn}"})
            if isinstance(m, ToolMessage):
                m = m.model_copy(update={"tool_call_id": f"call_1-{turn}"})
            if isinstance(m, AIMessage) and m.tool_calls:
                m = m.model_copy(
                    update={"tool_calls": [{**m.tool_calls[0], "id": f"call_1-{turn}"}]}
                )
            history.append(m)
    model = ScriptedChatModel(messages=iter([]), fallback=parroted())
    manager = ContextManager(
        context_window_tokens=3_000,
        strategies=[SlidingWindow(summarize=True)],
        summarizer=Summarizer(model=model, retries=0),
    )
    result = manager.build(history)
    summaries = [d for d in result.report.decisions if d.kind in ("summarize", "auto_compact")]
    assert summaries, result.report.kinds()
    detail = summaries[0].detail
    assert detail["source"] == "fallback"
    assert re.search("parroted the instructions", str(detail["error"]))
    assert "What has been done" not in (result.state["summary"] or {}).get("text", "")


@pytest.mark.parametrize("words", [3, 12])
def test_short_outputs_are_not_judged(words: int) -> None:
    # Too short to tell a copy from a fact kept verbatim: accepted.
    text = " ".join(f"word{i}" for i in range(words))
    model = ScriptedChatModel(messages=iter([text]), fallback=None)
    messages: list[BaseMessage] = [HumanMessage(text + " please", id="h")]
    assert Summarizer(model=model, retries=0).summarize(messages).source == "model"
