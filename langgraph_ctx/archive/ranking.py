"""Which lines of a thread's archive match a query, best first: the ranking rule.

Pure: plain entries in (`matching.SearchableEntry`), hits out. The rule, fully deterministic
(same query, same archive: the same answer):

1. Tier: the whole query as one phrase on the line (the words in order), then every term,
   then some terms (more terms first). A regular expression has one tier. Within a tier, a
   line where the query stands as a name of its own (`def flush_batch(`, `flush_batch =`)
   comes before one where it is part of a longer name (`app/flush_batch.py`,
   `jobs.flush_batch`), and a shorter such name before a longer one (`__init__` before
   `__init__.py` for `init__`): the agent asking for a name most often wants where it is
   defined or set, not every path that contains it. Then lines of tool output before lines
   of other messages (the agent's own turns): what a tool returned is what the agent lost;
   what it wrote itself it mostly restates.
2. Entry group: single archived messages (full tool outputs, shortened turns) before
   insurance dumps (a dump often holds the compacted stand-in of an output archived whole),
   then texts.
3. Newer entries first: the order the backend lists them in, newest write first
   (`ListableBackend.keys`: a store's `updated_at`, SQLite's rowid, a file's mtime; ties by
   key).
4. Line number, ascending.

Speed: a search for a common word can match thousands of lines in 10 MB, on every call. The
scan therefore works on each entry's casefolded text whole: `str.find` walks the occurrences
of each term, one pass per term records which terms each line holds and where the first one
starts, and only lines holding every term are sliced out (for the whole-query phrase). A
regular expression runs over the whole text too (`^`/`$` at each line) and is confirmed on
the single line it found, so a pattern costs one call per matching line, not one per line.

Bounds: whatever the query, one search matches for at most `SEARCH_SECONDS` and collects at
most `MAX_HITS` lines, words and patterns alike (a word as common as `e` matches most lines of
an archive). The scan goes newest entry first, `_WINDOW_LINES` lines at a time, and looks at
the clock between windows (a pattern at every call too, through its timeout, cut at
`_CALL_CPU_SECONDS` of processor time); when either bound is reached it stops, and `Hits` says
how many lines it searched, so the answer can say it is partial. The hits of a
partial search are those of the lines it searched, ranked by the same rule.
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Iterator, Sequence
from typing import Literal, NamedTuple, overload

from langgraph_ctx._patterns import PatternTimeoutError
from langgraph_ctx.archive.matching import EVERY_LINE, LineFilter, Query, SearchableEntry

__all__ = ["MAX_HITS", "SEARCH_SECONDS", "Hit", "Hits", "find_hits"]

SEARCH_SECONDS = 0.08
"""How long one search may match, words and patterns alike (the answer then says it is
partial)."""

MAX_HITS = 10_000
"""Most matching lines one search collects: they are all ranked and grouped for the answer,
and a query matching more says too little to rank (the answer then says it is partial)."""

_WINDOW_LINES = 256
"""Lines matched between two looks at the clock (a few milliseconds of the commonest word)."""

_CALL_CPU_SECONDS = 0.02
"""Most processor time one pattern call may take (`BoundedPattern.find`): `regex` times out
in processor time, which a busy host hands out at half the wall clock's pace or slower; a
call over one window or one line that needs more is a pattern too slow for a search."""

Stop = Literal["time", "hits", "pattern"]
"""Why a search stopped before its last line: out of `SEARCH_SECONDS`, `MAX_HITS` found, or
one pattern call over `_CALL_CPU_SECONDS` (a pattern too slow for a search)."""

_GROUP = {"message": 0, "messages": 1, "text": 2}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_/-")
_PATHS = _NAME_CHARS | {"."}
_PLAIN_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_-"
"""The name characters a name always goes on through, backwards (all but `/`)."""
_NAME_RUN = re.compile(r"[a-z0-9_/-]*")
"""A run of name characters, walked at C speed (a name can be a whole 10 MB line)."""

_NAME_LOOKBACK = 1_000
"""Farthest a name is followed back from a term: a name is no shorter for being cut there."""

_OCCURRENCES = 64
"""Most occurrences of a term in one line whose names are measured (`_closest`): a line of
`ab ab ab ...` would otherwise cost a Python step per occurrence, out of the time bound's
reach."""


class Hit(NamedTuple):
    """One matching line. Hits sort best first: `key` is unique, so it alone decides."""

    key: tuple[int, int, int, int, int, int, int]
    """`(tier, -terms matched, characters a longer name holding it adds (0: a name of its
    own), not tool output, entry group, entry rank, line index)`: the ranking rule."""
    entry: SearchableEntry
    """The entry the line is in."""
    line_index: int
    """0-based line index (recall's line number minus one)."""
    at: int
    """Where the match starts in the casefolded line (0 for a pattern)."""


def _name_span(text: str, at: int, end: int) -> tuple[int, int]:
    """Where the name holding `text[at:end]` begins and ends (`at, end` for a name of its own).

    A name continues with a letter, digit, `_`, `/`, `-`, or a `.` between two of those (a
    dotted name, a file's extension); a `.` ending a sentence does not, nor a leading `./`
    (the same path, relative to the working directory; `../` is another path), nor the `/` of
    a closing tag (`</body>` names `body`). A line break bounds a name like a space does, so
    a whole text answers as each of its lines would. Followed back at most `_NAME_LOOKBACK`
    characters.
    """
    begin, stop = at, end
    floor = max(0, at - _NAME_LOOKBACK)
    while begin > floor:
        # A run of name characters other than `/` always goes on: skipped at C speed.
        begin = floor + len(text[floor:begin].rstrip(_PLAIN_NAME_CHARS))
        if begin == floor:
            break
        before = text[begin - 1]
        leading = before == "/" and text[begin - 2 : begin] == "./"
        if leading and (begin == 2 or text[begin - 3] not in _PATHS):
            break
        if before == "/" and text[begin - 2 : begin] == "</":  # a closing tag: `</body>`
            break
        dotted = before == "." and begin >= 2 and text[begin - 2] in _NAME_CHARS
        if before not in _NAME_CHARS and not dotted:
            break
        begin -= 1
    size = len(text)
    while True:
        run = _NAME_RUN.match(text, stop)  # `*`: always a match, maybe empty
        stop = stop if run is None else run.end()
        if stop + 1 < size and text[stop] == "." and text[stop + 1] in _NAME_CHARS:
            stop += 1  # a dotted name goes on
            continue
        return begin, stop


def _closest(text: str, term: str, begin: int, stop: int) -> int:
    """How many characters the shortest name holding `term` in `text[begin:stop]` adds to it.

    0 when an occurrence stands as a name of its own. An occurrence inside the name an earlier
    one was found in is not looked at again: the same name, so the work stays linear in the
    line however often the term repeats in it (`a` in a line of 100,000 `a`s). At most
    `_OCCURRENCES` occurrences are measured.
    """
    best = -1
    at = text.find(term, begin, stop)
    for _ in range(_OCCURRENCES):
        if at < 0:
            break
        first, last = _name_span(text, at, at + len(term))
        extra = (last - first) - len(term)
        if extra == 0:
            return 0
        best = extra if best < 0 else min(best, extra)
        at = text.find(term, max(at + 1, last), stop)
    return max(best, 0)


class _Line:
    """What one pass over an entry learned about one of its lines."""

    __slots__ = ("at", "extra", "mask")

    def __init__(self, mask: int, at: int, extra: int) -> None:
        self.mask, self.at, self.extra = mask, at, extra


def _term_lines(
    entry: SearchableEntry, terms: Sequence[str], begin: int, end: int
) -> dict[int, _Line]:
    """What each line of `folded[begin:end]` holding a term holds: which terms, where the first.

    `begin` and `end` are a line's start and a line's end (no term spans a line break).
    Bits of `mask` follow `terms` order; `at` and `extra` are those of the line's first term
    (`extra`: `_closest` there).
    """
    folded, starts = entry.folded, entry.folded_starts
    last, size = len(starts) - 1, len(folded)
    lines: dict[int, _Line] = {}
    for bit, term in enumerate(terms):
        flag = 1 << bit
        at = folded.find(term, begin, end)
        while at >= 0:
            index = bisect.bisect_right(starts, at) - 1
            stop = starts[index + 1] - 1 if index < last else size
            seen = lines.get(index)
            if seen is None:
                lines[index] = _Line(flag, at - starts[index], _closest(folded, term, at, stop))
            else:
                seen.mask |= flag
            at = folded.find(term, stop + 1, end)
    return lines


_Row = tuple[int, int, int, int, int, int, int, int, int]
"""A hit while searching, one plain tuple: its first seven parts are its key (`Hit.key`:
tier, minus the terms the line holds, characters a longer name holding the match adds, not
tool output, entry group, the entry's place among its kind, line index), then where the match
starts in the casefolded line (`_AT`), then the entry's place in the list searched (`_SLOT`).

Plain, not a named tuple: a common word matches thousands of lines, and the garbage collector
stops tracking a plain tuple of numbers at its first pass but tracks a tuple subclass for as
long as it lives; the rows of one search would then move to the oldest generation and bring
Python's full collection (tens of milliseconds in a process holding LangChain) sooner. Read
by the names of their places (`_LINE`, `_AT`, `_SLOT`); sorted as tuples: the key's parts
decide, in order."""
_LINE = 6
"""A row's line index (the key's last part)."""
_AT = 7
"""Where a row's match starts in the casefolded line (0 for a pattern)."""
_SLOT = 8
"""A row's entry: its place in the list searched."""


class _Scan(NamedTuple):
    """One entry being matched: the parts its rows carry besides the line, and where they go."""

    entry: SearchableEntry
    slot: int
    """The entry's place in the list searched."""
    query: Query
    n: int
    """The entry's place among the entries of its kind (newest first)."""
    group: int
    deadline: float
    out: list[_Row]


def _entry_hits(scan: _Scan) -> int:
    """Add the rows of the entry's matching lines to `scan.out`; returns how many it searched.

    All of them, unless the deadline passed (between two windows, or in a pattern's match) or
    `MAX_HITS` were found at a window's end: the entry is matched `_WINDOW_LINES` lines at a
    time, by words or by the pattern.
    """
    window = _word_window if scan.query.pattern is None else _pattern_window
    n_lines = scan.entry.n_lines
    for first in range(0, n_lines, _WINDOW_LINES):
        if first and (time.monotonic() > scan.deadline or len(scan.out) >= MAX_HITS):
            return first
        stop = min(first + _WINDOW_LINES, n_lines)
        done = window(scan, first, stop)
        if done < stop:
            return done
    return n_lines


def _word_window(scan: _Scan, first: int, stop: int) -> int:
    """Add the rows of lines `first` to `stop` holding the query's terms; returns `stop`."""
    entry, slot, query, n, group, _, out = scan
    folded, starts = entry.folded, entry.folded_starts
    begin, end = starts[first], starts[stop] - 1 if stop < entry.n_lines else len(folded)
    terms = (*query.phrases, *query.words)
    every = (1 << len(terms)) - 1
    need = (1 << len(query.phrases)) - 1  # every phrase must be on the line
    words = every & ~need
    one_source = len(entry.segments) == 1
    not_tool_output = 0 if entry.segments[0][1].type == "tool" else 1
    for index, seen in _term_lines(entry, terms, begin, end).items():
        if seen.mask & need != need:
            continue
        if not one_source:
            not_tool_output = 0 if entry.segment(index)[2].type == "tool" else 1
        count = seen.mask.bit_count()
        if query.whole is not None and seen.mask == every:
            begin = starts[index]
            line_end = starts[index + 1] - 1 if index + 1 < len(starts) else len(folded)
            at = folded.find(query.whole, begin, line_end)
            if at >= 0:
                extra = _closest(folded, query.whole, at, line_end)
                out.append((0, -count, extra, not_tool_output, group, n, index, at - begin, slot))
                continue
        tier = 1 if seen.mask & words == words else 2
        out.append((tier, -count, seen.extra, not_tool_output, group, n, index, seen.at, slot))
    return stop


def _pattern_window(scan: _Scan, first: int, stop: int) -> int:
    """Add the rows of lines `first` to `stop` the pattern matches; returns how many it searched.

    That is `stop`, or the line a match ran out of time on (the lines before it are searched).
    With a prefilter, the whole-text pattern finds the next line where a match starts and
    the pattern confirms it on that line alone: the lines found are a superset of those a
    line-alone search matches (a match on a line alone is a match in the text, and the
    leftmost one from the line's start begins on that line), and the lines skipped between
    them have no match.
    """
    entry, slot, query, n, group, deadline, out = scan
    assert query.pattern is not None
    pattern, prefilter, starts = query.pattern, query.prefilter, entry.starts
    end = starts[stop] - 1 if stop < entry.n_lines else len(entry.text)
    index = first
    try:
        while index < stop:
            if prefilter is not None:  # else a pattern that only a line alone can answer
                at = prefilter.find(
                    entry.text, starts[index], deadline, end, cpu_seconds=_CALL_CPU_SECONDS
                )
                if at < 0:
                    break
                index = bisect.bisect_right(starts, at) - 1
            if pattern.search(entry.line(index), deadline, cpu_seconds=_CALL_CPU_SECONDS):
                not_tool_output = 0 if entry.segment(index)[2].type == "tool" else 1
                out.append((0, 0, 0, not_tool_output, group, n, index, 0, slot))
            index += 1
    except PatternTimeoutError:
        return index  # the lines before it are searched; a window's hits so far stand
    return stop


def find_hits(
    entries: Sequence[SearchableEntry],
    query: Query,
    *,
    within: LineFilter = EVERY_LINE,
    budget: float = SEARCH_SECONDS,
) -> Hits:
    """Every matching line of `entries` (listed newest first), best first, within bounds.

    Args:
        entries: The thread's entries; within each kind, newest first.
        query: What to look for.
        within: Which lines to search (the `kind` and `tool` filters).
        budget: Seconds the search may match, words and patterns alike; past them it stops
            (`Hits.stopped`), as it does after `MAX_HITS` matching lines.

    Returns:
        The hits of the lines searched; `Hits.searched_lines` of `Hits.total_lines`.
    """
    deadline = time.monotonic() + budget
    rank: dict[str, int] = {}
    rows: list[_Row] = []
    total = sum(entry.n_lines for entry in entries)
    searched = 0
    stopped: Stop | None = None
    for slot, entry in enumerate(entries):
        n = rank[entry.kind] = rank.get(entry.kind, -1) + 1
        if time.monotonic() > deadline or len(rows) >= MAX_HITS:
            stopped = _why(rows, deadline)
            break
        if not entry.text or not within.any_passes(entry.segments):
            searched += entry.n_lines
            continue
        group = _GROUP.get(entry.kind, 3)
        if query.pattern is not None or _may_match(entry.folded, query):
            done = _entry_hits(_Scan(entry, slot, query, n, group, deadline, rows))
        else:
            done = entry.n_lines
        searched += done
        if done < entry.n_lines:
            stopped = _why(rows, deadline)
            break
    rows.sort()  # the first seven parts are unique: the rest never decides
    if within.active:
        rows = [r for r in rows if within.passes(entries[r[_SLOT]].segment(r[_LINE])[2])]
    return Hits(rows, entries, searched_lines=searched, total_lines=total, stopped=stopped)


def _why(rows: list[_Row], deadline: float) -> Stop:
    """Why a search stopped early (only a pattern call stops before the deadline)."""
    if len(rows) >= MAX_HITS:
        return "hits"
    return "time" if time.monotonic() > deadline else "pattern"


def _may_match(folded: str, query: Query) -> bool:
    """Whether an entry's casefolded text holds every phrase, or a word when no phrase."""
    if query.phrases:
        return all(phrase in folded for phrase in query.phrases)
    return any(word in folded for word in query.words)


class Hits(Sequence[Hit]):
    """The hits of a search, best first; each `Hit` is made when it is read.

    Args:
        rows: The hits as rows, sorted.
        entries: The entries searched, as `find_hits` was given them.
        searched_lines: How many lines (newest first) the search went through.
        total_lines: How many lines the entries hold.
        stopped: Why the search stopped before the last line; None when it searched all.
    """

    def __init__(
        self,
        rows: list[_Row],
        entries: Sequence[SearchableEntry],
        *,
        searched_lines: int = 0,
        total_lines: int = 0,
        stopped: Stop | None = None,
    ) -> None:
        self._rows, self._entries = rows, entries
        self.searched_lines, self.total_lines, self.stopped = searched_lines, total_lines, stopped

    def __len__(self) -> int:
        return len(self._rows)

    def with_entries(self, entries: Sequence[SearchableEntry], stopped: Stop | None) -> Hits:
        """The same hits over `entries`: the same references in the same places, more lines.

        `stopped` is why the search stopped before its last line (None: it did not).
        """
        return Hits(
            self._rows,
            entries,
            searched_lines=self.searched_lines,
            total_lines=self.total_lines,
            stopped=stopped,
        )

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> list[Hit]: ...

    def __getitem__(self, index: int | slice) -> Hit | list[Hit]:
        if isinstance(index, slice):
            return [self._hit(row) for row in self._rows[index]]
        return self._hit(self._rows[index])

    def __iter__(self) -> Iterator[Hit]:
        return (self._hit(row) for row in self._rows)

    def text_of(self, index: int) -> str:
        """The casefolded line of hit `index`, without making the hit."""
        row = self._rows[index]
        return self._entries[row[_SLOT]].folded_line(row[_LINE])

    def _hit(self, row: _Row) -> Hit:
        return Hit(row[:7], self._entries[row[_SLOT]], row[_LINE], row[_AT])
