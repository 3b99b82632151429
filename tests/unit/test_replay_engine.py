"""The one replay engine (`langgraph_ctx_tools.replay`): every system it drives, measured alike.

`langgraph-ctx frontier` and the benchmarks replay through `replay.engine.replay`; these tests
drive our pipeline and each alternative through it on a recorded-shape run long enough for
summaries to happen at a small window, and check what the engine adds up.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from benchmarks.workload import generate_workload
from langgraph_ctx import ContextBudget, ScriptedChatModel
from langgraph_ctx.strategies import default_strategies
from langgraph_ctx.tokens import TiktokenCounter
from langgraph_ctx_tools.replay.anchors import LCSummarizationAnchor, TrimMessagesAnchor, stand_in
from langgraph_ctx_tools.replay.anchors_deepagents import DeepagentsAgentAnchor
from langgraph_ctx_tools.replay.engine import replay
from langgraph_ctx_tools.replay.models import RecordingModel, SummarizerMeter, metered
from langgraph_ctx_tools.replay.pipeline_system import PipelineSystem

WINDOW = 6_000
COUNTER = TiktokenCounter("gpt-4o")


@pytest.fixture(scope="module")
def run() -> list[BaseMessage]:
    return list(generate_workload(steps=40, seed=5).messages)


def _calls(messages: Sequence[BaseMessage]) -> int:
    return sum(isinstance(m, AIMessage) for m in messages[1:])


def ours(model: object = None) -> PipelineSystem:
    return PipelineSystem(
        "ours",
        budget=ContextBudget(context_window_tokens=WINDOW),
        counter=COUNTER,
        strategies=default_strategies(),
        model=model,
        remove_summarized=True,
    )


def test_our_pipeline_fits_every_call_and_gives_back_what_left(run: list[BaseMessage]) -> None:
    system = ours()
    result = replay(system, run, limit=WINDOW, counter=COUNTER)
    assert len(result.calls) == _calls(run) and result.errors == 0
    assert result.overruns == 0 and result.invalid == 0
    assert system.removed, "summarized messages left the history, as ContextMemory removes them"
    assert result.extra["removed"] > 0 and result.extra["restorable"] == result.extra["removed"]
    assert result.recall_total > 0 and 0 < result.recall_hits <= result.recall_total
    # The cost adds the summarizer's tokens; without a model (the deterministic summary) none.
    assert result.summarizer_calls == 0
    assert result.cost() == pytest.approx(
        result.total_tokens - 0.9 * result.reusable_tokens, abs=0.5
    )


def test_a_recording_model_is_counted_for_every_system_that_summarizes(
    run: list[BaseMessage],
) -> None:
    for make in (
        lambda model: ours(model),
        lambda model: LCSummarizationAnchor(
            limit=WINDOW,
            trigger=int(0.9 * WINDOW),
            keep=int(0.25 * WINDOW),
            model=model,
            trim_tokens_to_summarize=None,
        ),
        lambda model: DeepagentsAgentAnchor(limit=WINDOW, evict_tokens=20_000, model=model),
    ):
        model = stand_in(WINDOW)
        system = make(model)
        result = replay(system, run, limit=WINDOW, counter=COUNTER)
        assert result.errors == 0, (system.name, result.error_lines)
        assert result.summarizer_calls == len(model.calls) > 0, system.name
        read = sum(COUNTER(call) for call in model.calls)
        assert result.summarizer_input_tokens == read, system.name


class Echo(RecordingModel):
    """A subclass chooses its answer by `reply_text`, and is still counted."""

    def reply_text(self, messages: Sequence[BaseMessage]) -> str:
        return "<completed>read</completed><remaining>go on</remaining>"


def test_a_subclass_answers_and_its_words_are_counted(run: list[BaseMessage]) -> None:
    model = Echo(profile={"max_input_tokens": WINDOW})
    result = replay(ours(model), run, limit=WINDOW, counter=COUNTER)
    assert result.errors == 0 and result.summarizer_calls > 0
    assert result.summarizer_output_tokens == sum(
        COUNTER.count_message(AIMessage(model.reply_text([]))) for _ in model.calls
    )


def test_a_real_model_is_metered_by_its_callbacks(run: list[BaseMessage]) -> None:
    model = ScriptedChatModel(messages=[], fallback="<completed>read</completed>")
    system = ours(model)
    assert any(isinstance(h, SummarizerMeter) for h in model.callbacks or [])
    result = replay(system, run, limit=WINDOW, counter=COUNTER)
    assert result.summarizer_calls > 0 and result.summarizer_input_tokens > 0
    again = metered(model, COUNTER)  # a fresh meter for the next replay, never two
    assert sum(isinstance(h, SummarizerMeter) for h in again.callbacks) == 1


def test_trimming_counts_no_summarizer_and_says_nothing_of_what_left(
    run: list[BaseMessage],
) -> None:
    result = replay(
        TrimMessagesAnchor(limit=WINDOW, tool_safe=True), run, limit=WINDOW, counter=COUNTER
    )
    assert result.errors == 0 and result.invalid == 0 and result.overruns == 0
    assert result.summarizer_calls == 0 and "removed" not in result.extra
