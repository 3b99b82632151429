"""The package's own model calls are marked internal the way LangChain marks them."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableLambda
from typing_extensions import TypedDict

from langgraph_ctx.scripted import ScriptedChatModel
from langgraph_ctx.summaries.extract import EntityExtractor
from langgraph_ctx.summaries.internal_calls import (
    INTERNAL_TAG,
    internal_call_config,
    internal_model,
)
from langgraph_ctx.summaries.summarizer import Summarizer


class Seen(BaseCallbackHandler):
    """Records the tags and metadata of every chat model run."""

    def __init__(self) -> None:
        self.runs: list[tuple[list[str], dict[str, Any]]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs.append((list(tags or []), dict(metadata or {})))


class Trip(TypedDict, total=False):
    destination: str


def test_the_config_is_marked_and_keeps_the_callers() -> None:
    config = internal_call_config({"tags": ["mine"], "metadata": {"k": 1}}, "summarization")
    assert config["tags"] == ["mine", INTERNAL_TAG]
    assert config["metadata"]["k"] == 1 and config["metadata"]["lc_source"] == "summarization"
    assert "lc_internal_call" in config["metadata"]
    assert internal_call_config(config, "summarization")["tags"] == ["mine", INTERNAL_TAG]


def test_a_chat_model_is_called_with_streaming_off() -> None:
    model = ScriptedChatModel(fallback="x", disable_streaming=False)
    assert internal_model(model).disable_streaming is True
    assert model.disable_streaming is False  # a copy
    quiet = ScriptedChatModel(fallback="x")
    assert internal_model(quiet) is quiet


class JsonModel(ScriptedChatModel):
    """Structured output as the model's reply parsed as JSON: the chat model itself is run."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        """The model piped into a JSON parser."""
        return self | RunnableLambda(lambda m: json.loads(str(m.content)))


def test_the_summarizer_and_the_extractor_call_as_internal() -> None:
    seen = Seen()
    summary = "<completed>went to Rome</completed><remaining>book</remaining>"
    summarizer = Summarizer(
        model=ScriptedChatModel(fallback=summary, disable_streaming=False, callbacks=[seen])
    )
    assert summarizer.summarize([HumanMessage("hello", id="h")]).source == "model"
    extractor = EntityExtractor(
        model=JsonModel(fallback='{"destination": "Rome"}', callbacks=[seen]), schema=Trip
    )
    assert extractor.extract([HumanMessage("to Rome", id="r")], None) == {"destination": "Rome"}
    assert [metadata["lc_source"] for _, metadata in seen.runs] == [
        "summarization",
        "entity_extraction",
    ]
    for tags, metadata in seen.runs:
        assert INTERNAL_TAG in tags and "lc_internal_call" in metadata
