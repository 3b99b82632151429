"""Search served by the database: the entries a search ranks, built from the line index.

When the archive's backend keeps a `line_index.LineIndex` (a SQL store), a word or phrase
search asks the database which lines of the thread hold the query's terms, not the entries:
`plan_indexed_entries` builds, for every listed entry, a sparse `SearchableEntry`
(`matching.sparse_entry`: those lines at their real indexes, the entry's real line count
and sources) that `ranking.find_hits` ranks exactly as the whole entry; the lines a
candidate must hold (every phrase, or a word) are the lines `find_hits` matches, so the
hits, their order and the header's counts are today's. `IndexedEntries.plan_neighbours`
then reads the line before and after each hit the answer shows.

An entry the index does not know (archived before the index, or by a write that failed
between the store and the index) is read and decoded as a scan does (`entry_cache`, within
the search's reading time) and indexed on the way: a bounded backfill that the next search
resumes. Index rows of keys not listed are ignored; those of items the store no longer holds
are dropped.

A database answer is capped at `CANDIDATES` lines, newest entry first; a query matching more
stops where a scan stops (`ranking.MAX_HITS`), and the answer says it is partial.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from langgraph_ctx._effects import MethodCall, Plan
from langgraph_ctx._ids import RefKind
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.entry_cache import EntryCache, EntryNotReadInTime, plan_entry
from langgraph_ctx.archive.line_index import (
    IndexedEntry,
    LineIndex,
    LineRow,
    decode_segments,
    holds,
)
from langgraph_ctx.archive.matching import Query, SearchableEntry, sparse_entry
from langgraph_ctx.archive.ranking import MAX_HITS, Hits
from langgraph_ctx.archive.search_answer import shown_hits

__all__ = ["CANDIDATES", "IndexedEntries", "line_index_of", "plan_indexed_entries"]

logger = logging.getLogger("langgraph_ctx.archive")

CANDIDATES = MAX_HITS + 512
"""Most lines one database answer holds: past `MAX_HITS` and the window `find_hits` then
ends, so a capped answer stops where a scan would."""

_Key = tuple[tuple[str, ...], str]
_Lines = dict[int, tuple[str | None, str]]
"""Known lines of an entry: `(line, casefolded)`, the line None until read (a candidate)."""


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
    unread: int
    """Entries not read in time (neither indexed nor decoded)."""
    capped: bool
    """The database's answer stopped at `CANDIDATES` lines."""
    sparse: dict[str, tuple[_Key, IndexedEntry, _Lines]] = field(default_factory=dict)
    """By reference: the entries built from the index, with the lines known of each."""

    def plan_neighbours(self, hits: Hits, limit: int) -> Plan[Hits]:
        """`hits` over entries that also hold the lines around each hit the answer shows."""
        wanted: dict[str, set[int]] = {}
        for at in shown_hits(hits, limit):
            hit = hits[at]
            known = self.sparse.get(hit.entry.ref)
            if known is None:
                continue  # a decoded entry holds every line
            first, end, _ = hit.entry.segment(hit.line_index)
            for n in (hit.line_index - 1, hit.line_index, hit.line_index + 1):
                if first <= n < end and known[2].get(n, (None,))[0] is None:
                    wanted.setdefault(hit.entry.ref, set()).add(n)
        stopped = "hits" if self.capped and hits.stopped is None else hits.stopped
        if not wanted:
            return hits if stopped == hits.stopped else hits.with_entries(self.entries, stopped)
        asked = [(*self.sparse[ref][0], n) for ref, lines in wanted.items() for n in sorted(lines)]
        try:
            rows: list[LineRow] | None = yield MethodCall(self.index, "lines", (asked,))
        except Exception as exc:  # the hits stand, shown casefolded, without context
            logger.warning("reading context lines from the search index failed: %s", exc)
            rows = None
        by_key = {key: ref for ref, (key, _, _) in self.sparse.items()}
        for row in rows or ():
            self.sparse[by_key[(row.namespace, row.key)]][2][row.line_no] = (row.text, row.folded)
        entries = [
            _sparse(entry.ref, entry.kind, self.sparse[entry.ref]) if entry.ref in wanted else entry
            for entry in self.entries
        ]
        self.entries = entries
        return hits.with_entries(entries, stopped)


def _sparse(ref: str, kind: RefKind, known: tuple[_Key, IndexedEntry, _Lines]) -> SearchableEntry:
    _, indexed, lines = known
    segments = decode_segments(indexed.segments) if lines else ()
    # A line not read yet stands in casefolded: it is matched casefolded, and shown only
    # once read (`plan_neighbours` reads every line an answer shows).
    text = {n: (f if t is None else t, f) for n, (t, f) in lines.items()}
    return sparse_entry(ref, kind, indexed.n_lines, text, segments)


def plan_indexed_entries(
    archive: Archive,
    index: LineIndex,
    listed: Sequence[tuple[RefKind, list[str]]],
    query: Query,
    cache: EntryCache,
    read_until: float,
) -> Plan[IndexedEntries | None]:
    """The entries of a word or phrase search, from the index; None: scan instead.

    `listed` is each kind's references as `Archive.plan_refs` lists them (newest first).
    None when the index is unavailable or failed (the search then scans, as without one).
    """
    assert query.pattern is None
    if not all(holds(term) for term in (*query.phrases, *query.words)):
        return None  # a term the database holds altered: the scan answers it exactly
    namespaces = [archive.namespace(kind) for kind, _ in listed]
    try:
        indexed = yield MethodCall(index, "entries", (namespaces,))
        if indexed is None:
            return None
        rows = yield MethodCall(index, "candidates", (namespaces, query, CANDIDATES))
    except Exception as exc:
        logger.warning("the search index failed, scanning the archive: %s", exc)
        return None
    if rows is None:
        return None
    found: dict[_Key, _Lines] = {}
    for row in rows:
        found.setdefault((row.namespace, row.key), {})[row.line_no] = (row.text, row.folded)
    if found:  # only an entry holding a candidate needs its sources (which lines are whose)
        try:
            runs = yield MethodCall(index, "segments", (list(found),))
        except Exception as exc:
            logger.warning("the search index failed, scanning the archive: %s", exc)
            return None
        for key, text in runs.items():
            if key in indexed:
                indexed[key] = indexed[key]._replace(segments=text)
    out = IndexedEntries(index, [], 0, len(rows) >= CANDIDATES)
    for (kind, refs), namespace in zip(listed, namespaces, strict=True):
        for ref in refs:
            key = (namespace, ref.rsplit(":", 1)[1])
            meta = indexed.get(key)
            if meta is not None and meta.stored:
                known = (key, meta, found.get(key, {}))
                out.sparse[ref] = known
                out.entries.append(_sparse(ref, kind, known))
                continue
            try:
                entry = yield from plan_entry(archive, ref, kind, cache, read_until)
            except EntryNotReadInTime:
                out.unread += 1
                continue
            if entry is None:
                continue
            out.entries.append(entry)
            try:  # the backfill: the next search finds it in the index
                yield MethodCall(index, "add", (namespace, key[1], entry))
            except Exception as exc:
                logger.debug("indexing %s for search failed: %s", ref, exc)
    yield from _plan_prune(index, [key for key, meta in indexed.items() if not meta.stored])
    return out


def _plan_prune(index: LineIndex, stale: list[_Key]) -> Plan[None]:
    """Drop the rows of entries the store no longer holds (deleted without our trigger).

    Rows of an entry written after the listing are kept: the next search lists it.
    """
    by_namespace: dict[tuple[str, ...], list[str]] = {}
    for namespace, key in stale:
        by_namespace.setdefault(namespace, []).append(key)
    for namespace, keys in by_namespace.items():
        try:
            yield MethodCall(index, "forget", (namespace, keys))
        except Exception as exc:
            logger.debug("dropping stale search index rows failed: %s", exc)
