"""Strategies from JSON/dict config, config errors, and user strategies via `register_strategy`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import PromptView
from langgraph_ctx.archive import Archive
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import get_tag, text_of
from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.strategies import (
    Compaction,
    DropMemory,
    DynamicSummarization,
    EntityExtraction,
    PruneToolOutputs,
    ShortenTurns,
    SlidingWindow,
    Strategy,
    default_strategies,
    register_strategy,
    strategies_from_config,
)
from langgraph_ctx.strategies import base as strategies_module
from tests.conftest import make_conversation

BUILTIN_TYPES = [
    "compaction",
    "drop_memory",
    "dynamic_summarization",
    "entity_extraction",
    "prune_tool_outputs",
    "shorten_turns",
    "sliding_window",
]


@pytest.fixture(autouse=True)
def _isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test do not leak into the next one."""
    monkeypatch.setattr(strategies_module, "_REGISTRY", dict(strategies_module._REGISTRY))


# --- building from config --------------------------------------------------------------------


def test_from_json_text() -> None:
    text = json.dumps(
        [
            {"type": "compaction", "min_chars": 500, "include_tools": ["bash", "read_file"]},
            {"type": "sliding_window", "summarize": True},
        ]
    )
    built = strategies_from_config(text)
    assert built == [
        Compaction(min_chars=500, include_tools=("bash", "read_file")),
        SlidingWindow(summarize=True),
    ]


def test_from_one_dict_and_from_a_mixed_list() -> None:
    assert strategies_from_config({"type": "sliding_window", "summarize": True}) == [
        SlidingWindow(summarize=True)
    ]
    mixed = strategies_from_config(
        [{"type": "dynamic_summarization", "threshold_turns": 4, "turns": 2}, SlidingWindow()]
    )
    assert mixed == [DynamicSummarization(threshold_turns=4, turns=2), SlidingWindow()]
    assert strategies_from_config([{"type": "entity_extraction", "recent_messages": 3}]) == [
        EntityExtraction(recent_messages=3)
    ]
    assert all(isinstance(s, Strategy) for s in mixed)


def test_the_manager_takes_config_and_keeps_its_order() -> None:
    cm = ContextManager(
        context_window_tokens=8000,
        strategies='[{"type": "dynamic_summarization"}, {"type": "prune_tool_outputs",'
        ' "protect_turns": 1}, {"type": "sliding_window"}]',
    )
    assert cm.strategies == [
        DynamicSummarization(),
        PruneToolOutputs(protect_turns=1),
        SlidingWindow(),
    ]
    assert ContextManager(context_window_tokens=8000).strategies == default_strategies(
        summarize=False
    )
    assert default_strategies() == [
        DropMemory(),
        Compaction(
            excerpt=True,
            excerpt_chars=800,
            min_chars=600,
            keep_last=1,
            keep_share=0.05,
            on_arrival=0.1,
            arrival_min_tokens=0,
            arrival_news=True,
        ),
        ShortenTurns(
            settle_after=0,
            keep_last=0,
            head_lines=1,
            tail_lines=1,
            max_arg_chars=60,
            min_chars=700,
        ),
        PruneToolOutputs(),
        SlidingWindow(summarize=True, quote_share=0.22, summarize_shown=True, read_chars=0),
    ]


@pytest.mark.parametrize(
    "config",
    [
        {"type": "window"},
        '{"type": "Compaction"}',
        [{"type": "sliding_window"}, {"type": "summarise"}],
    ],
)
def test_unknown_type_names_the_valid_ones(config: Any) -> None:
    with pytest.raises(ConfigError, match="unknown strategy type") as info:
        strategies_from_config(config)
    assert ", ".join(BUILTIN_TYPES) in str(info.value)


def test_missing_type_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="needs a 'type'") as info:
        strategies_from_config({"min_chars": 10})
    assert ", ".join(BUILTIN_TYPES) in str(info.value)


def test_unknown_field_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as info:
        strategies_from_config({"type": "compaction", "min_char": 10, "keep": 2})
    text = str(info.value)
    assert "['keep', 'min_char']" in text and "'compaction'" in text
    for field in ("min_chars", "keep_last", "keep_errors", "preview_chars", "exclude_tools"):
        assert field in text
    allowed = (
        r"allowed: \['prepare_at', 'quote_repeats', 'quote_share', 'read_chars', 'summarize',"
        r" 'summarize_shown'\]"
    )
    with pytest.raises(ConfigError, match=allowed):
        strategies_from_config({"type": "sliding_window", "stage": 10})


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"type": "compaction", "min_chars": -1}, "must be >= 0"),
        ({"type": "dynamic_summarization", "threshold_turns": None}, "threshold"),
        ({"type": "dynamic_summarization", "turns": 0}, "turns must be >= 1"),
    ],
)
def test_bad_values_are_config_errors(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        strategies_from_config(config)


def test_bad_json_and_bad_items() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        strategies_from_config('[{"type": "compaction",]')
    with pytest.raises(ConfigError, match="expected a strategy"):
        strategies_from_config([{"type": "compaction"}, 42])
    with pytest.raises(ConfigError):
        ContextManager(context_window_tokens=8000, strategies={"type": "nope"})


# --- user strategies -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditNote:
    """Edits nothing; records that it ran once edits were due, with the window it saw."""

    label: str = "audit"

    def apply(self, view: PromptView) -> None:
        if view.over_trigger():
            detail = {"strategy": self.label, "start": view.start}
            view.record("skip", view.tokens, detail=detail)


@dataclass(frozen=True, kw_only=True, slots=True)
class Banner:
    """Runs on every call and adds a fragment to the system prompt."""

    text: str = "Banner."

    def apply(self, view: PromptView) -> None:
        view.inject(self.text)


def test_a_registered_strategy_runs_where_it_is_listed() -> None:
    register_strategy("audit_note", AuditNote)
    built = strategies_from_config(
        [
            {"type": "prune_tool_outputs"},
            {"type": "compaction", "min_chars": 1000, "keep_last": 1},
            {"type": "audit_note", "label": "mine"},
            {"type": "sliding_window"},
        ]
    )
    assert built[2] == AuditNote(label="mine")
    messages = make_conversation(6, long_output=3000)
    cm = ContextManager(
        context_window_tokens=1500,
        strategies=built,
        archive=Archive(InMemoryStore(), thread_id="t"),
    )
    result = cm.build(messages)
    kinds = result.report.kinds()
    audit = next(i for i, d in enumerate(result.report.decisions) if d.kind == "skip")
    assert result.report.decisions[audit].detail["strategy"] == "mine"
    assert kinds.index("compact") < audit < kinds.index("shrink")
    assert result.report.decisions[audit].detail["start"] == 0  # before the window moved


def test_a_strategy_that_waits_for_the_trigger_does_nothing_below_it() -> None:
    register_strategy("audit_note", AuditNote)
    cm = ContextManager(context_window_tokens=100_000, strategies=[{"type": "audit_note"}])
    assert cm.build(make_conversation(2)).report.decisions == []


def test_an_injecting_strategy_runs_on_every_call_and_is_counted() -> None:
    register_strategy("banner", Banner)
    cm = ContextManager(
        context_window_tokens=100_000,
        strategies=[{"type": "banner", "text": "Read-only mode."}, {"type": "sliding_window"}],
    )
    result = cm.build(make_conversation(1))
    assert text_of(result.messages[0]).endswith("Read-only mode.")
    assert result.report.tokens == cm.token_counter(result.messages)
    assert result.report.decisions == []


def test_register_strategy_rejects_what_is_not_a_strategy() -> None:
    class NoApply:
        def run(self, view: PromptView) -> None:
            pass

    with pytest.raises(ConfigError, match="is not a strategy"):
        register_strategy("bad", NoApply)
    with pytest.raises(ConfigError, match="unknown strategy type 'bad'"):
        strategies_from_config({"type": "bad"})
    with pytest.raises(ConfigError, match="expected a strategy"):
        strategies_from_config([AuditNote])  # the class, not an instance


def test_a_plain_class_with_bad_arguments_is_a_config_error() -> None:
    class Plain:
        def __init__(self, *, size: int = 1) -> None:
            self.size = size

        def apply(self, view: PromptView) -> None:
            pass

    register_strategy("plain", Plain)
    assert strategies_from_config({"type": "plain", "size": 3})[0].size == 3  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="bad config for strategy 'plain'"):
        strategies_from_config({"type": "plain", "colour": "red"})


# --- built-in strategies from config, end to end ---------------------------------------------


def test_dynamic_summarization_from_config_summarizes_old_turns_once() -> None:
    messages = make_conversation(12)
    cm = ContextManager(
        context_window_tokens=100_000,
        strategies=[{"type": "dynamic_summarization", "threshold_turns": 3, "turns": 2}],
    )
    first = cm.build(messages)
    assert first.report.kinds() == ["shrink", "summarize"]
    (summary,) = [m for m in first.messages if get_tag(m).get("kind") == "summary"]
    assert first.messages.index(summary) == 1  # no task pinned: right after the base prompt
    assert sum(isinstance(m, HumanMessage) for m in first.messages if m is not summary) == 3
    # Enough turns went at once: building again on the state changes nothing.
    again = cm.build(messages, state=first.state)
    assert again.report.decisions == []
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in first.messages]
