"""`LRUCache`: the package's one bounded, thread-safe cache.

Every cache a process keeps (token counts per message and per piece of text, provider
counts, rendered placeholders, the names in a text, the models seen called, decoded archive
entries, the summary preparer's preparations) is one of these: least recently used dropped
first once the entries take more than `max_bytes`, or number more than `max_items`. Bytes are
measured per entry by the owner's `size(key, value)` when it knows better (an archive entry
measures its strings), else by `measured`: the shallow `sys.getsizeof` of key and value, or
`measured_deep` for entries that hold strings or messages of any length. Each entry's size is
taken once, when it is put, and kept with it, so `bytes` is exactly the sum of what the
entries kept were measured at. A cache whose owner's option counts entries
(`TiktokenCounter(cache_size=...)`) keeps that meaning with `max_items`.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from langgraph_ctx.checks import check_int
from langgraph_ctx.errors import ConfigError

__all__ = ["LRUCache", "measured", "measured_deep", "serial_of"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def measured(key: object, value: object) -> int:
    """The bytes of an entry: `sys.getsizeof` of key and value (the objects, not what they hold)."""
    return sys.getsizeof(key) + sys.getsizeof(value)


_CONTAINERS = (tuple, list, set, frozenset)


def measured_deep(key: object, value: object) -> int:
    """The bytes of an entry and of what it holds, each object reached counted once.

    `sys.getsizeof` of key and value and of every object reached through tuples, lists, sets,
    dicts (keys and values) and pydantic models' field values (a message's content, tool calls
    and metadata); any other object counts shallow. For entries whose size follows the text they
    hold (a text's names, a rendered message and its source).
    """
    getsizeof = sys.getsizeof
    total = 0
    seen: set[int] = set()
    todo: list[object] = [key, value]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += getsizeof(obj)
        if type(obj) is str:
            continue
        if isinstance(obj, _CONTAINERS):
            todo.extend(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.keys())
            todo.extend(obj.values())
        elif hasattr(type(obj), "__pydantic_fields__") and isinstance(
            fields := getattr(obj, "__dict__", None), dict
        ):
            total += getsizeof(fields)  # its keys are the field names every instance shares
            todo.extend(fields.values())
    return total


_SERIALS: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
_SERIALS_LOCK = threading.Lock()
_NEXT_SERIAL = itertools.count(1)


def serial_of(owner: object) -> int:
    """A number for `owner` never given to another object, for a cache keyed by it.

    An object's `id` can be reused once it is collected, so a cache keyed by `id(store)` could
    answer a new store with an old one's entries; `owner` must accept weak references.
    """
    with _SERIALS_LOCK:
        found = _SERIALS.get(owner)
        if found is None:
            found = _SERIALS[owner] = next(_NEXT_SERIAL)
        return found


class LRUCache(Generic[K, V]):
    """Values by key, least recently used dropped first past `max_bytes` or `max_items`.

    Thread-safe: every method holds one lock (`size` runs outside it), except `peek`, a plain
    dict read that needs none. A value larger than `max_bytes` is not kept. `get` and `peek`
    return None on a miss, so cache no None values.

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
        >>> cache.peek("a")  # read without the lock; not a use
        1

    Args:
        max_bytes: How many bytes the entries may take, as `size` measures them (None: no
            byte bound).
        max_items: How many entries to keep (None: no count bound; 0 keeps nothing).
        size: The bytes of one entry, given its key and value; default `measured`.
        on_drop: Called with each entry dropped to make room (not one replaced or popped),
            after the cache's lock is released: for entries that own work to stop (the
            summary preparer's preparations). None: nothing is called.
    """

    def __init__(
        self,
        max_bytes: int | None = None,
        *,
        max_items: int | None = None,
        size: Callable[[K, V], int] = measured,
        on_drop: Callable[[K, V], object] | None = None,
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
        self._on_drop = on_drop
        # The values, and beside them each key's size in recency order (least recent first):
        # changed together, only under the lock, so `peek` can read `_values` without it. The
        # order needs the lock even to move a key (`get`): an OrderedDict changed by two
        # threads at once can crash a free-threaded CPython (python/cpython#125996).
        self._values: dict[K, V] = {}
        self._order: OrderedDict[K, int] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.peek: Callable[[K], V | None] = self._values.get
        """The value of `key`, or None, read without the lock and not counted as a use.

        For the hottest reads (a value per piece or word of a text): one dict read, atomic in
        CPython (with or without the GIL), so it is safe beside threads that put and evict, and
        it can be mapped over many keys at C speed. An entry only ever peeked at ages as if
        unused: it goes in the order it was put (or last `get`), which a cache of values cheap
        to make again can afford.
        """

    def __len__(self) -> int:
        with self._lock:  # never seen mid-`put`, over the bound
            return len(self._order)

    @property
    def bytes(self) -> int:
        """The bytes the entries take: the sum of their sizes when they were put."""
        with self._lock:
            return self._bytes

    def get(self, key: K) -> V | None:
        """The value of `key` (now the most recently used), or None."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._order.move_to_end(key)
            return value

    def get_many(self, keys: Iterable[K]) -> list[V | None]:
        """`get` of each key in one hold of the lock (None for a miss)."""
        found: list[V | None] = []
        with self._lock:
            values, order = self._values, self._order
            for key in keys:
                value = values.get(key)
                if value is not None:
                    order.move_to_end(key)
                found.append(value)
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
        max_bytes, max_items = self.max_bytes, self.max_items
        dropped: list[tuple[K, V]] = []
        with self._lock:
            values, order = self._values, self._order
            old = order.pop(key, None)
            if old is not None:
                self._bytes -= old
            if (max_bytes is not None and size > max_bytes) or max_items == 0:
                if old is not None:
                    del values[key]
                return False
            values[key] = value  # a `peek` meanwhile sees the old value or the new one
            order[key] = size
            self._bytes += size
            while (max_bytes is not None and self._bytes > max_bytes) or (
                max_items is not None and len(order) > max_items
            ):
                oldest, oldest_size = order.popitem(last=False)
                dropped.append((oldest, values.pop(oldest)))
                self._bytes -= oldest_size
        if self._on_drop is not None:
            for entry in dropped:
                self._on_drop(*entry)
        return True

    def pop(self, key: K) -> V | None:
        """Forget `key`; the value it held, or None."""
        with self._lock:
            size = self._order.pop(key, None)
            if size is None:
                return None
            self._bytes -= size
            return self._values.pop(key)

    def values(self) -> list[V]:
        """The values kept, least recently used first."""
        with self._lock:
            values = self._values
            return [values[key] for key in self._order]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._values.clear()  # in place: `peek` reads this dict
            self._order.clear()
            self._bytes = 0
