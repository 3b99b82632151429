"""The pure core of archive search: queries and searchable entries.

Nothing here does I/O; `search.py` lists and reads the archive and renders the answer.

A query is words, "quoted phrases", or (with `regex=True`) one regular expression compiled by
`langgraph_ctx._patterns.compile_pattern` and matched under one deadline for the whole
search (Python's `re` never sees model input). Words and phrases match case-insensitively
(`str.casefold`) as substrings of a line; every quoted phrase must be on the line, words are
optional but at least one term must be there.

Each entry is searched line by line, numbered as `recall` numbers them (`recall_text(...)
.splitlines()`), so a hit's line number is the one `recall(ref, start_line=..., end_line=...)`
shows. An insurance dump (`messages`) is one text for recall; each line also knows which of
its messages it came from.

Which lines match, and in what order, is `ranking`'s rule (`find_hits`).

A line repeated verbatim (in one output, or in outputs that read the same file again) is
shown once in an answer, with its count (`search_answer`).
"""

from __future__ import annotations

import bisect
import re
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal, cast, get_args

from langchain_core.messages import BaseMessage, ToolMessage, get_buffer_string

from langgraph_ctx._ids import RefKind
from langgraph_ctx._patterns import BoundedPattern, check_length, compile_pattern
from langgraph_ctx.errors import shorten
from langgraph_ctx.ledger.summary import parse_dump_index
from langgraph_ctx.messages.content import text_of

__all__ = [
    "EVERY_LINE",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "LineFilter",
    "Query",
    "SearchKind",
    "SearchableEntry",
    "Source",
    "line_filter",
    "parse_query",
    "recall_text",
    "searchable_entry",
    "sparse_entry",
]

SearchKind = Literal["any", "tool", "turn", "summarized"]
"""Which lines to search: all, tool outputs, shortened AI turns, or summarized messages."""

MAX_QUERY_CHARS = 1_000
"""Longest query accepted (words, phrases or a pattern)."""

MAX_TERMS = 20
"""Most words and phrases in one query."""

_LINE_ONLY = re.compile(r"\(\?(?!:)|\\[AZzGK]")
"""Pattern syntax whose meaning on a whole text can differ from a line alone: group
extensions other than `(?:` (lookarounds, inline flags such as `(?-m)`) and the anchors and
`\\K` that see the text's ends or move where a match starts."""


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query. Build it with `parse_query`."""

    text: str
    """The query as given (already checked to be at most `MAX_QUERY_CHARS`)."""
    phrases: tuple[str, ...] = ()
    """Quoted phrases, casefolded, whitespace collapsed: each must be on a matching line."""
    words: tuple[str, ...] = ()
    """Unquoted words, casefolded: a line needs at least one unless it has every phrase."""
    whole: str | None = None
    """Every term in order, one phrase (the best tier); None for one term or a pattern."""
    pattern: BoundedPattern | None = None
    """The compiled regular expression (regex mode), matched line by line."""
    prefilter: BoundedPattern | None = None
    """The pattern with `^`/`$` at each line, run on an entry's whole text first; None when
    the pattern could match a line alone but not the whole text (lookarounds, `\\A`...)."""


def parse_query(text: str, *, regex: bool = False) -> Query:
    """Parse the search text of a tool call.

    Raises:
        ValueError: Empty, too long, too many terms, or a bad pattern; the message quotes a
            bounded prefix of the query.
    """
    if not isinstance(text, str):
        msg = f"the query must be text, got {type(text).__name__}"
        raise ValueError(msg)
    check_length(text, MAX_QUERY_CHARS, what="the query", instead="a few distinctive words of it")
    if regex:
        pattern = compile_pattern(text)
        risky = _LINE_ONLY.search(text) is not None
        prefilter = None if risky else compile_pattern(text, multiline=True)
        return Query(text=text, pattern=pattern, prefilter=prefilter)
    phrases: list[str] = []
    words: list[str] = []
    order: list[str] = []
    for n, part in enumerate(text.split('"')):  # odd parts sat between quotes
        if n % 2:
            phrase = " ".join(part.split()).casefold()
            if phrase and phrase not in phrases:
                phrases.append(phrase)
            order.extend(phrase.split())
            continue
        for word in part.split():
            folded = word.casefold()
            order.append(folded)
            if folded not in words:
                words.append(folded)
    if not phrases and not words:
        msg = 'the query is empty; pass a few words or a "quoted phrase" to look for'
        raise ValueError(msg)
    if len(phrases) + len(words) > MAX_TERMS:
        msg = (
            f"the query has {len(phrases) + len(words)} words and phrases, over {MAX_TERMS}; "
            f"keep the most distinctive ones ({shorten(text, 40)})"
        )
        raise ValueError(msg)
    whole = " ".join(order) if len(order) > 1 else None
    return Query(text=text, phrases=tuple(phrases), words=tuple(words), whole=whole)


@dataclass(frozen=True, slots=True)
class Source:
    """The message a line came from."""

    type: str
    """The message type (`tool`, `ai`, `human`, `system`), or `text` for a text entry."""
    message_id: str | None = None
    """The message's id."""
    tool_name: str | None = None
    """The tool that produced a tool output."""
    tool_call_id: str | None = None
    """The call a tool output answers."""
    position: int | None = None
    """1-based place of the message in an insurance dump; None for a single message."""
    count: int | None = None
    """How many messages the dump holds."""


@dataclass(frozen=True, slots=True)
class SearchableEntry:
    """One archive entry decoded for searching (immutable, so it can be cached by reference).

    Lines are kept as one text with their start offsets (an `array` of machine integers: a
    tuple of Python ints costs 36 bytes a line, more than a short line's text), and once more
    casefolded; the casefolded text and offsets are the same objects when casefolding changed
    nothing (a log in lower case), so they cost nothing twice.
    """

    ref: str
    """The entry's reference."""
    kind: RefKind
    """What the entry holds."""
    text: str
    """The lines joined by `\\n` (the recall text without its line separators)."""
    starts: array[int]
    """Offset in `text` of each line."""
    folded: str
    """Each line casefolded, joined by `\\n`."""
    folded_starts: array[int]
    """Offset in `folded` of each line."""
    segments: tuple[tuple[int, Source], ...]
    """`(first line index, source)` runs, ascending: the lines from each message."""

    @property
    def n_lines(self) -> int:
        """How many lines the entry has."""
        return len(self.starts)

    @property
    def size(self) -> int:
        """The bytes the entry holds in memory (for the cache's budget), measured.

        `sys.getsizeof` of each part it owns, once for a part shared, and of its sources'
        strings: what keeping the entry costs, not the length of its text (a text of short
        lines keeps an offset for every few characters).
        """
        parts: list[object] = [self, self.text, self.starts, self.segments]
        if self.folded is not self.text:
            parts.append(self.folded)
        if self.folded_starts is not self.starts:
            parts.append(self.folded_starts)
        for segment in self.segments:
            source = segment[1]
            parts.extend((segment, source, *(v for v in _source_fields(source) if v)))
        return sum(sys.getsizeof(part) for part in parts) + _CACHE_SLOT_BYTES

    def line(self, index: int) -> str:
        """Line `index` (0-based)."""
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[index] : end]

    def folded_line(self, index: int) -> str:
        """Line `index` (0-based), casefolded."""
        starts = self.folded_starts
        end = starts[index + 1] - 1 if index + 1 < len(starts) else len(self.folded)
        return self.folded[starts[index] : end]

    def segment(self, index: int) -> tuple[int, int, Source]:
        """`(first, end, source)` of the message line `index` came from (line indexes)."""
        if len(self.segments) == 1:
            return 0, self.n_lines, self.segments[0][1]
        at = bisect.bisect_right(self.segments, index, key=lambda s: s[0]) - 1
        first, source = self.segments[at]
        end = self.segments[at + 1][0] if at + 1 < len(self.segments) else self.n_lines
        return first, end, source


_CACHE_SLOT_BYTES = 160
"""A cache's own cost per entry kept: its key's string and the ordered dict's slot."""


def _source_fields(source: Source) -> tuple[object, ...]:
    return (source.type, source.message_id, source.tool_name, source.tool_call_id)


def _source(message: BaseMessage, position: int | None = None, count: int | None = None) -> Source:
    tool = message if isinstance(message, ToolMessage) else None
    return Source(
        type=message.type,
        message_id=message.id,
        tool_name=None if tool is None else tool.name,
        tool_call_id=None if tool is None else tool.tool_call_id,
        position=position,
        count=count,
    )


def _dump_segments(messages: Sequence[BaseMessage], text: str) -> list[tuple[int, Source]]:
    """Which lines of a dump's recall text each message gave (by character offsets)."""
    parts = [get_buffer_string([m]) for m in messages]
    if "\n".join(parts) != text:  # a format we do not know: no per-message attribution
        return [(0, Source(type="messages", count=len(messages)))]
    out: list[tuple[int, Source]] = []
    line, offset, begin = 0, 0, 0
    lines = text.splitlines(keepends=True)
    for n, (message, part) in enumerate(zip(messages, parts, strict=True)):
        end = begin + len(part)
        first = line
        while line < len(lines) and offset < end:  # lines starting inside this message
            offset += len(lines[line])
            line += 1
        if line > first or not out:
            out.append((first, _source(message, n + 1, len(messages))))
        begin = end + 1
    return out


def recall_text(entry: BaseMessage | Sequence[BaseMessage] | str) -> str:
    """The text the recall tool shows for an archive entry (`recall.entry_text`).

    A message gives its content (text blocks joined by newlines, other blocks as JSON), a
    message list gives `get_buffer_string` of the list, text is shown as is.
    """
    if isinstance(entry, str):
        return entry
    if isinstance(entry, BaseMessage):
        return text_of(entry, other_blocks=True)
    return get_buffer_string(list(entry))


def searchable_entry(
    ref: str, kind: RefKind, entry: BaseMessage | Sequence[BaseMessage] | str
) -> SearchableEntry:
    """Decode what `Archive.read` returned into a searchable entry.

    A text that is a dump index (the archive's own list of references) has no lines.
    """
    text = recall_text(entry)
    if isinstance(entry, BaseMessage):
        segments = [(0, _source(entry))]
    elif isinstance(entry, str):
        segments = [(0, Source(type="text"))]
        try:
            parse_dump_index(entry)
        except ValueError:
            pass
        else:  # bookkeeping, not history
            text = ""
    else:
        segments = _dump_segments(entry, text)
    lines = text.splitlines()
    joined = "\n".join(lines)
    starts = _starts(lines)
    # Casefolding maps each character to one or more, never fewer: the same length means
    # the same offsets, and the same text can be the same object.
    folded = joined.casefold()
    if folded == joined:
        folded = joined
    folded_starts = starts if len(folded) == len(joined) else _starts(folded.split("\n"))
    return SearchableEntry(
        ref=ref,
        kind=kind,
        text=joined,
        starts=starts,
        folded=folded,
        folded_starts=folded_starts,
        segments=tuple(segments),
    )


def sparse_entry(
    ref: str,
    kind: RefKind,
    n_lines: int,
    known: Mapping[int, tuple[str | None, str]],
    segments: tuple[tuple[int, Source], ...],
) -> SearchableEntry:
    """An entry of which only some lines are known, the others empty (a database's answer).

    `known` maps a line index to `(line, casefolded line)`, the line None when only its
    casefolded form was read (it then stands in for the line). Searched by `ranking.find_hits`,
    it answers as the whole entry would for a query whose matching lines are all known: a
    line is matched alone, and an empty line matches nothing. Without a known line its text
    is empty, so a search counts its `n_lines` and skips it.
    """
    if not known:
        zeros = array("q", bytes(8 * n_lines))
        return SearchableEntry(ref, kind, "", zeros, "", zeros, segments)
    folded = [""] * n_lines
    shown: list[tuple[int, str]] = []  # lines that differ from their casefolding
    for index, (line, folded_line) in known.items():
        folded[index] = folded_line
        if line is not None and line is not folded_line and line != folded_line:
            shown.append((index, line))
    folded_joined, folded_starts = "\n".join(folded), _short_lived_starts(folded)
    if not shown:  # the common case: one text, as `searchable_entry` keeps it
        return SearchableEntry(
            ref, kind, folded_joined, folded_starts, folded_joined, folded_starts, segments
        )
    lines = folded.copy()
    for index, line in shown:
        lines[index] = line
    joined = "\n".join(lines)
    # Casefolding never shortens a line: the same length means the same offsets.
    starts = folded_starts if len(folded_joined) == len(joined) else _short_lived_starts(lines)
    return SearchableEntry(ref, kind, joined, starts, folded_joined, folded_starts, segments)


def _short_lived_starts(lines: Sequence[str]) -> array[int]:
    """`_starts` for an entry that lives one search (`sparse_entry`): a tuple of ints.

    Made faster than an array, and a tuple of numbers is one the garbage collector stops
    tracking at its first pass (an array it tracks while it lives): the entries a search of a
    common word builds then do not bring Python's full collection sooner.
    """
    if not lines:
        return array("q")
    return cast("array[int]", tuple(accumulate((len(line) + 1 for line in lines[:-1]), initial=0)))


def _starts(lines: Sequence[str]) -> array[int]:
    """Offset of each line in the lines joined by line breaks."""
    if not lines:
        return array("q")
    return array("q", accumulate((len(line) + 1 for line in lines[:-1]), initial=0))


_REF_KINDS: dict[SearchKind, tuple[RefKind, ...]] = {
    "any": ("message", "messages", "text"),
    "tool": ("message",),
    "turn": ("message",),
    "summarized": ("messages",),
}
"""The entries each kind of line can be in (a summarized message is in an insurance dump)."""


@dataclass(frozen=True, slots=True)
class LineFilter:
    """Which lines a search looks at: the `kind` and `tool` filters, interpreted here only.

    Build it with `line_filter` (which checks what a caller gave). The search lists the
    entries `ref_kinds` names, and ranks only lines whose source `passes`; an entry none of
    whose sources passes is skipped before its lines are matched (or built, from an index).
    """

    kind: SearchKind = "any"
    """`"tool"` (tool outputs), `"turn"` (shortened AI turns), `"summarized"` (messages a
    summary replaced), or `"any"`."""
    tool: str | None = None
    """Only outputs of this tool (case-insensitive); None: any."""

    @property
    def ref_kinds(self) -> tuple[RefKind, ...]:
        """The kinds of entries holding lines this filter can pass, in search order."""
        return _REF_KINDS[self.kind]

    @property
    def active(self) -> bool:
        """Whether some line of a listed entry can fail the filter."""
        return self.kind != "any" or self.tool is not None

    def passes(self, source: Source) -> bool:
        """Whether lines from `source` pass the kind and tool filters."""
        if self.tool is not None and (source.tool_name or "").casefold() != self.tool.casefold():
            return False
        if self.kind == "tool":
            return source.type == "tool" and source.position is None
        if self.kind == "turn":
            return source.type == "ai" and source.position is None
        if self.kind == "summarized":
            return source.position is not None or source.type == "messages"
        return True

    def any_passes(self, segments: Sequence[tuple[int, Source]]) -> bool:
        """Whether some line of an entry with these sources passes (always, when inactive)."""
        return not self.active or any(self.passes(source) for _, source in segments)


EVERY_LINE = LineFilter()
"""The filter of a search without `kind` or `tool`."""

_MAX_TOOL_CHARS = 200
"""Longest tool name a filter accepts."""


def line_filter(kind: object = "any", tool: object = None) -> LineFilter:
    """The filter a caller's `kind` and `tool` ask for; a blank tool name filters nothing.

    Raises:
        ValueError: `kind` is not a `SearchKind`, or `tool` is not a tool name; the message
            quotes a bounded prefix of what was given.
    """
    checked = next((k for k in get_args(SearchKind) if k == kind), None)
    if checked is None:
        msg = f"kind {shorten(kind, 30)} is not one of {', '.join(get_args(SearchKind))}"
        raise ValueError(msg)
    if tool is not None and (not isinstance(tool, str) or len(tool) > _MAX_TOOL_CHARS):
        msg = f"tool must be a tool name, got {shorten(tool, 40)}"
        raise ValueError(msg)
    return LineFilter(checked, (tool.strip() or None) if tool else None)
