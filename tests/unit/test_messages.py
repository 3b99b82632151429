from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx._ids import message_fingerprint
from langgraph_ctx.errors import InvalidMessagesError
from langgraph_ctx.messages import (
    TAG_KEY,
    check_messages,
    ensure_ids,
    get_tag,
    is_error_result,
    is_tool_output,
    repair_messages,
    split_blocks,
    split_turns,
    text_of,
    validate_messages,
    with_tag,
)
from tests.conftest import make_conversation
from tests.strategies import broken_histories, expected_defects, histories

any_history = st.one_of(histories(), broken_histories())


def same_objects(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def defects_found(messages: list[BaseMessage]) -> Counter[tuple[str, str]]:
    """validate_messages' pairing problems in the oracle's terms."""
    found: Counter[tuple[str, str]] = Counter()
    for problem in validate_messages(messages):
        if problem.code in ("orphan_tool_result", "unanswered_tool_call"):
            found[(problem.code, messages[problem.index].id or "")] += 1
    return found


# --- blocks --------------------------------------------------------------------------------


@given(any_history)
def test_blocks_concatenate_to_the_input(history: list[BaseMessage]) -> None:
    blocks = split_blocks(history)
    assert same_objects([m for b in blocks for m in b.messages], history)
    position = 0
    for block in blocks:
        assert block.start == position
        assert block.messages
        position = block.end
    assert position == len(history)


@given(any_history)
def test_tool_exchange_results_answer_their_calls(history: list[BaseMessage]) -> None:
    kinds = {SystemMessage: "system", HumanMessage: "user", ToolMessage: "orphan_tool"}
    for block in split_blocks(history):
        first = block.messages[0]
        if block.kind == "tool_exchange":
            assert isinstance(first, AIMessage)
            calls = {tc["id"] for tc in first.tool_calls}
            assert calls
            for result in block.messages[1:]:
                assert isinstance(result, ToolMessage)
                assert result.tool_call_id in calls
        else:
            assert len(block.messages) == 1
            assert block.kind == kinds.get(type(first), "ai")


@given(histories())
def test_parallel_batches_are_never_split(history: list[BaseMessage]) -> None:
    for block in split_blocks(history):
        first = block.messages[0]
        if isinstance(first, AIMessage) and first.tool_calls:
            assert block.kind == "tool_exchange"
            answered = [m.tool_call_id for m in block.messages[1:]]  # type: ignore[attr-defined]
            assert sorted(answered) == sorted(tc["id"] for tc in first.tool_calls)
    for turn in split_turns(history[1:]):
        ids = {m.id for b in turn.blocks for m in b.messages}
        for block in turn.blocks:
            for msg in block.messages:
                if isinstance(msg, AIMessage):
                    # every answer to this AI message lives in the same turn
                    answers = [
                        m
                        for m in history
                        if isinstance(m, ToolMessage)
                        and m.tool_call_id in {tc["id"] for tc in msg.tool_calls}
                    ]
                    assert all(a.id in ids for a in answers)


@pytest.mark.parametrize("parallel", [1, 2, 5])
def test_builder_batches_are_one_block(parallel: int) -> None:
    history = make_conversation(turns=4, parallel=parallel)
    exchanges = [b for b in split_blocks(history) if b.kind == "tool_exchange"]
    assert len(exchanges) == 4
    assert all(len(b.messages) == 1 + parallel for b in exchanges)


# --- turns ---------------------------------------------------------------------------------


@given(any_history)
def test_turns_start_with_a_user_block(history: list[BaseMessage]) -> None:
    rest = history[1:]  # without the leading system message
    turns = split_turns(rest)
    assert same_objects([m for t in turns for b in t.blocks for m in b.messages], rest)
    humans = sum(isinstance(m, HumanMessage) for m in rest)
    opens_with_user = bool(rest) and isinstance(rest[0], HumanMessage)
    assert len(turns) == humans + (0 if opens_with_user or not rest else 1)
    for i, turn in enumerate(turns):
        kinds = [b.kind for b in turn.blocks]
        if i > 0 or opens_with_user:
            assert kinds[0] == "user"
            assert turn.user is turn.blocks[0].messages[0]
        else:
            assert turn.user is None
        assert "user" not in kinds[1:]
        assert turn.start == turn.blocks[0].start
    for a, b in itertools.pairwise(turns):
        assert a.end == b.start


def test_turns_of_the_builder() -> None:
    history = make_conversation(turns=3, parallel=2)
    turns = split_turns(history[1:])
    assert [t.user.id for t in turns if t.user] == ["h1", "h2", "h3"]
    assert [t.end - t.start for t in turns] == [5, 5, 5]
    assert split_turns([]) == []


# --- validation and repair -----------------------------------------------------------------


@given(histories())
def test_valid_histories_have_no_problems(history: list[BaseMessage]) -> None:
    assert validate_messages(history) == []
    check_messages(history)
    assert expected_defects(history) == Counter()


@given(broken_histories())
def test_broken_histories_report_orphans_and_unanswered_calls(
    history: list[BaseMessage],
) -> None:
    expected = expected_defects(history)
    assert expected  # the strategy guarantees damage
    assert defects_found(history) == expected
    with pytest.raises(InvalidMessagesError) as info:
        check_messages(history, provider="openai")
    assert info.value.problems
    assert "repair_messages" in str(info.value)


@given(broken_histories())
def test_repair_output_is_valid_and_every_change_is_listed(history: list[BaseMessage]) -> None:
    snapshot = list(history)
    result = repair_messages(history)
    assert same_objects(history, snapshot)  # the input is untouched
    assert validate_messages(result.messages, provider="openai") == []
    assert len(result.actions) == sum(expected_defects(history).values())
    kept = [
        m for m in history if ("orphan_tool_result", m.id or "") not in expected_defects(history)
    ]
    assert [m for m in result.messages if m in kept] == kept  # order preserved, nothing else lost
    assert repair_messages(result.messages).actions == []  # repairing again is a no-op


@given(histories())
def test_repair_leaves_valid_histories_alone(history: list[BaseMessage]) -> None:
    # The pipeline repairs on every build: a valid history costs one pass and no copy.
    result = repair_messages(history)
    assert result.messages is history
    assert result.actions == []


@given(broken_histories())
def test_repair_copies_a_broken_history(history: list[BaseMessage]) -> None:
    result = repair_messages(history)
    assert result.actions and result.messages is not history


def test_repair_answers_dangling_calls_with_tagged_errors() -> None:
    ai = AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}], id="ai")
    result = repair_messages([HumanMessage("go", id="h"), ai, ToolMessage("x", tool_call_id="zz")])
    answer = result.messages[2]
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.name, answer.status) == ("c1", "bash", "error")
    assert get_tag(answer) == {"repair": "dangling_call"}
    assert len(result.messages) == 3
    assert any("orphan" in a for a in result.actions)
    assert any("'c1'" in a for a in result.actions)


def test_validate_rules_and_provider_filter() -> None:
    assert [p.code for p in validate_messages([])] == ["empty"]
    assert [p.code for p in validate_messages([SystemMessage("s")])] == ["no_conversation"]

    late_system = [HumanMessage("hi"), SystemMessage("late")]
    assert [p.code for p in validate_messages(late_system)] == ["system_not_leading"]
    assert validate_messages(late_system, provider="openai") == []
    assert [p.code for p in validate_messages(late_system, provider="anthropic")] == [
        "system_not_leading"
    ]

    ai_first = [SystemMessage("s"), AIMessage("hello"), HumanMessage("hi")]
    problems = validate_messages(ai_first)
    assert [(p.code, p.index) for p in problems] == [("first_not_user", 1)]
    assert str(problems[0]).startswith("first_not_user at 1: ")
    assert validate_messages(ai_first, provider="openai") == []

    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}])
    dupes = [
        HumanMessage("q"),
        ai,
        ToolMessage("1", tool_call_id="c"),
        ToolMessage("2", tool_call_id="c"),
    ]
    assert [p.code for p in validate_messages(dupes)] == ["duplicate_tool_result"]

    assert [p.code for p in validate_messages([HumanMessage("")])] == ["empty_user_message"]


@pytest.mark.trajectories
def test_real_trajectories_are_valid(trajectories: dict[str, list[BaseMessage]]) -> None:
    for name, messages in trajectories.items():
        assert validate_messages(messages) == [], name
        assert repair_messages(messages).actions == [], name


def test_builder_histories_are_valid_and_deterministic() -> None:
    history = make_conversation(turns=6, parallel=3, long_output=2000, error_every=3, seed=7)
    assert validate_messages(history) == []
    ids = [m.id for m in history]
    assert all(ids) and len(set(ids)) == len(ids)
    assert len(history) == 1 + 6 * (3 + 3)
    results = [m for m in history if isinstance(m, ToolMessage)]
    assert [m.status for m in results].count("error") == len(results) // 3
    assert all(len(text_of(m)) == 2000 for m in results if m.status == "success")
    again = make_conversation(turns=6, parallel=3, long_output=2000, error_every=3, seed=7)
    assert again == history
    assert make_conversation(turns=6, seed=8) != make_conversation(turns=6, seed=7)
    plain = make_conversation(turns=2, tool_calls=False)
    assert [type(m).__name__ for m in plain] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]


# --- ids and tags --------------------------------------------------------------------------


@given(histories())
def test_ensure_ids_is_deterministic(history: list[BaseMessage]) -> None:
    bare = [m.model_copy(update={"id": None}) for m in history]
    first, second = ensure_ids(bare), ensure_ids(bare)
    assert [m.id for m in first] == [m.id for m in second]
    assert all(m.id and m.id.startswith("lgctx-") for m in first)
    assert len({m.id for m in first}) == len(first)
    assert all(m.id is None for m in bare)  # copies, not mutation
    assert [m.content for m in first] == [m.content for m in bare]
    assert same_objects(ensure_ids(history), history)  # existing ids are kept as they are


def test_ensure_ids_depends_on_position_and_content() -> None:
    a, b = HumanMessage("same"), HumanMessage("same")
    ids = [m.id for m in ensure_ids([a, b])]
    assert ids[0] != ids[1]
    assert ensure_ids([HumanMessage("other")])[0].id != ids[0]
    assert message_fingerprint(a) == message_fingerprint(b)
    assert message_fingerprint(a) != message_fingerprint(AIMessage("same"))


def test_tags_merge_and_copy() -> None:
    msg = ToolMessage("out", tool_call_id="c", id="t")
    assert get_tag(msg) == {}
    tagged = with_tag(with_tag(msg, pruned=True), strategy="keep_last")
    assert get_tag(tagged) == {"pruned": True, "strategy": "keep_last"}
    assert tagged.additional_kwargs[TAG_KEY] == get_tag(tagged)
    assert get_tag(msg) == {} and tagged.id == "t"
    assert get_tag(HumanMessage("x", additional_kwargs={TAG_KEY: "junk"})) == {}


def test_text_and_tool_output_helpers() -> None:
    blocks = HumanMessage(
        content=[
            {"type": "text", "text": "one"},
            "two",
            {"type": "image_url", "image_url": {"url": "data:,"}},
            {"type": "text", "text": "three"},
        ]
    )
    assert text_of(blocks) == "one\ntwo\nthree"
    assert text_of(HumanMessage("plain")) == "plain"
    failed = ToolMessage("boom", tool_call_id="c", status="error")
    assert is_error_result(failed) and not is_error_result(ToolMessage("ok", tool_call_id="c"))
    assert not is_error_result(SystemMessage("[tool: bash] error"))
    said = ToolMessage("\n  Traceback (most recent call last):", tool_call_id="c")
    assert is_error_result(said, by_text=True) and not is_error_result(said)
    assert not is_error_result(ToolMessage("errors: 0", tool_call_id="c"), by_text=True)
    assert not is_error_result(SystemMessage("Error: [tool: bash]"), by_text=True)
    assert is_tool_output(failed)
    assert is_tool_output(SystemMessage("[tool: bash] ls output"))
    assert not is_tool_output(SystemMessage("You are helpful."))
    assert not is_tool_output(AIMessage("[tool: bash]"))
