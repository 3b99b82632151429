"""Options of the wrong kind: a `ConfigError` naming the argument, before anything is written.

Two parts. First one test per reported case (issue 26): each used to fail deep inside, with a
`TypeError` or an `AttributeError` naming nothing of ours, or was silently read as something
else (`remove_summarized="false"` as true). Each now raises `ConfigError` naming the argument,
the value and what to pass, and leaves the store, the directory and the history as they were.

Then a property test over every public entry point: the table of arguments is read from the
signatures (an argument annotated `int`, `float`, `bool`, `str`, a path or a callable, alone
or `| None`), so a new option is covered as soon as it is added. Each gets values of the wrong
kind (a string for a number or a flag, `nan`, a negative number, `None` where it is required,
bytes for a path, a non-callable for a callable) and must raise a `LangGraphCtxError` whose
message names it: never a `TypeError` from deep inside, never silent acceptance. The rules
themselves (no `bool` for a number, no whole float for an int...) are `langgraph_ctx.checks`.
"""

from __future__ import annotations

import copy
import doctest
import inspect
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

import langgraph_ctx
from langgraph_ctx import (
    ApproximateCounter,
    Archive,
    Compaction,
    ConfigError,
    ContextBudget,
    ContextManager,
    ContextMemory,
    ContextState,
    DirectoryBackend,
    DynamicSummarization,
    EntityExtraction,
    LangGraphCtxError,
    PruneToolOutputs,
    SlidingWindow,
    Summarizer,
    TiktokenCounter,
    checks,
    count_tokens,
    counter_for_model,
    default_strategies,
)
from langgraph_ctx.archive.recall import make_recall_tool
from langgraph_ctx.graph.middleware import ContextMiddleware
from langgraph_ctx.prompt.assembly import Skill
from langgraph_ctx.strategies import ShortenTurns, register_strategy
from langgraph_ctx.summaries.extract import EntityExtractor

# --- helpers ------------------------------------------------------------------------------


def store_items(store: InMemoryStore) -> list[Any]:
    """Every item of the store, whatever its namespace."""
    return [
        item
        for namespace in store.list_namespaces()
        for item in store.search(namespace, limit=1000)
    ]


def refused(call: Callable[[], Any], *words: str) -> ConfigError:
    """`call()` raises `ConfigError` whose message holds every word."""
    with pytest.raises(ConfigError) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    return info.value


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory, to see that nothing is created in it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def history() -> list[BaseMessage]:
    return [SystemMessage("Be brief.", id="s"), HumanMessage("hi", id="h")]


# --- the reported cases -------------------------------------------------------------------


@pytest.mark.parametrize(
    "skill", [{"name": 42, "description": "x"}, {"name": "x", "description": 7}]
)
def test_a_skill_whose_name_is_not_a_string_is_refused_at_construction(skill: Any) -> None:
    # Was: AttributeError: 'int' object has no attribute 'replace', at the first build.
    bad = "name" if skill["name"] == 42 else "description"
    refused(
        lambda: ContextManager(context_window_tokens=8_000, skills=[skill]),
        "skills[0]",
        f"{bad} must be",
        repr(skill[bad]),
        "pass e.g.",
    )
    refused(lambda: ContextMemory(context_window_tokens=8_000, skills=[skill]), "skills[0]")


def test_skills_given_as_one_string_are_refused() -> None:
    refused(
        lambda: ContextManager(context_window_tokens=8_000, skills="search"),
        "skills must be a list",
        "'search'",
    )


@pytest.mark.parametrize(
    ("tools", "words"),
    [
        (42, ["tools must be a list", "int 42"]),
        ([42], ["tools[0]", "int 42", "BaseTool"]),
        (["bash"], ["tools[0]", "str 'bash'"]),
        ([{"foo": 1}], ["tools[0]", "{'foo': 1}", "schema"]),
    ],
)
def test_tools_that_are_not_tools_are_refused_before_anything_is_written(
    tools: Any, words: list[str]
) -> None:
    # Was: ValueError: Unsupported function, from LangChain's converter, naming nothing of ours.
    store = InMemoryStore()
    cm = ContextManager(context_window_tokens=8_000, archive=Archive(store, thread_id="t"))
    messages = history()
    before = copy.deepcopy(messages)
    # A ledger with dump references to spill: the build would write them to the archive first.
    state = {"summary": {"text": "old", "dump_refs": [f"ref{i}" for i in range(50)]}}
    state_before = copy.deepcopy(state)
    refused(lambda: cm.build(messages, tools=tools, state=state), *words)
    assert messages == before
    assert state == state_before
    assert store_items(store) == []


def test_a_node_with_tools_that_are_not_tools_is_refused_when_made() -> None:
    memory = ContextMemory(context_window_tokens=8_000)
    refused(lambda: memory.node(tools=[42]), "tools[0]", "int 42")
    refused(lambda: memory.node(tools="bash"), "tools must be a list", "'bash'")


def test_count_tokens_with_a_tool_that_is_not_one_names_it() -> None:
    refused(lambda: count_tokens(history(), tools=[42]), "tools[0]", "int 42")


def test_a_bytes_archive_path_is_refused_and_no_directory_is_made(in_tmp: Path) -> None:
    # Was: TypeError: argument should be a str object or an os.PathLike object returning str.
    refused(
        lambda: ContextMemory(context_window_tokens=8_000, archive=b"some/path"),
        "archive must be",
        "bytes b'some/path'",
        "pass e.g. archive=",
    )
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize("value", ["false", "true", "no", 0, 1])
def test_remove_summarized_takes_only_a_real_bool(value: Any) -> None:
    # Was: "false" accepted and read as true, the opposite of what was written.
    refused(
        lambda: ContextMemory(context_window_tokens=8_000, remove_summarized=value),
        "remove_summarized must be True, False or None",
        repr(value),
        "pass e.g. remove_summarized=",
    )


def test_remove_summarized_false_as_a_string_suggests_false() -> None:
    error = refused(lambda: ContextMemory(context_window_tokens=8_000, remove_summarized="false"))
    assert "remove_summarized=False" in str(error)


@pytest.mark.parametrize("max_chars", ["10", 1.5, True, None, 0, -3, math.nan])
def test_the_recall_tool_refuses_a_max_chars_that_is_not_a_count(max_chars: Any) -> None:
    # Was: TypeError: '<' not supported between instances of 'str' and 'int'.
    store = InMemoryStore()
    archive = Archive(store, thread_id="t")
    memory = ContextMemory(context_window_tokens=8_000, archive=store)
    for make in (
        lambda: memory.recall_tool(max_chars=max_chars),
        lambda: make_recall_tool(archive, max_chars=max_chars),
    ):
        refused(make, "max_chars must be", repr(max_chars), "pass e.g. max_chars=20000")
    assert store_items(store) == []


@pytest.mark.parametrize("root", [None, b"some/path", "", 42])
def test_directory_backend_needs_a_directory_path(root: Any, in_tmp: Path) -> None:
    # Was: TypeError: expected str, bytes or os.PathLike object, not NoneType.
    refused(lambda: DirectoryBackend(root), "root must be a directory path", repr(root))
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize("size", ["100", 1.5, True, None, -1])
def test_tiktoken_cache_size_must_be_a_whole_number(size: Any) -> None:
    # Was: TypeError: '<' not supported between instances of 'str' and 'int'.
    refused(lambda: TiktokenCounter(cache_size=size), "cache_size must be", repr(size))


def test_a_bad_option_in_a_graph_is_refused_before_the_graph_runs() -> None:
    """Configuration fails when the graph is built, not in the middle of a run: no checkpoint."""
    saver = InMemorySaver()

    def make() -> Any:
        memory = ContextMemory(context_window_tokens=8_000, remove_summarized="false")
        builder = StateGraph(ContextState)
        builder.add_node("context", memory.node())
        builder.add_node("model", lambda state: {"messages": [AIMessage("ok")]})
        builder.add_edge(START, "context")
        builder.add_edge("context", "model")
        builder.add_edge("model", END)
        return builder.compile(checkpointer=saver)

    refused(make, "remove_summarized")
    assert list(saver.list(None)) == []


def test_the_middleware_needs_a_context_memory() -> None:
    refused(lambda: ContextMiddleware(ContextManager(context_window_tokens=8_000)), "memory")
    refused(lambda: ContextMiddleware(None), "memory", "ContextMemory(")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: ContextMemory(windows=8_000), ["unknown option(s) ['windows']", "max_messages"]),
        (lambda: EntityExtractor(model=42, schema=dict), ["model must be a chat model", "42"]),
        (lambda: EntityExtractor(model=None, schema=dict), ["model must be", "None"]),
        (lambda: Summarizer(tags="mine"), ["tags must be a list", "'mine'"]),
        (lambda: Summarizer(tags=[1]), ["tags[0] must be a str", "int 1"]),
        (lambda: register_strategy(42, Compaction), ["name must be a non-empty string", "42"]),
        (lambda: Skill(name="", description="x"), ["Skill(name='')", "non-empty string"]),
        (lambda: Skill(name="s", description="x", location=3), ["location", "int 3"]),
        (lambda: ShortenTurns(settle_after=-1), ["settle_after must be >= 0 or None", "-1"]),
        (lambda: Compaction(excerpt_chars=-1), ["excerpt_chars must be >= 0", "-1"]),
        (lambda: Compaction(on_arrival=math.nan), ["on_arrival", "nan"]),
        (lambda: ContextBudget(context_window_tokens=9, trigger=math.nan), ["trigger", "nan"]),
        (lambda: ContextMemory(archive=42), ["archive must be", "int 42", "archive=store"]),
    ],
)
def test_siblings_of_the_reported_cases(call: Callable[[], Any], words: list[str]) -> None:
    refused(call, *words)


def test_the_checks_docstring_example_runs() -> None:
    result = doctest.testmod(checks)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: checks.check_int("n", 2000.0), ["whole number", "float 2000.0"]),
        (lambda: checks.check_int("n", True), ["whole number", "bool True"]),
        (lambda: checks.check_number("x", math.inf), ["finite number", "inf"]),
        (lambda: checks.check_number("x", True), ["finite number", "bool True"]),
        (lambda: checks.check_bool("flag", "false"), ["True or False", "'false'", "flag=False"]),
        (lambda: checks.check_path("root", b"x"), ["directory path", "bytes b'x'"]),
        (lambda: checks.check_str("name", ""), ["non-empty string", "str ''"]),
        (lambda: checks.check_callable("f", 3, what="a function"), ["f must be a function"]),
        (lambda: checks.check_list("xs", "abc", "strings"), ["xs must be a list", "'abc'"]),
    ],
)
def test_the_rules_of_the_checks(call: Callable[[], None], words: list[str]) -> None:
    refused(call, *words)


def test_values_of_the_right_kind_pass_the_checks() -> None:
    checks.check_int("n", 0)
    checks.check_int("n", None, optional=True)
    checks.check_number("x", 0.5, gt=0, le=1)
    checks.check_number("x", 1, gt=0, le=1)
    checks.check_bool("flag", False)
    checks.check_path("root", Path("a"))
    checks.check_path("root", "a")
    checks.check_callable("f", len)
    checks.check_list("xs", ("a",), "strings")


# --- every public entry point, from its signature ------------------------------------------


def _graph() -> Any:
    builder = StateGraph(ContextState)
    builder.add_node("model", lambda state: {"messages": [AIMessage("ok")]})
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())


_STORE = InMemoryStore()
_MEMORY = ContextMemory(context_window_tokens=8_000, archive=_STORE)
_VIEW = {"graph": _graph(), "config": {"configurable": {"thread_id": "t"}}}

# (label, the callable, the arguments it needs): every public class of `langgraph_ctx.__all__`
# that takes options, and the public methods and functions that take numbers, flags, paths or
# callables. `test_every_public_class_with_options_is_in_the_table` keeps it complete.
ENTRY_POINTS: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
    ("ContextMemory", ContextMemory, {"context_window_tokens": 8_000}),
    ("ContextManager", ContextManager, {"context_window_tokens": 8_000}),
    ("ContextBudget", ContextBudget, {"context_window_tokens": 8_000}),
    ("TiktokenCounter", TiktokenCounter, {}),
    ("ApproximateCounter", ApproximateCounter, {}),
    ("DirectoryBackend", DirectoryBackend, {"root": "never-created"}),
    ("Archive", Archive, {"backend": _STORE, "thread_id": "t"}),
    ("Summarizer", Summarizer, {}),
    ("Compaction", Compaction, {}),
    ("PruneToolOutputs", PruneToolOutputs, {}),
    ("SlidingWindow", SlidingWindow, {}),
    ("ShortenTurns", ShortenTurns, {}),
    ("DynamicSummarization", DynamicSummarization, {}),
    ("EntityExtraction", EntityExtraction, {}),
    ("default_strategies", default_strategies, {}),
    ("counter_for_model", counter_for_model, {}),
    ("count_tokens", count_tokens, {"messages": [HumanMessage("hi")]}),
    ("make_recall_tool", make_recall_tool, {"archive": Archive(_STORE, thread_id="t")}),
    ("ContextMemory.recall_tool", _MEMORY.recall_tool, {}),
    ("ContextMemory.node", _MEMORY.node, {}),
    ("ContextMemory.get_full_history", _MEMORY.get_full_history, _VIEW),
    ("ContextMemory.get_history_page", _MEMORY.get_history_page, _VIEW),
]

# Whole classes of `__all__` left out, and why.
NOT_CONFIGURED = {
    "ScriptedChatModel": "a pydantic model: pydantic validates its fields",
    "PromptView": "made by the pipeline for each build, not by users",
    "BuildResult": "a result, made by the pipeline",
    "ContextCostReport": "a report, made by the pipeline",
    "Decision": "a report entry, made by the pipeline",
    "EntityExtractor": "takes a chat model and a schema (checked in its own tests)",
    "DropMemory": "has no options",
    "ContextState": "a state schema (a TypedDict), not constructed with options",
    "ContextReactState": "a state schema (a TypedDict), not constructed with options",
}


def _kind(annotation: Any) -> tuple[str, bool] | None:
    """The kind of an annotated argument (int, number, bool, str, path, callable) and whether
    it may be None; None for arguments of other types (lists, models, stores...)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    parts = {part.strip() for part in text.split("|")}
    optional = "None" in parts
    parts.discard("None")
    if any("PathLike" in part for part in parts):
        return "path", optional
    if parts & {"TokenCounter"} or any(part.startswith("Callable") for part in parts):
        return "callable", optional
    for names, kind in (
        ({"bool"}, "bool"),
        ({"int"}, "int"),
        ({"float"}, "number"),
        ({"int", "float"}, "number"),
        ({"str"}, "str"),
    ):
        if parts == names:
            return kind, optional
    return None


def _arguments() -> Iterator[tuple[str, Callable[..., Any], dict[str, Any], str, str, bool]]:
    for label, target, base in ENTRY_POINTS:
        for name, parameter in inspect.signature(target).parameters.items():
            if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                continue
            found = _kind(parameter.annotation)
            if found is not None:
                yield label, target, base, name, *found


ARGUMENTS = list(_arguments())


def _bad_values(kind: str, optional: bool) -> st.SearchStrategy[Any]:
    """Values of the wrong kind for an argument of `kind`."""
    wrong: dict[str, list[Any]] = {
        "int": ["10", "0", True, False, 1.5, 2000.0, math.nan, b"1"],
        "number": ["0.5", True, False, math.nan, math.inf, -math.inf, b"1", [0.5]],
        "bool": ["false", "true", "no", 0, 1, 1.0, b"true"],
        "str": [42, b"name", 1.5, ["a"]],
        "path": [b"some/path", 42, "", 1.5],
        "callable": [42, "len", b"len", 1.5],
    }
    values: list[st.SearchStrategy[Any]] = [st.sampled_from(wrong[kind])]
    if not optional:
        values.append(st.just(None))
    if kind == "int":
        values.append(st.integers(max_value=-1))
        values.append(st.floats(allow_nan=True, allow_infinity=True))
    if kind == "number":
        values.append(st.floats(max_value=-1e-9))
        values.append(st.text(max_size=5))
    return st.one_of(values)


def test_the_table_covers_every_kind_of_argument() -> None:
    kinds = {(label, name): kind for label, _, _, name, kind, _ in ARGUMENTS}
    for kind in ("int", "number", "bool", "str", "path", "callable"):
        assert kind in kinds.values(), kind
    # The reported cases are in the table.
    for key in [
        ("ContextMemory", "remove_summarized"),
        ("ContextMemory", "archive"),
        ("ContextMemory.recall_tool", "max_chars"),
        ("DirectoryBackend", "root"),
        ("TiktokenCounter", "cache_size"),
        ("ContextManager", "token_counter"),
        ("Summarizer", "redact"),
    ]:
        assert key in kinds, key
    assert len(ARGUMENTS) > 60, len(ARGUMENTS)


def test_every_public_class_with_options_is_in_the_table() -> None:
    covered = {label.split(".")[0] for label, _, _ in ENTRY_POINTS}
    for name in langgraph_ctx.__all__:
        value = getattr(langgraph_ctx, name)
        if not inspect.isclass(value) or issubclass(value, BaseException):
            continue
        if getattr(value, "_is_protocol", False):
            continue  # Strategy, TokenCounter, ArchiveBackend: protocols, nothing to construct
        assert name in covered or name in NOT_CONFIGURED, f"{name}: add it to ENTRY_POINTS"


@pytest.mark.parametrize(
    "argument", ARGUMENTS, ids=[f"{label}-{name}" for label, _, _, name, _, _ in ARGUMENTS]
)
@settings(max_examples=max(20, settings().max_examples // 2))
@given(data=st.data())
def test_every_public_option_refuses_values_of_the_wrong_kind(
    argument: tuple[str, Callable[..., Any], dict[str, Any], str, str, bool],
    data: st.DataObject,
) -> None:
    label, target, base, name, kind, optional = argument
    value = data.draw(_bad_values(kind, optional), label=f"{label}({name}=...)")
    cwd = set(os.listdir("."))
    with pytest.raises(LangGraphCtxError) as info:
        target(**{**base, name: value})
    assert name in str(info.value), (label, name, value, str(info.value))
    assert set(os.listdir(".")) == cwd  # no archive directory made on the way
    assert store_items(_STORE) == []
