"""Patterns a model or a user writes, matched within a time bound.

A regular expression from a tool call is input nobody checked: `^(a+)+$` against a line of
28 `a`s and a `b` takes Python's `re` seconds, doubling with every character, and a worker
running it hangs. `re` cannot be interrupted; the `regex` engine (which tiktoken already
needs) takes a `timeout`. `BoundedPattern` holds one deadline for a whole search, so a search
over many lines costs at most its budget however the pattern behaves, and the caller says
what to do instead when it runs out.

Compiling is bounded too, before it starts: a counted repetition is compiled as that many
copies of what it repeats, so the 13 characters `a{4294967294}` ask for more memory than a
host has and `(a{1000}){1000}` for a million copies. `compile_pattern` estimates the
compiled size (`compiled_size`: nested counts multiply) and refuses a pattern over
`MAX_COMPILED_SIZE`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import regex

from langgraph_ctx.errors import shorten

__all__ = [
    "MAX_COMPILED_SIZE",
    "MAX_PATTERN_CHARS",
    "BoundedPattern",
    "PatternTimeoutError",
    "check_length",
    "compile_pattern",
    "compiled_size",
]

MAX_PATTERN_CHARS = 1_000
"""Longest pattern accepted; longer ones are refused before they are compiled."""

MAX_COMPILED_SIZE = 10_000
"""Most pieces a pattern may compile to (`compiled_size`): what `regex` takes a piece, in
memory and in time, keeps a compile within a few megabytes and milliseconds (figures in
docs/benchmarks.md)."""


class PatternTimeoutError(ValueError):
    """A search ran out of its time budget."""


@dataclass(frozen=True)
class BoundedPattern:
    """A compiled pattern and the text it came from."""

    text: str
    compiled: regex.Pattern[str]

    def search(self, line: str, deadline: float, *, cpu_seconds: float | None = None) -> bool:
        """Whether `line` matches, within `deadline` (a `time.monotonic()` value).

        Raises:
            PatternTimeoutError: The deadline passed, before or during the match, or the
                match took more than `cpu_seconds` (see `find`).
        """
        return self.find(line, 0, deadline, cpu_seconds=cpu_seconds) >= 0

    def find(
        self,
        text: str,
        pos: int,
        deadline: float,
        endpos: int | None = None,
        *,
        cpu_seconds: float | None = None,
    ) -> int:
        """Where the first match in `text[pos:endpos]` starts, or -1; within `deadline`.

        `regex` counts its timeout in the process's processor time, not on the wall clock: on
        a busy host a timeout ends well after that much wall-clock time. `cpu_seconds` cuts
        one call shorter than what is left of the deadline, so a caller with a short
        wall-clock budget looks at the clock that often.

        Raises:
            PatternTimeoutError: The deadline passed, before or during the match, or the
                match took more than `cpu_seconds` of processor time.
        """
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PatternTimeoutError(self._slow())
        try:
            # `concurrent=False`: keep the GIL. `regex` lets go of it at each search otherwise,
            # and beside a thread running Python getting it back takes the switch interval
            # (5 ms) a search: enough for a server's search of a plain pattern to run out of
            # its budget.
            found = self.compiled.search(
                text,
                pos,
                endpos,
                timeout=remaining if cpu_seconds is None else min(remaining, cpu_seconds),
                concurrent=False,
            )
        except TimeoutError:
            raise PatternTimeoutError(self._slow()) from None
        return -1 if found is None else found.start()

    def _slow(self) -> str:
        return (
            f"the pattern {shorten(self.text, 60)} ran out of time; use a simpler one (plain "
            "words, no nested repetition such as (a+)+)"
        )


_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
"""A counted repetition: `{n}`, `{n,}`, `{n,m}`, `{,m}` (digits only; `{e<=1}` is fuzzy)."""

_BRACED_ESCAPES = frozenset("pPNxuUgk")
"""Escapes that may take a `{...}` argument (`\\p{L}`, `\\N{name}`, `\\x{263a}`)."""


def compiled_size(text: str) -> int:
    """About how many pieces `regex` compiles `text` to; nested counts multiply.

    Each counted repetition copies what it repeats as often as its lower bound (`a{5,}` five
    times, `a{0,9}` once), so `(a{1000}){1000}` is a million.

    An estimate that never under-counts the copies: a `{n}` inside a comment or a verbose
    pattern's `#` note counts too, so such a pattern may be refused, never compiled unbounded.
    """
    groups = [0]  # the size of each open group, outermost first
    last = 0  # the size of the atom a count would repeat (0: none, a count there is literal)
    at, size = 0, len(text)
    while at < size:
        char = text[at]
        if char == "\\":
            at += 2
            if at < size and text[at - 1] in _BRACED_ESCAPES and text[at] == "{":
                close = text.find("}", at)
                at = size if close < 0 else close + 1
            groups[-1] += 1
            last = 1
            continue
        if char == "[":
            at = _class_end(text, at)
            groups[-1] += 1
            last = 1
            continue
        if char == "(":
            groups.append(0)
            last = 0
        elif char == ")" and len(groups) > 1:
            inner = max(groups.pop(), 1)
            groups[-1] += inner
            last = inner
        elif char == "{" and last:
            count = _COUNT.match(text, at)
            if count is not None:
                copies = max(int(count.group(1) or 0), 1)
                groups[-1] += last * (copies - 1)
                last *= copies
                at = count.end()
                continue
            groups[-1] += 1
            last = 1
        else:
            groups[-1] += 1
            last = 1 if char not in "|^$" else 0
        at += 1
    while len(groups) > 1:  # an unclosed group: `regex` refuses it, count it anyway
        inner = groups.pop()
        groups[-1] += inner
    return groups[0]


def _class_end(text: str, at: int) -> int:
    """Where the character class opening at `text[at]` (a `[`) ends (after its `]`)."""
    at += 1
    if text.startswith("^", at):
        at += 1
    if text.startswith("]", at):  # a `]` first is a literal
        at += 1
    while at < len(text):
        if text[at] == "\\":
            at += 2
            continue
        if text[at] == "]":
            return at + 1
        at += 1
    return at


def check_length(text: str, limit: int, *, what: str, instead: str) -> None:
    """Refuse search text longer than `limit` characters, before any work is spent on it.

    Raises:
        ValueError: `text` is longer; the message names `what` it is, its length and the
            bound, says what to search for `instead`, and quotes a bounded prefix of it.
    """
    if len(text) > limit:
        msg = (
            f"{what} is {len(text):,} characters long, over {limit:,}; "
            f"search for {instead} ({shorten(text, 40)})"
        )
        raise ValueError(msg)


def compile_pattern(
    text: str, *, ignore_case: bool = True, multiline: bool = False
) -> BoundedPattern:
    """Compile `text` (a regular expression, Python syntax) for bounded searches.

    `multiline` lets `^` and `$` match at every line of a text searched whole.

    Raises:
        ValueError: Empty, longer than `MAX_PATTERN_CHARS`, compiling to more than
            `MAX_COMPILED_SIZE` pieces (`compiled_size`), or not a valid pattern; the message
            quotes a bounded prefix of it.
    """
    if not isinstance(text, str) or not text:
        msg = "the pattern is empty; pass the words or the regular expression to look for"
        raise ValueError(msg)
    check_length(text, MAX_PATTERN_CHARS, what="the pattern", instead="a shorter part of it")
    pieces = compiled_size(text)
    if pieces > MAX_COMPILED_SIZE:
        msg = (
            f"the pattern {shorten(text, 60)} repeats too much: a count such as {{1000}} "
            f"copies what it repeats, and this one would compile to about {pieces:,} pieces, "
            f"over {MAX_COMPILED_SIZE:,}; use + or * (a+ rather than a{{5000}}) or a smaller count"
        )
        raise ValueError(msg)
    flags = (regex.IGNORECASE if ignore_case else 0) | (regex.MULTILINE if multiline else 0)
    try:
        return BoundedPattern(text, regex.compile(text, flags))
    except (regex.error, OverflowError, RecursionError) as exc:
        msg = f"{shorten(text, 60)} is not a valid regular expression: {shorten(str(exc), 80)}"
        raise ValueError(msg) from None
