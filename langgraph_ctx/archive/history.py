"""What a person sees: the thread's history for a UI, whole or a page at a time.

The live state is what the model gets next; after a hint rebuild or with `remove_summarized`
it holds a few messages while the archive holds the rest. A chat UI should render the history
instead: `full_history` (every message, in order) or `history_page` (the last `limit` messages,
or the `limit` messages before a given message id, for scrolling up), which reads only the
newest insurance dumps it needs instead of the whole archive.

Both are plans on plain data (the live messages, the ledger, an `Archive`); the thread views
on `ContextMemory` (`get_full_history`, `get_history_page`) read them through a compiled graph,
and `langgraph_ctx.graph.client` reads them from a LangGraph server through `langgraph_sdk`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_ctx._effects import Plan, both
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.dumps import plan_all_dump_refs
from langgraph_ctx.checks import check_bool, check_int, check_str
from langgraph_ctx.errors import ArchiveError, ConfigError
from langgraph_ctx.ledger.repair import load_ledger

logger = logging.getLogger("langgraph_ctx.memory")  # where these warnings were always logged
"""Warnings for what a run survives but an operator should see."""

__all__ = [
    "FullHistory",
    "afull_history",
    "ahistory_page",
    "full_history",
    "history_page",
    "plan_full_history",
    "plan_history_page",
]


class FullHistory(list[BaseMessage]):
    """The messages `full_history` could rebuild, in order, and the dumps it could not read.

    A list of messages like any other; `unreadable` names each insurance dump the archive
    could not give back, as `(reference, reason)`. One lost dump hides only its own messages:
    the live state and every other dump are still there.
    """

    unreadable: list[tuple[str, str]]

    def __init__(
        self, messages: Sequence[BaseMessage] = (), unreadable: Sequence[tuple[str, str]] = ()
    ) -> None:
        super().__init__(messages)
        self.unreadable = list(unreadable)


def plan_full_history(
    messages: Sequence[BaseMessage],
    ledger: Mapping[str, Any] | None,
    archive: Archive,
    *,
    strict: bool = False,
) -> Plan[FullHistory]:
    """`full_history` as a plan: it reads the dumps the ledger names, then merges."""
    check_bool("strict", strict)
    # Read as every build reads it: a part of the wrong shape (a hand edit, a crafted
    # checkpoint) is left out rather than raising an AttributeError below.
    ledger = None if ledger is None else load_ledger(ledger)
    dumps: list[list[BaseMessage]] = []
    unreadable: list[tuple[str, str]] = []
    try:
        refs = yield from plan_all_dump_refs(ledger, archive)
    except ArchiveError as exc:  # the index is lost: the ledger's own refs are still there
        if strict:
            raise
        index = ((ledger or {}).get("summary") or {}).get("dump_index")
        unreadable.append((str(index), str(exc)))
        refs = _dump_refs(ledger)
    for ref in refs:
        try:
            dump = yield from archive.plan_read(ref)
            if not isinstance(dump, list):
                msg = f"the ledger names {ref} as an insurance dump, but it holds no message list"
                raise ArchiveError(msg)
        except ArchiveError as exc:
            if strict:
                raise
            unreadable.append((ref, str(exc)))
            continue
        dumps.append(dump)
    if unreadable:
        logger.warning(
            "full history: %d insurance dump(s) could not be read, their messages are missing: %s",
            len(unreadable),
            "; ".join(reason for _, reason in unreadable),
        )
    return FullHistory(_merge_history(dumps, messages), unreadable)


full_history, afull_history = both(
    plan_full_history,
    doc="""Rebuild a thread's complete original history from its live state and its archive.

    Every message that left the live state did so only after landing in an insurance dump
    named in the ledger; the dumps and the live messages are merged in the order they were
    written, each message once (its live version when it is still live).

    Args:
        messages: The thread's live messages (`state["messages"]`).
        ledger: The thread's ledger (`state["context_ledger"]`).
        archive: The thread's archive.
        strict: Raise the archive's error when a dump cannot be read, instead of returning
            everything else with the dump named in `FullHistory.unreadable` (and a warning
            logged).

    Raises:
        ArchiveError: With `strict=True`, a dump the ledger names cannot be read.
    """,
)


def _dump_refs(ledger: Mapping[str, Any] | None) -> list[str]:
    """The dump refs the ledger names itself (the newest; see `all_dump_refs`)."""
    summary = (ledger or {}).get("summary") or {}
    return list(summary.get("dump_refs", []))


def _merge_history(
    dumps: Sequence[Sequence[BaseMessage]], live: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """One history from the dumps and the live messages, in the order they were written.

    Each source is an ordered excerpt of the thread. A dump need not be a contiguous piece:
    a summary leaves out the turn's pinned task, which a later dump (a hint rebuild, or the
    removal dump) then holds between its neighbours. So every source adds "a comes before b"
    for its consecutive messages and the merge is a topological sort of those constraints;
    ties go to the earliest source and position (the live state's leading system messages
    count as the first source). Each message appears once: its live version (the state may
    have changed it since it was dumped), else its newest dump.
    """
    # The live state's leading system messages are configuration that opens every history.
    head = list(itertools.takewhile(lambda m: isinstance(m, SystemMessage), live))
    sources = [head, *dumps, live]
    keys: list[list[str]] = []
    version: dict[str, BaseMessage] = {}
    rank: dict[str, tuple[int, int]] = {}
    anonymous = 0
    for s, source in enumerate(sources):
        row: list[str] = []
        in_row: set[str] = set()
        for p, message in enumerate(source):
            if message.id:
                key = message.id
            else:  # no id, nothing to match it with: a message of its own
                key, anonymous = f"\x00{anonymous}", anonymous + 1
            if key in in_row:
                continue
            row.append(key)
            in_row.add(key)
            version[key] = message  # later sources win: newer dumps, then live
            rank.setdefault(key, (s, p))
        keys.append(row)
    after: dict[str, set[str]] = {k: set() for k in rank}
    waiting = dict.fromkeys(rank, 0)
    for row in keys:
        for a, b in itertools.pairwise(row):
            if b not in after[a]:
                after[a].add(b)
                waiting[b] += 1
    ready = [(rank[k], k) for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        _, key = heapq.heappop(ready)
        out.append(key)
        for nxt in after[key]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, (rank[nxt], nxt))
    if len(out) < len(rank):  # contradictory sources (should not happen): keep what is left
        done = set(out)
        out += sorted((k for k in rank if k not in done), key=rank.__getitem__)
    return [version[k] for k in out]


def plan_history_page(
    messages: Sequence[BaseMessage],
    ledger: Mapping[str, Any] | None,
    archive: Archive,
    *,
    limit: int | None = None,
    before: str | None = None,
) -> Plan[list[BaseMessage]]:
    """`history_page` as a plan: it reads dumps newest first until the page is full."""
    _check_page(limit, before)
    if limit is None:  # every dump is needed: read them in order and merge once
        merged: list[BaseMessage] = yield from plan_full_history(
            messages, ledger, archive, strict=True
        )
        return merged if before is None else merged[: _position(merged, before)]
    refs = _dump_refs(ledger)  # the newest; the archive's dump index lists the older ones
    indexed = bool(((ledger or {}).get("summary") or {}).get("dump_index"))
    head = len(list(itertools.takewhile(lambda m: isinstance(m, SystemMessage), messages)))
    dumps: list[list[BaseMessage]] = []  # oldest first, a suffix of the ledger's dumps
    while True:
        merged = _merge_history(dumps, messages)
        everything = len(dumps) == len(refs) and not indexed
        end = len(merged)
        if before is not None:
            found = [i for i, m in enumerate(merged) if m.id == before]
            end = found[0] if found else _position(merged, before) if everything else -1
        # Until every dump is read, only what follows the oldest source read is certain: a
        # source repeats messages of older ones (a rebuild keeps the last request and its
        # answer) without what lay between them, which only the older dump holds.
        floor = _after_last(merged, dumps[0] if dumps else messages[head:], head)
        if end >= 0 and (everything or end - floor >= limit):
            return merged[max(0, end - limit) : end]
        if len(dumps) == len(refs):  # older dumps are needed: read the index only now
            refs, indexed = (yield from plan_all_dump_refs(ledger, archive)), False
            continue
        ref = refs[len(refs) - len(dumps) - 1]
        dump = yield from archive.plan_read(ref)
        if not isinstance(dump, list):
            msg = f"the ledger names {ref} as an insurance dump, but it holds no message list"
            raise ArchiveError(msg)
        dumps.insert(0, dump)


history_page, ahistory_page = both(
    plan_history_page,
    doc="""A page of the thread's complete history (`full_history`), for a UI.

    Without arguments it is the whole history. `limit=n` gives the last `n` messages;
    `before=message_id` ends the page just before that message (the first message of the page
    a UI shows, to scroll up). The archive's insurance dumps are read newest first and only
    until the page is full, so the last page of a long thread costs one or two reads.

    A page is the same slice of `full_history`: it is taken only from what follows every
    message of the oldest dump read (a dump repeats a few messages of the one before it, a
    rebuild keeps the last request and its answer, without what lay between them), and the
    messages written after a dump are in no older one.

    Args:
        messages: The thread's live messages (`state["messages"]`).
        ledger: The thread's ledger (`state["context_ledger"]`).
        archive: The thread's archive.
        limit: At most this many messages (a positive int); `None` for all of them.
        before: A message id of the thread; the page ends just before it.

    Raises:
        ConfigError: `limit` is not a positive int, or `before` names no message of the thread.
        ArchiveError: A dump the ledger names can not be read.
    """,
)


def _position(merged: Sequence[BaseMessage], before: str) -> int:
    """The position of the message `before` in the whole history; a clear error without it."""
    for n, message in enumerate(merged):
        if message.id == before:
            return n
    msg = (
        f"before={before!r} is not the id of a message of this thread; pass the id of a "
        "message from the page shown (its first message's .id)"
    )
    raise ConfigError(msg)


def _after_last(merged: Sequence[BaseMessage], source: Sequence[BaseMessage], head: int) -> int:
    """The position in `merged` just after the last message of `source` (at least `head`)."""
    ids = {m.id for m in source if m.id}
    anonymous = {id(m) for m in source if not m.id}
    positions = [
        n + 1 for n, m in enumerate(merged) if (m.id in ids if m.id else id(m) in anonymous)
    ]
    return max([head, *positions])


def _check_page(limit: Any, before: Any) -> None:
    check_int("limit", limit, minimum=1, optional=True, example=50)
    check_str("before", before, optional=True, note="a message id")
