"""A catalogue of bad input: one test per kind, each showing what the library does with it.

Every case ends one of two ways, and docs/RELIABILITY.md points here for which:

* a typed error (a `LangGraphCtxError` subclass) whose message says what was wrong, shows the
  value and says what to do; or
* a documented repair: the pipeline fixes the prompt, says so in the report, and the prompt is
  valid for every provider (`validate_messages(prompt, provider="all") == []`).

In every case nothing is lost: the messages and the ledger passed in are not mutated.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import (
    ApproximateCounter,
    Archive,
    ArchiveError,
    Compaction,
    ConfigError,
    ContextBudget,
    ContextManager,
    ContextMemory,
    ContextState,
    ContextWindowExceededError,
    LangGraphCtxError,
    SlidingWindow,
    TiktokenCounter,
    count_tokens,
    strategies_from_config,
    validate_messages,
)
from langgraph_ctx._ids import CONVERSATION_START_ID
from langgraph_ctx.archive import encode_message
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.errors import (
    ArchiveCorruptError,
    ArchiveEntryNotFoundError,
    InvalidMessagesError,
)
from langgraph_ctx.ledger import merge_ledger
from langgraph_ctx.messages import get_tag, text_of
from langgraph_ctx.summaries.summarizer import Summarizer
from langgraph_ctx.tokens import context_window_for
from langgraph_ctx_tools.cli import main
from tests.conftest import make_strategies

# --- helpers ------------------------------------------------------------------------------


def frozen(items: Sequence[Any]) -> list[Any]:
    """A deep, comparable copy of a history (messages as `model_dump`)."""
    return [m.model_dump() if isinstance(m, BaseMessage) else copy.deepcopy(m) for m in items]


def manager(window: int = 4_000, **kwargs: Any) -> ContextManager:
    return ContextManager(context_window_tokens=window, **kwargs)


def build_checked(
    cm: ContextManager, history: Sequence[Any], state: Any = None, **kwargs: Any
) -> Any:
    """Build and check the two promises: a valid prompt, and the input left untouched."""
    before, state_before = frozen(history), copy.deepcopy(state)
    result = cm.build(history, state=state, **kwargs)
    assert validate_messages(result.messages, provider="all") == []
    assert frozen(history) == before
    assert state == state_before
    return result


def raises_untouched(
    error: type[LangGraphCtxError], history: Sequence[Any], call: Any, *words: str
) -> LangGraphCtxError:
    """`call()` raises `error` whose message holds every word; `history` is not mutated."""
    before = frozen(history)
    with pytest.raises(error) as info:
        call()
    text = str(info.value)
    for word in words:
        assert word in text, (word, text)
    assert frozen(history) == before
    return info.value


def call(call_id: str, name: str = "read_file", **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "args": args or {"path": "a.py"}, "type": "tool_call"}


def repair_decision(result: Any) -> Any:
    found = [d for d in result.report.decisions if d.kind == "repair"]
    assert len(found) == 1, result.report.kinds()
    return found[0]


@pytest.fixture
def archive() -> Archive:
    return Archive(InMemoryStore(), thread_id="t")


# --- broken tool-call pairing (repaired in the prompt, never in state) ---------------------


def test_orphan_tool_result_is_left_out_of_the_prompt() -> None:
    history = [
        HumanMessage("go", id="h1"),
        ToolMessage("stray output", tool_call_id="nobody", id="orphan"),
        AIMessage("done", id="a1"),
        HumanMessage("next", id="h2"),
    ]
    result = build_checked(manager(), history)
    assert [m.id for m in result.messages] == ["h1", "a1", "h2"]
    decision = repair_decision(result)
    assert "orphan" in decision.detail["messages"][0]
    assert "orphan" in decision.message_ids
    assert len(history) == 4  # the state keeps it


# --- messages a provider refuses where they stand (shown differently, kept in state) --------


def test_system_message_inside_the_conversation_is_shown_as_user_text() -> None:
    history: list[BaseMessage] = [
        SystemMessage("You are an agent.", id="s"),
        HumanMessage("go", id="h1"),
        AIMessage("on it", id="a1"),
        SystemMessage("[tool: bash] exit 0", id="mid"),
        HumanMessage("next", id="h2"),
    ]
    result = build_checked(manager(), history)
    assert [m.type for m in result.messages] == ["system", "human", "ai", "human", "human"]
    shown = result.messages[3]
    assert shown.id == "mid" and get_tag(shown)["shown_as"] == "user"
    assert text_of(shown) == "<system_message>\n[tool: bash] exit 0\n</system_message>"
    assert "showed system message mid" in repair_decision(result).detail["messages"][0]


def test_empty_user_message_gets_a_placeholder() -> None:
    history: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("on it", id="a1"),
        HumanMessage("", id="empty"),
        AIMessage("still here", id="a2"),
        HumanMessage([], id="empty-list"),
    ]
    result = build_checked(manager(), history)
    shown = {m.id: text_of(m) for m in result.messages}
    assert shown["empty"] == shown["empty-list"] == "[empty message]"
    assert set(repair_decision(result).message_ids) == {"empty", "empty-list"}


@pytest.mark.parametrize("rest", [[], [HumanMessage("my order is late", id="h1")]])
def test_conversation_opening_with_the_model_gets_a_user_stand_in(rest: list[BaseMessage]) -> None:
    history: list[BaseMessage] = [
        SystemMessage("You are a support agent.", id="s"),
        AIMessage("Hello! How can I help you today?", id="greeting"),
        *rest,
    ]
    cm = manager()
    result = build_checked(cm, history)
    assert [m.id for m in result.messages][:3] == ["s", CONVERSATION_START_ID, "greeting"]
    assert "stand-in" in repair_decision(result).detail["messages"][-1]
    again = cm.build(history, state=result.state)
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in result.messages]
    fed_back = cm.build(result.messages)  # building on its own output changes nothing
    assert [m.model_dump() for m in fed_back.messages] == [m.model_dump() for m in result.messages]


@pytest.mark.parametrize("where", ["middle", "end"])
def test_unanswered_tool_call_gets_an_error_result(where: str) -> None:
    ai = AIMessage("", tool_calls=[call("c1"), call("c2")], id="a1")
    answer = ToolMessage("one answer", tool_call_id="c1", name="read_file", id="t1")
    history: list[BaseMessage] = [HumanMessage("go", id="h1"), ai, answer]
    if where == "middle":
        history += [AIMessage("moving on", id="a2"), HumanMessage("next", id="h2")]
    cm = manager()
    result = build_checked(cm, history)
    made_up = [m for m in result.messages if get_tag(m).get("repair") == "dangling_call"]
    assert len(made_up) == 1
    assert made_up[0].tool_call_id == "c2"  # type: ignore[attr-defined]
    assert made_up[0].status == "error"  # type: ignore[attr-defined]
    assert "c2" in repair_decision(result).detail["messages"][0]
    again = cm.build(history, state=result.state)  # deterministic: same bytes every call
    assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in result.messages]


def test_second_answer_to_one_call_is_left_out() -> None:
    history = [
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=[call("c1")], id="a1"),
        ToolMessage("first", tool_call_id="c1", id="t1"),
        ToolMessage("second", tool_call_id="c1", id="t2"),
        AIMessage("done", id="a2"),
    ]
    result = build_checked(manager(), history)
    assert "t2" not in [m.id for m in result.messages]
    assert "duplicate" in repair_decision(result).detail["messages"][0]


# --- ids ----------------------------------------------------------------------------------


def test_duplicate_message_ids_are_refused() -> None:
    history = [HumanMessage("a", id="same"), AIMessage("b", id="a1"), HumanMessage("c", id="same")]
    raises_untouched(
        InvalidMessagesError,
        history,
        lambda: manager().build(history),
        "duplicate message id 'same'",
        "positions 0 and 2",
        "add_messages",
    )


def test_missing_message_ids_are_derived_deterministically() -> None:
    history = [
        SystemMessage("Be brief."),
        HumanMessage("hi"),
        AIMessage("hello"),
        HumanMessage("x"),
    ]
    cm = manager()
    first = build_checked(cm, history)
    second = build_checked(cm, history)
    ids = [m.id for m in first.messages]
    assert all(ids) and len(set(ids)) == len(ids)
    assert ids == [m.id for m in second.messages]
    assert all(m.id is None for m in history)  # derived on copies, never written back


# --- things that are not messages --------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [{"role": "user", "content": "hi"}, ("user", "hi"), "hi", {"type": "human", "content": "hi"}],
    ids=["role-dict", "tuple", "str", "type-dict"],
)
def test_message_likes_are_coerced_like_add_messages(item: Any) -> None:
    history = [SystemMessage("Be brief.", id="s"), item]
    result = build_checked(manager(), history)
    assert [m.type for m in result.messages] == ["system", "human"]
    assert result.messages[-1].content == "hi"
    assert count_tokens(history) == count_tokens([SystemMessage("Be brief."), HumanMessage("hi")])


@pytest.mark.parametrize(
    ("item", "shown"),
    [(None, "NoneType None"), (5, "int 5"), ({"foo": 1}, "dict {'foo': 1}"), (object, "type")],
    ids=["none", "int", "dict-without-role", "class"],
)
def test_non_messages_are_refused(item: Any, shown: str) -> None:
    history = [HumanMessage("hi", id="h"), item]
    raises_untouched(
        InvalidMessagesError,
        history,
        lambda: manager().build(history),
        "item 1 of the history is not a message",
        shown,
        "Pass BaseMessage objects",
    )


@pytest.mark.parametrize("value", ["hello", None, HumanMessage("hi")], ids=["str", "none", "msg"])
def test_history_that_is_not_a_list_is_refused(value: Any) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        manager().build(value)
    assert "messages must be a list of messages" in str(info.value)
    assert type(value).__name__ in str(info.value)


# --- content blocks -----------------------------------------------------------------------


def test_unknown_content_blocks_are_counted_and_kept() -> None:
    blocks = [{"type": "text", "text": "look"}, {"type": "hologram", "payload": {"z": [1, 2]}}]
    history = [HumanMessage(blocks, id="h")]  # type: ignore[arg-type]
    assert count_tokens(history) > count_tokens([HumanMessage("look", id="h")])
    result = build_checked(manager(), history)
    assert result.messages[-1].content == blocks


IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBOR" * 200}}
IMAGE_B64 = {"type": "image", "source_type": "base64", "mime_type": "image/png", "data": "A" * 4000}
IMAGE_ANTHROPIC = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "A" * 4000},
}


@pytest.mark.parametrize(
    "image", [IMAGE_URL, IMAGE_B64, IMAGE_ANTHROPIC], ids=["image_url", "base64", "anthropic"]
)
def test_images_are_counted_and_kept_or_pruned_validly(image: dict[str, Any]) -> None:
    user = HumanMessage([{"type": "text", "text": "what is this?"}, image], id="h1")  # type: ignore[list-item]
    assert count_tokens([user]) > count_tokens([HumanMessage("what is this?")])
    kept = build_checked(manager(), [user])
    assert kept.messages[-1].content == user.content  # a user image is never edited
    # An image inside a tool result is an old tool output like any other: pruned validly.
    shot = ToolMessage(
        [{"type": "text", "text": "word " * 2_000}, image], tool_call_id="c1", id="t1"
    )  # type: ignore[list-item]
    history = [
        HumanMessage("screenshot", id="h0"),
        AIMessage("", tool_calls=[call("c1", "screenshot")], id="a1"),
        shot,
        AIMessage("got it", id="a2"),
        *[
            m
            for i in range(3)
            for m in (HumanMessage(f"q{i}", id=f"q{i}"), AIMessage("ok", id=f"r{i}"))
        ],
    ]
    result = build_checked(manager(1_500), history)
    assert "t1" in result.state["pruned"]
    assert result.report.tokens <= result.report.limit


# --- sizes --------------------------------------------------------------------------------


def big_tool_history(chars: int) -> list[BaseMessage]:
    return [
        HumanMessage("read the log", id="h1"),
        AIMessage("", tool_calls=[call("c1", "read_log")], id="a1"),
        ToolMessage("line\n" * (chars // 5), tool_call_id="c1", name="read_log", id="t1"),
        AIMessage("it is long", id="a2"),
        HumanMessage("and now?", id="h2"),
    ]


@pytest.mark.parametrize("with_archive", [True, False], ids=["archived", "state-only"])
def test_tool_result_larger_than_the_window_is_pruned_out_of_the_prompt(with_archive: bool) -> None:
    history = big_tool_history(60_000)  # ~12k tokens in a 2k window
    store = InMemoryStore()
    cm = manager(
        2_000,
        strategies=make_strategies(protect_turns=1, compaction=Compaction(keep_last=0)),
        archive=Archive(store, thread_id="t") if with_archive else None,
    )
    result = build_checked(cm, history)
    assert result.report.tokens <= result.report.limit
    # Pruning (stage 30) reaches it before compaction; with an archive the pruned original
    # is archived too, so recall works either way.
    assert "t1" in result.state["pruned"]
    assert result.state["pruned"]["t1"]["chars"] == len(history[2].content)
    assert ("ref" in result.state["pruned"]["t1"]) is with_archive
    if with_archive:  # lossless: the archive gives it back byte for byte
        restored = Archive(store, thread_id="t").restore("t1")
        assert encode_message(restored) == encode_message(history[2])


def test_user_message_larger_than_the_window_raises_with_the_report() -> None:
    history = [HumanMessage("word " * 5_000, id="h1")]
    error = raises_untouched(
        ContextWindowExceededError,
        history,
        lambda: manager(2_000).build(history),
        "the limit is 2000",
        "Raise context_window_tokens",
    )
    report = error.report  # type: ignore[attr-defined]
    assert report.ok is False and report.tokens > report.limit
    assert report.kinds()[-1] == "error"


@pytest.mark.parametrize(
    "history",
    [[], [SystemMessage("Be brief.", id="s")]],
    ids=["empty", "system-only"],
)
def test_history_without_conversation_is_refused(history: list[BaseMessage]) -> None:
    raises_untouched(
        InvalidMessagesError,
        history,
        lambda: manager().build(history),
        "no conversation to send",
        "at least one user message",
    )


def test_system_prompt_alone_over_the_budget_raises() -> None:
    history = [SystemMessage("rule. " * 3_000, id="s"), HumanMessage("hi", id="h")]
    error = raises_untouched(
        ContextWindowExceededError,
        history,
        lambda: manager(1_000).build(history),
        "the limit is 1000",
        "shorten the system prompt",
    )
    assert error.report.tokens > 1_000  # type: ignore[attr-defined]


def test_reserved_output_above_the_window_leaves_no_room() -> None:
    # Documented: the limit is window - reserved, never below 0; every build then says why.
    cm = ContextManager(context_window_tokens=1_000, reserved_output_tokens=2_000)
    assert cm.budget.limit == 0
    history = [HumanMessage("hi", id="h")]
    raises_untouched(
        ContextWindowExceededError,
        history,
        lambda: cm.build(history),
        "limit is 0 (window 1000 - reserved 2000)",
        "reserve fewer output tokens",
    )


# --- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ContextManager(context_window_tokens=0), ["must be > 0, got 0", "128_000"]),
        (lambda: ContextManager(context_window_tokens=-5), ["must be > 0, got -5"]),
        (lambda: ContextManager(context_window_tokens="8k"), ["got str '8k'", "e.g. 128_000"]),
        (lambda: ContextBudget(context_window_tokens=-1), ["must be >= 0", "got -1"]),
        (lambda: ContextBudget(context_window_tokens=1.5), ["whole number", "float 1.5"]),
        (lambda: ContextBudget(context_window_tokens=None), ["whole number", "NoneType None"]),
        (
            lambda: ContextBudget(context_window_tokens=9, reserved_output_tokens=-1),
            ["reserved_output_tokens must be >= 0", "got -1"],
        ),
        (
            lambda: ContextBudget(context_window_tokens=9, trigger=0.2, target=0.5),
            ["target <= trigger", "target=0.5", "e.g. trigger=0.9"],
        ),
        (lambda: ContextBudget(context_window_tokens=9, trigger=1.5), ["trigger <= 1", "1.5"]),
        (lambda: ContextBudget(context_window_tokens=9, target=0), ["0 < target", "target=0"]),
        (
            lambda: ContextBudget(context_window_tokens=9, summary_target=0.95),
            ["summary_target <= trigger", "summary_target=0.95"],
        ),
        (lambda: ContextBudget(context_window_tokens=9, trigger="high"), ["fraction", "'high'"]),
        (lambda: manager(strategies=make_strategies(protect_turns=-1)), ["protect_turns", "-1"]),
        (
            lambda: manager(strategies=make_strategies(protect_turns="2")),
            ["protect_turns must be a whole number", "'2'"],
        ),
        (lambda: manager(max_messages=0), ["max_messages must be >= 1", "0"]),
        (lambda: manager(summary_placement="inline"), ["'separate' or 'merged'", "'inline'"]),
        (lambda: manager(token_counter=5), ["token_counter must be callable", "5"]),
        (lambda: manager(tool_policy=5), ["tool_policy must be", "int 5"]),
        (lambda: manager(tool_policy={"allows": ["x"]}), ["'allow' and/or 'deny'", "allows"]),
        (lambda: manager(tool_policy={"allow": "read"}), ["list of tool names", "'read'"]),
        (lambda: manager(summarizer=5), ["Summarizer or a chat model", "int"]),
        (lambda: ContextMemory(context_window_tokens=9, hint_threshold=0), ["hint_threshold", "0"]),
        (lambda: ApproximateCounter(tokens_per_message=-3), ["tokens_per_message", "-3"]),
        (lambda: SlidingWindow(summarize="yes"), ["summarize must be True or False", "'yes'"]),
        (lambda: Compaction(keep_last=True), ["keep_last must be a whole number", "got bool"]),
    ],
)
def test_invalid_configuration_values_are_config_errors(make: Any, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ([{"type": "nope"}], ["unknown strategy type 'nope'", "known types"]),
        ([{"min_chars": 5}], ["needs a 'type'", "known types"]),
        ([{"type": "compaction", "foo": 1}], ["unknown field(s) ['foo']", "allowed"]),
        ([{"type": "compaction", "min_chars": -1}], ["must be >= 0", "-1"]),
        ([{"type": "compaction", "min_chars": "big"}], ["min_chars='big'", "a whole number"]),
        ([{"type": "sliding_window", "summarize": "yes"}], ["summarize='yes'", "True or False"]),
        ([{"type": "dynamic_summarization", "turns": 0}], ["turns must be >= 1", "0"]),
        ([{"type": "dynamic_summarization", "threshold_turns": -1}], ["threshold_turns", "-1"]),
        ([{"type": "entity_extraction", "recent_messages": 0}], ["recent_messages", "0"]),
        ("[{", ["not valid JSON"]),
        ("5", ["must be a list of strategies", "int 5"]),
        (5, ["must be a list of strategies", "int 5"]),
        ([5], ["expected a strategy or a config dict", "5"]),
    ],
)
def test_bad_strategy_configs_are_config_errors(config: Any, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        strategies_from_config(config)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("name", ["my-llama-3", "claude-3-opus", ""])
def test_unknown_model_names_count_with_the_documented_fallback(name: str) -> None:
    # Documented: names tiktoken does not know count with cl100k_base, as langchain-openai
    # falls back; the gpt-4o / o-series families with o200k_base.
    counter = TiktokenCounter(name)
    assert counter.encoding_name == "cl100k_base"
    assert counter([HumanMessage("hello")]) == TiktokenCounter("gpt-4")([HumanMessage("hello")])
    assert TiktokenCounter("gpt-4o-2099-preview").encoding_name == "o200k_base"


@pytest.mark.parametrize("model", [None, 5])
def test_model_name_of_the_wrong_type_is_a_config_error(model: Any) -> None:
    with pytest.raises(ConfigError, match="must be an OpenAI model name") as info:
        TiktokenCounter(model)
    assert repr(model) in str(info.value)


def test_window_of_an_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        context_window_for("gpt-4o")
    assert "'gpt-4o'" in str(info.value) and "context_window_tokens=" in str(info.value)

    class Profiled:
        profile: ClassVar[dict[str, Any]] = {"max_input_tokens": "lots"}

    with pytest.raises(ConfigError, match="it is 'lots'"):
        ContextManager(model=Profiled())


# --- a corrupt ledger ---------------------------------------------------------------------


CORRUPT_LEDGERS = {
    "pruned-not-a-dict": ({"pruned": [1, 2]}, "ledger['pruned']"),
    "pruned-entry-wrong-types": ({"pruned": {"t1": {"chars": "many"}}}, "ledger['pruned']['t1']"),
    "compacted-without-ref": ({"compacted": {"t1": {"tool": "x"}}}, "ledger['compacted']['t1']"),
    "window-a-string": ({"window": "start here"}, "ledger['window']"),
    "summary-text-int": ({"summary": {"text": 5, "dump_refs": ["r"]}}, "['summary']['text']"),
    "summary-a-list": ({"summary": [1]}, "ledger['summary']"),
    "hint-a-string": ({"hint": "rebuilt"}, "ledger['hint']"),
    "entities-a-list": ({"entities": ["x"]}, "ledger['entities']"),
    "last-report-a-string": ({"last_report": "ok"}, "ledger['last_report']"),
}


def ledger_history() -> list[BaseMessage]:
    return [
        SystemMessage("Be brief.", id="s"),
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=[call("c1")], id="a1"),
        ToolMessage("out " * 200, tool_call_id="c1", name="read_file", id="t1"),
        AIMessage("done", id="a2"),
    ]


@pytest.mark.parametrize(("state", "where"), CORRUPT_LEDGERS.values(), ids=CORRUPT_LEDGERS.keys())
def test_corrupt_ledger_parts_are_dropped_and_reported(state: dict[str, Any], where: str) -> None:
    cm = manager()
    history = ledger_history()
    result = build_checked(cm, history, state=state)
    lines = repair_decision(result).detail["ledger"]
    assert any(where in line for line in lines), lines
    assert [m.content for m in result.messages[1:]] == [m.content for m in history[1:]]
    clean = cm.build(history, state=result.state)  # the persisted ledger is clean again
    assert "repair" not in clean.report.kinds()


def test_damaged_summary_lists_keep_their_good_items() -> None:
    # A dump ref is how the full history finds a dump: one bad item must not lose the others.
    good = "lgctx:t:messages:" + "0" * 64
    state = {"summary": {"text": "earlier", "covered_ids": ["a", None], "dump_refs": [good, 5]}}
    result = build_checked(manager(), ledger_history(), state=state)
    assert result.state["summary"]["dump_refs"] == [good]
    # An old ledger's covered ids migrate to the newest good one and their count.
    assert result.state["summary"]["covered_last"] == "a"
    assert result.state["summary"]["covered"] == 1
    lines = repair_decision(result).detail["ledger"]
    assert any("['summary']['dump_refs']" in line and "others are kept" in line for line in lines)


def test_bare_string_summary_is_kept_as_the_summary_text() -> None:
    result = build_checked(manager(), ledger_history(), state={"summary": "we read a.py"})
    assert result.state["summary"]["text"] == "we read a.py"
    assert "<summary>\nwe read a.py\n</summary>" in [m.content for m in result.messages]
    assert "kept as the summary text" in repair_decision(result).detail["ledger"][0]


def test_ledger_ids_that_name_no_message_are_harmless() -> None:
    state = {
        "summary": {"text": "earlier work", "covered_ids": ["gone-1"], "dump_refs": []},
        "window": {"start_id": "gone-2", "pin_id": "gone-3"},
        "pruned": {"gone-4": {"tool": "x", "chars": 10}},
        "garbage": {"ignored": True},
        3: "non-string key",
    }
    result = build_checked(manager(), ledger_history(), state=state)
    assert "repair" not in result.report.kinds()  # unknown keys and stale ids are not damage
    assert result.state["pruned"] == {} and result.state["window"] == {}
    assert "garbage" not in result.state
    assert result.removable_ids == []  # no dump, so nothing is offered for removal


@pytest.mark.parametrize("state", ["garbage", [1, 2], 5], ids=["str", "list", "int"])
def test_ledger_that_is_not_a_dict_is_a_config_error(state: Any) -> None:
    history = ledger_history()
    raises_untouched(
        ConfigError,
        history,
        lambda: manager().build(history, state=state),
        "the context ledger must be a dict",
        type(state).__name__,
        "None to start a fresh ledger",
    )


def graph_with_memory() -> tuple[Any, list[list[BaseMessage]]]:
    prompts: list[list[BaseMessage]] = []

    def model(state: dict[str, Any]) -> dict[str, Any]:
        prompts.append(list(state["llm_input_messages"]))
        return {"messages": [AIMessage(f"answer {len(prompts)}", id=f"ai-{len(prompts)}")]}

    memory = ContextMemory(context_window_tokens=4_000)
    builder = StateGraph(ContextState)
    builder.add_node("context", memory.node())
    builder.add_node("model", model)
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=InMemorySaver()), prompts


def test_corrupt_ledger_in_graph_state_is_repaired_and_reported() -> None:
    graph, prompts = graph_with_memory()
    config: RunnableConfig = {"configurable": {"thread_id": "corrupt"}}
    graph.invoke({"messages": [HumanMessage("first", id="h1")]}, config)
    damage = {"pruned": "x", "window": {"start_id": 7}, "summary": {"text": 1}, "hint": []}
    graph.update_state(config, {"context_ledger": damage})
    state = graph.invoke({"messages": [HumanMessage("second", id="h2")]}, config)
    assert validate_messages(prompts[-1], provider="all") == []
    decisions = state["context_ledger"]["last_report"]["decisions"]
    lines = next(d for d in decisions if d["kind"] == "repair")["detail"]["ledger"]
    assert {"ledger['pruned']", "ledger['window']", "ledger['hint']"} <= {
        line.split(":")[0] for line in lines
    }
    assert state["context_ledger"]["pruned"] == {} and state["context_ledger"]["window"] == {}
    assert [m.id for m in state["messages"]] == ["h1", "ai-1", "h2", "ai-2"]


def test_ledger_update_that_is_not_a_dict_is_refused_by_the_channel() -> None:
    graph, _ = graph_with_memory()
    config: RunnableConfig = {"configurable": {"thread_id": "not-a-dict"}}
    graph.invoke({"messages": [HumanMessage("first", id="h1")]}, config)
    with pytest.raises(ConfigError, match="the 'context_ledger' channel holds the ledger, a dict"):
        graph.update_state(config, {"context_ledger": "garbage"})
    with pytest.raises(ConfigError, match="got list"):
        merge_ledger({}, [1])  # type: ignore[arg-type]
    state = graph.invoke({"messages": [HumanMessage("second", id="h2")]}, config)
    assert state["messages"][-1].content == "answer 2"  # the thread goes on


# --- the archive --------------------------------------------------------------------------


def test_missing_archive_entry_is_a_typed_error_and_a_recall_message(archive: Archive) -> None:
    ref = "lgctx:t:message:" + "0" * 64
    with pytest.raises(ArchiveEntryNotFoundError, match=r"no archive entry for .* never written"):
        archive.restore(ref)
    with pytest.raises(ArchiveEntryNotFoundError, match="'m-unknown' is neither"):
        archive.restore("m-unknown")
    with pytest.raises(ArchiveError, match="not an archive reference: 'lgctx:t:bad'"):
        archive.restore("lgctx:t:bad")
    answer = make_recall_tool(archive).invoke({"ref": ref})
    assert answer.startswith("recall failed: no archive entry")  # told to the agent, no crash


def test_corrupt_archive_entry_is_a_typed_error(archive: Archive) -> None:
    store = archive.backend.store  # type: ignore[attr-defined]
    message = ToolMessage("precious output", tool_call_id="c1", id="m1")
    ref = archive.put_message(message)
    namespace, key = ("langgraph_ctx", "t", "message"), ref.rsplit(":", 1)[1]
    value = dict(store.get(namespace, key).value)
    value["data"] = value["data"].replace("precious", "tampered")
    store.put(namespace, key, value)
    with pytest.raises(ArchiveCorruptError, match="does not match its recorded sha256") as info:
        archive.restore(ref)
    assert "restore it from a backup" in str(info.value)  # and what to do
    assert "get_state_history" in str(info.value)
    store.put(namespace, key, {"encoding": "rot13", "data": 5})
    with pytest.raises(ArchiveCorruptError, match="not an archive entry"):
        archive.restore("m1")
    answer = make_recall_tool(archive).invoke({"ref": ref})
    assert answer.startswith("recall failed:")


# --- transcript files on the command line --------------------------------------------------


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.mark.parametrize("command", ["count", "compact", "replay"])
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "is not JSON"),
        ('{"messages": []}', "holds a JSON dict, not a message list"),
        ("[1, 2]", "is not a LangChain message list"),
        ('[{"type": "human", "data": {}}]', "is not a LangChain message list (ValidationError"),
    ],
    ids=["not-json", "json-object", "json-numbers", "message-without-content"],
)
def test_bad_transcript_files_are_one_line_exit_2(
    command: str, content: str, needle: str, in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "bad.json").write_text(content, encoding="utf-8")
    argv = [command, "bad.json"]
    if command == "compact":
        argv += ["--window", "1000", "--out", "out.json"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert err.startswith(f"langgraph-ctx {command}: ") and needle in err


def test_transcript_without_conversation_is_exit_2(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "sys.json").write_text(json.dumps(messages_to_dict([SystemMessage("s")])))
    assert main(["compact", "sys.json", "--window", "1000", "--out", "out.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no conversation to send" in err
    assert not (in_tmp / "out.json").exists()


# --- unicode ------------------------------------------------------------------------------


UNICODE = {
    "lone-surrogate": "half a pair: \ud800 and \udfff",
    "zero-width-joiner": "family 👩\u200d👩\u200d👧\u200d👦 and ZW\u200bSP",
    "rtl": "\u202eevil\u202c \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
    "emoji-sequences": "🏳️\u200d🌈 🇺🇳 👍🏽 1️⃣",
    "nul": "nul \x00 inside \x00\x00",
    "combining-marks": "e\u0301\u0302\u0303 Z\u0351\u0352\u0353\u0354",
}


@pytest.mark.parametrize("text", UNICODE.values(), ids=UNICODE.keys())
def test_unicode_edge_cases_count_build_and_round_trip(text: str, archive: Archive) -> None:
    tokens = count_tokens([HumanMessage(text)])
    assert tokens > 0
    output = ToolMessage(text * (8_000 // tokens + 1), tool_call_id="c1", name="x", id="t1")
    history = [
        HumanMessage(text, id="h1"),
        AIMessage(text, tool_calls=[call("c1", path=text)], id="a1"),
        output,
        AIMessage(text, id="a2"),
        HumanMessage(text, id="h2"),
    ]
    cm = manager(
        2_000,
        strategies=make_strategies(compaction=Compaction(min_chars=100, keep_last=0)),
        archive=archive,
    )
    result = build_checked(cm, history)
    assert "t1" in result.state["compacted"]
    restored = archive.restore(result.state["compacted"]["t1"]["ref"])
    assert encode_message(restored) == encode_message(output)  # byte for byte
    assert restored.content == output.content


# --- a very long single line --------------------------------------------------------------


def test_two_megabyte_single_line_counts_compacts_recalls_and_prunes(archive: Archive) -> None:
    line = "".join(f"{i:07d}," for i in range(250_000))  # 2,000,000 chars, no newline
    history = big_tool_history(0)
    history[2] = ToolMessage(line, tool_call_id="c1", name="read_log", id="t1")
    assert count_tokens(history) > 200_000
    cm = manager(
        4_000, strategies=make_strategies(compaction=Compaction(keep_last=0)), archive=archive
    )
    result = build_checked(cm, history)
    entry = result.state["compacted"]["t1"]
    assert entry["chars"] == 2_000_000 and entry["preview"] == line[:100]
    recall = make_recall_tool(archive)
    first = recall.invoke({"ref": "t1", "start_line": 1, "end_line": 1})
    assert first.startswith("[t1: 2000000 characters, 1 lines; showing characters 0-20000")
    middle = recall.invoke({"ref": "t1", "start_char": 1_000_000, "end_char": 1_000_016})
    assert middle.endswith("\n0125000,0125001,")
    assert "lines 2-end are outside 1-1" in recall.invoke({"ref": "t1", "start_line": 2})
    pruned = build_checked(
        manager(4_000, strategies=make_strategies(protect_turns=1)), history
    )  # no archive: pruned in the view instead
    assert pruned.state["pruned"]["t1"]["chars"] == 2_000_000
    assert pruned.report.tokens <= pruned.report.limit


# --- arguments of the wrong kind: refused up front, the value shown, the fix named ---------


def _tool_args_history(value: Any) -> list[BaseMessage]:
    return [
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=[call("c1", "save", when=value)], id="a1"),
        ToolMessage("ok", tool_call_id="c1", id="t1"),
        AIMessage("done", id="a2"),
    ]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _calibrated_with_nan() -> int:
    counter = ApproximateCounter()
    counter.calibrate(float("nan"), 100)
    return counter([HumanMessage("hello there")])


ARGUMENT_CASES: list[tuple[str, Any, type[LangGraphCtxError], tuple[str, ...]]] = [
    (
        "remove-message-in-history",
        lambda: manager().build([HumanMessage("hi", id="h"), RemoveMessage(id="h")]),
        InvalidMessagesError,
        ("RemoveMessage", "add_messages"),
    ),
    *[
        (
            f"tool-args-{type(value).__name__}",
            lambda value=value: manager().build(_tool_args_history(value)),
            InvalidMessagesError,
            ("'save'", type(value).__name__, "JSON"),
        )
        for value in (datetime.datetime(2026, 1, 1), b"raw", {1, 2})
    ],
    (
        "tool-args-nested-2000-deep",
        lambda: manager().build(_tool_args_history(_nested(2_000))),
        InvalidMessagesError,
        ("'save'", "recursion", "JSON"),
    ),
    (
        "sliding-window-summarize-false-string",
        lambda: SlidingWindow(summarize="false"),
        ConfigError,
        ("summarize must be True or False", "'false'", "summarize=False"),
    ),
    (
        "tools-a-string",
        lambda: manager().build([HumanMessage("hi")], tools="bash"),
        ConfigError,
        ("tools must be a list", "'bash'"),
    ),
    (
        "memory-a-string",
        lambda: manager().build([HumanMessage("hi")], memory="abc"),
        ConfigError,
        ("memory must be a list", "'abc'"),
    ),
    (
        "build-injections-a-string",
        lambda: manager().build([HumanMessage("hi")], injections="abc"),
        ConfigError,
        ("injections must be a list", "'abc'"),
    ),
    (
        "injections-a-string",
        lambda: manager(injections="abc"),
        ConfigError,
        ("injections must be a list", "'abc'"),
    ),
    (
        "build-archive-a-path",
        lambda: manager().build([HumanMessage("hi")], archive="some/dir"),
        ConfigError,
        ("archive must be an Archive", "'some/dir'", "Archive(DirectoryBackend"),
    ),
    (
        "archive-a-path",
        lambda: manager(archive="some/dir"),
        ConfigError,
        ("archive must be an Archive", "'some/dir'"),
    ),
    (
        "redact-a-string",
        lambda: manager(redact="***"),
        ConfigError,
        ("redact must be a function", "'***'"),
    ),
    (
        "memory-namespace-a-string",
        lambda: manager(memory_namespace="memories"),
        ConfigError,
        ("memory_namespace must be a tuple", "'memories'", "('memories',)"),
    ),
    (
        "memory-archive-empty-path",
        lambda: ContextMemory(context_window_tokens=4_000, archive=""),
        ConfigError,
        ("archive", "''", "directory"),
    ),
    (
        "hint-threshold-a-string",
        lambda: ContextMemory(context_window_tokens=4_000, hint_threshold="0.8"),
        ConfigError,
        ("hint_threshold", "'0.8'", "number"),
    ),
    (
        "summarizer-timeout-a-string",
        lambda: Summarizer(timeout_seconds="5"),
        ConfigError,
        ("timeout_seconds", "'5'", "number"),
    ),
    (
        "summarizer-model-a-name",
        lambda: Summarizer(model="gpt-4o-mini"),
        ConfigError,
        ("model must be a chat model", "'gpt-4o-mini'", "init_chat_model"),
    ),
    (
        "compaction-include-tools-a-string",
        lambda: Compaction(include_tools="bash"),
        ConfigError,
        ("include_tools", "'bash'", "('bash',)"),
    ),
    (
        "restore-none",
        lambda: Archive(InMemoryStore(), thread_id="t").restore(None),
        ArchiveError,
        ("reference or a message id", "None"),
    ),
    (
        "counter-returns-none",
        lambda: manager(token_counter=lambda messages: None).build([HumanMessage("hi")]),
        ConfigError,
        ("token_counter returned", "None", "whole number"),
    ),
    (
        "counter-returns-negative",
        lambda: manager(token_counter=lambda messages: -5).build([HumanMessage("hi")]),
        ConfigError,
        ("token_counter returned", "-5", "whole number"),
    ),
]


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [pytest.param(make, error, words, id=name) for name, make, error, words in ARGUMENT_CASES],
)
def test_arguments_of_the_wrong_kind_are_refused_clearly(
    make: Any, error: type[LangGraphCtxError], words: tuple[str, ...]
) -> None:
    raises_untouched(error, [], make, *words)


def test_calibrating_with_nan_leaves_the_counter_as_it_was() -> None:
    fresh = ApproximateCounter()([HumanMessage("hello there")])
    assert _calibrated_with_nan() == fresh
