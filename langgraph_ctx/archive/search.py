r"""Search one thread's archive: find a line the agent lost, in one call.

`search_archive(archive, "connection refused")` (or `asearch_archive`, or the agent's
`search_history` tool from `make_search_tool`) lists the thread's entries (`Archive.plan_refs`,
so the backend must list: `ListableBackend`), reads those it has not decoded before, matches
line by line (`matching`: the query syntax and the ranking rule) and answers with at most
`limit` hits, each with the exact `recall(...)` call that reads more around it. The answer is
tool data, at most `max_chars` characters, the same bytes for the same query and archive.

When the archive is in a SQL store (`SqliteStore`, `PostgresStore` and their async twins),
its lines are indexed in that database as they are archived (`line_index`), and a search for
words or phrases (or a regular expression holding a plain run of characters) asks the
database for the lines holding them (`index_search`): the same hits and the same answer,
without reading the entries. Another pattern, an in-memory store or a directory archive, or a
database where the index could not be set up, scans:

Decoded entries are kept per process in an `EntryCache` (`entry_cache`), an LRU bounded by
measured bytes: entries are content-addressed and never change, so a repeated search only
reads keys it has not seen, and searches running at once decode each entry once.

Bounded whatever the query or the archive: reading entries not yet decoded stops after
`READ_SECONDS`, matching after `ranking.SEARCH_SECONDS` or `ranking.MAX_HITS` lines, and
the answer after `max_chars`; an answer that stopped early says it is partial, how much it
searched and how to narrow the query.

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langgraph.store.memory import InMemoryStore
    >>> from langgraph_ctx.archive import Archive
    >>> archive = Archive(InMemoryStore(), thread_id="t1")
    >>> ref = archive.put_message(
    ...     ToolMessage("ok\nERROR disk full\nok", tool_call_id="c1", name="bash")
    ... )
    >>> print(search_archive(archive, "disk full").splitlines()[3])
    > 2: ERROR disk full
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field

from langgraph_ctx._effects import Plan, both
from langgraph_ctx._ids import RefKind
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.entry_cache import EntryCache, EntryNotReadInTime, plan_entry
from langgraph_ctx.archive.index_search import line_index_of, plan_indexed_entries
from langgraph_ctx.archive.matching import (
    SearchableEntry,
    SearchKind,
    line_filter,
    parse_query,
)
from langgraph_ctx.archive.ranking import find_hits
from langgraph_ctx.archive.recall import archive_source, archive_tool
from langgraph_ctx.archive.search_answer import bounded, render_hits
from langgraph_ctx.checks import check_int, check_str
from langgraph_ctx.errors import ArchiveError, shorten
from langgraph_ctx.messages.content import RECALLED_KEY
from langgraph_ctx.prompt.assembly import SEARCH_TOOL_MARK

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "READ_SECONDS",
    "SearchArgs",
    "asearch_archive",
    "make_search_tool",
    "plan_search",
    "search_archive",
]

DEFAULT_LIMIT = 8
"""Hits shown when the caller names no limit."""

MAX_LIMIT = 30
"""Most hits one answer shows."""

READ_SECONDS = 1.0
"""How long one search may read and decode entries it has not decoded before; the rest wait
for the next search (the answer says it is partial), which starts where the cache ends."""

_SHARED = EntryCache()


def plan_search(
    archive: Archive,
    query: str,
    *,
    kind: SearchKind = "any",
    tool: str | None = None,
    limit: int = DEFAULT_LIMIT,
    regex: bool = False,
    max_chars: int = 4_000,
    cache: EntryCache | None = None,
    tool_name: str = "search_history",
    recall_name: str = "recall",
) -> Plan[str]:
    """`search_archive` as a plan, to compose with `yield from`.

    A bad query, filter or pattern returns a one-line error answer; one that runs out of
    time or matches too much, a partial answer that says so; a backend failure raises
    `ArchiveError`.
    """
    try:
        parsed = parse_query(query, regex=regex)
        within = line_filter(kind, tool)
        limit = _checked(limit)
    except ValueError as exc:
        return bounded(f"{tool_name}: {exc}", max_chars)
    cache = _SHARED if cache is None else cache
    read_until = time.monotonic() + READ_SECONDS
    listed: list[tuple[RefKind, list[str]]] = []
    for ref_kind in within.ref_kinds:
        listed.append((ref_kind, (yield from archive.plan_refs(ref_kind))))
    index = line_index_of(archive)
    served = None
    if index is not None:
        served = yield from plan_indexed_entries(
            archive, index, listed, parsed, cache, read_until, within
        )
    if served is not None:
        searched, unread = served.searched, served.unread
        hits = find_hits(served.entries, parsed, within=within)
        hits = yield from served.plan_neighbours(hits, limit)
    else:
        entries, unread = yield from _plan_scan(archive, listed, cache, read_until)
        searched = len(entries)
        hits = find_hits(entries, parsed, within=within)
    return render_hits(
        hits,
        query=query,
        searched=searched,
        limit=limit,
        max_chars=max_chars,
        tool_name=tool_name,
        recall_name=recall_name,
        unread=unread,
    )


def _plan_scan(
    archive: Archive,
    listed: list[tuple[RefKind, list[str]]],
    cache: EntryCache,
    read_until: float,
) -> Plan[tuple[list[SearchableEntry], int]]:
    """Every listed entry, cached or read and decoded within `read_until`; and how many not."""
    entries: list[SearchableEntry] = []
    unread = 0
    for ref_kind, refs in listed:
        for ref in refs:
            try:
                entry = yield from plan_entry(archive, ref, ref_kind, cache, read_until)
            except EntryNotReadInTime:
                unread += 1
                continue
            if entry is not None:
                entries.append(entry)
    return entries, unread


def _checked(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        msg = f"limit must be a whole number from 1 to {MAX_LIMIT}, got {shorten(limit, 30)}"
        raise ValueError(msg)
    return min(limit, MAX_LIMIT)


search_archive, asearch_archive = both(
    plan_search,
    name="search_archive",
    doc="""Search the lines of one thread's archive; the answer is text for the agent.

    Args:
        archive: The thread's archive; nothing outside its thread (and user) is read.
        query: Words (a line needs at least one; lines with all, in order, rank first), and
            "quoted phrases" (each must be on the line); or a regular expression if `regex`.
        kind: `"tool"` (tool outputs), `"turn"` (shortened AI turns), `"summarized"`
            (messages a summary replaced), or `"any"`.
        tool: Only outputs of this tool.
        limit: Most hits shown, 1 to `MAX_LIMIT` (more is capped).
        regex: Treat `query` as one regular expression (time-bounded).
        max_chars: Most characters in the answer.
        cache: Where decoded entries are kept; default one shared per process.
        tool_name: The search tool's name, as the answer's header line names it.
        recall_name: The recall tool's name, as each hit's call to read around it names it.

    Returns:
        A header line and the hits, best first (the rule is in `matching`), each with the
        `recall(...)` call that reads around it; or a one-line error for a bad query. A search
        stopped by its bounds (`READ_SECONDS`, `ranking.SEARCH_SECONDS`, `ranking.MAX_HITS`)
        says in its header that it is partial and how much it searched.

    Raises:
        ArchiveError: The backend can not list its entries (`ListableBackend`) or failed.
    """,
    adoc="Async `search_archive`.",
)


SEARCH_DESCRIPTION = (
    'Find a line of earlier output no longer shown, by words or a "quoted phrase"; each hit '
    "gives the recall call that reads around it."
)
"""The tool description the model sees: short (it is sent with every call once bound)."""


class SearchArgs(BaseModel):
    """Arguments of the `search_history` tool (described tersely: the schema is sent often)."""

    query: str = Field(description='Words or a "quoted phrase".')
    kind: SearchKind = Field(default="any", description="Where to look.")
    tool: str = Field(default="", description="Only this tool's outputs.")
    limit: int = Field(default=DEFAULT_LIMIT, description=f"Most hits (max {MAX_LIMIT}).")
    regex: bool = Field(default=False, description="query is a regular expression.")


def make_search_tool(
    archive: Archive | Callable[[], Archive],
    *,
    name: str = "search_history",
    max_chars: int = 4_000,
    recall_name: str = "recall",
    cache: EntryCache | None = None,
) -> BaseTool:
    """Build the search tool over one thread's archive.

    Args:
        archive: The archive of the thread the agent runs in; the tool reads nothing else.
            A callable is asked for the archive at each call (e.g. the current run's thread).
        name: The tool name the model sees.
        max_chars: Most characters per answer (keeps the next prompt within budget).
        recall_name: The name of the recall tool the hits tell the model to call.
        cache: Where decoded entries are kept; default one shared per process.

    Returns:
        A `StructuredTool` with sync and async implementations and `handle_tool_error=True`,
        so an archive failure comes back to the model as an error message.

    Raises:
        ConfigError: `max_chars` under 1,000, a bad `name`, or `archive` of the wrong type.
    """
    check_int("max_chars", max_chars, minimum=1_000, example=4_000, note="it caps each answer")
    check_str("name", name, example="search_history")
    check_str("recall_name", recall_name, example="recall")
    archive_of = archive_source(archive, tool_name=name)  # no thread: a tool error says so

    # Like a `recall` result, an answer the agent asked for whole is not excerpted as it
    # arrives (`is_recalled`): an excerpt of a search answer would hide the hits it found.
    searched = {RECALLED_KEY: name}

    def plan(query: str, **filters: Any) -> Plan[tuple[str, dict[str, str]]]:
        # `filters`: the other `SearchArgs` the model gave (kind, tool, limit, regex).
        current = archive_of()
        try:
            answer = yield from plan_search(
                current,
                query,
                max_chars=max_chars,
                cache=cache,
                tool_name=name,
                recall_name=recall_name,
                **filters,
            )
        except ArchiveError as exc:
            raise ToolException(bounded(f"{name} failed: {exc}", max_chars)) from exc
        return answer, searched

    return archive_tool(
        plan,
        name=name,
        description=SEARCH_DESCRIPTION,
        args_schema=SearchArgs,
        metadata={SEARCH_TOOL_MARK: True},
        handle_validation_error=lambda exc: bounded(
            f"{name}: bad arguments: {shorten(str(exc), 300)}", max_chars
        ),
    )
