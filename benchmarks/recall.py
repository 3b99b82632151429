"""Next-step recall: how much of what the agent's next step uses the prompt still shows.

At each model call of a recorded run, the recorded *next* AI message (the one the call
produced) says what the agent needed: the distinctive names it uses (paths, dotted, snake and
camel identifiers, long numbers, hex ids) that first came from an earlier tool output. A name
counts as shown when the prompt holds a whole line (20+ characters, stripped) of an earlier
tool output that carries the name. The share over all calls is the recall. No model judges
anything; the agent's own next step is the ground truth, and showing a reference the agent
could `recall` does not count (the recorded agent never calls it).

The measure lives here, in the benchmarks, and nothing in `langgraph_ctx` imports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx.messages import text_of

__all__ = ["MIN_LINE_CHARS", "NextStepRecall", "names_in"]

MIN_LINE_CHARS = 20
"""A source line shorter than this does not show a name in context."""

_NAME_RE = re.compile(
    r"""
    (?:[\w.-]*/)+[\w.-]+                      # paths: a/b, /a/b.py, ./x/y
    | [A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+        # dotted: os.path.join, setup.py
    | [A-Za-z]\w*_\w+                        # snake_case (and CONSTANT_CASE)
    | [a-z]+(?:[A-Z][a-z0-9]+)+\w*           # camelCase
    | [A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\w*   # CamelCase with two humps or more
    | \d{5,}                                 # long numbers
    | [0-9a-f]{7,}                           # hex ids (checked: a digit and a letter)
    """,
    re.VERBOSE,
)


def names_in(text: str) -> set[str]:
    """The distinctive names in `text` (4 characters or more)."""
    out: set[str] = set()
    for match in _NAME_RE.finditer(text):
        name = match.group(0).strip("./-")
        if len(name) < 4:
            continue
        hex_like = re.fullmatch(r"[0-9a-f]+", name) is not None
        mixed = re.search(r"\d", name) and re.search(r"[a-f]", name)
        if hex_like and not mixed and not re.fullmatch(r"\d{5,}", name):
            continue  # a plain lowercase word or a short number: not distinctive
        out.add(name)
    return out


def _used_text(message: AIMessage) -> str:
    parts = [text_of(message)]
    for call in message.tool_calls:
        parts.append(str(call.get("args", "")))
    return "\n".join(parts)


@dataclass(slots=True)
class _Need:
    """One name the next step uses and the tool-output lines that show it."""

    name: str
    lines: list[str]


@dataclass(slots=True)
class NextStepRecall:
    """The needs of every model call of one recorded run, and the running score.

    Build once per run (`NextStepRecall.of(messages)`), then `score(i, prompt)` at the call
    made before `messages[i]`.
    """

    needs: dict[int, list[_Need]] = field(default_factory=dict)
    hits: int = 0
    total: int = 0

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> NextStepRecall:
        """Work out, for each AI message, the names it uses that came from tool output."""
        first_from_tool: dict[str, bool] = {}  # name -> its first sight was a tool output
        lines_of: dict[str, list[str]] = {}  # name -> tool-output lines that carry it
        needs: dict[int, list[_Need]] = {}
        for i, message in enumerate(messages):
            if isinstance(message, AIMessage) and i > 0:
                used = names_in(_used_text(message))
                found = [
                    _Need(name, list(lines_of.get(name, ())))
                    for name in sorted(used)
                    if first_from_tool.get(name) and lines_of.get(name)
                ]
                needs[i] = found
            if isinstance(message, ToolMessage):
                text = text_of(message)
                for name in names_in(text):
                    first_from_tool.setdefault(name, True)
                for raw in text.splitlines():
                    line = raw.strip()
                    if len(line) < MIN_LINE_CHARS:
                        continue
                    for name in names_in(line):
                        bucket = lines_of.setdefault(name, [])
                        if line not in bucket:
                            bucket.append(line)
                            if len(bucket) > 50:  # the newest lines are the likeliest shown
                                del bucket[0]
            else:
                body = _used_text(message) if isinstance(message, AIMessage) else text_of(message)
                for name in names_in(body):
                    first_from_tool.setdefault(name, False)
        return cls(needs=needs)

    def score(self, index: int, prompt: Sequence[BaseMessage]) -> tuple[int, int]:
        """Count the call before `messages[index]`: (names shown, names used)."""
        needs = self.needs.get(index) or []
        if not needs:
            return 0, 0
        shown = "\n".join(text_of(m) for m in prompt)
        hits = sum(any(line in shown for line in need.lines) for need in needs)
        self.hits += hits
        self.total += len(needs)
        return hits, len(needs)

    def skip(self, index: int) -> None:
        """Count a call that sent no prompt (the system raised): nothing shown."""
        self.total += len(self.needs.get(index) or [])
