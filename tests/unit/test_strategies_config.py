"""Strategies from JSON/dict config, config errors, and user strategies via `register_strategy`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import strategies as strategies_module
from langgraph_ctx._effects import Plan
from langgraph_ctx._workspace import Workspace
from langgraph_ctx.archive import Archive
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages import get_tag, text_of
from langgraph_ctx.pipeline import ContextManager
from langgraph_ctx.strategies import (
    Compaction,
    DynamicSummarization,
    EntityExtraction,
    SlidingWindow,
    Strategy,
    Summarization,
    register_strategy,
    strategies_from_config,
)
from tests.conftest import make_conversation

BUILTIN_TYPES = [
    "compaction",
    "dynamic_summarization",
    "entity_extraction",
    "sliding_window",
    "summarization",
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
    assert strategies_from_config({"type": "summarization"}) == [Summarization()]
    assert Summarization().summarize is True
    mixed = strategies_from_config(
        [{"type": "dynamic_summarization", "threshold_turns": 4, "turns": 2}, SlidingWindow()]
    )
    assert mixed == [DynamicSummarization(threshold_turns=4, turns=2), SlidingWindow()]
    assert strategies_from_config([{"type": "entity_extraction", "recent_messages": 3}]) == [
        EntityExtraction(recent_messages=3)
    ]
    assert all(isinstance(s, Strategy) for s in mixed)


def test_the_manager_takes_config_and_sorts_by_stage() -> None:
    cm = ContextManager(
        context_window_tokens=8000,
        strategies='[{"type": "sliding_window"}, {"type": "compaction"},'
        ' {"type": "dynamic_summarization"}]',
    )
    assert [type(s) for s in cm.strategies] == [DynamicSummarization, Compaction, SlidingWindow]
    assert ContextManager(context_window_tokens=8000).strategies == [SlidingWindow()]


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
    with pytest.raises(ConfigError, match=r"allowed: \['summarize'\]"):
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
    with pytest.raises(ConfigError, match="expected a strategy or a config dict"):
        strategies_from_config([{"type": "compaction"}, 42])
    with pytest.raises(ConfigError):
        ContextManager(context_window_tokens=8000, strategies={"type": "nope"})


# --- user strategies -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditNote:
    """Injects nothing; records that it ran, with the prompt size it saw."""

    stage: ClassVar[int] = 45  # between compaction (40) and the window (50): when triggered
    label: str = "audit"

    def run(self, work: Workspace) -> Plan[None]:
        work.decide("skip", work.tokens, detail={"strategy": self.label, "turns": work.start})
        return
        yield  # a generator, like every strategy


@dataclass(frozen=True, kw_only=True, slots=True)
class Banner:
    """Runs on every call (stage < 40) and adds a fragment to the system prompt."""

    stage: ClassVar[int] = 15
    text: str = "Banner."

    def run(self, work: Workspace) -> Plan[None]:
        work.static_fragments.append(self.text)
        work.tokens = work.count_full()
        work.decide("skip", work.tokens, detail={"strategy": "banner"})
        return
        yield


def test_a_registered_strategy_runs_at_its_stage() -> None:
    register_strategy("audit_note", AuditNote)
    built = strategies_from_config(
        [
            {"type": "sliding_window"},
            {"type": "audit_note", "label": "mine"},
            {"type": "compaction", "min_chars": 1000, "keep_last": 1},
        ]
    )
    assert built[1] == AuditNote(label="mine")
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
    assert result.report.decisions[audit].detail["turns"] == 0  # before the window moved


def test_a_late_stage_strategy_runs_only_once_triggered() -> None:
    register_strategy("audit_note", AuditNote)
    cm = ContextManager(context_window_tokens=100_000, strategies=[{"type": "audit_note"}])
    assert cm.build(make_conversation(2)).report.decisions == []


def test_an_early_stage_strategy_runs_on_every_call() -> None:
    register_strategy("banner", Banner)
    cm = ContextManager(
        context_window_tokens=100_000,
        strategies=[{"type": "banner", "text": "Read-only mode."}, {"type": "sliding_window"}],
    )
    result = cm.build(make_conversation(1))
    assert text_of(result.messages[0]).endswith("Read-only mode.")
    assert result.report.kinds() == ["skip"]


def test_register_strategy_rejects_what_is_not_a_strategy() -> None:
    class NoRun:
        stage = 10

    class NoStage:
        def run(self, work: Workspace) -> Plan[None]:
            return
            yield

    for cls in (NoRun, NoStage):
        with pytest.raises(ConfigError, match="is not a strategy"):
            register_strategy("bad", cls)
    with pytest.raises(ConfigError, match="unknown strategy type 'bad'"):
        strategies_from_config({"type": "bad"})


def test_a_plain_class_with_bad_arguments_is_a_config_error() -> None:
    class Plain:
        stage = 45

        def __init__(self, *, size: int = 1) -> None:
            self.size = size

        def run(self, work: Workspace) -> Plan[None]:
            return
            yield

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
    summary = first.messages[1]
    assert get_tag(summary)["kind"] == "summary"
    assert sum(isinstance(m, HumanMessage) for m in first.messages) == 3
    # Enough turns went at once: building again on the state changes nothing.
    again = cm.build(messages, state=first.state)
    assert again.report.decisions == []
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in first.messages]
