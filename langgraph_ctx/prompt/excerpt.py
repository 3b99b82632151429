"""Excerpts: which lines of a tool output stay in view once the output is shortened.

An agent's next step mostly quotes names it read in earlier tool output (a path, a function,
an id, a line number), and the names it already quoted are the likeliest to come back. So
when an output is shortened, it keeps its first and last lines (what it was, how it ended) and
every line that carries a name a later model message used; a summary keeps such lines of what
it replaces the same way. A "name" here is any identifier-like word: one with an underscore,
a dot, a slash, a digit beside a letter, an inner capital, or a number of four digits or more.
Nothing here looks for a particular format.

Pure functions on text and messages; the strategies decide when to use them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx._lru import LRUCache
from langgraph_ctx.messages.content import is_tool_output, text_of

__all__ = ["LaterUse", "excerpt_lines", "quoted_lines", "render_excerpt", "salient_names"]

_WORD = re.compile(r"[\w$@#:./\\-]+")
_EDGES = ".:,;/\\-#@$"
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
MAX_LINE_CHARS = 400
"""A kept line longer than this is cut (a minified blob is not a line worth quoting)."""


_PARTS = re.compile(r"[/:\\]+")


def _is_salient(word: str) -> bool:
    if len(word) < 4:
        return False
    if word.isalpha():  # most words of a tool output: only an inner capital makes them names
        return _INNER_CAPITAL.search(word) is not None
    if word.isdigit():
        return True
    has_alpha = any(c.isalpha() for c in word)
    if not has_alpha:
        return False
    return (
        "_" in word
        or "." in word
        or "/" in word
        or any(c.isdigit() for c in word)
        or _INNER_CAPITAL.search(word) is not None
    )


def salient_names(text: str) -> frozenset[str]:
    """The identifier-like names in `text`, with the parts of paths and dotted names."""
    names = _TEXT_NAMES.peek(text)
    if names is None:
        names = _salient_names(text)
        _TEXT_NAMES.put(text, names)
    return names


def _salient_names(text: str) -> frozenset[str]:
    names: set[str] = set()
    known = _WORD_NAMES.peek
    for raw in _WORD.findall(text):
        if len(raw) < 4 or (raw.islower() and raw.isalpha()):
            continue  # most words of an output: too short, or a plain word (no name, no parts)
        found = known(raw)
        if found is None:
            found = _word_names(raw)
            _WORD_NAMES.put(raw, found)
        names.update(found)
    return frozenset(names)


def _names_size(word: str, names: tuple[str, ...]) -> int:
    """The bytes of a word's names: the word, the tuple and each name in it."""
    return sys.getsizeof(word) + sys.getsizeof(names) + sum(map(sys.getsizeof, names))


_WORD_NAMES: LRUCache[str, tuple[str, ...]] = LRUCache(8 << 20, size=_names_size)
"""The names each word seen gives: an output repeats its names line after line (read with
`peek`, which costs less than looking at the word again)."""
_TEXT_NAMES: LRUCache[str, frozenset[str]] = LRUCache(32 << 20)
"""`salient_names` by text (a message, a line), asked again on every build. Measured shallow
(`measured`): the names in a set are the strings `_WORD_NAMES` keeps and measures. Read with
`peek`, so texts leave in the order their names were made (made again when asked after)."""


def _word_names(raw: str) -> tuple[str, ...]:
    word = raw.strip(_EDGES)
    names = [word] if _is_salient(word) else []
    if len(word) > 4 and ("/" in word or ":" in word or "." in word):
        for part in _PARTS.split(word):
            part = part.strip(_EDGES)
            if part != word and _is_salient(part):
                names.append(part)
    return tuple(names)


def line_names(text: str) -> tuple[frozenset[str], ...]:
    """`salient_names` of each line of `text` (`str.splitlines`), read once per output.

    Excerpts and quotes read every line of every output on each edit; a cache per line
    (`salient_names`') is outrun by outputs of thousands of lines, one per whole text is not,
    so a line's names are looked up there but not added (most lines of an output are its own).
    """
    names = _LINE_NAMES.get(text)
    if names is None:
        known = _TEXT_NAMES.peek
        names = tuple(
            _salient_names(line) if (found := known(line)) is None else found
            for line in text.splitlines()
        )
        _LINE_NAMES.put(text, names)
    return names


def _line_names_size(text: str, names: tuple[frozenset[str], ...]) -> int:
    """The bytes of an output's line names: the text, the tuple and each line's set."""
    return sys.getsizeof(text) + sys.getsizeof(names) + sum(map(sys.getsizeof, names))


_LINE_NAMES: LRUCache[str, tuple[frozenset[str], ...]] = LRUCache(8 << 20, size=_line_names_size)
"""`line_names` by whole text: every output an edit reads, with each line's set of names (the
names in the sets are the strings `_WORD_NAMES` keeps and measures)."""


def _message_names(message: BaseMessage) -> frozenset[str]:
    parts = [text_of(message)]
    if isinstance(message, AIMessage):
        parts.extend(str(call.get("args", "")) for call in message.tool_calls)
    return salient_names("\n".join(parts))


@dataclass(slots=True)
class LaterUse:
    """Where each name was last used by a model message of a history (its index)."""

    last: dict[str, int] = field(default_factory=dict)
    newest: int = -1
    """Index of the newest model message scanned (-1: none)."""

    @classmethod
    def of(cls, history: Sequence[BaseMessage], start: int = 0) -> LaterUse:
        """Scan the model messages of `history[start:]`."""
        last: dict[str, int] = {}
        newest = -1
        for i in range(start, len(history)):
            message = history[i]
            if isinstance(message, AIMessage):
                newest = i
                for name in _message_names(message):
                    last[name] = i
        return cls(last, newest)

    def used_after(self, index: int, names: Iterable[str]) -> int:
        """The newest index after `index` where one of `names` was used (-1: none)."""
        last = self.last
        if last.keys().isdisjoint(names):  # most lines: no name a model message used
            return -1
        newest = max(last.get(name, -1) for name in names)
        return newest if newest > index else -1


def _clip(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}... [{len(line) - MAX_LINE_CHARS:,} more chars]"


def excerpt_lines(
    text: str,
    *,
    index: int,
    later: LaterUse,
    head: int = 2,
    tail: int = 2,
    max_chars: int = 1_500,
    seen: Set[str] | None = None,
) -> list[int]:
    """The lines of the output at history `index` to keep: head, tail, and lines used later.

    Lines that carry a name a later model message used are kept newest use first until
    `max_chars` of them; the result is in line order. An output no model message has
    answered yet (one shortened as it arrives) keeps the lines with a name any model message
    used: what the agent has been working with. With `seen` (the names the prompt showed
    before this output), the room those lines leave of `max_chars` is filled with lines
    carrying names not in `seen`, most such names first: what the output tells the agent
    that nothing else did.
    """
    if index > later.newest:
        index = -1
    lines = text.splitlines()
    names = line_names(text)
    keep = set(range(min(head, len(lines))))
    keep.update(range(max(0, len(lines) - tail), len(lines)))
    ranked: list[tuple[int, int]] = []
    for k, line in enumerate(lines):
        if k in keep or not line.strip():
            continue
        used = later.used_after(index, names[k])
        if used >= 0:
            ranked.append((-used, k))
    spent = _fill(keep, sorted(ranked), lines, 0, max_chars)
    if seen is not None:
        news = sorted(
            (-len(names[k] - seen), k)
            for k, line in enumerate(lines)
            if k not in keep and line.strip() and not names[k] <= seen
        )
        _fill(keep, news, lines, spent, max_chars)
    return sorted(keep)


def _fill(
    keep: set[int], ranked: list[tuple[int, int]], lines: list[str], spent: int, max_chars: int
) -> int:
    """Add the lines of `ranked` (best first) to `keep` while `max_chars` has room for them.

    A line costs its clipped length; one too long for the room left is passed over for the
    shorter ones after it. Returns the characters spent.
    """
    for _, k in ranked:
        size = min(len(lines[k]), MAX_LINE_CHARS)
        if spent + size > max_chars:
            continue
        keep.add(k)
        spent += size
    return spent


def render_excerpt(text: str, kept: Sequence[int]) -> str:
    """The kept lines of `text`, with a note of how many lines each gap left out."""
    lines = text.splitlines()
    out: list[str] = []
    previous = -1
    for k in kept:
        if k >= len(lines):
            break
        if k > previous + 1:
            out.append(f"[... {k - previous - 1:,} lines ...]")
        out.append(_clip(lines[k]))
        previous = k
    if previous < len(lines) - 1:
        out.append(f"[... {len(lines) - 1 - previous:,} lines ...]")
    return "\n".join(out)


def quoted_lines(
    covered: Sequence[BaseMessage],
    *,
    later: LaterUse,
    positions: dict[str, int],
    previous: Sequence[str] = (),
    max_chars: int,
    repeats: bool = False,
) -> list[str]:
    """Whole tool-output lines of `covered` that a later model message used, for a summary.

    Newest use first, then the lines an earlier summary quoted, until `max_chars`; each line
    once, in the order they were written. A line is quoted only when it carries a name no
    line quoted before it carries: one line shows a name as well as ten, and the room goes to
    more names (with `repeats`, every used line is quoted while room is left). A line longer
    than half of `max_chars` (and than `MAX_LINE_CHARS`) is never quoted: it would crowd out
    the rest.
    """
    # A record on one line (a JSON object, a CSV row) is what the agent reuses whole: a quoted
    # line may take up to half the budget, so at least two lines always fit.
    longest = max(MAX_LINE_CHARS, max_chars // 2)
    ranked: list[tuple[int, int, str]] = []
    for order, line in enumerate(previous):  # written first; kept after every new line used
        ranked.append((1, order, line))
    order = len(previous)
    for message in covered:
        if not is_tool_output(message):
            continue
        index = positions.get(message.id or "", -1)
        text = text_of(message)
        for raw, names in zip(text.splitlines(), line_names(text), strict=True):
            line = raw.strip()
            if len(line) < 20 or len(line) > longest:
                continue
            used = later.used_after(index, names)
            if used >= 0:
                ranked.append((-used, order, line))
                order += 1
    ranked.sort()
    kept: dict[str, int] = {}
    carried: set[str] = set()
    spent = 0
    for _, at, line in ranked:
        if line in kept or spent + len(line) + 1 > max_chars:
            continue
        if not repeats:
            # On a long run the same names come back in many lines (a path in every grep
            # hit, a class in every traceback): a line that brings no new name only repeats.
            names = salient_names(line)
            if names <= carried:
                continue
            carried |= names
        kept[line] = at
        spent += len(line) + 1
    return sorted(kept, key=kept.__getitem__)
