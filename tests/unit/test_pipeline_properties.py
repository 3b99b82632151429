"""Property tests of `ContextManager.build` over random agent histories and small budgets.

Every build either returns a prompt that is valid for OpenAI and Anthropic and fits the budget
(by an exact recount), or raises `ContextWindowExceededError` with a failed report. Builds are
deterministic, idempotent on their own state, never drop the system prompt, never mutate their
input, and keep the prompt prefix stable between edits when replayed call by call.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given, settings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_ctx.errors import ContextWindowExceededError
from langgraph_ctx.messages import get_tag, text_of, validate_messages
from langgraph_ctx.pipeline import BuildResult
from langgraph_ctx.prompt.render import references_recall, without_recall_calls
from langgraph_ctx.prompt.report import ContextBudget
from langgraph_ctx.tokens import TiktokenCounter
from tests.strategies import COUNTERS, Setup, cases

PROPERTY_SETTINGS = settings(deadline=None)  # examples: the profile in tests/conftest.py

_RECOUNT = TiktokenCounter("gpt-4o", cache_size=0)


def _recount_plain(counter: Callable[[Sequence[BaseMessage]], int]) -> Any:
    def recount(messages: Sequence[BaseMessage], tools: list[Any]) -> int:
        if not tools:
            return counter(messages)
        from langchain_core.utils.function_calling import convert_to_openai_tool

        schemas = json.dumps([convert_to_openai_tool(t) for t in tools], sort_keys=True)
        return counter(messages) + counter([SystemMessage(schemas)]) - counter([])

    return recount


RECOUNTS: dict[str, Callable[[Sequence[BaseMessage], list[Any]], int]] = {
    "tiktoken": lambda messages, tools: _RECOUNT.count(messages, tools=tools or None),
    "chars": _recount_plain(COUNTERS["chars"]),
    "len": _recount_plain(COUNTERS["len"]),
}
"""An independent recount (prompt plus tool schemas) for each of the setups' counters."""


def _dump(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


def _state_json(state: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in state.items() if k != "last_report"}, sort_keys=True)


def _check_result(setup: Setup, result: BuildResult, history: list[BaseMessage]) -> None:
    """The invariants every successful build keeps."""
    prompt = result.messages
    assert prompt, "the prompt is never empty"
    assert validate_messages(prompt, provider="all") == []
    limit = ContextBudget(
        context_window_tokens=setup.window, reserved_output_tokens=setup.reserved
    ).limit
    assert result.report.ok and result.report.limit == limit
    assert result.report.tokens <= limit
    assert result.report.tokens == RECOUNTS[setup.counter](prompt, result.tools)
    assert result.report.messages_out == len(prompt)
    system = [m for m in history if isinstance(m, SystemMessage)]
    if system:
        assert isinstance(prompt[0], SystemMessage)
        assert text_of(system[0]) in text_of(prompt[0])
    # History messages keep their order (and their ids) in the prompt.
    position = {m.id: i for i, m in enumerate(history) if not isinstance(m, SystemMessage)}
    shown = [position[m.id] for m in prompt if m.id in position]
    assert shown == sorted(shown) and len(set(shown)) == len(shown)
    json.dumps(result.state)  # JSON-able
    # A call whose `recall` a middleware dropped gets the same prompt without calls to it:
    # still valid, no larger, and none of the package's pieces names recall any more.
    unrecalled = without_recall_calls(prompt)
    assert validate_messages(unrecalled, provider="all") == []
    assert [(type(m), m.id) for m in unrecalled] == [(type(m), m.id) for m in prompt]
    assert RECOUNTS[setup.counter](unrecalled, result.tools) <= result.report.tokens
    tags = [get_tag(m) for m in unrecalled]
    ours = [
        m
        for m, tag in zip(unrecalled, tags, strict=True)
        if tag.get("pruned") or tag.get("compacted") or tag.get("kind") == "summary"
    ]
    assert not references_recall(ours)


def _check_error(exc: ContextWindowExceededError) -> None:
    assert exc.report.ok is False
    assert exc.report.error
    assert "error" in exc.report.kinds()
    assert exc.report.tokens > exc.report.limit


# --- one build -------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(case=cases(max_turns=6))
def test_build_fits_or_raises_and_is_valid(case: tuple[list[BaseMessage], Setup]) -> None:
    history, setup = case
    before = copy.deepcopy(history)
    cm = setup.manager()
    try:
        result = setup.build(cm, history)
    except ContextWindowExceededError as exc:
        _check_error(exc)
        assert _dump(history) == _dump(before)
        return
    assert _dump(history) == _dump(before), "the input is never mutated"
    _check_result(setup, result, history)

    # Deterministic: a fresh manager (fresh archive) builds the same bytes.
    again = setup.build(setup.manager(), history)
    assert _dump(again.messages) == _dump(result.messages)
    assert _state_json(again.state) == _state_json(result.state)
    assert again.report.to_dict() == result.report.to_dict()

    # Idempotent: building again on its own state changes nothing.
    state_before = copy.deepcopy(result.state)
    rerun = setup.build(cm, history, state=result.state)
    assert result.state == state_before, "the state passed in is never mutated"
    assert _dump(rerun.messages) == _dump(result.messages)
    assert _state_json(rerun.state) == _state_json(result.state)
    assert rerun.report.tokens == result.report.tokens
    # Memory is not part of the state: a prompt that had to drop it drops it again.
    assert [d.kind for d in rerun.report.edits() if d.kind != "drop_memory"] == []


@PROPERTY_SETTINGS
@given(case=cases(counter="tiktoken", max_turns=4, system=False))
def test_build_without_system_prompt(case: tuple[list[BaseMessage], Setup]) -> None:
    history, setup = case
    try:
        result = setup.build(setup.manager(), history)
    except ContextWindowExceededError as exc:
        _check_error(exc)
        return
    _check_result(setup, result, history)


# --- replaying a history call by call --------------------------------------------------------


def _call_points(history: list[BaseMessage]) -> list[int]:
    """Prefix lengths at which an agent calls its model: after user input or a full batch."""
    points = []
    for i in range(1, len(history) + 1):
        last = history[i - 1]
        nxt = history[i] if i < len(history) else None
        if (
            isinstance(last, HumanMessage)
            or (isinstance(last, ToolMessage) and not isinstance(nxt, ToolMessage))
            or (isinstance(last, AIMessage) and not last.tool_calls and nxt is None)
        ):
            points.append(i)
    return points


@PROPERTY_SETTINGS
@given(case=cases(min_turns=2, max_turns=6))
def test_incremental_replay_keeps_the_prefix_between_edits(
    case: tuple[list[BaseMessage], Setup],
) -> None:
    history, setup = case
    cm = setup.manager()
    state: dict[str, Any] | None = None
    previous: list[BaseMessage] | None = None
    for n in _call_points(history):
        prefix = history[:n]
        try:
            result = setup.build(cm, prefix, state=state)
        except ContextWindowExceededError as exc:
            _check_error(exc)
            previous = None
            continue
        _check_result(setup, result, prefix)
        # The trigger of this build: the budget's, or earlier with a cache price.
        trigger = result.report.trigger
        assert trigger is not None and trigger <= cm.budget.trigger_tokens
        if result.report.tokens_in <= trigger:
            assert result.report.decisions == [], "no edits below the trigger"
        if previous is not None and not result.report.edits():
            assert _dump(result.messages[: len(previous)]) == _dump(previous), (
                "a call without decisions extends the previous prompt"
            )
        previous, state = result.messages, result.state
