"""The answer of an archive search: text for the agent, bounded in characters.

A header line says how many lines matched; each hit shows where it came from, the line (cut
around the match), one line of context on each side, and the exact `recall(...)` call that
reads more around it. Hits stop before the answer would pass `max_chars`, and a last line says
how many were left out and how to narrow the search. A search stopped by its bounds (out of
time, too many matching lines, entries not read in time) says so in its header line: how
much it searched, and how to narrow the query. Control characters, line and paragraph
separators and bidi controls in data are masked (`_UNPRINTABLE`), at the one place data is
cut for showing (`_cut`).
"""

from __future__ import annotations

from langgraph_ctx.archive.matching import Source
from langgraph_ctx.archive.ranking import MAX_HITS, SEARCH_SECONDS, Hit, Hits
from langgraph_ctx.errors import ACTING_CHARACTERS, shorten

__all__ = [
    "CONTEXT_CHARS",
    "LINE_CHARS",
    "RECALL_AROUND",
    "bounded",
    "render_hits",
    "shown_hits",
]

LINE_CHARS = 200
"""Longest matching line shown; a longer one is cut around the match."""

CONTEXT_CHARS = 120
"""Longest context line shown (the line before and after a hit)."""

RECALL_AROUND = 8
"""Lines before and after a hit that its `recall(...)` call reads."""


def bounded(text: str, max_chars: int) -> str:
    """`text`, cut to `max_chars` characters (the last one an ellipsis) when longer."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


_UNPRINTABLE = {c: "\ufffd" for span in ACTING_CHARACTERS for c in span if c != 9}
"""What a shown piece of data (a line, a tool name, an id) must not carry (`ACTING_CHARACTERS`
but the tab): each becomes U+FFFD. Line breaks would let an archived line pose as another hit
or as the tool's own words; bidi controls make a line read otherwise than it is."""


def _cut(line: str, at: int, width: int) -> str:
    """At most `width` characters of `line`, around offset `at`, control characters masked."""
    if len(line) > width:
        begin = max(0, min(at - width // 3, len(line) - width))
        head, tail = ("…" if begin else ""), ("…" if begin + width < len(line) else "")
        line = head + line[begin : begin + width - len(head) - len(tail)] + tail
    return line.translate(_UNPRINTABLE)


def _where(source: Source) -> str:
    parts = []
    if source.type == "tool":
        parts.append(f"tool output of {source.tool_name or 'a tool'}")
        if source.tool_call_id:
            parts.append(f"call {source.tool_call_id}")
    elif source.type == "ai":
        parts.append("AI turn")
    else:
        parts.append(f"{source.type} message" if source.type != "text" else "archived text")
    if source.message_id:
        parts.append(f"message {source.message_id}")
    where = ", ".join(_cut(p, 0, 80) for p in parts)
    if source.position is not None:
        return f"summarized message {source.position} of {source.count} ({where})"
    return where


def _render_hit(number: int, hit: Hit, repeats: int, recall_name: str) -> str:
    entry, index = hit.entry, hit.line_index
    first, end, source = entry.segment(index)
    lines = [f"[{number}] {_where(source)}, line {index + 1} of {entry.n_lines}"]
    if repeats:
        lines[0] += f" (the same line {repeats} more times)"
    if index > first:
        lines.append(f"  {index}: {_cut(entry.line(index - 1), 0, CONTEXT_CHARS)}")
    lines.append(f"> {index + 1}: {_cut(entry.line(index), hit.at, LINE_CHARS)}")
    if index + 1 < end:
        lines.append(f"  {index + 2}: {_cut(entry.line(index + 1), 0, CONTEXT_CHARS)}")
    start, stop = max(first + 1, index + 1 - RECALL_AROUND), min(end, index + 1 + RECALL_AROUND)
    lines.append(f'  more: {recall_name}(ref="{entry.ref}", start_line={start}, end_line={stop})')
    return "\n".join(lines)


def _grouped(hits: Hits, limit: int) -> list[tuple[int, int]]:
    """`(hit index, repeats)` of the first `limit` distinct lines, best first.

    A line repeated verbatim (within one output, or in outputs that read the same file again)
    is shown once, where it ranks best, with its count: the slots go to distinct lines. A
    search for a common word can match thousands of lines; only their text is compared.
    """
    groups: dict[str, int] = {}
    found: list[tuple[int, int]] = []
    for index in range(len(hits)):
        text = hits.text_of(index)
        at = groups.get(text)
        if at is not None:
            first, repeats = found[at]
            found[at] = (first, repeats + 1)
        elif len(found) < limit:
            groups[text] = len(found)
            found.append((index, 0))
    return found


def shown_hits(hits: Hits, limit: int) -> list[int]:
    """The indexes of the hits an answer of at most `limit` hits may show (`render_hits`)."""
    return [index for index, _ in _grouped(hits, limit)]


def render_hits(
    hits: Hits,
    *,
    query: str,
    searched: int,
    limit: int,
    max_chars: int,
    tool_name: str = "search_history",
    recall_name: str = "recall",
    unread: int = 0,
) -> str:
    """The answer: a header line, then up to `limit` hits, within `max_chars` characters.

    `unread`: entries left unread (out of reading time); with `hits.stopped`, the header
    then says the answer is partial.
    """
    found = [(hits[index], repeats) for index, repeats in _grouped(hits, limit)]
    total = len(hits)
    quoted = shorten(query, 60)
    partial = _partial(hits, unread)
    if not total:
        if partial:
            return bounded(f"{tool_name}: no line matches {quoted} so far ({partial})", max_chars)
        return bounded(
            f"{tool_name}: no line matches {quoted} in this thread's archive "
            f"({searched} entries searched)",
            max_chars,
        )
    lines = "line" if total == 1 else "lines"
    out = f"{tool_name}: {total} matching {lines} for {quoted}, best first"
    if partial:
        out += f" ({partial})"
    written = covered = 0
    for hit, repeats in found:
        block = _render_hit(written + 1, hit, repeats, recall_name)
        if written and len(out) + 1 + len(block) + _FOOTER_CHARS > max_chars:
            break
        out += "\n" + block
        written, covered = written + 1, covered + 1 + repeats
    if covered < total:
        out += (
            f'\n[{total - covered} more matching lines not shown; add words, use a "quoted '
            f'phrase", filter by kind or tool, or ask for more (up to 30)]'
        )
    return bounded(out, max_chars)


_FOOTER_CHARS = 130


def _partial(hits: Hits, unread: int) -> str:
    """Why the answer is partial and how to narrow the query; empty for a complete one."""
    if hits.stopped is None and not unread:
        return ""
    if hits.stopped == "hits":
        why = f"over {MAX_HITS:,} lines match, the search stopped there"
    elif hits.stopped == "time":
        why = f"the search ran out of time ({SEARCH_SECONDS * 1000:.0f} ms)"
    elif hits.stopped == "pattern":
        why = "the pattern ran out of time on a few lines (no nested repetition such as (a+)+)"
    else:
        why = f"{unread:,} entries were not read in time (asking again reads more)"
    searched = f"{hits.searched_lines:,} of {hits.total_lines:,} lines"
    if hits.stopped is not None and unread:
        searched += f" ({unread:,} entries not read yet)"
    return (
        f'PARTIAL: {why} after {searched}, newest first; use rarer words, a "quoted '
        'phrase" or a simpler pattern, or filter by kind or tool'
    )
