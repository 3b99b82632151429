"""What a replayed summarizer costs: a recording stand-in model, and a meter for a real one.

A replay calls no provider unless the user names a summarizer. Every system that summarizes
(ours, LangChain's `SummarizationMiddleware`, deepagents' summarization, ...) then gets a
`RecordingModel`: it records each call's input and answers with `reply_text(messages)`, the
summary of the summary condition (`replay.summary_models`); this base class answers nothing.
Its base, `InProcessChatModel`, is any chat model answered by code (the demo's explorer too).
A real model named by the user is metered by `SummarizerMeter`, a callback handler that counts
what it reads and writes (the provider's usage when it reports one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from langgraph_ctx_tools.replay.measure import per_message

__all__ = ["InProcessChatModel", "RecordingModel", "SummarizerMeter", "metered", "summarizer_usage"]

Counter = Callable[[Sequence[BaseMessage]], int]


class InProcessChatModel(BaseChatModel):
    """A chat model answered by code in this process, never by a provider.

    Each call's reply is `answer(messages, tools)`, `tools` being the schemas bound to the
    call (none unless the subclass binds tools).
    """

    def answer(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """The reply to one call (subclasses decide)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self.answer(messages, list(kwargs.get("tools") or []))
        return ChatResult(generations=[ChatGeneration(message=reply)])


class RecordingModel(InProcessChatModel):
    """A stand-in summarizer: records every call's input, answers with `reply_text`.

    Subclasses choose the answer (`reply_text`); this one answers with an empty text.
    """

    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _replies: list[BaseMessage] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Inputs of every call so far."""
        return self._calls

    def reply_text(self, messages: Sequence[BaseMessage]) -> str:
        """The answer to one call's input (here: nothing)."""
        return ""

    def answer(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        """`reply_text` of `messages`; the input and the reply are recorded."""
        self._calls.append(list(messages))
        reply = AIMessage(self.reply_text(messages))
        self._replies.append(reply)
        return reply

    def usage(self, counter: Counter) -> tuple[int, int, int]:
        """(calls, input tokens, output tokens) so far, counted with `counter`."""
        count = per_message(counter)
        read = sum(counter(call) for call in self._calls)
        return len(self._calls), read, sum(count(m) for m in self._replies)


class SummarizerMeter(BaseCallbackHandler):
    """Counts what a real summarizer model reads and writes (the provider's usage if given)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.calls = 0
        self.read = 0
        self.written = 0
        self._pending = 0

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        """Count the input."""
        self.calls += 1
        self._pending = sum(self.counter(batch) for batch in messages)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Count the output; the provider's usage replaces both counts when it has one."""
        pending, self._pending = self._pending, 0
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or {}
                if usage.get("input_tokens") is not None and usage.get("output_tokens"):
                    self.read += int(usage["input_tokens"])
                    self.written += int(usage["output_tokens"])
                    pending = 0
                elif message is not None:
                    self.written += self.counter([message])
        self.read += pending

    def usage(self) -> tuple[int, int, int]:
        """(calls, input tokens, output tokens) so far."""
        return self.calls, self.read, self.written


def summarizer_usage(model: Any, counter: Counter) -> tuple[int, int, int]:
    """What `model` has cost so far: its own record, or its `SummarizerMeter`'s.

    (0, 0, 0) for no model or one nothing meters.
    """
    if isinstance(model, RecordingModel):
        return model.usage(counter)
    for handler in getattr(model, "callbacks", None) or ():
        if isinstance(handler, SummarizerMeter):
            return handler.usage()
    return 0, 0, 0


def metered(model: Any, counter: Counter) -> Any:
    """`model`, with a fresh `SummarizerMeter` among its callbacks unless it records itself."""
    if model is None or isinstance(model, RecordingModel):
        return model
    others = [h for h in (model.callbacks or ()) if not isinstance(h, SummarizerMeter)]
    model.callbacks = [*others, SummarizerMeter(counter)]
    return model
