"""`LRUCache`: the package's one bounded, thread-safe cache.

Every cache a process keeps (token counts per message, provider counts, recent builds, the
models seen called, decoded archive entries) is one of these: least recently used dropped
first once the entries take more than `max_bytes`, or number more than `max_items`. Bytes are
measured per entry by the owner's `size(key, value)` when it knows better (an archive entry
measures its strings), else by `measured`: the shallow `sys.getsizeof` of key and value. Each
entry's size is taken once, when it is put, and kept with it, so `bytes` is exactly the sum of
what the entries kept were measured at. A cache whose owner's option counts entries
(`TiktokenCounter(cache_size=...)`) keeps that meaning with `max_items`.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from langgraph_ctx.checks import check_int
from langgraph_ctx.errors import ConfigError

__all__ = ["LRUCache", "measured"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def measured(key: object, value: object) -> int:
    """The bytes of an entry: `sys.getsizeof` of key and value (the objects, not what they hold)."""
    return sys.getsizeof(key) + sys.getsizeof(value)


class LRUCache(Generic[K, V]):
    """Values by key, least recently used dropped first past `max_bytes` or `max_items`.

    Thread-safe: every method holds one lock; `size` runs outside it. A value larger than
    `max_bytes` is not kept. `get` returns None on a miss, so cache no None values.

    Example:
        >>> cache: LRUCache[str, int] = LRUCache(max_items=2)
        >>> for key, value in [("a", 1), ("b", 2)]:
        ...     _ = cache.put(key, value)
        >>> cache.get("a")  # now the most recently used
        1
        >>> cache.put("c", 3)
        True
        >>> cache.get("b") is None  # the least recently used, dropped for "c"
        True

    Args:
        max_bytes: How many bytes the entries may take, as `size` measures them (None: no
            byte bound).
        max_items: How many entries to keep (None: no count bound; 0 keeps nothing).
        size: The bytes of one entry, given its key and value; default `measured`.
    """

    def __init__(
        self,
        max_bytes: int | None = None,
        *,
        max_items: int | None = None,
        size: Callable[[K, V], int] = measured,
    ) -> None:
        check_int("max_bytes", max_bytes, optional=True, example=64 << 20, owner="LRUCache")
        check_int("max_items", max_items, optional=True, example=1024, owner="LRUCache")
        if max_bytes is None and max_items is None:
            msg = "LRUCache needs a bound; pass max_bytes=..., max_items=... or both"
            raise ConfigError(msg)
        self.max_bytes = max_bytes
        """The byte budget (None: none)."""
        self.max_items = max_items
        """The count bound (None: none)."""
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:  # never seen mid-`put`, over the bound
            return len(self._entries)

    @property
    def bytes(self) -> int:
        """The bytes the entries take: the sum of their sizes when they were put."""
        with self._lock:
            return self._bytes

    def get(self, key: K) -> V | None:
        """The value of `key` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def get_many(self, keys: Iterable[K]) -> list[V | None]:
        """`get` of each key in one hold of the lock (None for a miss)."""
        found: list[V | None] = []
        with self._lock:
            entries = self._entries
            for key in keys:
                entry = entries.get(key)
                if entry is None:
                    found.append(None)
                else:
                    entries.move_to_end(key)
                    found.append(entry[0])
        return found

    def put(self, key: K, value: V) -> bool:
        """Keep `value` as the most recently used; whether it was kept.

        It replaces what `key` held. It is not kept (and `key` holds nothing) when it alone
        takes more than `max_bytes` or `max_items` is 0; older entries go to make room.
        """
        size = self._size(key, value)
        if not isinstance(size, int) or size < 0:
            msg = f"size must give an entry's bytes as an int >= 0, got {size!r}; fix the size"
            raise ConfigError(msg)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if (self.max_bytes is not None and size > self.max_bytes) or self.max_items == 0:
                return False
            self._entries[key] = (value, size)
            self._bytes += size
            while (self.max_bytes is not None and self._bytes > self.max_bytes) or (
                self.max_items is not None and len(self._entries) > self.max_items
            ):
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
            return True

    def pop(self, key: K) -> V | None:
        """Forget `key`; the value it held, or None."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return None
            self._bytes -= entry[1]
            return entry[0]

    def values(self) -> list[V]:
        """The values kept, least recently used first."""
        with self._lock:
            return [value for value, _ in self._entries.values()]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
