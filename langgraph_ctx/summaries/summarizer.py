"""The summarizer: a structured running summary from any chat model, with a deterministic fallback.

A summary has four sections, `<completed>`, `<remaining>`, `<current_state>` and `<notes>`,
whether a model wrote it or `fallback_summary` built it, so the rest of the pipeline never has to
tell them apart. The text returned is the inner part; the pipeline wraps it in
`<summary>…</summary>` when it places it in the prompt.

Design notes:

- **Folding, not re-summarizing.** The previous running summary is handed to the model separately
  from the new messages, with the instruction to carry it forward and add to it. A long span is
  cut at block boundaries (an AI message with tool calls stays with its results) into chunks that
  fit `input_window_tokens`; chunk 1 is folded into the previous summary, chunk 2 into that
  result, and so on.
- **Insured.** Model output is validated (see `Summarizer`). After every attempt failed (an
  exception, a timeout, empty, error-like, malformed or enormous output) the deterministic
  `fallback_summary` takes over, so nothing leaves the prompt without a summary and an error
  message never becomes one.
- **One plan, two drivers.** `Summarizer.plan` is a generator holding every decision: it yields a
  `CallModel` effect for each model call and receives the model's output back, or the exception
  thrown in (see `langgraph_ctx._effects`). `summarize` and `asummarize` are `run_plan` and
  `arun_plan` of it; the driver owns the timeout. Other plans compose it with `yield from`.

The text it works with lives next to it: what the model reads (`summaries.transcript`), what
its answer must be (`summaries.validation`), and the sections and the fallback summary the
prompt shows (`langgraph_ctx.prompt.sections`, `langgraph_ctx.prompt.fallback`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig

from langgraph_ctx._effects import CallModel, Plan, both
from langgraph_ctx.checks import check_callable, check_int, check_list, check_number, check_str
from langgraph_ctx.errors import ConfigError
from langgraph_ctx.messages.blocks import split_blocks
from langgraph_ctx.messages.content import text_of
from langgraph_ctx.prompt.fallback import fallback_summary, one_line
from langgraph_ctx.prompt.markup import WRAPPER_TAGS, escape_markup
from langgraph_ctx.prompt.sections import clip, unwrap
from langgraph_ctx.summaries.internal_calls import internal_call_config, internal_model
from langgraph_ctx.summaries.transcript import SUMMARY_PROMPT, redact_messages, render_transcript
from langgraph_ctx.summaries.validation import validate
from langgraph_ctx.tokens.counter import TokenCounter
from langgraph_ctx.tokens.models import shared_counter_for_model

logger = logging.getLogger("langgraph_ctx.summarize")  # the name it always had
"""Warnings for what a run survives but an operator should see."""

_CHARS_PER_TOKEN = 4  # output bound in characters, so any token counter (even `len`) works
_DEFAULT_INPUT_WINDOW = 16_000

__all__ = ["SummaryOutcome", "Summarizer"]


# --- the summarizer -------------------------------------------------------------------------

_MIN_PART_CHARS = 200
"""No part of a message cut for the summarizer is shorter than this (but the last)."""


def _cut_text(text: str, budget: int) -> list[str]:
    """`text` in consecutive pieces of at most `budget` characters, joined: `text`.

    A piece ends after a line end when one is in its second half.
    """
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + budget)
        if end < len(text):
            cut = text.rfind("\n", start + budget // 2, end)
            end = cut + 1 if cut >= 0 else end
        pieces.append(text[start:end])
        start = end
    return pieces


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """What `Summarizer.summarize` returns.

    Attributes:
        text: The summary: the four sections, without a `<summary>` wrapper.
        source: `"model"` when the model wrote it, `"fallback"` when `fallback_summary` did (in
            part: after chunk k failed, the chunks before it are the model's).
        model_calls: Calls made to the model, failed attempts included.
        error: Why the fallback was used (`None` with no model, or when the model succeeded).
        input_tokens: Tokens sent to the model, summed over calls, by the token counter.
    """

    text: str
    source: Literal["model", "fallback"]
    model_calls: int
    error: str | None
    input_tokens: int


def _describe(exc: BaseException) -> str:
    text = one_line(str(exc))
    return clip(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, 200)


def _reply_text(reply: Any) -> str:
    return text_of(reply) if isinstance(reply, BaseMessage) else str(reply)


@dataclass(frozen=True, kw_only=True, slots=True)
class Summarizer:
    """Summarize a span of messages with a chat model, falling back to `fallback_summary`.

    Each model call gets `SUMMARY_PROMPT` as the system message and one human message with the
    previous summary and the transcript. Output is accepted when, after stripping whitespace, a
    code fence and a `<summary>` wrapper, it is:

    - not empty, and at most 3x the output bound in characters (`max_output_tokens` x 4; longer
      output is "enormous": the model ignored the instructions). Output between 1x and 3x is cut
      down to the bound by dropping the oldest lines of the largest section;
    - not error-like: free text, the text before the first section, or a structured output
      under 200 characters must not start with `Error`, `Exception`, `Traceback`, an apology or
      refusal (`I'm sorry`, `I cannot`, `Unable to`, `As an AI`) nor contain phrases such as
      `too long to summarize`, `maximum context length`, `rate limit`;
    - structured with closed `<completed>` and `<remaining>` sections (missing `<current_state>`
      or `<notes>` are added empty), or free text with no section tag at all, which is accepted
      and wrapped into `<current_state>`;
    - a summary, not a copy: output whose phrases are mostly the prompt's own section
      descriptions (a small model parroting its instructions), or mostly runs of eight words
      copied verbatim from the transcript (a near-copy of the input), is rejected. Runs the
      previous summary holds are not counted (folding keeps its items verbatim).

    Every failure (exception, timeout, rejected output) costs one attempt; after `1 + retries`
    attempts on a chunk, the messages from that chunk on go to `fallback_summary`, folded into
    the summary of the chunks before it, and `SummaryOutcome.error` says why.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> Summarizer().summarize([HumanMessage("hi")]).source  # no model: the fallback
        'fallback'
    """

    model: BaseChatModel | None = None
    """The chat model that writes summaries; `None` uses `fallback_summary` only."""
    max_output_tokens: int = 2048
    """Bound on the summary's size, enforced on the text at 4 characters per token, for model
    and fallback summaries alike. The model itself is not bound (providers name the setting
    differently); set a provider-side limit on the model too if you want one."""
    timeout_seconds: float | None = 60.0
    """Time limit per model call; `None` waits forever. A sync call that times out is left to
    finish in a daemon thread."""
    retries: int = 2
    """Extra attempts per chunk after a failed one."""
    input_window_tokens: int | None = 16_000
    """Largest prompt (system prompt, previous summary and transcript) sent in one call; longer
    spans are summarized chunk by chunk. A block too large for one call is read in parts (each
    message's text cut at line ends, `[part k of n]`), so nothing in its middle is lost.
    `None`: the model's own window (`profile["max_input_tokens"]` less `max_output_tokens`), or
    16,000 when the model has no profile."""
    token_counter: TokenCounter | None = None
    """Counts prompt tokens; `None` uses the model's (`counter_for_model`: exact tiktoken for
    OpenAI models and without a model, a provider approximation otherwise)."""
    redact: Callable[[str], str] | None = None
    """Applied to every text sent to the model and to the fallback's input."""
    tags: Sequence[str] = ("langgraph_ctx", "langgraph_ctx:summarizer")
    """Run tags of each model call, so tracing and callbacks can tell summarizer calls apart."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: {"langgraph_ctx": "summarizer"})
    """Run metadata of each model call."""
    run_name: str = "langgraph_ctx_summarizer"
    """Run name of each model call."""

    def __post_init__(self) -> None:
        if self.model is not None and not callable(getattr(self.model, "invoke", None)):
            msg = (
                f"Summarizer(model=...): model must be a chat model, got "
                f"{type(self.model).__name__} {self.model!r}; pass a chat model object, e.g. "
                "init_chat_model('openai:gpt-4o-mini'), or None for the deterministic fallback"
            )
            raise ConfigError(msg)
        owner = "Summarizer"
        check_int("max_output_tokens", self.max_output_tokens, minimum=1, example=2048, owner=owner)
        check_int("retries", self.retries, example=2, owner=owner, note="0 for a single attempt")
        check_int(
            "input_window_tokens",
            self.input_window_tokens,
            minimum=1,
            optional=True,
            example=16_000,
            owner=owner,
            note="None for the model's own window",
        )
        check_number(
            "timeout_seconds",
            self.timeout_seconds,
            gt=0,
            optional=True,
            example=60.0,
            owner=owner,
            note="None to wait forever",
        )
        check_callable(
            "redact",
            self.redact,
            what="a function from text to text",
            optional=True,
            example="lambda text: text.replace(secret, '***')",
            owner=owner,
        )
        check_callable(
            "token_counter",
            self.token_counter,
            what="callable on a message list",
            optional=True,
            example='TiktokenCounter("gpt-4o")',
            owner=owner,
        )
        check_str("run_name", self.run_name, example="langgraph_ctx_summarizer", owner=owner)
        check_list("tags", self.tags, "strings, e.g. ['my_app']", of=str, owner=owner)

    @property
    def input_window(self) -> int:
        """The input bound in force (see `input_window_tokens`)."""
        if self.input_window_tokens is not None:
            return self.input_window_tokens
        profile = getattr(self.model, "profile", None) or {}
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        if isinstance(window, int) and window > self.max_output_tokens:
            return window - self.max_output_tokens
        return _DEFAULT_INPUT_WINDOW

    @property
    def max_output_chars(self) -> int:
        """The summary's length bound in characters."""
        return self.max_output_tokens * _CHARS_PER_TOKEN

    def _count(self, messages: Sequence[BaseMessage]) -> int:
        counter = self.token_counter or shared_counter_for_model(self.model)
        return counter(messages)

    def redact_messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Copies of `messages` with this summarizer's `redact` applied (e.g. to an archive)."""
        return redact_messages(messages, self.redact)

    def build_prompt(
        self,
        messages: Sequence[BaseMessage],
        *,
        previous: str | None = None,
        max_chars_per_message: int | None = None,
    ) -> list[BaseMessage]:
        """The prompt of one summarizer call: `SUMMARY_PROMPT` and the redacted request."""
        transcript = render_transcript(messages, max_chars_per_message=max_chars_per_message)
        if previous and previous.strip():
            body = (
                "Previous running summary (fold the new messages into it):\n"
                f"<previous_summary>\n{escape_markup(unwrap(previous), WRAPPER_TAGS)}\n"
                "</previous_summary>\n\n"
                f"New messages:\n<transcript>\n{transcript}\n</transcript>"
            )
        else:
            body = f"Messages to summarize:\n<transcript>\n{transcript}\n</transcript>"
        if self.redact is not None:
            body = self.redact(body)
        return [SystemMessage(SUMMARY_PROMPT), HumanMessage(body)]

    def _config(self) -> RunnableConfig:
        return {"tags": list(self.tags), "metadata": dict(self.metadata), "run_name": self.run_name}

    def _fallback(
        self, messages: Sequence[BaseMessage], previous: str | None, **outcome: Any
    ) -> SummaryOutcome:
        if self.redact is not None and previous:
            previous = self.redact(previous)
        text = fallback_summary(
            self.redact_messages(messages), previous=previous, max_chars=self.max_output_chars
        )
        return SummaryOutcome(text=text, source="fallback", **outcome)

    def fallback(
        self,
        messages: Sequence[BaseMessage],
        previous: str | None = None,
        *,
        error: str | None = None,
    ) -> SummaryOutcome:
        """The deterministic summary (`fallback_summary`) as this summarizer makes it.

        Redacted and bounded as a model's would be, with no model call: what stands in when
        the model fails, and when the cap on summarizer calls in flight leaves no slot
        (`langgraph_ctx.summaries.slots`). `error` says why it stands in.
        """
        return self._fallback(messages, previous, model_calls=0, error=error, input_tokens=0)

    def plan(
        self, messages: Sequence[BaseMessage], previous: str | None = None
    ) -> Plan[SummaryOutcome]:
        """`summarize` as a plan: every decision, with a `CallModel` effect per model call.

        An exception thrown in at a `CallModel` counts as one failed attempt, like rejected
        output; the plan never raises for a failing model.
        """
        if self.model is None or not messages:
            return self._fallback(messages, previous, model_calls=0, error=None, input_tokens=0)
        window = self.input_window
        units = self._units(messages, previous)
        model = internal_model(self.model)
        config = internal_call_config(self._config(), "summarization")
        attempts, calls, tokens = 1 + self.retries, 0, 0
        running, start, chunk_no = previous, 0, 0
        while start < len(units):
            chunk_no += 1
            overhead = self._count(self.build_prompt([], previous=running))
            end, size = start, 0
            while end < len(units):
                cost = self._count(units[end][1])
                if end > start and overhead + size + cost > window:
                    break
                end, size = end + 1, size + cost
            chunk = [m for _, unit in units[start:end] for m in unit]
            per_message = None
            if overhead + size > window:  # one block alone is too large
                per_message = max(200, (window * 3) // len(chunk))
            prompt = self.build_prompt(chunk, previous=running, max_chars_per_message=per_message)
            prompt_tokens = self._count(prompt)
            call = CallModel(model, prompt, config, self.timeout_seconds)
            problems: list[str] = []
            text: str | None = None
            for _ in range(attempts):
                calls, tokens = calls + 1, tokens + prompt_tokens
                try:
                    reply = _reply_text((yield call))
                except Exception as exc:  # a failure may pass: try again
                    problems.append(_describe(exc))
                    continue
                text, problem = validate(
                    reply,
                    max_chars=self.max_output_chars,
                    source=text_of(prompt[-1]),
                    previous=running,
                )
                if text is None:  # the model answered, unusably: asking again costs the same
                    problems.append(problem or "invalid output")
                break
            if text is not None:
                running = text
            else:
                tried = "; ".join(f"attempt {i}: {p}" for i, p in enumerate(problems, 1))
                error = f"summarizer model failed on chunk {chunk_no} ({tried})"
                logger.warning("%s; using the deterministic fallback summary", error)
                rest = messages[units[start][0] :]
                return self._fallback(
                    rest, running, model_calls=calls, error=error, input_tokens=tokens
                )
            start = end
        assert running is not None
        return SummaryOutcome(running, "model", calls, None, tokens)

    def _units(
        self, messages: Sequence[BaseMessage], previous: str | None
    ) -> list[tuple[int, list[BaseMessage]]]:
        """What calls are made of: whole blocks, and the parts of blocks too large for a call.

        Each unit is `(index of its block's first message, messages)`. A block that does not
        fit one call beside the prompt and the largest summary is cut into parts, message by
        message, at line ends where it can: every character reaches the model (clipping the
        middle of a large output lost what it held). A part is labelled `[part k of n]`.
        """
        room = self.input_window - self._count(self.build_prompt([], previous=previous))
        room -= self.max_output_tokens  # the running summary grows up to its bound
        units: list[tuple[int, list[BaseMessage]]] = []
        for block in split_blocks(messages):
            whole = list(block.messages)
            if room <= 0 or self._count(whole) <= room:
                units.append((block.start, whole))
                continue
            for message in whole:
                parts = self._parts(message, room)
                units.extend((block.start, [part]) for part in parts)
        return units

    def _parts(self, message: BaseMessage, room: int) -> list[BaseMessage]:
        """`message` as copies carrying consecutive parts of its text, each within `room`."""
        text = text_of(message)
        size = self._count([message])
        if size <= room or len(text) < 2 * _MIN_PART_CHARS:
            return [message]
        budget = max(_MIN_PART_CHARS, len(text) * room // size)
        for _ in range(6):  # shrink the part size until every part fits the room
            pieces = _cut_text(text, budget)
            parts = [
                message.model_copy(
                    update={
                        "content": f"[part {k} of {len(pieces)}]\n{piece}",
                        **({"tool_calls": []} if k > 1 and hasattr(message, "tool_calls") else {}),
                    }
                )
                for k, piece in enumerate(pieces, 1)
            ]
            largest = max(self._count([p]) for p in parts)
            if largest <= room or budget == _MIN_PART_CHARS:
                return parts
            budget = max(_MIN_PART_CHARS, budget * room * 9 // (largest * 10))
        return parts

    def _plan_summarize(
        self, messages: Sequence[BaseMessage], *, previous: str | None = None
    ) -> Plan[SummaryOutcome]:
        return (yield from self.plan(messages, previous))

    summarize, asummarize = both(
        _plan_summarize,
        doc="""Summarize `messages`, folding in `previous`; never raises for a failing model.

        Args:
            messages: The span the summary replaces, oldest first.
            previous: The running summary so far, if any.

        Returns:
            The summary and how it was made.
        """,
        adoc="Async `summarize`.",
    )
