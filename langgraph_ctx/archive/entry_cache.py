"""The process cache of decoded archive entries, and the loads searches share.

Decoding an entry for search (`matching.searchable_entry`: the text split in lines, and
casefolded) costs more than reading it; a thread is searched again and again. `EntryCache`
keeps decoded entries per process, an `LRUCache` bounded by measured bytes (`SearchableEntry.size`):
entries are content-addressed and never change, so a cached entry never goes stale.

Searches running at once share each load (single flight): the first to miss an entry reads
and decodes it (`plan_entry`), the others wait for that load (`EntryLoad.wait_done` or
`await_done` through a `MethodCall` effect: an event in a thread, a future in an event loop)
rather than decode it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from langgraph_ctx._effects import MethodCall, Plan
from langgraph_ctx._ids import RefKind
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.archive.archive import Archive
from langgraph_ctx.archive.matching import SearchableEntry, searchable_entry
from langgraph_ctx.checks import check_int
from langgraph_ctx.errors import ArchiveCorruptError, ArchiveEntryNotFoundError

__all__ = ["EntryCache", "EntryLoad", "EntryNotReadInTime", "plan_entry"]


class EntryLoad:
    """One entry being read and decoded by one search, which others wait for."""

    def __init__(self) -> None:
        self.entry: SearchableEntry | None = None
        """The decoded entry once loaded; None before, or when the load failed."""
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def finish(self, entry: SearchableEntry | None) -> None:
        """End the load with `entry` (None: it failed) and wake every waiter."""
        with self._lock:
            self.entry = entry
            self._done.set()
            waiting, self._waiting = self._waiting, []
        for loop, future in waiting:  # each in its own loop's thread
            with contextlib.suppress(RuntimeError):  # that loop closed after its wait ended
                loop.call_soon_threadsafe(_wake, future)

    def wait_done(self, timeout: float) -> SearchableEntry | None:
        """The entry, waiting up to `timeout` s; None when the load failed or still runs."""
        self._done.wait(max(timeout, 0.0))
        return self.entry

    async def await_done(self, timeout: float) -> SearchableEntry | None:
        """`wait_done` without blocking the event loop (the loading search may run in it)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._done.is_set():
                return self.entry
            self._waiting.append((loop, future))
        await asyncio.wait([future], timeout=max(timeout, 0.0))  # no error when out of time
        return self.entry


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # not cancelled with its waiting task meanwhile
        future.set_result(None)


class EntryCache:
    """Decoded entries by reference, least recently used dropped first past `max_bytes`.

    Entries are content-addressed and immutable, so a cached entry never goes stale.
    Thread-safe; one shared instance serves the process unless a caller passes its own.
    It also knows which entries a search is loading (`start_load`), so searches running at
    once decode each entry once.

    Args:
        max_bytes: How much memory the cached entries may take (`SearchableEntry.size`:
            measured, the strings, offsets and sources each entry keeps).
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        check_int("max_bytes", max_bytes, minimum=0, example=64 * 1024 * 1024, owner="EntryCache")
        self.max_bytes = max_bytes
        self._entries: LRUCache[str, SearchableEntry] = LRUCache(
            max_bytes, size=lambda ref, entry: entry.size
        )
        self._loads: dict[str, EntryLoad] = {}
        self._lock = threading.Lock()  # guards `_loads`

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """How much memory the cached entries take (`SearchableEntry.size`)."""
        return self._entries.bytes

    def start_load(self, ref: str) -> EntryLoad | None:
        """The load of `ref` another search is running, or None: the caller loads it.

        A caller that gets None must end its load with `end_load`, however it ends.
        """
        with self._lock:
            running = self._loads.get(ref)
            if running is None:
                self._loads[ref] = EntryLoad()
            return running

    def end_load(self, ref: str, entry: SearchableEntry | None) -> None:
        """End the caller's load of `ref`: keep `entry` (None: the load failed), wake waiters."""
        if entry is not None:
            self.put(entry)
        with self._lock:
            load = self._loads.pop(ref, None)
        if load is not None:
            load.finish(entry)

    def get(self, ref: str) -> SearchableEntry | None:
        """The cached entry of `ref` (now the most recently used), or None."""
        return self._entries.get(ref)

    def put(self, entry: SearchableEntry) -> None:
        """Keep `entry`; one larger than `max_bytes` is not kept."""
        self._entries.put(entry.ref, entry)

    def clear(self) -> None:
        """Forget every entry (loads under way end as they would)."""
        self._entries.clear()


class EntryNotReadInTime(Exception):
    """The search's reading time ended before this entry was read."""


def plan_entry(
    archive: Archive, ref: str, ref_kind: RefKind, cache: EntryCache, deadline: float
) -> Plan[SearchableEntry | None]:
    """The entry of `ref`: cached, loaded by another search, or read and decoded here.

    Returns None for an entry gone since it was listed (a TTL) or damaged: nothing to show.

    Raises:
        EntryNotReadInTime: `deadline` (a `time.monotonic()` value) passed first.
    """
    entry = cache.get(ref)
    if entry is not None:
        return entry
    if time.monotonic() >= deadline:
        raise EntryNotReadInTime
    running = cache.start_load(ref)
    if running is not None:
        left = deadline - time.monotonic()
        waited: SearchableEntry | None = yield MethodCall(running, "wait_done", (left,))
        if waited is not None:
            return waited
        if time.monotonic() >= deadline:
            raise EntryNotReadInTime
    try:
        decoded = yield from archive.plan_read(ref)
        entry = searchable_entry(ref, ref_kind, decoded)
    except (ArchiveEntryNotFoundError, ArchiveCorruptError):
        return None
    finally:  # a failure, or the plan closed mid-read: the waiters must not wait for it
        if running is None:
            cache.end_load(ref, entry)
    if running is not None:  # the other load failed: this one is kept instead
        cache.put(entry)
    return entry
