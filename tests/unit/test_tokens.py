from __future__ import annotations

import doctest
import math
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, Literal

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, ConfigDict, Field

from langgraph_ctx.errors import ConfigError
from langgraph_ctx.prompt import report
from langgraph_ctx.tokens import (
    ApproximateCounter,
    TiktokenCounter,
    context_window_for,
    count_tokens,
    exact,
    get_counter,
    models,
)
from langgraph_ctx.tokens._encodings import encoding_name_for_model
from langgraph_ctx.tokens.approximate import PARTS
from tests.conftest import make_conversation
from tests.fakes import ScriptedChatModel, scripted
from tests.strategies import histories

MODELS = ["gpt-4o", "gpt-4", "gpt-3.5-turbo", "gpt-4.1-mini", "o3"]


@cache
def chat(model: str) -> ChatOpenAI:
    return ChatOpenAI(model=model, api_key="x")  # type: ignore[arg-type]


def reference(messages: list[BaseMessage], model: str) -> int:
    return chat(model).get_num_tokens_from_messages(messages)


# --- exactness ---------------------------------------------------------------------------


@pytest.mark.trajectories
@pytest.mark.parametrize("model", MODELS)
def test_exact_on_every_trajectory(trajectories: dict[str, list[BaseMessage]], model: str) -> None:
    for name, messages in trajectories.items():
        assert count_tokens(messages, model=model) == reference(messages, model), name


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
@given(history=histories())
def test_exact_on_generated_histories(model: str, history: list[BaseMessage]) -> None:
    assert count_tokens(history, model=model) == reference(history, model)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-3.5-turbo-0301", "gpt-6-preview", "gpt-4x-lab"])
def test_exact_on_builder_histories_and_unusual_names(model: str) -> None:
    history = make_conversation(turns=6, parallel=3, long_output=800, error_every=4, seed=3)
    history.insert(2, HumanMessage("also this", name="alice", id="named"))
    assert count_tokens(history, model=model) == reference(history, model)


def test_counter_is_a_token_counter_and_documented_examples_hold() -> None:
    counter = TiktokenCounter("gpt-4o")
    # 3 per message + role + text, and 3 for reply priming (what ChatOpenAI reports too).
    assert counter([HumanMessage("hello")]) == 8
    assert count_tokens([SystemMessage("Be brief."), HumanMessage("hi")]) == 15
    assert counter([]) == 3  # reply priming only
    assert get_counter("gpt-4o") is get_counter("gpt-4o")


# The modules where the counters and the report are written (doctest reads only their own names).
@pytest.mark.parametrize("module", [exact, models, report], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_special_token_text_is_counted_as_text() -> None:
    counter = TiktokenCounter("gpt-4o")
    assert counter.count_text("<|endoftext|>") > 1


# --- tool schemas --------------------------------------------------------------------------

WEATHER_DICT = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}


def get_current_weather(location: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather in a given location.

    Args:
        location: The city and state, e.g. San Francisco, CA
        unit: The unit of temperature to return
    """
    return f"20 degrees {unit} in {location}"


class WeatherModel(BaseModel):
    """Get the current weather in a given location."""

    model_config = ConfigDict(title="get_current_weather")  # same tool name as the others

    location: str = Field(description="The city and state, e.g. San Francisco, CA")
    unit: Literal["celsius", "fahrenheit"] = Field(
        "celsius", description="The unit of temperature to return"
    )


WEATHER_TOOL = tool(get_current_weather, parse_docstring=True)
WEATHER_FORMS = {
    "dict": WEATHER_DICT,
    "pydantic": WeatherModel,
    "function": get_current_weather,
    "basetool": WEATHER_TOOL,
}

COOKBOOK_MESSAGES: list[BaseMessage] = [
    SystemMessage("You are a helpful assistant that can answer to questions about the weather."),
    HumanMessage("What's the weather like in San Francisco?"),
]


def cookbook_num_tokens_for_tools(functions: list[dict[str, Any]], model: str) -> int:
    """`num_tokens_for_tools` from OpenAI's cookbook, tool part only, with tiktoken itself."""
    if model in ("gpt-4o", "gpt-4o-mini"):
        func_init, prop_init, prop_key, enum_init, enum_item, func_end = 7, 3, 3, -3, 3, 12
    else:
        func_init, prop_init, prop_key, enum_init, enum_item, func_end = 10, 3, 3, -3, 3, 12
    encoding = tiktoken.encoding_for_model(model)
    count = 0
    for f in functions:
        count += func_init
        function = f["function"]
        desc = function["description"]
        desc = desc[:-1] if desc.endswith(".") else desc
        count += len(encoding.encode(function["name"] + ":" + desc))
        props = function["parameters"]["properties"]
        if props:
            count += prop_init
            for key, prop in props.items():
                count += prop_key
                if "enum" in prop:
                    count += enum_init
                    for item in prop["enum"]:
                        count += enum_item + len(encoding.encode(item))
                pdesc = prop["description"]
                pdesc = pdesc[:-1] if pdesc.endswith(".") else pdesc
                count += len(encoding.encode(f"{key}:{prop['type']}:{pdesc}"))
    return count + func_end if functions else 0


@pytest.mark.parametrize(
    ("model", "published"),
    [("gpt-4o", 101), ("gpt-4o-mini", 101), ("gpt-4", 105), ("gpt-3.5-turbo", 105)],
)
def test_tools_match_the_cookbook(model: str, published: int) -> None:
    # The cookbook's example prints these totals, which the API confirmed.
    total = count_tokens(COOKBOOK_MESSAGES, model=model, tools=[WEATHER_DICT])
    assert total == published
    by_hand = cookbook_num_tokens_for_tools([WEATHER_DICT], model)
    assert total == count_tokens(COOKBOOK_MESSAGES, model=model) + by_hand


@pytest.mark.parametrize("form", sorted(WEATHER_FORMS))
def test_every_tool_form_adds_the_same_positive_deterministic_amount(form: str) -> None:
    counter = TiktokenCounter("gpt-4o")
    history = make_conversation(turns=2)
    tools_ = [WEATHER_FORMS[form]]
    added = counter.count(history, tools=tools_) - counter.count(history)
    assert added > 0
    assert added == counter.count_tools(tools_) == TiktokenCounter("gpt-4o").count_tools(tools_)
    assert added == 101 - 33  # the cookbook's tools-only share for gpt-4o


def test_tools_edge_cases() -> None:
    counter = TiktokenCounter("gpt-4o")

    def ping() -> str:
        """Check the service."""
        return "pong"

    def maybe(limit: int | None = None) -> str:
        """Optional argument without a plain type."""
        return str(limit)

    assert counter.count_tools([]) == 0
    assert count_tokens(COOKBOOK_MESSAGES, tools=[]) == count_tokens(COOKBOOK_MESSAGES)
    no_params = counter.count_tools([ping])
    assert no_params == 7 + counter.count_text("ping:Check the service") + 12
    assert counter.count_tools([maybe]) == counter.count_tools([maybe]) > no_params
    two = counter.count_tools([ping, get_current_weather])
    assert two == no_params + counter.count_tools([get_current_weather]) - 12  # one func_end


# --- the per-message cache -----------------------------------------------------------------


def test_grown_history_encodes_only_new_messages() -> None:
    history = make_conversation(turns=20, parallel=2, seed=1)
    counter = TiktokenCounter("gpt-4o")
    counter(history[:40])
    assert counter.encoded_messages == 40
    for n in range(41, len(history) + 1):
        total = counter(history[:n])
        assert counter.encoded_messages == n
    assert total == TiktokenCounter("gpt-4o", cache_size=0)(history)
    counter(history)
    assert counter.encoded_messages == len(history)


def test_changed_message_with_same_id_is_recounted() -> None:
    history = make_conversation(turns=3)
    counter = TiktokenCounter("gpt-4o")
    before = counter(history)
    target = history[3]  # the first tool result
    changed = target.model_copy(update={"content": f"{target.content}\nthree more words"})
    assert changed.id == target.id
    after = counter([*history[:3], changed, *history[4:]])
    assert counter.encoded_messages == len(history) + 1
    assert after == before + counter.count_text("\nthree more words")


def test_message_changed_in_place_is_recounted() -> None:
    msg = HumanMessage("short", id="h")
    counter = TiktokenCounter("gpt-4o")
    counter([msg])
    msg.content = "a much longer text than before, so the count must change"
    assert counter([msg]) == reference([msg], "gpt-4o")


def test_content_list_appended_in_place_is_recounted() -> None:
    # The count must follow the message as it is now: a list grown in place is the same object.
    history = make_conversation(turns=3)
    blocks = HumanMessage([{"type": "text", "text": "look"}], id="grow")
    counter = TiktokenCounter("gpt-4o")
    counter([*history, blocks])
    blocks.content.append({"type": "text", "text": "more words " * 300})  # type: ignore[union-attr]
    assert counter([*history, blocks]) == reference([*history, blocks], "gpt-4o")
    assert counter.count_message(blocks) == reference([blocks], "gpt-4o") - 3


def test_tool_call_args_edited_in_place_are_recounted() -> None:
    history = make_conversation(turns=3)
    ai = AIMessage("", tool_calls=[{"name": "write", "args": {"text": "x"}, "id": "c1"}], id="w")
    counter = TiktokenCounter("gpt-4o")
    counter([*history, ai])
    ai.tool_calls[0]["args"]["text"] = "a long argument " * 300
    assert counter([*history, ai]) == reference([*history, ai], "gpt-4o")
    assert counter.count_message(ai) == reference([ai], "gpt-4o") - 3


@pytest.mark.parametrize(
    "update",
    [
        {"invalid_tool_calls": [{"name": "f", "args": "{oops", "id": "bad", "error": None}]},
        {"additional_kwargs": {"name": "planner"}},
        {"tool_calls": [{"name": "read_file", "args": {"path": "b.py"}, "id": "call_1_1"}]},
    ],
    ids=["invalid_tool_calls", "kwargs_name", "tool_args"],
)
def test_changes_outside_content_are_recounted(update: dict[str, Any]) -> None:
    ai = AIMessage(
        "", tool_calls=[{"name": "read_file", "args": {"path": "a.py"}, "id": "call_1_1"}], id="x"
    )
    counter = TiktokenCounter("gpt-4o")
    counter([ai])
    changed = ai.model_copy(update=update)
    assert counter([changed]) == reference([changed], "gpt-4o")


def test_cache_size_bounds_and_disables_the_cache() -> None:
    history = make_conversation(turns=2)
    uncached = TiktokenCounter("gpt-4o", cache_size=0)
    uncached(history)
    uncached(history)
    assert uncached.encoded_messages == 2 * len(history)

    small = TiktokenCounter("gpt-4o", cache_size=3)
    small(history[:5])
    small(history[3:5])  # still cached
    assert small.encoded_messages == 5
    small(history[:1])  # evicted long ago
    assert small.encoded_messages == 6

    small.cache_clear()
    small(history[3:5])
    assert small.encoded_messages == 8

    with pytest.raises(ConfigError, match="cache_size"):
        TiktokenCounter(cache_size=-1)


def test_repeated_message_in_one_list_is_encoded_once() -> None:
    msg = HumanMessage("the same question twice", id="q")
    counter = TiktokenCounter("gpt-4o")
    assert counter([msg, msg]) == reference([msg, msg], "gpt-4o")
    assert counter.encoded_messages == 1


def test_counting_from_threads_agrees() -> None:
    history = make_conversation(turns=30, parallel=2, long_output=300)
    prefixes = [history[: len(history) - n % 7] for n in range(40)]
    exact = TiktokenCounter("gpt-4o", cache_size=0)
    expected = [exact(p) for p in prefixes]
    counter = TiktokenCounter("gpt-4o", cache_size=50)  # small: evictions race with lookups
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(counter, prefixes)) == expected


# --- model names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-2099-01-01", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("gpt-5-nano", "o200k_base"),
        ("gpt-6-preview", "o200k_base"),  # unknown to tiktoken: langchain-openai's fallback
        ("o3", "o200k_base"),
        ("o4-large", "o200k_base"),  # unknown o-series: o200k (langchain-openai would say cl100k)
        ("gpt-oss-20b", "o200k_base"),  # o200k_harmony shares o200k_base's ranks
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo-16k", "cl100k_base"),
        ("gpt-4x-lab", "cl100k_base"),
        ("my-local-llama", "cl100k_base"),
    ],
)
def test_encoding_follows_the_model_name(model: str, encoding: str) -> None:
    assert encoding_name_for_model(model) == encoding
    assert TiktokenCounter(model).encoding_name == encoding


def test_unknown_model_fallbacks_count_differently() -> None:
    text = [HumanMessage("Привет, как дела? これはテストです。 مرحبا بالعالم")]
    o200k = count_tokens(text, model="gpt-6-preview")
    cl100k = count_tokens(text, model="my-local-llama")
    assert o200k == count_tokens(text, model="gpt-4o")
    assert cl100k == count_tokens(text, model="gpt-4")
    assert o200k != cl100k


# --- approximate counter -------------------------------------------------------------------


def test_approximate_raw_estimate() -> None:
    counter = ApproximateCounter()
    msgs = [HumanMessage("abcd" * 10)]
    assert counter.raw(msgs) == 40 / 4 + 3 + 3
    assert counter(msgs) == 16
    call = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "ls -la"}, "id": "c"}])
    assert counter([call]) > counter([AIMessage("")])


def test_approximate_estimate_by_part() -> None:
    """The parts add up to the estimate, and each is scaled by its own ratio."""
    counter = ApproximateCounter()
    call = {"name": "bash", "args": {"command": "ls -la src/"}, "id": "c"}
    msgs = [HumanMessage("abcd" * 10), AIMessage("okay", tool_calls=[call])]
    tools = [{"name": "bash", "description": "Run it.", "parameters": {"type": "object"}}]
    parts = counter.raw_parts(msgs, tools)
    assert set(parts) == set(PARTS)
    assert parts["text"] == (40 + 4) / 4 and parts["frame"] == 3 + 3 + 3
    assert parts["calls"] > 0 and parts["tools"] > 0 and parts["media"] == 0
    assert sum(parts.values()) == pytest.approx(counter.raw(msgs) + parts["tools"])
    assert counter.with_ratios(dict.fromkeys(PARTS, 1.0))(msgs) == counter(msgs)
    halved = counter.with_ratios({"calls": 0.0, "tools": 0.0})  # the others keep 1
    assert halved(msgs) == math.ceil(parts["text"] + parts["frame"])
    assert halved.count_tools(tools) == 0
    assert halved.with_ratio(1.0)(msgs) == counter(msgs)  # one ratio again for every part


def test_approximate_calibration_learns_and_clamps() -> None:
    msgs = make_conversation(turns=3)
    counter = ApproximateCounter()
    raw = counter.raw(msgs)
    assert counter.calibrate(raw, round(2 * raw)) == pytest.approx(2.0, rel=1e-2)
    assert counter(msgs) == pytest.approx(2 * raw, rel=1e-2)

    smooth = ApproximateCounter(smoothing=0.3)
    assert smooth.calibrate(100, 150) == pytest.approx(1.5)  # first observation is taken whole
    assert smooth.calibrate(100, 50) == pytest.approx(1.5 + 0.3 * (0.5 - 1.5))
    assert smooth.observations == 2
    assert smooth.calibrate(0, 100) == smooth.calibrate(100, 0) == pytest.approx(1.2)

    assert ApproximateCounter().calibrate(100, 10_000) == 2.0
    assert ApproximateCounter().calibrate(100, 1) == 0.5
    wide = ApproximateCounter(min_ratio=0.1, max_ratio=10)
    assert wide.calibrate(100, 700) == pytest.approx(7.0)


@given(st.lists(st.tuples(st.floats(0.01, 1e6), st.integers(1, 10**7)), max_size=20))
def test_approximate_ratio_stays_clamped(observations: list[tuple[float, int]]) -> None:
    counter = ApproximateCounter(min_ratio=0.6, max_ratio=1.8)
    for raw, actual in observations:
        assert 0.6 <= counter.calibrate(raw, actual) <= 1.8


def test_approximate_calibrates_from_usage_metadata() -> None:
    counter = ApproximateCounter()
    history: list[BaseMessage] = [SystemMessage("x" * 400), HumanMessage("y" * 400)]
    prompt = counter.raw(history)
    history.append(
        AIMessage(
            "ok",
            usage_metadata={
                "input_tokens": int(prompt * 1.5),
                "output_tokens": 1,
                "total_tokens": int(prompt * 1.5) + 1,
            },
        )
    )
    assert counter.calibrate_from_history(history) == pytest.approx(1.5, rel=1e-2)
    assert counter(history[:2]) == math.ceil(prompt * counter.ratio)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"chars_per_token": 0}, "chars_per_token"),
        ({"min_ratio": 0}, "min_ratio"),
        ({"min_ratio": 1.2}, "min_ratio"),
        ({"max_ratio": 0.9}, "max_ratio"),
        ({"smoothing": 0}, "smoothing"),
        ({"smoothing": 1.5}, "smoothing"),
    ],
)
def test_approximate_config_errors(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ApproximateCounter(**kwargs)  # type: ignore[arg-type]


# --- context window ------------------------------------------------------------------------


def fake_model(profile: dict[str, Any] | None) -> ScriptedChatModel:
    return scripted(AIMessage("hi"), profile=profile)


def test_context_window_from_profile_and_explicit_wins() -> None:
    model = fake_model({"max_input_tokens": 128_000, "max_output_tokens": 4096})
    assert context_window_for(model) == 128_000
    assert context_window_for(model, explicit=32_000) == 32_000
    assert context_window_for(None, explicit=1) == 1


@pytest.mark.parametrize(
    ("model", "explicit", "match"),
    [
        ("none", None, "no model"),
        ("no_profile", None, "context_window_tokens=..."),
        ("no_max", None, "max_input_tokens"),
        ("profile", 0, "must be > 0, got 0"),
        ("profile", -5, "must be > 0, got -5"),
    ],
)
def test_context_window_config_errors(model: str, explicit: int | None, match: str) -> None:
    models = {
        "none": None,
        "no_profile": fake_model(None),
        "no_max": fake_model({"max_output_tokens": 4096}),
        "profile": fake_model({"max_input_tokens": 1000}),
    }
    with pytest.raises(ConfigError, match=match):
        context_window_for(models[model], explicit=explicit)
