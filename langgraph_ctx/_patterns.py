"""Patterns a model or a user writes, matched within a time bound.

A regular expression from a tool call is input nobody checked: `^(a+)+$` against a line of
28 `a`s and a `b` takes Python's `re` seconds, doubling with every character, and a worker
running it hangs. `re` cannot be interrupted; the `regex` engine (which tiktoken already
needs) takes a `timeout`. `BoundedPattern` holds one deadline for a whole search, so a search
over many lines costs at most its budget however the pattern behaves, and the caller says
what to do instead when it runs out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import regex

from langgraph_ctx.errors import shorten

__all__ = ["MAX_PATTERN_CHARS", "BoundedPattern", "PatternTimeoutError", "compile_pattern"]

MAX_PATTERN_CHARS = 1_000
"""Longest pattern accepted; longer ones are refused before they are compiled."""


class PatternTimeoutError(ValueError):
    """A search ran out of its time budget."""


@dataclass(frozen=True)
class BoundedPattern:
    """A compiled pattern and the text it came from."""

    text: str
    compiled: regex.Pattern[str]

    def search(self, line: str, deadline: float) -> bool:
        """Whether `line` matches, within `deadline` (a `time.monotonic()` value).

        Raises:
            PatternTimeoutError: The deadline passed, before or during the match.
        """
        return self.find(line, 0, deadline) >= 0

    def find(self, text: str, pos: int, deadline: float) -> int:
        """Where the first match at or after `pos` starts, or -1; within `deadline`.

        Raises:
            PatternTimeoutError: The deadline passed, before or during the match.
        """
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PatternTimeoutError(self._slow())
        try:
            # `concurrent=False`: keep the GIL. `regex` lets go of it at each search otherwise,
            # and beside a thread running Python getting it back takes the switch interval
            # (5 ms) a search: a server's search of a plain pattern ran out of its budget.
            found = self.compiled.search(text, pos, timeout=remaining, concurrent=False)
        except TimeoutError:
            raise PatternTimeoutError(self._slow()) from None
        return -1 if found is None else found.start()

    def _slow(self) -> str:
        return (
            f"the pattern {shorten(self.text, 60)} ran out of time; use a simpler one (plain "
            "words, no nested repetition such as (a+)+)"
        )


def compile_pattern(
    text: str, *, ignore_case: bool = True, multiline: bool = False
) -> BoundedPattern:
    """Compile `text` (a regular expression, Python syntax) for bounded searches.

    `multiline` lets `^` and `$` match at every line of a text searched whole.

    Raises:
        ValueError: Empty, longer than `MAX_PATTERN_CHARS`, or not a valid pattern; the
            message quotes a bounded prefix of it.
    """
    if not isinstance(text, str) or not text:
        msg = "the pattern is empty; pass the words or the regular expression to look for"
        raise ValueError(msg)
    if len(text) > MAX_PATTERN_CHARS:
        msg = (
            f"the pattern is {len(text):,} characters long, over {MAX_PATTERN_CHARS:,}; "
            f"search for a shorter part of it ({shorten(text, 40)})"
        )
        raise ValueError(msg)
    flags = (regex.IGNORECASE if ignore_case else 0) | (regex.MULTILINE if multiline else 0)
    try:
        return BoundedPattern(text, regex.compile(text, flags))
    except (regex.error, OverflowError, RecursionError) as exc:
        msg = f"{shorten(text, 60)} is not a valid regular expression: {shorten(str(exc), 80)}"
        raise ValueError(msg) from None
