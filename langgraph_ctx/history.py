"""What a person sees: the thread's history for a UI, whole or a page at a time.

The live state is what the model gets next; after a hint rebuild or with `remove_summarized`
it holds a few messages while the archive holds the rest. A chat UI should render the history
instead: `full_history` (every message, in order) or `history_page` (the last `limit` messages,
or the `limit` messages before a given message id, for scrolling up), which reads only the
newest insurance dumps it needs instead of the whole archive.

Both are plans on plain data (the live messages, the ledger, an `Archive`); the thread views
on `ContextMemory` (`get_full_history`, `get_history_page`) read them through a compiled graph,
and `langgraph_ctx.client` reads them from a LangGraph server through `langgraph_sdk`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_ctx._effects import Plan, arun_plan, run_plan
from langgraph_ctx.archive import Archive
from langgraph_ctx.errors import ArchiveError, ConfigError

__all__ = ["ahistory_page", "history_page", "plan_history_page"]


def plan_history_page(
    messages: Sequence[BaseMessage],
    ledger: Mapping[str, Any] | None,
    archive: Archive,
    *,
    limit: int | None = None,
    before: str | None = None,
) -> Plan[list[BaseMessage]]:
    """`history_page` as a plan: it reads dumps newest first until the page is full."""
    from langgraph_ctx._dumps import plan_all_dump_refs
    from langgraph_ctx.memory import _dump_refs, _merge_history, _plan_full_history

    _check_page(limit, before)
    if limit is None:  # every dump is needed: read them in order and merge once
        merged: list[BaseMessage] = yield from _plan_full_history(
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


def history_page(
    messages: Sequence[BaseMessage],
    ledger: Mapping[str, Any] | None,
    archive: Archive,
    *,
    limit: int | None = None,
    before: str | None = None,
) -> list[BaseMessage]:
    """A page of the thread's complete history (`memory.full_history`), for a UI.

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
    """
    return run_plan(plan_history_page(messages, ledger, archive, limit=limit, before=before))


async def ahistory_page(
    messages: Sequence[BaseMessage],
    ledger: Mapping[str, Any] | None,
    archive: Archive,
    *,
    limit: int | None = None,
    before: str | None = None,
) -> list[BaseMessage]:
    """Async twin of `history_page`."""
    return await arun_plan(plan_history_page(messages, ledger, archive, limit=limit, before=before))


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
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        msg = f"limit must be a positive int or None, got {type(limit).__name__} {limit!r}"
        raise ConfigError(msg)
    if before is not None and (not isinstance(before, str) or not before):
        msg = (
            f"before must be a message id (a non-empty str) or None, got "
            f"{type(before).__name__} {before!r}"
        )
        raise ConfigError(msg)
