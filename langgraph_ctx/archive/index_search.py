"""Search served by the database: the entries a search ranks, built from the line index.

When the archive's backend keeps a `line_index.LineIndex` (a SQL store), a word or phrase
search asks the database which lines of the thread hold the query's terms, not the entries:
`plan_indexed_entries` builds a sparse `SearchableEntry` (`matching.sparse_entry`: those
lines at their real indexes, the entry's real line count and sources) for each entry holding
a candidate line, which `ranking.find_hits` ranks exactly as the whole entry; the lines a
candidate must hold (every phrase, or a word) are the lines `find_hits` matches, so the
hits, their order and the header's counts are today's. `IndexedEntries.plan_neighbours`
then reads the line before and after each hit the answer shows.

The work follows what matches, not the size of the archive. Each run of listed entries
holding no candidate line stands in the list `find_hits` takes as one empty entry with the
run's line count (`_gap`): `find_hits` skips an entry without text, counting its lines, so
the totals, the place a capped search stops and the order of the hits are those of every
entry listed one by one. What the index knows of a thread's entries (`key -> line count`)
is kept per process (`KNOWN_BYTES`), and a search asks the database only what changed since
(`LineIndex.entries` with the versions seen: a count and the row at the last id, so a write
by another worker or process is seen); the sources of the entries that held a candidate are
kept too (`SEGMENTS_BYTES`): entries are content-addressed, so those never change.

An entry the index does not know (archived before the index, or by a write that failed
between the store and the index) is read and decoded as a scan does (`entry_cache`, within
the search's reading time) and indexed on the way: a bounded backfill that the next search
resumes. Index rows of keys not listed are ignored; those of items the store no longer holds
are dropped.

A regular expression is served the same way when every line it matches holds a run of plain
characters (`required_literal`): the lines holding it, read as written, are matched by the
pattern itself; other patterns scan.

A database answer is capped at `CANDIDATES` lines; past that the search asks for the first
ones in its own order, newest entries first, a batch of entries at a time (`_plan_first`),
and stops where a scan stops (`ranking.MAX_HITS`), saying the answer is partial.
"""

from __future__ import annotations

import logging
import re
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from langgraph_ctx._effects import MethodCall, Plan
from langgraph_ctx._ids import RefKind
from langgraph_ctx._lru import LRUCache, serial_of
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.entry_cache import EntryCache, EntryNotReadInTime, plan_entry
from langgraph_ctx.archive.line_index import (
    EntryRows,
    EntryVersion,
    LineIndex,
    LineRow,
    decode_segments,
    holds,
)
from langgraph_ctx.archive.matching import (
    LineFilter,
    Query,
    SearchableEntry,
    Source,
    sparse_entry,
)
from langgraph_ctx.archive.ranking import MAX_HITS, Hits
from langgraph_ctx.archive.search_answer import shown_hits

__all__ = [
    "CANDIDATES",
    "KNOWN_BYTES",
    "SEGMENTS_BYTES",
    "IndexedEntries",
    "line_index_of",
    "plan_indexed_entries",
    "required_literal",
]

logger = logging.getLogger("langgraph_ctx.archive")

CANDIDATES = MAX_HITS + 512
"""Most lines one database answer holds: past `MAX_HITS` and the window `find_hits` then
ends, so a capped answer stops where a scan would."""

KNOWN_BYTES = 32 * 1024 * 1024
"""Most memory the per-process record of indexed entries takes (each thread's keys and line
counts, about 150 bytes an entry), least recently searched thread dropped first."""

SEGMENTS_BYTES = 16 * 1024 * 1024
"""Most memory the per-process record of entries' sources takes (those of entries that held
a candidate line), least recently used dropped first."""

_Key = tuple[tuple[str, ...], str]
_Lines = dict[int, tuple[str | None, str]]
"""Known lines of an entry: `(line, casefolded)`, the line None until read (a candidate)."""
_Segments = tuple[tuple[int, Source], ...]
_FIRST_BATCH = 256
"""Entries in the first batch `_plan_first` asks for (each next batch twice the last)."""
_SUSPECTS = 512
"""Most indexed keys one search checks against the store (rows an item left behind)."""


class _Known(NamedTuple):
    """What this process knows of one namespace's indexed entries."""

    version: EntryVersion
    lines: dict[str, int]
    """`key -> n_lines` of every indexed entry."""


def _known_size(key: tuple[int, tuple[str, ...]], known: _Known) -> int:
    strings = sum(map(sys.getsizeof, known.lines))  # C-level: a thread may hold 50,000
    return sys.getsizeof(known.lines) + strings + sys.getsizeof(known) + 200


def _segments_size(key: tuple[int, tuple[str, ...], str], segments: _Segments) -> int:
    size = sys.getsizeof(segments) + sys.getsizeof(key[2]) + 160
    for run in segments:
        source = run[1]
        size += sys.getsizeof(run) + sys.getsizeof(source)
        size += sum(sys.getsizeof(v) for v in (source.message_id, source.tool_call_id) if v)
    return size


_KNOWN: LRUCache[tuple[int, tuple[str, ...]], _Known] = LRUCache(KNOWN_BYTES, size=_known_size)
_SEGMENTS: LRUCache[tuple[int, tuple[str, ...], str], _Segments] = LRUCache(
    SEGMENTS_BYTES, size=_segments_size
)
_GAPS: LRUCache[tuple[RefKind, int], SearchableEntry] = LRUCache(max_items=4096)
"""`_gap` entries by kind and line count (a few hundred bytes each)."""


_SPECIAL = frozenset("\\.^$*+?{}[]()|I")
"""Characters never part of a literal run: the pattern's syntax, and `I`, which `regex`
matches case-insensitively to the dotless i (U+0131, whose casefolding is not `i`)."""
_CLASSES = frozenset("dDsSwWbBAZzGmM")
"""Escapes `\\<letter>` of one character class or anchor: no literal, nothing after them."""
_QUANTIFIER = re.compile(r"\{(?:\d+|\d+,\d*|,\d+)\}")
_MIN_LITERAL = 3
"""The shortest literal worth asking the index for (a trigram)."""


def required_literal(pattern: str) -> str | None:
    """A text every line `pattern` matches holds (casefolded), or None when none is sure.

    The longest run of plain ASCII characters at the pattern's top level (outside groups,
    sets and alternatives, and not made optional or repeated by a quantifier), at least
    `_MIN_LITERAL` characters. Conservative: a construct read differently by the `regex`
    module than here (inline flags, nested sets, escapes other than a class, an anchor or an
    escaped symbol, braces that are not a plain count, an alternative at the top) gives None,
    and the search scans. Every line the pattern matches holds the run, so the index's lines
    holding it are a superset of the matching ones, and ASCII letters match only characters
    whose casefolding holds theirs, so the casefolded run is in every such line casefolded.
    """
    runs: list[str] = []
    run: list[str] = []
    grown = False  # the last atom was added to `run` (a quantifier takes it back)
    at, size = 0, len(pattern)
    while at < size:
        char = pattern[at]
        if char == "\\":
            if at + 1 >= size:
                return None
            escaped = pattern[at + 1]
            at += 2
            if escaped.isascii() and not escaped.isalnum() and escaped.isprintable():
                run.append(escaped)
                grown = True
            elif escaped in _CLASSES:
                runs.append("".join(run))
                run, grown = [], False
            else:
                return None
            continue
        if char in "*+?{":
            if char == "{":
                count = _QUANTIFIER.match(pattern, at)
                if count is None:
                    return None
                at = count.end()
            else:
                at += 1
            if at < size and pattern[at] in "?+":  # lazy or possessive
                at += 1
            if grown:
                run.pop()
            runs.append("".join(run))
            run, grown = [], False
            continue
        if char == "|" or char in "}])":
            return None
        if char in "([":
            end = _closing(pattern, at)
            if end is None:
                return None
            at = end
        else:
            at += 1
            if char not in _SPECIAL and char.isascii() and char.isprintable():
                run.append(char)
                grown = True
                continue
        runs.append("".join(run))  # `.`, `^`, `$`, a group, a set or another character
        run, grown = [], False
    runs.append("".join(run))
    best = max(runs, key=len)
    return best.lower() if len(best) >= _MIN_LITERAL else None


def _closing(pattern: str, at: int) -> int | None:
    """Where the group or set opening at `at` ends (past its closing bracket).

    None when it holds what `required_literal` does not read (a set in a set, an inline
    flag) or does not end.
    """
    depth, size = 0, len(pattern)
    while at < size:
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if char == "[":
            at += 1
            if at < size and pattern[at] == "^":
                at += 1
            if at < size and pattern[at] == "]":
                at += 1
            while at < size and pattern[at] != "]":
                if pattern[at] == "[":
                    return None  # a POSIX class or a nested set (`regex`)
                at += 2 if pattern[at] == "\\" else 1
            if at >= size:
                return None
            at += 1
            if depth == 0:
                return at
            continue
        if char == "(":
            if pattern.startswith("(?", at) and not pattern.startswith("(?:", at):
                return None
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    return None


def line_index_of(archive: Archive) -> LineIndex | None:
    """The line index of `archive`'s backend, or None (search scans)."""
    index = getattr(archive.backend, "line_index", None)
    if not isinstance(index, LineIndex) or index.available is False:
        return None
    return index


@dataclass
class IndexedEntries:
    """The entries of one search, as `find_hits` takes them, and what made them."""

    index: LineIndex
    entries: list[SearchableEntry]
    """The entries holding a candidate line and those decoded, in the order listed, with
    each run of other entries between them as one empty entry of the run's lines (`_gap`)."""
    unread: int
    """Entries not read in time (neither indexed nor decoded)."""
    capped: bool
    """The database's answer stopped at `CANDIDATES` lines."""
    searched: int = 0
    """The entries searched: every listed entry indexed or decoded."""
    sparse: dict[str, _Key] = field(default_factory=dict)
    """By reference: the entries built from the index, as `(namespace, key)` of `known`."""
    known: dict[_Key, _Lines] = field(default_factory=dict)
    """The lines known of each entry built from the index (its candidate lines)."""

    def plan_neighbours(self, hits: Hits, limit: int) -> Plan[Hits]:
        """`hits` over entries that also hold the lines around each hit the answer shows."""
        wanted: dict[str, set[int]] = {}
        for at in shown_hits(hits, limit):
            hit = hits[at]
            key = self.sparse.get(hit.entry.ref)
            if key is None:
                continue  # a decoded entry holds every line
            lines = self.known[key]
            first, end, _ = hit.entry.segment(hit.line_index)
            for n in (hit.line_index - 1, hit.line_index, hit.line_index + 1):
                if first <= n < end and lines.get(n, (None,))[0] is None:
                    wanted.setdefault(hit.entry.ref, set()).add(n)
        stopped = "hits" if self.capped and hits.stopped is None else hits.stopped
        if not wanted:
            return hits if stopped == hits.stopped else hits.with_entries(self.entries, stopped)
        asked = [(*self.sparse[ref], n) for ref, lines in wanted.items() for n in sorted(lines)]
        try:
            rows: list[LineRow] | None = yield MethodCall(self.index, "lines", (asked,))
        except Exception as exc:  # the hits stand, shown casefolded, without context
            logger.warning("reading context lines from the search index failed: %s", exc)
            rows = None
        for row in rows or ():
            self.known[row.namespace, row.key][row.line_no] = (row.text, row.folded)
        entries = [
            _sparse(entry, self.known[self.sparse[entry.ref]]) if entry.ref in wanted else entry
            for entry in self.entries
        ]
        self.entries = entries
        return hits.with_entries(entries, stopped)


def _sparse(entry: SearchableEntry, lines: _Lines) -> SearchableEntry:
    """`entry` (built from the index) again, with the lines now known of it.

    A line not read yet stands in casefolded: it is matched casefolded, and shown only once
    read (`plan_neighbours` reads every line an answer shows).
    """
    return sparse_entry(entry.ref, entry.kind, entry.n_lines, lines, entry.segments)


def _gap(kind: RefKind, n_lines: int) -> SearchableEntry:
    """A run of listed entries holding no candidate line, as `find_hits` sees them.

    No text (`find_hits` skips it, counting its lines) and the run's line count. Its offsets
    are never read (no hit is in it), so a `range` stands for them: no memory per line.
    Immutable, so one is kept per kind and line count (`_GAPS`): a search of a common word
    has a gap between most candidates, and each object it makes and keeps to its end brings
    Python's full garbage collection sooner.
    """
    found = _GAPS.peek((kind, n_lines))
    if found is None:
        none = cast("array[int]", range(n_lines))
        found = SearchableEntry("", kind, "", none, "", none, ())
        _GAPS.put((kind, n_lines), found)
    return found


def plan_indexed_entries(
    archive: Archive,
    index: LineIndex,
    listed: Sequence[tuple[RefKind, list[str]]],
    query: Query,
    cache: EntryCache,
    read_until: float,
    within: LineFilter,
) -> Plan[IndexedEntries | None]:
    """The entries of a search from the index, of the lines `within` passes.

    An entry none of whose sources `within` passes stands in the list as lines without
    text, as `find_hits` skips it.

    `listed` is each kind's references as `Archive.plan_refs` lists them (newest first).
    A pattern is served when it holds a literal every matching line holds
    (`required_literal`): the lines holding it, as written, are its candidates.
    None: scan instead, when the index is unavailable or failed (as without one), or for a
    pattern without such a literal.
    """
    texts = query.pattern is not None
    asked = query
    if texts:
        literal = required_literal(query.text)
        if literal is None:
            return None
        asked = Query(text=literal, phrases=(literal,))
    if not all(holds(term) for term in (*asked.phrases, *asked.words)):
        return None  # a term the database holds altered: the scan answers it exactly
    namespaces = [archive.namespace(kind) for kind, _ in listed]
    serial = serial_of(index)
    known = [_KNOWN.get((serial, namespace)) for namespace in namespaces]
    try:
        versions = [None if k is None else k.version for k in known]
        changed = yield MethodCall(index, "entries", (namespaces, versions))
        if changed is None:
            return None
        rows = yield MethodCall(index, "candidates", (namespaces, asked, CANDIDATES, texts))
    except Exception as exc:
        logger.warning("the search index failed, scanning the archive: %s", exc)
        return None
    if rows is None:
        return None
    count = sum(len(lines) for lines in rows.values())
    if texts and count >= CANDIDATES:
        return None  # a capped pattern's candidates may hold too few matches: scan
    lines_of = [
        _merged(serial, namespace, was, changed.get(namespace))
        for namespace, was in zip(namespaces, known, strict=True)
    ]
    found: dict[_Key, _Lines] = rows
    if count >= CANDIDATES:  # more than a search ranks: the first, in search order
        first = yield from _plan_first(index, listed, namespaces, lines_of, asked)
        if first is None:
            return None
        found = first
    segments = yield from _plan_segments(index, serial, list(found))
    if segments is None:
        return None
    # By namespace and key: the sources of each entry holding a candidate line, None when
    # its row is gone meanwhile (it is read as a scan reads it).
    by_namespace: dict[tuple[str, ...], dict[str, _Segments | None]] = {}
    for namespace, key in found:
        by_namespace.setdefault(namespace, {})[key] = segments.get((namespace, key))
    out = IndexedEntries(index, [], 0, count >= CANDIDATES, known=found)
    for (ref_kind, refs), namespace, lines in zip(listed, namespaces, lines_of, strict=True):
        held = by_namespace.get(namespace, {})
        # `Archive.plan_refs` gives one kind's references one prefix: its key follows.
        cut = refs[0].rindex(":") + 1 if refs else 0
        keys = [ref[cut:] for ref in refs]
        counts = list(map(lines.get, keys))  # None: not indexed
        # Only entries holding a candidate, or not indexed, are looked at one by one; each
        # run of others between them is summed at C speed (a thread may list 50,000).
        special = [n for n, key in enumerate(keys) if key in held]
        if None in counts:
            special = sorted({*special, *(n for n, c in enumerate(counts) if c is None)})
        gap = matched = done = 0
        for at in special:
            run = cast("list[int]", counts[done:at])  # no None between the special ones
            gap += sum(run)
            out.searched += len(run)
            matched += len(run)
            done = at + 1
            ref, key, n_lines = refs[at], keys[at], counts[at]
            runs = held.get(key)
            if n_lines is not None and runs is not None:
                out.searched += 1
                matched += 1
                if not within.any_passes(runs):
                    gap += n_lines  # `find_hits` skips it as it skips an entry filtered out
                    continue
                if gap:
                    out.entries.append(_gap(ref_kind, gap))
                    gap = 0
                entry_key = (namespace, key)
                out.sparse[ref] = entry_key
                out.entries.append(sparse_entry(ref, ref_kind, n_lines, found[entry_key], runs))
                continue
            try:  # not indexed, or its row gone meanwhile: read as a scan reads it
                entry = yield from plan_entry(archive, ref, ref_kind, cache, read_until)
            except EntryNotReadInTime:
                out.unread += 1
                continue
            if entry is None:
                continue
            if gap:
                out.entries.append(_gap(ref_kind, gap))
                gap = 0
            out.searched += 1
            out.entries.append(entry)
            try:  # the backfill: the next search finds it in the index
                yield MethodCall(index, "add", (namespace, key, entry))
            except Exception as exc:
                logger.debug("indexing %s for search failed: %s", ref, exc)
        run = cast("list[int]", counts[done:])
        gap += sum(run)
        out.searched += len(run)
        matched += len(run)
        if gap:
            out.entries.append(_gap(ref_kind, gap))
        if matched < len(lines):  # indexed keys not listed: rows an item left behind?
            listed_keys = set(keys)
            suspects = [key for key in lines if key not in listed_keys]
            if suspects:
                yield from _plan_prune(index, namespace, suspects[:_SUSPECTS])
    return out


def _plan_first(
    index: LineIndex,
    listed: Sequence[tuple[RefKind, list[str]]],
    namespaces: list[tuple[str, ...]],
    lines_of: list[dict[str, int]],
    query: Query,
) -> Plan[dict[_Key, _Lines] | None]:
    """The first `CANDIDATES` candidate lines in the order a search goes; None on failure.

    Asked entry by entry, newest first, in batches that double (`_FIRST_BATCH` entries
    first): a query matching most lines is answered by the first batch, one matching few
    in a long thread by a few more.
    """
    out: dict[_Key, _Lines] = {}
    count = 0
    for (_, refs), namespace, lines in zip(listed, namespaces, lines_of, strict=True):
        keys = [key for key in (ref.rsplit(":", 1)[1] for ref in refs) if key in lines]
        at, size = 0, _FIRST_BATCH
        while at < len(keys) and count < CANDIDATES:
            batch = keys[at : at + size]
            try:
                rows = yield MethodCall(
                    index, "first_candidates", (namespace, batch, query, CANDIDATES - count)
                )
            except Exception as exc:
                logger.warning("the search index failed, scanning the archive: %s", exc)
                return None
            if rows is None:
                return None
            out.update(rows)
            count += sum(len(found) for found in rows.values())
            at, size = at + size, size * 2
    return out


def _merged(
    serial: int, namespace: tuple[str, ...], was: _Known | None, changed: EntryRows | None
) -> dict[str, int]:
    """The namespace's `key -> n_lines`, what was known updated with what changed (kept)."""
    if changed is None:  # not answered (the op answers each namespace asked)
        return {} if was is None else was.lines
    if was is not None and not changed.whole:
        if not changed.lines and changed.version == was.version:
            return was.lines
        lines = {**was.lines, **changed.lines}
    else:
        lines = changed.lines
    _KNOWN.put((serial, namespace), _Known(changed.version, lines))
    return lines


def _plan_segments(
    index: LineIndex, serial: int, keys: list[_Key]
) -> Plan[dict[_Key, _Segments] | None]:
    """The sources of the entries `keys` (those holding a candidate line); None on failure.

    An entry whose row is gone meanwhile has none: the search reads it as a scan does.
    """
    out: dict[_Key, _Segments] = {}
    missing: list[_Key] = []
    for key in keys:
        segments = _SEGMENTS.get((serial, *key))
        if segments is None:
            missing.append(key)
        else:
            out[key] = segments
    if missing:
        try:
            runs = yield MethodCall(index, "segments", (missing,))
        except Exception as exc:
            logger.warning("the search index failed, scanning the archive: %s", exc)
            return None
        for key, text in runs.items():
            decoded = out[key] = decode_segments(text)
            _SEGMENTS.put((serial, *key), decoded)
    return out


def _plan_prune(index: LineIndex, namespace: tuple[str, ...], suspects: list[str]) -> Plan[None]:
    """Drop the rows of `suspects` the store no longer holds (deleted without our trigger).

    Rows of an entry written after the listing are kept: the next search lists it.
    """
    try:
        stale = yield MethodCall(index, "unstored", (namespace, suspects))
        if stale:
            yield MethodCall(index, "forget", (namespace, stale))
    except Exception as exc:
        logger.debug("dropping stale search index rows failed: %s", exc)
