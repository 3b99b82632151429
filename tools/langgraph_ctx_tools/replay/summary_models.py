"""The summary conditions of a replay: one summarizer, as a chat model, for every system.

A replay that names no real model still gives every system that summarizes the same
summarizer, so a row's figures come from its policy and not from a better summarizer:

* `"same"` (`DeterministicSummaryModel`): the package's deterministic summary
  (`langgraph_ctx.prompt.fallback.fallback_summary`) of the messages it is asked to summarize,
  offered as a chat model. It carries each tool call's outcome line into the summary.
* `"shape"` (`ShapeSummaryModel`): only the conversation's shape (how many messages of each
  type, which tools were called how often, the task's first line), no line of any tool output.

Each system wraps the messages in its own prompt; `summarized_span` finds them in it:

* ours (`Summarizer.build_prompt`): the `<transcript>` of `render_transcript` and the
  `<previous_summary>`;
* LangChain's `SummarizationMiddleware`, and deepagents' (which calls it): one prompt string
  holding the messages as `get_buffer_string(format="xml")` (their text XML-escaped, so a
  message never ends early); a tool result is paired with the call before it by order;
* langmem's `summarize_messages`: the messages themselves, then one instruction message.

A message holding a summary this model wrote earlier (LangChain's and deepagents' summary
message, langmem's running summary in the instruction) is folded in as the previous summary,
not summarized as a user's request. Known limit: our plain-text transcript starts a message at
each line opening with `Human: `, `AI: `, `Tool: ` or `System: `; a tool output holding such a
line is read as two messages.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import unescape

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import PrivateAttr

from langgraph_ctx.messages import text_of
from langgraph_ctx.prompt.fallback import fallback_summary
from langgraph_ctx.prompt.markup import escape_markup
from langgraph_ctx_tools.replay.models import RecordingModel

__all__ = [
    "SUMMARY_CONDITIONS",
    "DeterministicSummaryModel",
    "ShapeSummaryModel",
    "SpanSummaryModel",
    "condition_model",
    "summarized_span",
]

SUMMARY_CONDITIONS: dict[str, str] = {
    "same": "same summary: every system's summarizer is the deterministic summary",
    "shape": "keeps no line: every system's summarizer writes the conversation's shape only",
}
"""Condition name (`langgraph-ctx frontier --summaries`) -> how a table names it."""

SUMMARY_CHARS = 8_192
"""Bound on a condition model's summary: `Summarizer`'s default (2,048 tokens x 4 chars)."""

_ROLES = {"Human": "human", "AI": "ai", "Tool": "tool", "System": "system"}
_ROLE_LINE = re.compile(r"^(Human|AI|Tool|System): ?", re.MULTILINE)
_TOOL_CALL_LINE = re.compile(r"^\[tool call\] ([^\s(]+)\((.*)\)$")
_TOOL_LABEL = re.compile(r"^\[([^\]\s]+)( error)?\] ?")
_XML_MESSAGE = re.compile(r"<message type=(\"[^\"]*\"|'[^']*')>(.*?)</message>", re.DOTALL)
_XML_CONTENT = re.compile(r"<content>(.*?)</content>", re.DOTALL)
_XML_CALL = re.compile(
    r"<tool_call id=(\"[^\"]*\"|'[^']*') name=(\"[^\"]*\"|'[^']*')>(.*?)</tool_call>", re.DOTALL
)
_ATTR_ENTITIES = {"&quot;": '"', "&apos;": "'", "&#10;": "\n", "&#13;": "\r", "&#9;": "\t"}


def _attr(quoted: str) -> str:
    return unescape(quoted[1:-1], _ATTR_ENTITIES)


def _args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def _message(kind: str, text: str, calls: list[dict[str, Any]]) -> BaseMessage:
    if kind == "human":
        return HumanMessage(text)
    if kind == "ai":
        return AIMessage(text, tool_calls=calls)
    if kind == "system":
        return SystemMessage(text)
    if kind == "tool":
        return ToolMessage(text, tool_call_id="")
    return ChatMessage(role=kind, content=text)


def _paired(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Tool results given the id and name of the call before them, in order."""
    out: list[BaseMessage] = []
    pending: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AIMessage):
            pending = [dict(tc) for tc in message.tool_calls]
        elif isinstance(message, ToolMessage) and not message.tool_call_id:
            call = pending.pop(0) if pending else {"id": f"orphan-{len(out)}", "name": None}
            update = {"tool_call_id": call["id"] or "", "name": message.name or call["name"]}
            message = message.model_copy(update=update)
        out.append(message)
    return out


def _from_transcript(text: str) -> list[BaseMessage]:
    """The messages of our `render_transcript` text."""
    starts = list(_ROLE_LINE.finditer(text))
    out: list[BaseMessage] = []
    for n, match in enumerate(starts):
        end = starts[n + 1].start() - 1 if n + 1 < len(starts) else len(text)
        kind, body = _ROLES[match.group(1)], text[match.end() : max(match.end(), end)]
        calls: list[dict[str, Any]] = []
        name, status = None, "success"
        if kind == "ai":
            lines = body.split("\n")
            while lines and (line := _TOOL_CALL_LINE.match(lines[-1])):
                calls.insert(0, {"name": line.group(1), "args": _args(line.group(2))})
                lines.pop()
            body = "\n".join(lines)
            for i, call in enumerate(calls):
                call["id"] = f"t{len(out)}-{i}"
        elif kind == "tool" and (label := _TOOL_LABEL.match(body)):
            name, status = label.group(1), "error" if label.group(2) else "success"
            body = body[label.end() :]
        message = _message(kind, body, calls)
        if isinstance(message, ToolMessage):
            message = message.model_copy(update={"name": name, "status": status})
        out.append(message)
    return _paired(out)


def _from_xml(text: str) -> list[BaseMessage]:
    """The messages of a `get_buffer_string(format="xml")` text."""
    out: list[BaseMessage] = []
    for match in _XML_MESSAGE.finditer(text):
        kind, inner = _attr(match.group(1)), match.group(2)
        calls = [
            {"name": _attr(name), "args": _args(unescape(args)), "id": _attr(cid) or f"x{i}"}
            for i, (cid, name, args) in enumerate(_XML_CALL.findall(inner))
        ]
        if calls:
            content = _XML_CONTENT.search(inner)
            inner = content.group(1) if content else ""
        out.append(_message(kind, unescape(inner), calls))
    return _paired(out)


def _block(text: str, tag: str) -> str | None:
    start, end = text.find(f"<{tag}>\n"), text.rfind(f"\n</{tag}>")
    return text[start + len(tag) + 3 : end] if 0 <= start < end else None


def summarized_span(
    messages: Sequence[BaseMessage], written: Sequence[str] = ()
) -> tuple[list[BaseMessage], str | None]:
    """The messages a summarizer call asks to summarize, and the previous summary to fold in.

    Args:
        messages: The call's input, as the system sent it (see the module for the formats).
        written: Summaries this model wrote before: a message holding one is the previous
            summary, not a message to summarize.

    Returns:
        (the messages, oldest first, system prompts left out; the previous summary or None).
    """
    earlier = [w for w in (s.strip() for s in written) if w]
    request = text_of(messages[-1]) if messages else ""
    bare = request
    for summary in earlier:  # a summary of ours may quote anything: not the prompt's markers
        bare = bare.replace(summary, "")
    previous: str | None = None
    if "<transcript>" in bare and len(messages) <= 2:
        transcript = _block(request, "transcript") or ""
        covered = _from_transcript(transcript)
        previous = _block(request, "previous_summary")
    elif "<message type=" in bare and len(messages) <= 2:
        covered = _from_xml(request)
    else:  # the messages themselves, then the instruction (langmem)
        covered = list(messages[:-1]) if isinstance(messages[-1], HumanMessage) else []
        previous = next((s for s in reversed(earlier) if s in request), None)
    kept: list[BaseMessage] = []
    for message in covered:
        text = text_of(message)
        mine = next((s for s in reversed(earlier) if s in text), None)
        if mine is not None:
            previous = mine
        elif not isinstance(message, SystemMessage):
            kept.append(message)
    return kept, previous


class SpanSummaryModel(RecordingModel):
    """A stand-in summarizer that answers with a summary of the span its input asks for.

    Records every call (`RecordingModel`); `summary(covered, previous)` is the answer.
    """

    max_chars: int = SUMMARY_CHARS
    """Bound on the summary's length."""
    _written: list[str] = PrivateAttr(default_factory=list)

    def summary(self, covered: Sequence[BaseMessage], previous: str | None) -> str:
        """The summary of `covered`, `previous` folded in (here: the deterministic one)."""
        return fallback_summary(covered, previous=previous, max_chars=self.max_chars)

    def reply_text(self, messages: Sequence[BaseMessage]) -> str:
        """The summary of the span `messages` asks for (`summarized_span`)."""
        covered, previous = summarized_span(messages, self._written)
        text = self.summary(covered, previous)
        self._written.append(text)
        return text


class DeterministicSummaryModel(SpanSummaryModel):
    """The `"same"` condition: `fallback_summary` of the span, as a chat model."""

    @property
    def _llm_type(self) -> str:
        return "deterministic-summary"


_COUNTS = re.compile(r"- Summarized (\d+) earlier message\(s\)(?:: (.*?))?\.$", re.MULTILINE)
_TOOLS = re.compile(r"- Tools called: (.*)\.$", re.MULTILINE)
_TASK = re.compile(r"^- Task \(its first line\): (.*)$", re.MULTILINE)
_PAIR = re.compile(r"([^,()]+?) \((\d+)\)|([a-z]+) (\d+)")
_WORD = re.compile(r"\w")
_TAGS = re.compile(r"<[^<>]*>")
TASK_CHARS = 120
"""The task's first line is clipped to this many characters (a shape, not a copy)."""
SHAPE_NOTE = (
    "- This summary records the conversation's shape only (how many messages, which tools were "
    "called how often, the task's first line), no line of any tool output."
)
"""The shape summary's note. It also keeps the summary over the 200 characters under which
our summary validation reads a short answer naming e.g. a rate limit as an error message, so
our pipeline never trades it for the deterministic fallback (which keeps tool lines)."""


def _counted(text: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for match in _PAIR.finditer(text):
        name, n = (match.group(1), match.group(2)) if match.group(1) else match.group(3, 4)
        out[name.strip()] += int(n)
    return out


class ShapeSummaryModel(SpanSummaryModel):
    """The `"shape"` condition: the conversation's shape, no line of any tool output.

    `<completed>` says how many messages of each type the summaries covered and which tools
    were called how often, `<remaining>` the task's first line (the first user message's
    first line with a word in it, clipped to `TASK_CHARS`); the previous summary's counts are
    added in (read from its text). Nothing of a tool output, a tool call's arguments or a
    model's text is written.
    """

    @property
    def _llm_type(self) -> str:
        return "shape-summary"

    def summary(self, covered: Sequence[BaseMessage], previous: str | None) -> str:
        """The shape of `covered`, `previous`'s counts added in."""
        types: Counter[str] = Counter()
        tools: Counter[str] = Counter()
        task = None
        if previous:
            for match in _COUNTS.finditer(previous):
                types.update(_counted(match.group(2) or ""))
            for match in _TOOLS.finditer(previous):
                tools.update(_counted(match.group(1)))
            task = next((m.group(1) for m in _TASK.finditer(previous)), None)
        types.update(m.type for m in covered)
        tools.update(tc["name"] for m in covered if isinstance(m, AIMessage) for tc in m.tool_calls)
        if task is None:
            human = next((m for m in covered if isinstance(m, HumanMessage)), None)
            lines = text_of(human).splitlines() if human else []
            first = next((x for x in lines if _WORD.search(_TAGS.sub("", x))), "")
            task = escape_markup(" ".join(first.split())[:TASK_CHARS]) or None
        by_type = ", ".join(f"{kind} {n}" for kind, n in types.items())
        done = [f"- Summarized {sum(types.values())} earlier message(s): {by_type}."]
        if tools:
            done.append(
                "- Tools called: " + ", ".join(f"{t} ({n})" for t, n in sorted(tools.items())) + "."
            )
        left = f"- Task (its first line): {task}" if task else "- (none)"
        return (
            "<completed>\n" + "\n".join(done) + "\n</completed>\n"
            f"<remaining>\n{left}\n</remaining>\n"
            f"<current_state>\n- (none)\n</current_state>\n<notes>\n{SHAPE_NOTE}\n</notes>"
        )[: self.max_chars]


def condition_model(condition: str, limit: int) -> SpanSummaryModel:
    """A fresh summarizer for `condition` (`SUMMARY_CONDITIONS`) advertising `limit` input tokens.

    Raises:
        ValueError: `condition` is not one of `SUMMARY_CONDITIONS`.
    """
    profile: Any = {"max_input_tokens": limit}
    if condition == "same":
        return DeterministicSummaryModel(profile=profile)
    if condition == "shape":
        return ShapeSummaryModel(profile=profile)
    msg = f"unknown summary condition {condition!r}; use one of {sorted(SUMMARY_CONDITIONS)}"
    raise ValueError(msg)
