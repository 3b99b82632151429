"""`ScriptedChatModel`: a chat model that replays a script, for trying the package without a key.

It stands in for the LLM in the README's quickstart, the notebooks and the test suite: no
network, no key, the same replies every run. It binds tools like a real chat model and has a
profile with `max_input_tokens` (128,000 unless you pass another), so
`ContextMemory(model=...)` takes its window from it as from a real model.

    model = ScriptedChatModel(messages=[AIMessage("", tool_calls=[...]), "The answer."])

A `ScriptedChatModel` replays a script of steps, one per call, whatever prompt it gets:

- an `AIMessage` (answered as a fresh deep copy, its id included), a `str` (answered as an
  `AIMessage` with the framework's id, as from a real provider), a `BaseException` (raised),
  or a function of the prompt returning one of those (it may raise too);
- for `with_structured_output`, any value (returned as the parsed output) or an exception.

It supports `bind_tools`, and keeps what it was asked on the instance (never on the class):
every prompt (`prompts`), the tools bound for it (`prompt_tools`), the prompts it rejected for
overflow (`rejected`) and the schemas asked for (`schemas`). Options: `delay` (latency, slept
with `time.sleep` or `asyncio.sleep`), `failures` (raise on the n-th call), `usage_counter` /
`usage_scale` (`usage_metadata` with the prompt's real token count), `provider_limit` (reject
long prompts like a provider), and `route` (hand every call to another scripted model).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, field_validator

DEFAULT_PROFILE = {"max_input_tokens": 128_000, "max_output_tokens": 16_384}
"""The profile a `ScriptedChatModel` has unless given another (a gpt-4o-sized window)."""

Step = AIMessage | str | BaseException | Callable[[list[BaseMessage]], Any]
"""One scripted reply: a message, a text, an exception to raise, or a function of the prompt."""


class ScriptedChatModel(GenericFakeChatModel):
    """Replays scripted steps in order and records what it was asked.

    When the script runs out the model answers `fallback` (a final text reply), so a run that
    continues past a recording ends cleanly; with `fallback=None` it raises instead.
    """

    messages: Iterator[Any] = Field(default_factory=lambda: iter(()))
    """The script: one step per call (see the module docstring); a list or any iterable."""
    profile: Any = Field(default_factory=lambda: dict(DEFAULT_PROFILE))
    """The model profile; `max_input_tokens` sets the window of `ContextMemory(model=...)`."""
    fallback: str | None = "Done."
    """Reply once the script is exhausted; None raises instead."""
    delay: float = 0.0
    """Seconds every call takes (a slow provider; racing runs interleave)."""
    failures: Mapping[int, BaseException] = Field(default_factory=dict)
    """Raise this exception on the n-th call (1-based), before the script is read."""
    usage_counter: Any = None
    """A `TokenCounter`: when set, replies carry `usage_metadata.input_tokens` of the prompt."""
    usage_scale: float = 1.0
    """Multiplies the reported input tokens (a provider that counts more than we do)."""
    provider_limit: int | None = None
    """Reject prompts whose scaled count passes this with `ContextOverflowError`."""
    route: Callable[[], ScriptedChatModel] | None = None
    """When set, every call goes to the model this returns (which records it and answers)."""
    rejected: list[list[BaseMessage]] = Field(default_factory=list)
    """Prompts rejected for overflow (not in `prompts`; they consume no script step)."""
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    """Every prompt answered (or failed on), in order."""
    prompt_tools: list[list[dict[str, Any]]] = Field(default_factory=list)
    """The tools (OpenAI format) bound for each prompt."""
    schemas: list[Any] = Field(default_factory=list)
    """The schemas `with_structured_output` was asked for."""
    disable_streaming: bool = True  # the parent's `_stream` drops tool calls

    @field_validator("messages", mode="before")
    @classmethod
    def _as_iterator(cls, value: Any) -> Any:
        """Accept a list (or any iterable) as the script."""
        return value if isinstance(value, Iterator) else iter(value)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Bind tools as OpenAI schemas; they reach the model call and are recorded.

        Args:
            tools: Tools in any form `convert_to_openai_tool` accepts.
            **kwargs: Bound along (`tool_choice` is dropped: the script decides).

        Returns:
            The model bound to the tools.
        """
        schemas = [convert_to_openai_tool(t) for t in tools]
        kwargs.pop("tool_choice", None)
        return self.bind(tools=schemas, **kwargs)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        """A runnable replaying the script as parsed outputs (an exception step is raised).

        Args:
            schema: Recorded in `schemas`; the script decides the values.
            **kwargs: Ignored.

        Returns:
            A runnable that records each input in `prompts` and answers the next step.
        """
        self.schemas.append(schema)

        def answer(messages: list[BaseMessage]) -> Any:
            self.prompts.append(messages)
            return self._step(messages, parse=False)

        return RunnableLambda(answer)

    def _step(self, prompt: list[BaseMessage], *, parse: bool = True) -> Any:
        failure = self.failures.get(len(self.prompts))
        if failure is not None:
            raise failure
        step = next(self.messages, None)
        if step is None:
            if self.fallback is None:
                msg = f"the script is exhausted after {len(self.prompts)} calls"
                raise AssertionError(msg)
            step = self.fallback
        if callable(step) and not isinstance(step, BaseException):
            step = step(prompt)
        if isinstance(step, BaseException):
            raise step
        if not parse:
            return step
        if isinstance(step, str):
            return AIMessage(step)
        reply: AIMessage = step.model_copy(deep=True)
        return reply

    def _record(self, messages: list[BaseMessage], kwargs: Mapping[str, Any]) -> int:
        """Check the provider limit, record the prompt; the prompt's tokens (0 without usage)."""
        tools = list(kwargs.get("tools") or [])
        tokens = 0
        if self.usage_counter is not None:
            counted = self.usage_counter(messages) + self.usage_counter.count_tools(tools)
            tokens = int(counted * self.usage_scale)
            if self.provider_limit is not None and tokens > self.provider_limit:
                self.rejected.append(list(messages))
                msg = f"This model's maximum context length is {self.provider_limit} tokens"
                raise ContextOverflowError(msg)
        self.prompts.append(list(messages))
        self.prompt_tools.append(tools)
        return tokens

    def _reply(self, messages: list[BaseMessage], tokens: int) -> ChatResult:
        reply: AIMessage = self._step(list(messages))
        if self.usage_counter is not None:
            reply.usage_metadata = UsageMetadata(
                input_tokens=tokens, output_tokens=10, total_tokens=tokens + 10
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _target(self) -> ScriptedChatModel:
        return self.route() if self.route is not None else self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        target = self._target()
        tokens = target._record(messages, kwargs)
        if target.delay:
            time.sleep(target.delay)
        return target._reply(messages, tokens)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        target = self._target()
        tokens = target._record(messages, kwargs)
        await asyncio.sleep(target.delay)  # also yields to the loop when there is no delay
        return target._reply(messages, tokens)


def scripted(*steps: Step | Any, fallback: str | None = None, **options: Any) -> ScriptedChatModel:
    """A `ScriptedChatModel` replaying `steps`; by default an exhausted script raises.

    Args:
        *steps: The replies, one per call (see the module docstring).
        fallback: Reply once the steps run out; None (the default here) raises instead.
        **options: Any other field (`delay`, `failures`, `profile`, `callbacks`, ...).

    Returns:
        The model.
    """
    return ScriptedChatModel(messages=iter(steps), fallback=fallback, **options)
