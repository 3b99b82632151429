"""Where the running summary goes, and why: what no fold changes stays in the provider's cache.

A fold rewrites the summary, and a provider serves from its cache only the prompt's leading
part up to the first changed message. With `summary_placement="after_task"` (the default) the
pinned task sits before the summary, so every prompt after a fold starts with the same base
system message and task as the one before it; with `"separate"` the summary comes first and
the task is sent again after every fold. Judged over a long `create_agent` run with many folds,
and each prompt by the providers' own converters.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_ctx import ContextMemory
from langgraph_ctx.messages import get_tag
from langgraph_ctx.messages.base import is_summary_message
from langgraph_ctx.scripted import ScriptedChatModel
from tests.providers import provider_problems

STEPS = 60


@tool
def read_file(path: str) -> str:
    """Read a file."""
    n = int(path.split("_")[1].split(".")[0])
    return "\n".join(f"def handler_{n}_{i}(request): return table_{n}[{i}]" for i in range(40))


def run(placement: str) -> list[list[BaseMessage]]:
    script: list[Any] = []
    for n in range(STEPS):
        call = {"name": "read_file", "args": {"path": f"src/mod_{n}.py"}, "id": f"c{n}"}
        said = f"handler_{n - 1}_3 calls table_{n - 1}." if n else "Reading the modules."
        script.append(AIMessage(said, tool_calls=[call], id=f"a{n}"))
    script.append(AIMessage("Done: handler_3_7 is the culprit.", id="done"))
    model = ScriptedChatModel(messages=iter(script), profile={"max_input_tokens": 6_000})
    memory = ContextMemory(
        model=model,
        reserved_output_tokens=500,
        archive=InMemoryStore(),
        summary_placement=placement,  # type: ignore[arg-type]
    )
    agent = create_agent(
        model,
        [read_file],
        system_prompt="You find bugs.",
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    task = HumanMessage("Find the broken handler.", id="task")
    agent.invoke({"messages": [task]}, {"configurable": {"thread_id": placement}})
    return model.prompts


def folds(prompts: list[list[BaseMessage]]) -> list[tuple[list[BaseMessage], list[BaseMessage]]]:
    """Consecutive prompts whose summaries differ (the second came right after a fold)."""

    def summary(prompt: list[BaseMessage]) -> str | None:
        return next((str(m.content) for m in prompt if is_summary_message(m)), None)

    return [
        (before, after)
        for before, after in pairwise(prompts)
        if summary(after) is not None and summary(after) != summary(before)
    ]


def test_the_task_before_the_summary_stays_in_the_cache_across_every_fold() -> None:
    prompts = run("after_task")
    assert len(prompts) == STEPS + 1
    pairs = folds(prompts)
    assert len(pairs) >= 3, "the run must fold several times: the test proves nothing"
    for before, after in pairs:
        assert isinstance(after[0], SystemMessage) and after[1].id == "task"
        assert is_summary_message(after[2]) and isinstance(after[2], HumanMessage)
        assert get_tag(after[2])["shown_as"] == "user"
        # The leading part a provider's cache serves after the fold: base prompt and task.
        assert [m.model_dump() for m in after[:2]] == [m.model_dump() for m in before[:2]]
    for prompt in prompts:
        assert provider_problems(prompt) == []


def test_a_summary_right_after_the_system_prompt_sends_the_task_again() -> None:
    pairs = folds(run("separate"))
    assert len(pairs) >= 3
    for before, after in pairs:
        assert is_summary_message(after[1]) and isinstance(after[1], SystemMessage)
        assert after[2].id == "task"
        # Only the base prompt is served from the cache: the summary before the task changed.
        assert after[1].model_dump() != before[1].model_dump()


@pytest.mark.parametrize("placement", ["after_task", "separate"])
def test_both_placements_show_one_summary_and_the_task_once(placement: str) -> None:
    for prompt in run(placement)[-10:]:
        assert sum(is_summary_message(m) for m in prompt) <= 1
        assert sum(m.id == "task" for m in prompt) == 1
