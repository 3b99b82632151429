"""Clean streams: the summarizer's and the entity extractor's calls never reach the user's stream.

A `create_agent` agent with the middleware, a streaming agent model and streaming internal
models, driven until the window summarizes, through every way LangGraph streams model tokens:
`stream_mode="messages"` (what the LangGraph server's `messages-tuple` mode carries), the event
stream v2 (`astream_events`, async only) and v3 (`stream_events` / `astream_events`, whose
`run.messages` `InternalCallTransformer` filters). Each internal call must have been made (the
models record their prompts), none of its tokens may appear, and the agent's own tokens must.
"""

from __future__ import annotations

import json
import uuid
import warnings
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, dynamic_prompt
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from typing_extensions import TypedDict

from langgraph_ctx import ContextMemory, EntityExtraction, EntityExtractor
from tests.conftest import make_strategies
from tests.fakes import ScriptedChatModel

SUMMARY = "<completed>SUMMARYTOKEN one</completed><remaining>SUMMARYTOKEN two</remaining>"
AGENT = "AGENTTOKEN " + "word " * 300
TURNS = 6


class Trip(TypedDict, total=False):
    destination: str


class JsonModel(ScriptedChatModel):
    """Structured output as a streamed JSON reply parsed after the model: a real model call."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        """The model piped into a JSON parser."""
        return self | RunnableLambda(lambda m: json.loads(str(m.content)))


@dynamic_prompt
def house_rules(request: ModelRequest[Any]) -> str:
    """A prompt written inside ContextMiddleware: the call guard watches the stream's model runs."""
    return "Answer plainly. " * 20


@pytest.fixture(params=["alone", "with_middleware_inside"])
def inside(request: pytest.FixtureRequest) -> list[Any]:
    """Ours alone, or ours first with a `dynamic_prompt` inside it (the call guard active)."""
    return [] if request.param == "alone" else [house_rules]


def make_agent(inside: list[Any]) -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    summarizer = ScriptedChatModel(fallback=SUMMARY, disable_streaming=False)
    extractor = JsonModel(fallback='{"destination": "EXTRACTTOKEN"}', disable_streaming=False)
    memory = ContextMemory(
        context_window_tokens=3_000,
        summarizer=summarizer,
        strategies=make_strategies(first=[EntityExtraction()], summarize=True),
        extractor=EntityExtractor(model=extractor, schema=Trip),
    )
    model = ScriptedChatModel(fallback=AGENT, disable_streaming=False)
    agent = create_agent(
        model, [], middleware=[memory.middleware(), *inside], checkpointer=InMemorySaver()
    )
    return agent, summarizer, extractor


def turns() -> list[dict[str, Any]]:
    return [{"messages": [HumanMessage(f"question {i} " + "blah " * 200)]} for i in range(TURNS)]


def config() -> Any:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def text(message: BaseMessage) -> str:
    return str(message.content)


def check(streamed: list[str], summarizer: ScriptedChatModel, extractor: ScriptedChatModel) -> None:
    joined = "".join(streamed)
    assert summarizer.prompts and extractor.prompts  # the internal calls happened
    assert "SUMMARYTOKEN" not in joined and "EXTRACTTOKEN" not in joined
    assert joined.count("AGENTTOKEN") == TURNS  # the agent's own tokens, once per turn


async def test_messages_stream_mode(mode: str, inside: list[Any]) -> None:
    agent, summarizer, extractor = make_agent(inside)
    cfg, streamed = config(), []
    for turn in turns():
        if mode == "sync":
            for chunk, _ in agent.stream(turn, cfg, stream_mode="messages"):
                streamed.append(text(chunk))
        else:
            async for chunk, _ in agent.astream(turn, cfg, stream_mode="messages"):
                streamed.append(text(chunk))
    check(streamed, summarizer, extractor)


async def test_event_stream_v2(inside: list[Any]) -> None:
    agent, summarizer, extractor = make_agent(inside)
    cfg, streamed = config(), []
    for turn in turns():
        async for event in agent.astream_events(turn, cfg, version="v2"):
            if event["event"] == "on_chat_model_stream":
                streamed.append(text(event["data"]["chunk"]))
    check(streamed, summarizer, extractor)


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
async def test_event_stream_v3(mode: str, inside: list[Any]) -> None:
    agent, summarizer, extractor = make_agent(inside)
    cfg, streamed = config(), []
    with warnings.catch_warnings():
        for turn in turns():
            if mode == "sync":
                run = agent.stream_events(turn, cfg, version="v3")
                streamed += [str(m.text) for m in run.messages]  # drains each message
            else:
                run = await agent.astream_events(turn, cfg, version="v3")
                streamed += [text(await m) async for m in run.messages]
    check(streamed, summarizer, extractor)
