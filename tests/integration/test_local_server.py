"""A long agent run against an OpenAI-compatible server that counts with a real non-OpenAI
tokenizer and rejects prompts over its context the way llama.cpp's server does.

`ChatOpenAI(base_url=...)` serving a local model gets an approximate counter (never OpenAI's
tokenizer), calibrated from the `usage.prompt_tokens` the server reports: the run gets 0
rejections and the package's estimate converges within 5% of the server's count.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, dynamic_prompt
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ApproximateCounter, ContextMemory
from langgraph_ctx.errors import is_context_overflow
from langgraph_ctx.prompt.report import REPORT_KEY
from tests.local_server import OVERFLOW_MESSAGE, LocalChatServer, count_prompt

pytest.importorskip("sentencepiece")

N_CTX = 4096
TURNS = 10
READS_PER_TURN = 3


def tool_outputs(trajectories: dict[str, list[BaseMessage]]) -> list[str]:
    outputs = [
        str(m.content)[:3_500]
        for messages in trajectories.values()
        for m in messages
        if isinstance(m, ToolMessage) and len(str(m.content)) > 800
    ]
    return outputs[:200]


class Agent:
    """Reads `READS_PER_TURN` files for each task, then answers (a policy for the server).

    It keeps its own count per task: the prompt it gets is edited (old reads pruned, compacted
    or summarized away), so it cannot count its reads from the prompt.
    """

    def __init__(self) -> None:
        self.reads: dict[str, int] = {}

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        tasks = [str(m["content"]) for m in messages if str(m.get("content")).startswith("Task ")]
        if not tasks:
            return {"content": "Done."}
        done = self.reads.get(tasks[-1], 0)
        if done < READS_PER_TURN:
            self.reads[tasks[-1]] = done + 1
            n = sum(self.reads.values())
            call = {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": "read_file",
                    "arguments": json.dumps({"path": f"src/f{n}.py"}),
                },
            }
            return {"content": "", "tool_calls": [call]}
        return {"content": f"I read {done} files; the change is in place."}


@pytest.fixture
def server() -> Iterator[LocalChatServer]:
    with LocalChatServer(Agent(), n_ctx=N_CTX) as running:
        yield running


def local_model(server: LocalChatServer) -> ChatOpenAI:
    return ChatOpenAI(
        model="smollm2-135m-instruct", base_url=server.url, api_key="local", max_retries=0
    )


def test_the_server_rejects_like_llama_cpp(server: LocalChatServer) -> None:
    model = local_model(server)
    with pytest.raises(openai.BadRequestError, match=OVERFLOW_MESSAGE) as rejection:
        model.invoke([HumanMessage("word " * 6_000)])
    assert is_context_overflow(rejection.value)  # langchain-openai does not recognize it
    reply = model.invoke([HumanMessage("hello")])
    tokens = count_prompt([{"role": "user", "content": "hello"}], [])
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] == tokens
    assert server.rejected and server.prompt_tokens == [tokens]


def test_a_llama_cpp_rejection_is_retried_smaller(server: LocalChatServer) -> None:
    """A window set too large: the server rejects, the middleware rebuilds 30% smaller."""
    rules = "\n".join(
        f"Rule {i}: keep `f{i}(x)` returning {{'k{i}': [x, {i}]}}." for i in range(80)
    )

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return f"# {path}\n" + "def main():\n    return 0\n" * 20

    model = local_model(server)
    memory = ContextMemory(model=model, context_window_tokens=6_000, reserved_output_tokens=256)
    agent = create_agent(
        model,
        [read_file],
        system_prompt=rules,
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "too-large"}}
    for turn in range(4):
        agent.invoke({"messages": [HumanMessage(f"Task {turn}: fix module {turn}.")]}, config)
    assert server.rejected, "the window given was larger than the server's"
    assert len(server.prompt_tokens) == 4 * (READS_PER_TURN + 1)  # every call was answered
    assert max(server.prompt_tokens) <= N_CTX


@pytest.mark.trajectories
def test_long_agent_run_fits_and_the_estimate_converges(
    server: LocalChatServer, trajectories: dict[str, list[BaseMessage]]
) -> None:
    outputs = tool_outputs(trajectories)
    assert len(outputs) >= TURNS * READS_PER_TURN

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return outputs[int(path.removeprefix("src/f").removesuffix(".py")) % len(outputs)]

    model = local_model(server)
    memory = ContextMemory(model=model, context_window_tokens=N_CTX, reserved_output_tokens=256)
    counter = memory.manager.token_counter
    assert isinstance(counter, ApproximateCounter) and counter.provider == "unknown"
    assert counter.method == "pieces"
    agent = create_agent(
        model,
        [read_file],
        system_prompt="You are a coding agent. Read files with read_file before changing them.",
        middleware=[memory.middleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "local"}}
    for turn in range(TURNS):
        agent.invoke(
            {"messages": [HumanMessage(f"Task {turn}: fix the bug in module {turn}.")]}, config
        )
    assert server.rejected == []
    calls = len(server.prompt_tokens)
    assert calls == TURNS * (READS_PER_TURN + 1)
    full = memory.get_full_history(agent, config)
    reports = [
        m.response_metadata[REPORT_KEY]
        for m in full
        if isinstance(m, AIMessage) and REPORT_KEY in m.response_metadata
    ]
    assert [r["reported_tokens"] for r in reports] == server.prompt_tokens
    errors = [abs(r["tokens"] - r["reported_tokens"]) / r["reported_tokens"] for r in reports]
    print(  # the figures for the closing note (pytest -s)
        f"calls={calls} max_prompt={max(server.prompt_tokens)} n_ctx={N_CTX} "
        f"first_error={errors[0]:.3f} ratio={reports[-1]['calibration_ratio']:.3f} "
        f"max_error_after_5={max(errors[5:]):.3f} mean_error_after_5="
        f"{sum(errors[5:]) / len(errors[5:]):.3f}"
    )
    # Converged: after five calls the estimate is within 5% of the server's count on
    # average and on most calls, and no call is far under it (the side that overflows).
    later = sorted(errors[5:])
    assert sum(later) / len(later) <= 0.04, errors
    assert later[len(later) // 2] <= 0.03, errors
    assert sum(e <= 0.05 for e in later) >= 0.8 * len(later), errors
    assert all(r["tokens"] >= 0.95 * r["reported_tokens"] for r in reports[5:]), errors
    # Over it by more only for a call or two after the history was summarized or rebuilt:
    # with excerpts a 4k window holds many short messages, and this server's chat template
    # frames each with about a dozen tokens more than the counter assumes, which the frame's
    # ratio learns; a prompt of a few long messages (a summary) then counts high (the safe
    # side) until the next reports correct the ratios.
    assert later[-1] <= 0.2, errors
    assert max(server.prompt_tokens) > N_CTX * 0.5  # the run did press on the window


def test_middleware_inside_ours_is_counted_at_the_call(server: LocalChatServer) -> None:
    """Ours first: a `dynamic_prompt` inside it adds house rules to the system prompt after the
    build; the call guard counts what `ChatOpenAI` sends the server (its own message and tool
    format) and the next builds leave room for it. (`TodoListMiddleware` does the same with
    2,000 tokens of prompt and tool schema, too many for a 4k window either way.)"""
    rules = "\n".join(f"Rule {i}: answer in the style of module {i}." for i in range(110))

    @dynamic_prompt
    def house_rules(request: ModelRequest[Any]) -> str:
        return f"{request.system_prompt or ''}\n{rules}"

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return f"# {path}\n" + "def main():\n    return 0\n" * 110

    model = local_model(server)
    memory = ContextMemory(model=model, context_window_tokens=N_CTX, reserved_output_tokens=256)
    agent = create_agent(
        model,
        [read_file],
        system_prompt="You are a coding agent.",
        middleware=[memory.middleware(), house_rules],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "inside"}}
    for turn in range(6):
        agent.invoke({"messages": [HumanMessage(f"Task {turn}: fix module {turn}.")]}, config)
    assert server.rejected == []
    assert len(server.prompt_tokens) == 6 * (READS_PER_TURN + 1)  # every call was answered
    assert max(server.prompt_tokens) > N_CTX * 0.6  # the run pressed on the window
    values = agent.get_state(config).values
    assert values["context_ledger"]["called"]["added"] > 1_000  # the rules
    # Calibration pairs the server's count with what it received (rules included), not with
    # the build: the estimate of the received prompt converges on the server's count.
    reports = [
        m.response_metadata[REPORT_KEY]
        for m in memory.get_full_history(agent, config)
        if isinstance(m, AIMessage) and REPORT_KEY in m.response_metadata
    ]
    errors = [
        abs(r["received_tokens"] - r["reported_tokens"]) / r["reported_tokens"] for r in reports[3:]
    ]
    assert max(errors) <= 0.1, errors
    assert reports[-1]["calibration_ratio"] < 1.3  # not the rules learned as counting error
