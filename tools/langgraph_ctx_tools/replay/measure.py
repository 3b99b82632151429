"""The two axes of the frontier: what a prompt costs and what it shows the agent's next step.

One measure for `langgraph-ctx frontier` and the benchmarks (`benchmarks.replay` imports it):

* **effective cost** (`effective_cost`): the prompt tokens of every call, the tokens a
  provider's prompt cache can reuse priced at `cache_price` (0.1 by default: cached input is
  billed at about a tenth), plus every token a summarizer reads and writes. A call's reusable
  tokens (`measure_prompt`) are those of the longest run of leading messages equal, as the
  provider sees them (`same_for_provider`: role, content, name, tool-call id, tool calls), to
  the previous call's prompt, counted message by message.
* **next-step recall** (`NextStepRecall`): at each model call of a recorded run, the recorded
  *next* AI message (the one the call produced) says what the agent needed: the distinctive
  names it uses (paths, dotted, snake and camel identifiers, long numbers, hex ids) that first
  came from an earlier tool output. A name counts as shown when the prompt holds a whole line
  (20+ characters, stripped) of an earlier tool output that carries the name. The share over
  all calls is the recall. No model judges anything; the agent's own next step is the ground
  truth, and showing a reference the agent could `recall` does not count (the recorded agent
  never calls it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx.messages import text_of, validate_messages
from langgraph_ctx.tokens.counter import count_tool_tokens

__all__ = [
    "DEFAULT_CACHE_PRICE",
    "MIN_LINE_CHARS",
    "NextStepRecall",
    "PromptMeasure",
    "effective_cost",
    "measure_prompt",
    "names_in",
    "one_search",
    "path_names_in",
    "reusable_tokens",
    "per_message",
    "same_for_provider",
    "shown_text",
]

DEFAULT_CACHE_PRICE = 0.1
"""The price of a cache-reusable token, as a share of an uncached one."""

MIN_LINE_CHARS = 20
"""A source line shorter than this does not show a name in context."""

# --- effective cost ----------------------------------------------------------------------------


def _provider_view(message: BaseMessage) -> tuple[Any, ...]:
    return (
        message.type,
        message.content,
        getattr(message, "name", None),
        getattr(message, "tool_call_id", None),
        [
            (tc.get("name"), tc.get("args"), tc.get("id"))
            for tc in getattr(message, "tool_calls", None) or ()
        ],
    )


def same_for_provider(a: BaseMessage, b: BaseMessage) -> bool:
    """Whether two messages are sent as the same bytes (ids and metadata are not sent)."""
    return a is b or _provider_view(a) == _provider_view(b)


def per_message(counter: Callable[[Sequence[BaseMessage]], int]) -> Callable[[BaseMessage], int]:
    """The counter's tokens of one message: its `count_message`, else a one-message count."""
    own = getattr(counter, "count_message", None)
    if callable(own):
        return own  # type: ignore[no-any-return]
    return lambda message: counter([message])


@dataclass(slots=True)
class PromptMeasure:
    """What one call's prompt costs, and whether a provider would take it."""

    tokens: int
    """The prompt's tokens."""
    reusable: int
    """Tokens of the leading messages the previous prompt sent the same (the cache can hit)."""
    fresh: int
    """Tokens of messages absent from the previous prompt (never cacheable)."""
    overrun: bool
    """The prompt is over the limit."""
    problems: list[Any] = field(default_factory=list)
    """`validate_messages(prompt)`: the provider rules the prompt breaks."""


def reusable_tokens(
    previous: Sequence[BaseMessage],
    prompt: Sequence[BaseMessage],
    *,
    counter: Callable[[Sequence[BaseMessage]], int],
    previous_tools: Sequence[Any] = (),
    tools: Sequence[Any] = (),
) -> int:
    """Tokens of `prompt` a provider's prompt cache can reuse after `previous`.

    The tools come first in the cached prefix: a changed tool list (compared as JSON) breaks
    it; then the longest run of leading messages equal as the provider sees them
    (`same_for_provider`), counted message by message.
    """
    if json.dumps(list(previous_tools), sort_keys=True, default=str) != json.dumps(
        list(tools), sort_keys=True, default=str
    ):
        return 0
    count = per_message(counter)
    reusable = count_tool_tokens(counter, tools) if tools and previous else 0
    for a, b in zip(previous, prompt, strict=False):
        if not same_for_provider(a, b):
            break
        reusable += count(b)
    return reusable


def measure_prompt(
    previous: Sequence[BaseMessage],
    prompt: Sequence[BaseMessage],
    *,
    counter: Callable[[Sequence[BaseMessage]], int],
    limit: int,
) -> PromptMeasure:
    """Measure `prompt`, sent after `previous` (the prompt of the call before; [] for the first).

    Args:
        previous: The previous call's prompt.
        prompt: This call's prompt.
        counter: The token counter (a `TiktokenCounter` counts message by message, cached).
        limit: The prompt budget in tokens.
    """
    count = per_message(counter)
    tokens = counter(prompt)
    reusable = reusable_tokens(previous, prompt, counter=counter)
    before = {m.id for m in previous if m.id}
    fresh = sum(count(m) for m in prompt if m.id not in before or not m.id)
    return PromptMeasure(tokens, reusable, fresh, tokens > limit, list(validate_messages(prompt)))


def effective_cost(
    tokens: float,
    reusable: float,
    summarizer: float = 0,
    *,
    cache_price: float = DEFAULT_CACHE_PRICE,
) -> float:
    """Uncached tokens + `cache_price` x cache-reusable tokens + the summarizer's tokens.

    Args:
        tokens: Prompt tokens summed over calls.
        reusable: The cache-reusable part of them.
        summarizer: Every token the summarizer read and wrote.
        cache_price: A cached token's price as a share of an uncached one.
    """
    uncached = tokens - reusable
    return uncached + cache_price * reusable + summarizer


# --- next-step recall --------------------------------------------------------------------------

# What counts as a name, as one regex each (`_NAME_RE`: paths, dotted, snake, camel, long
# numbers, hex ids; `_PATH_OR_DOTTED_RE`: the first two): the definition, tried leftmost first
# at each position. Run as they stand they are quadratic on a long word (each position scans to
# the word's end before failing), so the scans below find the same matches in linear time and
# the regexes stay as the reference the tests compare them with.
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
_PATH_OR_DOTTED_RE = re.compile(
    r"""
    (?:[\w.-]*/)+[\w.-]+                      # paths: a/b, /a/b.py, ./x/y
    | [A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+        # dotted: os.path.join, setup.py
    """,
    re.VERBOSE,
)

# The pieces of the linear scans. Every alternative matches within one run of `[\w./-]`
# characters (a chunk), and within a chunk:
# - a path matches at the chunk's start exactly when a `/` in it is followed by a character
#   other than `/`, and then it is the chunk without its trailing slashes (the rest holds no
#   name); otherwise no path matches anywhere in the chunk;
# - the other alternatives but the dotted one stay within one run of `\w`, and whether each
#   matches at a position depends on facts of the run that are the same for every position
#   of it (what follows the run, its last `_`, where a lowercase run ends), found once.
_WORD_RUN = re.compile(r"\w+")
_DOTTED_TAIL = re.compile(r"(?:\.[A-Za-z_]\w*)+")
_LETTER_OR_UNDERSCORE = re.compile(r"[A-Za-z_]")
_LETTER = re.compile(r"[A-Za-z]")
_NUMBER_OR_HEX = re.compile(r"\d{5,}|[0-9a-f]{7,}")
# camelCase from the first of a lowercase run (a later letter of the run ends where it does,
# so it matches as the first did), CamelCase, then numbers and hex ids: each position costs
# the run it scans once, so a search over a run is linear.
_CAMEL_FROM_RUN_START = re.compile(r"[a-z]+[A-Z][a-z0-9]")
_LOWERCASE = re.compile(r"[a-z]*")
_CAMEL_OR_NUMBER = re.compile(
    r"(?<![a-z])[a-z]+[A-Z][a-z0-9]\w*|[A-Z][a-z0-9]+[A-Z]\w*|\d{5,}|[0-9a-f]{7,}"
)
# Paths at a chunk's start only; a dotted name from the start of its `\w` run, since the first
# `[A-Za-z_]` of a run starts one if any position of the run does (they all reach the run's end
# and look at what follows it). One pass, each character scanned a bounded number of times.
_PATH_OR_DOTTED_LINEAR = re.compile(
    r"""
    (?<![\w./-])(?:[\w.-]*/)+[\w.-]+
    | (?<!\w)[^\WA-Za-z_]*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)
    """,
    re.VERBOSE,
)
# `_NAME_RE` with paths at a chunk's start only, run on the text between long chunks: there a
# position costs at most the rest of its chunk (under 32 characters), and the regex engine
# keeps ordinary text fast; the scan below (`_names_in_run`) takes the long chunks.
_NAME_SHORT_CHUNKS = re.compile(r"(?<![\w./-])" + _NAME_RE.pattern.lstrip(), re.VERBOSE)
_LONG_CHUNK = re.compile(r"(?<![\w./-])[\w./-]{32,}")


def _chunk_path(chunk: str) -> str | None:
    """The path match of a chunk (at its start), or None when it holds no path."""
    kept = chunk.rstrip("/")
    return kept if "/" in kept else None


def _dotted_matches(text: str) -> Iterator[str]:
    """`_PATH_OR_DOTTED_RE.finditer(text)`'s matches, in linear time."""
    for match in _PATH_OR_DOTTED_LINEAR.finditer(text):
        yield match.group(1) or match.group(0)


def _name_matches(text: str) -> Iterator[str]:
    """`_NAME_RE.finditer(text)`'s matches, in linear time."""
    at = 0
    for chunk in _LONG_CHUNK.finditer(text):
        yield from (m.group() for m in _NAME_SHORT_CHUNKS.finditer(text, at, chunk.start()))
        at = chunk.end()
        path = _chunk_path(chunk.group())
        if path is not None:
            yield path
            continue
        resume = chunk.start()  # a dotted name goes on past its run
        for run in _WORD_RUN.finditer(text, chunk.start(), chunk.end()):
            if run.start() >= resume:
                resume = yield from _names_in_run(text, run.start(), run.end())
    yield from (m.group() for m in _NAME_SHORT_CHUNKS.finditer(text, at))


def _names_in_run(text: str, start: int, end: int) -> Generator[str, None, int]:
    """The names matched from the word run `text[start:end]`; returns where they end."""
    dotted = text.startswith(".", end) and _LETTER_OR_UNDERSCORE.match(text, end + 1) is not None
    underscore = text.rfind("_", start + 1, end - 1)  # snake_case needs one with \w around it
    at = start
    lowercase_end = start
    while at < end:
        # Only numbers and hex ids can start before the first ASCII letter (or `_`).
        first = (_LETTER_OR_UNDERSCORE if dotted else _LETTER).search(text, at, end)
        letter = end if first is None else first.start()
        number = _NUMBER_OR_HEX.search(text, at, end)
        if number is not None and number.start() < letter:
            yield number.group()
            at = number.end()
            continue
        if first is None:
            return end
        if dotted:  # the dotted alternative comes first and matches at any letter of the run
            tail = _DOTTED_TAIL.match(text, end)
            assert tail is not None  # `dotted` says the run is followed by one
            yield text[letter : tail.end()]
            return tail.end()
        if underscore > letter:  # snake_case, second, matches to the run's end
            yield text[letter:end]
            return end
        # camelCase, CamelCase, numbers, hex ids. A lowercase run reached past its start
        # (after a number or hex id) is tried here; the search tries runs from their starts.
        if letter >= lowercase_end:  # not a run already found to start no camelCase
            if _CAMEL_FROM_RUN_START.match(text, letter, end) is not None:
                yield text[letter:end]
                return end
            lowercase = _LOWERCASE.match(text, letter)
            lowercase_end = lowercase.end() if lowercase else letter
        found = _CAMEL_OR_NUMBER.search(text, letter, end)
        if found is None:
            return end
        yield found.group()
        at = found.end()
    return end


def _long_enough(matches: Iterator[str]) -> Iterator[str]:
    """The matches without their leading and trailing `./-`, of 4 characters or more."""
    return (name for name in (m.strip("./-") for m in matches) if len(name) >= 4)


def names_in(text: str) -> set[str]:
    """The distinctive names in `text` (4 characters or more)."""
    out: set[str] = set()
    for name in _long_enough(_name_matches(text)):
        hex_like = re.fullmatch(r"[0-9a-f]+", name) is not None
        mixed = re.search(r"\d", name) and re.search(r"[a-f]", name)
        if hex_like and not mixed and not re.fullmatch(r"\d{5,}", name):
            continue  # a plain lowercase word or a short number: not distinctive
        out.add(name)
    return out


def path_names_in(text: str) -> set[str]:
    """The stricter definition of a name: paths and dotted names only (4 characters or more).

    Recall under this definition is reported beside `names_in`'s, so that a win does not
    hang on what counts as a name (snake and camel identifiers, numbers and hex ids are left
    out: the likeliest to be words or noise).
    """
    return set(_long_enough(_dotted_matches(text)))


def _used_text(message: AIMessage) -> str:
    parts = [text_of(message)]
    for call in message.tool_calls:
        parts.append(str(call.get("args", "")))
    return "\n".join(parts)


def shown_text(prompt: Sequence[BaseMessage]) -> str:
    """The text of every message of `prompt`, one after the other: what it shows."""
    return "\n".join(text_of(m) for m in prompt)


@dataclass(slots=True)
class _Need:
    """One name the next step uses and the tool-output lines that show it."""

    name: str
    lines: list[str]

    def shown_in(self, shown: str) -> bool:
        """Whether `shown` (`shown_text` of a prompt) holds one of the lines."""
        return any(line in shown for line in self.lines)


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
    def of(
        cls,
        messages: Sequence[BaseMessage],
        names: Callable[[str], set[str]] = names_in,
    ) -> NextStepRecall:
        """Work out, for each AI message, the names it uses that came from tool output.

        Args:
            messages: The recorded run.
            names: What counts as a name (`names_in`, or the stricter `path_names_in`).
        """
        first_from_tool: dict[str, bool] = {}  # name -> its first sight was a tool output
        lines_of: dict[str, list[str]] = {}  # name -> tool-output lines that carry it
        needs: dict[int, list[_Need]] = {}
        for i, message in enumerate(messages):
            if isinstance(message, AIMessage) and i > 0:
                used = names(_used_text(message))
                found = [
                    _Need(name, list(lines_of.get(name, ())))
                    for name in sorted(used)
                    if first_from_tool.get(name) and lines_of.get(name)
                ]
                needs[i] = found
            if isinstance(message, ToolMessage):
                text = text_of(message)
                for name in names(text):
                    first_from_tool.setdefault(name, True)
                for raw in text.splitlines():
                    line = raw.strip()
                    if len(line) < MIN_LINE_CHARS:
                        continue
                    for name in names(line):
                        bucket = lines_of.setdefault(name, [])
                        if line not in bucket:
                            bucket.append(line)
                            if len(bucket) > 50:  # the newest lines are the likeliest shown
                                del bucket[0]
            else:
                body = _used_text(message) if isinstance(message, AIMessage) else text_of(message)
                for name in names(body):
                    first_from_tool.setdefault(name, False)
        return cls(needs=needs)

    def score(self, index: int, prompt: Sequence[BaseMessage]) -> tuple[int, int]:
        """Count the call before `messages[index]`: (names shown, names used)."""
        needs = self.needs.get(index) or []
        if not needs:
            return 0, 0
        shown = shown_text(prompt)
        hits = sum(need.shown_in(shown) for need in needs)
        self.hits += hits
        self.total += len(needs)
        return hits, len(needs)

    def skip(self, index: int) -> None:
        """Count a call that sent no prompt (the system raised): nothing shown."""
        self.total += len(self.needs.get(index) or [])


_HIT_LINE = re.compile(r"^> \d+: (.*)$", re.M)


def one_search(
    search: Callable[[str], str], needs: Sequence[Any], prompt: Sequence[BaseMessage]
) -> tuple[int, int]:
    """One-search recall at one call: `(found, missed)`.

    Of the `needs` (`NextStepRecall.needs[i]`) whose lines `prompt` no longer shows (missed),
    how many one search finds: the query is the name itself, as an agent would type it, and a
    need is found when a hit line (not a context line) of the answer `search(name)` gives (the
    `search_history` answer, limited to 3 hits) is part of one of its source lines.
    """
    shown = shown_text(prompt)
    missed = [n for n in needs if not n.shown_in(shown)]
    found = 0
    for need in missed:
        # A long hit line is shown cut around the match ("…" at a cut end): its visible part
        # must be part of a source line.
        hits = [h.strip().strip("…").strip() for h in _HIT_LINE.findall(search(need.name))]
        found += any(hit and any(hit[:120] in line for line in need.lines) for hit in hits)
    return found, len(missed)
