"""Shared test setup: a hermetic environment, real trajectories, a conversation builder.

- Every session gets a `TIKTOKEN_CACHE_DIR` primed with the verified offline ranks, so
  `ChatOpenAI.get_num_tokens_from_messages` (our reference for exact counts) works offline.
- `load_trajectories()` / the `trajectories` fixture give the recorded runs of
  `data/trajectories` (read by `benchmarks.trajectories`, the one loader; part of every clone).
- `make_conversation(...)` builds realistic, deterministic agent histories.
- The `mode` fixture runs a test once through the sync API and once through the async one;
  `run(mode, sync_fn, async_fn, ...)` and `call(obj, method, ..., mode=mode)` pick the twin.

Other test modules import the plain helpers: `from tests.conftest import make_conversation`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from functools import cache
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import benchmarks.trajectories
from langgraph_ctx._effects import Plan, arun_plan, run_plan
from langgraph_ctx.tokens._encodings import prime_tiktoken_cache

# Modest defaults keep `pytest tests/unit` quick; HYPOTHESIS_PROFILE=thorough digs deeper, and
# HYPOTHESIS_PROFILE=long (`make fuzz`) runs 10,000 examples per property test.
# HYPOTHESIS_MAX_EXAMPLES overrides the chosen profile's count (e.g. a shorter long run).
# No deadline: the first example of a test may pay for loading a tokenizer.
settings.register_profile(
    "default", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
if os.environ.get("HYPOTHESIS_MAX_EXAMPLES"):
    settings.register_profile(
        f"{_PROFILE}-override",
        settings.get_profile(_PROFILE),
        max_examples=int(os.environ["HYPOTHESIS_MAX_EXAMPLES"]),
    )
    _PROFILE = f"{_PROFILE}-override"
settings.load_profile(_PROFILE)

TRAJECTORY_DIR = benchmarks.trajectories.TRAJECTORY_DIR
"""Real agent runs as gzip-compressed LangChain message JSON, in the repository."""


# --- environment ---------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _hermetic_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Offline tiktoken cache and no tracing for the whole session."""
    cache_dir = prime_tiktoken_cache(tmp_path_factory.mktemp("tiktoken_cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
        for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
            mp.delenv(name, raising=False)
        yield


# --- sync and async ---------------------------------------------------------------------------

T = TypeVar("T")


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """`"sync"` or `"async"`: one test body covers both drivers."""
    return str(request.param)


async def run(
    mode: str,
    sync_fn: Callable[..., T],
    async_fn: Callable[..., Awaitable[T]],
    *args: Any,
    **kwargs: Any,
) -> T:
    """`sync_fn(*args, **kwargs)` in sync mode, else `await async_fn(*args, **kwargs)`.

    Args:
        mode: `"sync"` or `"async"` (the `mode` fixture).
        sync_fn: The sync twin, e.g. `graph.invoke`.
        async_fn: The async twin, e.g. `graph.ainvoke`.
        *args: Passed to the chosen function.
        **kwargs: Passed to the chosen function.

    Returns:
        What the chosen function returned.
    """
    if mode == "sync":
        return sync_fn(*args, **kwargs)
    return await async_fn(*args, **kwargs)


async def call(obj: Any, method: str, *args: Any, mode: str, **kwargs: Any) -> Any:
    """`obj.method(...)` or its async twin `obj.amethod(...)`, depending on the mode.

    Args:
        obj: Has both `method` and `a<method>` (e.g. an archive, a manager, a tool).
        method: The sync method's name, e.g. `"build"` (async: `"abuild"`).
        *args: Passed to the method.
        mode: `"sync"` or `"async"` (the `mode` fixture).
        **kwargs: Passed to the method.

    Returns:
        What the method returned.
    """
    return await run(mode, getattr(obj, method), getattr(obj, f"a{method}"), *args, **kwargs)


async def drive(plan: Plan[T], *, mode: str) -> T:
    """`run_plan(plan)` or `await arun_plan(plan)`, depending on the mode: how the package
    runs a plan such as `archive.plan_put_message(message)` sync or async."""
    return run_plan(plan) if mode == "sync" else await arun_plan(plan)


# --- real trajectories ---------------------------------------------------------------------


@cache
def _load_all() -> dict[str, tuple[BaseMessage, ...]]:
    return {name: tuple(msgs) for name, msgs in benchmarks.trajectories.load_trajectories().items()}


def load_trajectories() -> dict[str, list[BaseMessage]]:
    """Every trajectory by name (fresh lists; the messages are shared, do not mutate).

    Parsed once per process. There are always 45: the runs are part of the repository.
    """
    return {name: list(msgs) for name, msgs in _load_all().items()}


@pytest.fixture(scope="session")
def trajectories() -> dict[str, list[BaseMessage]]:
    """The real trajectories (`load_trajectories()`)."""
    return load_trajectories()


# --- synthetic conversations ---------------------------------------------------------------

_TASKS = (
    "The test suite fails on `parse_config` with nested sections; find out why and fix it.",
    "Add a `--dry-run` flag to the CLI that prints what would change without writing files.",
    "Refactor `storage/cache.py` so the LRU eviction no longer holds the lock while writing.",
    "Users report that dates before 1970 are rendered wrong in the report; reproduce and fix.",
    "Why is `make docs` so slow? Profile it and speed up the slowest step.",
    "Rename the `Client.fetch_all` method to `Client.fetch_many` and keep a deprecated alias.",
)
_FOLLOW_UPS = (
    "Thanks. Can you also add a regression test for that?",
    "Looks good. Please update the changelog too.",
    "The CI run still fails on Python 3.10; can you check?",
    "Great, now run the whole suite once more and summarise the result.",
    "One more thing: keep the public API unchanged.",
)
_FILES = (
    "src/app/config.py",
    "src/app/cli.py",
    "src/app/storage/cache.py",
    "src/app/report/render.py",
    "tests/test_config.py",
    "docs/conf.py",
)
_CODE = (
    "def parse_config(path: str) -> dict[str, Any]:",
    '    """Read an INI file into nested dicts."""',
    "    parser = configparser.ConfigParser(interpolation=None)",
    "    parser.read(path, encoding='utf-8')",
    "    result: dict[str, Any] = {}",
    "    for section in parser.sections():",
    "        head, _, tail = section.partition('.')",
    "        result.setdefault(head, {})[tail or head] = dict(parser[section])",
    "    return result",
    "",
    "class LRUCache:",
    "    def __init__(self, size: int = 128) -> None:",
    "        self._data: OrderedDict[str, bytes] = OrderedDict()",
    "        self._lock = threading.Lock()",
    "    def put(self, key: str, value: bytes) -> None:",
    "        with self._lock:",
    "            self._data[key] = value",
    "            self._data.move_to_end(key)",
)


def _tool_call(rng: random.Random) -> tuple[str, dict[str, object]]:
    name = rng.choice(("read_file", "grep", "run_tests", "list_dir"))
    path = rng.choice(_FILES)
    if name == "read_file":
        return name, {"path": path}
    if name == "grep":
        return name, {"pattern": rng.choice(("parse_config", "_lock", "fetch_all")), "path": "src"}
    if name == "run_tests":
        return name, {"target": path.replace("src/app", "tests"), "verbose": rng.random() < 0.5}
    return name, {"path": path.rsplit("/", 1)[0]}


def _tool_output(name: str, args: dict[str, object], rng: random.Random, size: int) -> str:
    if name == "read_file":
        start = rng.randrange(len(_CODE))
        lines = [_CODE[(start + i) % len(_CODE)] for i in range(8)]
        text = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(lines))
    elif name == "grep":
        text = "\n".join(
            f"{rng.choice(_FILES)}:{rng.randint(1, 400)}: {rng.choice(_CODE).strip()}"
            for _ in range(rng.randint(1, 5))
        )
    elif name == "run_tests":
        passed, failed = rng.randint(5, 80), rng.randint(0, 3)
        text = (
            f"============ test session starts ============\ncollected {passed + failed} items\n\n"
            f"{args['target']} {'.' * passed}{'F' * failed}\n\n"
            f"==== {failed} failed, {passed} passed in {rng.uniform(0.2, 9):.2f}s ===="
        )
    else:
        text = "\n".join(sorted(rng.sample([f.rsplit("/", 1)[-1] for f in _FILES], 4)))
    if size:
        # A long output: the same kind of text, numbered so no two lines repeat exactly.
        lines, total, i = [text], len(text), 0
        while total < size:
            i += 1
            lines.append(f"{i:5d}  {_CODE[(i * 7 + rng.randrange(3)) % len(_CODE)]}")
            total += len(lines[-1]) + 1
        text = "\n".join(lines)[:size]
    return text


def make_conversation(
    turns: int = 5,
    *,
    tool_calls: bool = True,
    parallel: int = 1,
    long_output: int = 0,
    error_every: int = 0,
    seed: int = 0,
) -> list[BaseMessage]:
    """A realistic coding-agent history: deterministic, every message with an id.

    Layout: `SystemMessage` (id `sys`), then per turn `t` (from 1):

    - `HumanMessage` `h{t}` (the task, then follow-ups);
    - with `tool_calls`: `AIMessage` `ai{t}` making `parallel` calls (ids `call_{t}_{k}`), one
      `ToolMessage` `tool{t}_{k}` per call, with matching `tool_call_id` and `name`;
    - `AIMessage` `ai{t}_final` answering the user.

    So a turn is `3 + parallel` messages with tools and 2 without, plus 1 for the system.

    Args:
        turns: Number of user turns.
        tool_calls: Whether each turn runs one batch of tool calls.
        parallel: Tool calls per batch (a parallel batch when > 1).
        long_output: When > 0, every successful tool result is exactly this many characters.
        error_every: When > 0, every n-th tool result (counting from 1) has `status="error"`.
        seed: Varies the wording, tools and outputs; same seed, same history.
    """
    if turns < 0 or parallel < 1 or long_output < 0 or error_every < 0:
        msg = (
            "need turns >= 0, parallel >= 1, long_output >= 0, error_every >= 0; got "
            f"{turns=}, {parallel=}, {long_output=}, {error_every=}"
        )
        raise ValueError(msg)
    rng = random.Random(seed)
    messages: list[BaseMessage] = [
        SystemMessage(
            "You are a careful coding agent working in a Python repository. Use the tools to "
            "read files, search and run tests. Explain what you changed.",
            id="sys",
        )
    ]
    results = 0
    for t in range(1, turns + 1):
        text = rng.choice(_TASKS) if t == 1 else rng.choice(_FOLLOW_UPS)
        messages.append(HumanMessage(text, id=f"h{t}"))
        if tool_calls:
            calls = []
            for k in range(1, parallel + 1):
                name, args = _tool_call(rng)
                calls.append({"name": name, "args": args, "id": f"call_{t}_{k}"})
            plan = f"Let me look at {calls[0]['args'].get('path', 'the code')} first."
            messages.append(
                AIMessage(plan if rng.random() < 0.6 else "", tool_calls=calls, id=f"ai{t}")
            )
            for k, call in enumerate(calls, start=1):
                results += 1
                if error_every and results % error_every == 0:
                    status = "error"
                    out = f"Error: {call['name']} failed: FileNotFoundError: {call['args']}"
                else:
                    status = "success"
                    out = _tool_output(str(call["name"]), call["args"], rng, long_output)
                messages.append(
                    ToolMessage(
                        out,
                        tool_call_id=str(call["id"]),
                        name=str(call["name"]),
                        status=status,
                        id=f"tool{t}_{k}",
                    )
                )
        answer = rng.choice(
            (
                "I found the cause and fixed it; the tests pass now.",
                "Done. I changed two functions and added a test covering the edge case.",
                "The failure comes from an off-by-one in the section parser. Fixed.",
            )
        )
        messages.append(AIMessage(answer, id=f"ai{t}_final"))
    return messages


def make_strategies(
    *,
    summarize: bool = False,
    protect_turns: int = 2,
    prune_errors: bool = False,
    compaction: Any = None,
    first: Sequence[Any] = (),
) -> list[Any]:
    """An explicit strategy list in the default order, with the knobs tests vary.

    `first` runs before the cutting strategies (extraction, dynamic summarization); no
    `Compaction` unless one is given.
    """
    from langgraph_ctx.strategies import DropMemory, PruneToolOutputs, SlidingWindow

    return [
        *first,
        DropMemory(),
        PruneToolOutputs(protect_turns=protect_turns, prune_errors=prune_errors),
        *([compaction] if compaction is not None else []),
        SlidingWindow(summarize=summarize),
    ]


def summary_first_strategies() -> list[Any]:
    """The default list before excerpts and turn shortening: prune, compact, then summarize.

    For tests whose subject is what a summary does (the insurance dump, the summarizer's
    faults, rebuilds, removals): with it, a short scripted run reaches a summary, which the
    current defaults (excerpts first) often make unnecessary.
    """
    from langgraph_ctx.strategies import Compaction, DropMemory, PruneToolOutputs, SlidingWindow

    return [
        DropMemory(),
        PruneToolOutputs(),
        Compaction(on_arrival=0.1),
        SlidingWindow(summarize=True),
    ]
