"""`ProviderCounter` against fake Anthropic and Gemini count endpoints served on 127.0.0.1.

`counter_for_model(ChatAnthropic(...), use_provider_api=True)` counts with Anthropic's own
count API (through `ChatAnthropic.get_num_tokens_from_messages`), and
`counter_for_model(ChatGoogleGenerativeAI(...), use_provider_api=True)` with Google's
`countTokens` (through the model's google-genai client); both cached per message by a hash of
what it says, and both fall back to the approximation with a warning when the API fails.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import ApproximateCounter, ContextMemory, counter_for_model
from langgraph_ctx.prompt.report import REPORT_KEY
from langgraph_ctx.tokens.provider_count import ProviderCounter
from tests.anthropic_server import AnthropicCountServer
from tests.fakes import ScriptedChatModel
from tests.gemini_server import GeminiCountServer, count_request


@pytest.fixture
def server() -> Iterator[AnthropicCountServer]:
    pytest.importorskip("sentencepiece")  # the Anthropic server counts with a real tokenizer
    with AnthropicCountServer() as running:
        yield running


def claude(server: AnthropicCountServer) -> Any:
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    return langchain_anthropic.ChatAnthropic(
        model="claude-sonnet-4-5", base_url=server.url, api_key="test", max_retries=0
    )


def conversation() -> list[Any]:
    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "toolu_1"}
    return [
        SystemMessage("You read files."),
        HumanMessage("What does a.py do?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("def main():\n    return {'ok': True}\n", tool_call_id="toolu_1"),
    ]


def test_the_provider_counts_the_prompt(server: AnthropicCountServer) -> None:
    model = claude(server)
    counter = counter_for_model(model, use_provider_api=True)
    assert isinstance(counter, ProviderCounter)
    assert isinstance(counter_for_model(model), ApproximateCounter)  # opt-in only
    messages = conversation()
    assert counter(messages) == model.get_num_tokens_from_messages(messages)
    assert len(server.requests) == 2  # ours, then the direct call
    assert server.requests[0]["system"] and server.requests[0]["messages"][1]["role"] == "assistant"
    assert counter(messages) == counter(list(messages))  # cached: no new request
    assert len(server.requests) == 2


def test_each_message_is_counted_once_and_again_when_edited(
    server: AnthropicCountServer,
) -> None:
    counter = ProviderCounter(claude(server))
    messages = conversation()
    first = [counter.count_message(m) for m in messages]
    assert all(n > 0 for n in first) and len(server.requests) == len(messages)
    assert [counter.count_message(m) for m in messages] == first
    assert len(server.requests) == len(messages)  # every message from the cache
    messages[3].content += "# and a long comment that adds several tokens to the output\n"
    assert counter.count_message(messages[3]) > first[3]  # edited in place: counted again
    assert len(server.requests) == len(messages) + 1


def test_tools_are_counted_by_the_provider(server: AnthropicCountServer) -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return path

    counter = ProviderCounter(claude(server))
    assert counter.count_tools([read_file]) > 300  # the server's tool-use overhead
    assert server.requests[0]["tools"][0]["name"] == "read_file"
    assert counter.count_tools([]) == 0


def test_a_failing_api_falls_back_to_the_approximation(
    server: AnthropicCountServer, caplog: pytest.LogCaptureFixture
) -> None:
    counter = counter_for_model(claude(server), use_provider_api=True)
    assert isinstance(counter, ProviderCounter)
    messages = conversation()
    server.fail = True
    with caplog.at_level(logging.WARNING, logger="langgraph_ctx.provider_count"):
        tokens = counter(messages)
    assert tokens == ApproximateCounter(provider="anthropic")(messages)
    assert "provider's token count failed" in caplog.text and counter.failures == 1
    server.fail = False  # a failure is not cached: the next count asks again
    assert counter(messages) == claude(server).get_num_tokens_from_messages(messages)


def test_an_agent_budgets_with_the_providers_count(server: AnthropicCountServer) -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(60))

    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "toolu_1"}
    agent_model = ScriptedChatModel(
        messages=[AIMessage("", tool_calls=[call]), "It defines sixty functions."] * 3
    )
    counter = counter_for_model(claude(server), use_provider_api=True)
    memory = ContextMemory(model=agent_model, context_window_tokens=20_000, token_counter=counter)
    agent = create_agent(
        agent_model, [read_file], middleware=[memory.middleware()], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "claude"}}
    for turn in range(3):
        agent.invoke({"messages": [HumanMessage(f"Turn {turn}: what does a.py do?")]}, config)
    history = agent.get_state(config).values["messages"]
    reports = [m.response_metadata[REPORT_KEY] for m in history if isinstance(m, AIMessage)]
    assert len(reports) == len(agent_model.prompts) == 6
    # Each report's tokens are the provider's count of the prompt that was sent, plus tools.
    tools = counter.count_tools([read_file, memory.middleware().tools[0]])
    for report, prompt in zip(reports, agent_model.prompts, strict=True):
        assert report["tokens"] == counter(prompt) + tools
    # Cached per message: far fewer requests than messages counted across the six builds.
    counted = sum(len(p) for p in agent_model.prompts)
    assert len(server.requests) < counted


# Gemini: Google's countTokens through ChatGoogleGenerativeAI's google-genai client.


@pytest.fixture
def google() -> Iterator[GeminiCountServer]:
    with GeminiCountServer() as running:
        yield running


def gemini(url: str, *, vertexai: bool = False) -> Any:
    langchain_google_genai = pytest.importorskip("langchain_google_genai")
    # max_retries=1 is one attempt: langchain-google-genai passes 0 on as google-genai's default
    return langchain_google_genai.ChatGoogleGenerativeAI(
        model="gemini-2.5-flash", base_url=url, api_key="test-key", max_retries=1, vertexai=vertexai
    )


def test_gemini_counts_with_googles_count_api(google: GeminiCountServer) -> None:
    model = gemini(google.url)
    counter = counter_for_model(model, use_provider_api=True)
    assert isinstance(counter, ProviderCounter)
    assert isinstance(counter_for_model(model), ApproximateCounter)  # opt-in only
    messages = conversation()
    tokens = counter(messages)
    assert tokens == google.answers[-1] == count_request(google.requests[-1]) > 0
    # The Developer API takes a system instruction in the generateContentRequest form only.
    sent = google.requests[-1]
    assert sent["contents"] == [] and sent["generateContentRequest"]["model"] == (
        "models/gemini-2.5-flash"
    )
    body = sent["generateContentRequest"]
    assert body["systemInstruction"]["parts"] == [{"text": "You read files."}]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][1]["parts"][0]["functionCall"]["name"] == "read_file"
    assert "functionResponse" in body["contents"][2]["parts"][0]
    assert counter(messages) == counter(list(messages)) == tokens  # cached: no new request
    assert len(google.requests) == counter.api_calls == 1


def test_gemini_counts_each_message_once_and_again_when_edited(google: GeminiCountServer) -> None:
    counter = ProviderCounter(gemini(google.url))
    assert counter.count_message(HumanMessage("x" * 40)) == 40 // 4 + 3  # the server's count
    assert google.requests[-1] == {"contents": [{"parts": [{"text": "x" * 40}], "role": "user"}]}
    messages = conversation()
    first = [counter.count_message(m) for m in messages]
    assert first == google.answers[1:] and len(google.requests) == 1 + len(messages)
    assert [counter.count_message(m) for m in messages] == first
    assert len(google.requests) == 1 + len(messages)  # every message from the cache
    messages[3].content += "# and a long comment that adds several tokens to the output\n"
    assert counter.count_message(messages[3]) > first[3]  # edited in place: counted again
    assert len(google.requests) == 2 + len(messages)


def test_gemini_counts_tools(google: GeminiCountServer) -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return path

    counter = ProviderCounter(gemini(google.url))
    tools = counter.count_tools([read_file])
    with_tools, bare = google.requests
    declared = with_tools["generateContentRequest"]["tools"]
    assert declared[0]["functionDeclarations"][0]["name"] == "read_file"
    assert "generateContentRequest" not in bare  # a prompt of contents alone: the plain form
    assert tools == google.answers[0] - google.answers[1] > 0
    chars = sum(len(json.dumps(t, sort_keys=True)) for t in declared)
    assert tools == math.ceil((len("hi") + chars) / 4) - math.ceil(len("hi") / 4)


def test_gemini_on_vertex_ai_sends_the_system_instruction_and_tools_beside_the_contents(
    google: GeminiCountServer,
) -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return path

    counter = ProviderCounter(gemini(google.url, vertexai=True))
    messages = conversation()
    assert counter(messages) == google.answers[-1]
    sent = google.requests[-1]
    assert "generateContentRequest" not in sent and len(sent["contents"]) == 3
    assert sent["systemInstruction"]["parts"] == [{"text": "You read files."}]
    assert counter.count_tools([read_file]) > 0
    assert google.requests[-2]["tools"][0]["functionDeclarations"][0]["name"] == "read_file"


def test_a_failing_gemini_api_falls_back_to_the_approximation(
    google: GeminiCountServer, caplog: pytest.LogCaptureFixture
) -> None:
    counter = counter_for_model(gemini(google.url), use_provider_api=True)
    assert isinstance(counter, ProviderCounter)
    messages = conversation()
    google.fail = True  # HTTP 500
    with caplog.at_level(logging.WARNING, logger="langgraph_ctx.provider_count"):
        tokens = counter(messages)
        single = counter.count_message(messages[1])
    assert tokens == ApproximateCounter(provider="google")(messages)
    assert single == ApproximateCounter(provider="google")([messages[1]])
    assert "provider's token count failed (ServerError" in caplog.text
    assert counter.failures == 2 and not google.requests
    google.fail = False  # a failure is not cached: the next count asks again
    assert counter(messages) == google.answers[-1] == count_request(google.requests[-1])
    assert counter.api_calls == 3


def test_an_unreachable_gemini_api_falls_back_to_the_approximation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with GeminiCountServer() as stopped:
        url = stopped.url  # closed when the block ends: nothing listens on the port
    counter = counter_for_model(gemini(url), use_provider_api=True)
    assert isinstance(counter, ProviderCounter)
    messages = conversation()
    with caplog.at_level(logging.WARNING, logger="langgraph_ctx.provider_count"):
        assert counter(messages) == ApproximateCounter(provider="google")(messages)
        assert counter(messages) == ApproximateCounter(provider="google")(messages)
    assert counter.failures == counter.api_calls == 2  # not cached: asked again, failed again
    assert caplog.text.count("provider's token count failed") == 2
