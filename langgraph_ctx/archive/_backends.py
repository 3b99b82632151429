"""Archive backends: where the archive's bytes live.

`StoreBackend` keeps them in any LangGraph `BaseStore` (`InMemoryStore`, `PostgresStore` for
many workers sharing one database); `DirectoryBackend` keeps them in a plain directory (the
embedded default for the command line and notebooks) with owner-only files, atomic writes and
no path traversal. Both are sync and async; `Archive` (in `archive.py`) sits on top.

Both also list a namespace (`ListableBackend`: `keys`/`akeys`, newest write first), which
searching the archive needs; a backend of your own needs only `put`/`get`/`aput`/`aget` to
archive and recall, and `keys` (with an optional `akeys`) to be searched.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langgraph.store.base import BaseStore

from langgraph_ctx._effects import MethodCall, Plan, SearchStore, both
from langgraph_ctx._ids import RefKind, sha256_hex
from langgraph_ctx._lru import LRUCache
from langgraph_ctx.archive.line_index import Entry, LineIndex, indexed_entry
from langgraph_ctx.archive.sql_store import StoreSql, listing_failed, listing_op
from langgraph_ctx.checks import check_path
from langgraph_ctx.errors import ArchiveAccessError, ArchiveCorruptError

_UTF8 = "utf-8"
logger = logging.getLogger("langgraph_ctx.archive")
Namespace = tuple[str, ...]
_UNBOUNDED_READ = {"write": False, "bounded": False}
"""How a listing runs: a read without the index's time bound (the store's own table)."""


@runtime_checkable
class ArchiveBackend(Protocol):
    """Moves bytes in and out of a namespaced key-value space, sync and async.

    `put` overwrites; `get` returns `None` for a missing key.
    """

    def put(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Store `data` under `namespace`/`key`."""
        ...

    def get(self, namespace: Namespace, key: str) -> bytes | None:
        """The bytes under `namespace`/`key`, or `None` when there are none."""
        ...

    async def aput(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Async `put`."""
        ...

    async def aget(self, namespace: Namespace, key: str) -> bytes | None:
        """Async `get`."""
        ...


@runtime_checkable
class ListableBackend(Protocol):
    """An archive backend that can also list a namespace, which searching the archive needs.

    Optional on purpose: a backend with only `put`/`get` archives and recalls; add `keys`
    (and, if your backend has async I/O, `akeys`; without it the async search lists in a
    worker thread) to make it searchable.
    """

    def keys(self, namespace: Namespace) -> list[str]:
        """The keys under `namespace` (not below it), newest write first; ties by key.

        A backend that does not know when a key was written returns them in any stable order.
        A missing namespace has no keys (`[]`).
        """
        ...

    async def akeys(self, namespace: Namespace) -> list[str]:
        """Async `keys`."""
        ...


def cannot_list(backend: object) -> str:
    """The error text for searching an archive whose backend has no `keys`."""
    return (
        f"archive backend {type(backend).__name__} can not list its entries, which searching "
        "the archive needs: give it keys(namespace) -> list[str] returning the keys under that "
        "namespace, newest first (and, optionally, async akeys); see "
        "langgraph_ctx.archive.ListableBackend"
    )


_PAGE = 1_000
"""Items per `store.search` page when a store is listed through the generic API."""


def newest_first(written: Iterable[tuple[str, Any]]) -> list[str]:
    """Keys ordered by their write stamp, newest first, ties by key (a stamp sorts with `<`)."""
    ordered = sorted(written, key=lambda kv: kv[0])
    ordered.sort(key=lambda kv: kv[1], reverse=True)  # stable: equal stamps keep key order
    return [key for key, _ in ordered]


def _to_value(data: bytes) -> dict[str, Any]:
    # Text keeps entries readable in the store; NUL is refused by Postgres jsonb, hence base64.
    try:
        text = data.decode(_UTF8)
    except UnicodeDecodeError:
        text = None
    if text is not None and "\x00" not in text:
        encoding, payload = "utf-8", text
    else:
        encoding, payload = "base64", base64.b64encode(data).decode("ascii")
    return {"encoding": encoding, "data": payload, "sha256": sha256_hex(data), "size": len(data)}


def from_value(value: Mapping[str, Any], where: str) -> bytes:
    """The bytes of a store value holding an archive entry, checked against its sha256."""
    encoding, payload = value.get("encoding"), value.get("data")
    try:
        if encoding == "utf-8" and isinstance(payload, str):
            data = payload.encode(_UTF8)
        elif encoding == "base64" and isinstance(payload, str):
            data = base64.b64decode(payload.encode("ascii"), validate=True)
        else:
            msg = f"store item {where} is not an archive entry (encoding={encoding!r})"
            raise ArchiveCorruptError(msg)
    except (UnicodeEncodeError, binascii.Error) as exc:
        msg = f"store item {where} holds undecodable data: {exc}"
        raise ArchiveCorruptError(msg) from exc
    if value.get("sha256") != sha256_hex(data):
        msg = f"store item {where} does not match its recorded sha256; it was changed after writing"
        raise ArchiveCorruptError(msg)
    return data


class StoreBackend:
    """An `ArchiveBackend` on any LangGraph `BaseStore` (InMemoryStore, PostgresStore, ...).

    Each entry is one store item whose value is
    `{"encoding": "utf-8" | "base64", "data": ..., "sha256": ..., "size": ...}`.
    Items are written with `index=False`, so a store configured for semantic search does not
    embed archived outputs.

    Args:
        store: The store.
        index_lines: Index the lines of what is archived in the store's database, for
            search (`line_index.LineIndex`; only `SqliteStore`, `AsyncSqliteStore`,
            `PostgresStore` and `AsyncPostgresStore` have one). False archives without it:
            search then reads and decodes the entries (and indexes them as it reads them).
    """

    def __init__(self, store: BaseStore, *, index_lines: bool = True) -> None:
        self.store = store
        self.line_index: LineIndex | None = LineIndex.of(store) if index_lines else None
        """Where the lines of this store's entries are indexed; None: search scans."""

    def put(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Store `data` as one item."""
        self.store.put(namespace, key, _to_value(data), index=False)

    def _plan_put_indexed(
        self, namespace: Namespace, key: str, data: bytes, indexed: tuple[str, RefKind, Entry]
    ) -> Plan[None]:
        index = self.line_index
        entry = None if index is None or index.available is False else indexed_entry(indexed)
        if index is None or entry is None:
            yield MethodCall(self, "put", (namespace, key, data))
            return
        if self._puts_as_the_store:
            try:
                if (yield MethodCall(index, "put", (namespace, key, _to_value(data), entry))):
                    return
            except Exception as exc:  # the transaction failed: nothing written, put alone
                logger.debug("archiving with the index failed: %s: %s", type(exc).__name__, exc)
        yield MethodCall(self, "put", (namespace, key, data))
        try:
            yield MethodCall(index, "add", (namespace, key, entry))
        except Exception as exc:
            logger.debug("indexing %s/%s for search failed: %s", namespace, key, exc)

    put_indexed, aput_indexed = both(
        _plan_put_indexed,
        doc="""`put`, and index the entry `data` holds for search in the same transaction.

        `indexed` is the entry's reference, kind and decoded entry. One commit per archived
        entry, as `put` alone: the item and its index rows are written together or not at
        all. When that write is not to be had (no index, or the write failed), `put` writes
        the item and its lines are indexed after, if they can be (else search indexes the
        entry when it reads it). A subclass with a `put` or `aput` of its own keeps it: its
        items are written by it, and indexed after.
        """,
    )

    @property
    def _puts_as_the_store(self) -> bool:
        # The index writes the item with the store's own statements: only when this class
        # writes items as `store.put` does.
        return type(self).put is StoreBackend.put and type(self).aput is StoreBackend.aput

    def get(self, namespace: Namespace, key: str) -> bytes | None:
        """The bytes of one item, or `None` when missing."""
        item = self.store.get(namespace, key)
        return None if item is None else from_value(item.value, f"{namespace}/{key}")

    async def aput(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Async `put`."""
        await self.store.aput(namespace, key, _to_value(data), index=False)

    async def aget(self, namespace: Namespace, key: str) -> bytes | None:
        """Async `get`."""
        item = await self.store.aget(namespace, key)
        return None if item is None else from_value(item.value, f"{namespace}/{key}")

    def _plan_keys(self, namespace: Namespace) -> Plan[list[str]]:
        listing = listing_op(self.store, namespace)
        if listing is not None:
            try:
                sql = StoreSql(self.store)
                keys: list[str] = yield MethodCall(sql, "run", (listing,), kwargs=_UNBOUNDED_READ)
                return keys
            except Exception as exc:  # any failure (layout, setup): page search instead
                listing_failed(self.store, exc)
        written: dict[str, datetime] = {}
        offset = 0
        while True:
            items = yield SearchStore(self.store, namespace, None, _PAGE, offset)
            _collect(written, items, namespace)
            if len(items) < _PAGE:
                return newest_first(written.items())
            offset += len(items)

    keys, akeys = both(
        _plan_keys,
        doc="""The item keys of `namespace`, newest `updated_at` first.

        SQLite and Postgres stores are listed by one keys-only query; any other store through
        `store.search` pages (values included, which costs more).
        """,
    )


def _collect(written: dict[str, datetime], items: Iterable[Any], namespace: Namespace) -> None:
    # A search covers the namespace and those below it (another scope's entries can sit
    # there: a thread label equal to a user label); keep exactly this one. Pages are newest
    # first, so a write between two pages repeats an item (kept once), never hides one.
    for item in items:
        if tuple(item.namespace) == namespace:
            written[item.key] = item.updated_at


_SETTLED_NS = 2_000_000_000
"""How long a folder must be unchanged before its listing is reused (mtime granularity)."""

_LISTINGS_KEPT = 64
"""Folders whose listing a `DirectoryBackend` keeps."""

_PATH_PART = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,254}")


def _check_part(part: object, path: tuple[object, ...]) -> None:
    if not isinstance(part, str) or not _PATH_PART.fullmatch(part):
        msg = (
            f"refusing archive path part {part!r} in {path!r}: parts must "
            "match [A-Za-z0-9_~-][A-Za-z0-9._~-]* (no separators, no leading dot)"
        )
        raise ArchiveAccessError(msg)


class DirectoryBackend:
    """An `ArchiveBackend` writing one file per entry under `root/<namespace parts>/<key>`.

    Directories are created `0o700` and files `0o600` (owner only). Writes go to a temporary
    file in the same directory, are fsynced, then moved into place with `os.replace`, so a
    reader never sees half an entry. Namespace parts and keys must match
    `[A-Za-z0-9_~-][A-Za-z0-9._~-]*` and the resolved path must stay under `root`, which
    rules out path traversal (`..`, absolute parts, symlinks leading out).

    A relative `root` is made absolute once, here, against the current directory: an agent
    whose tools change directory mid-run keeps writing to and reading from the same archive.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        check_path("root", root, example=".langgraph_ctx/archive")
        self.root = Path(root).expanduser().absolute()
        # thread-safe: keys runs in worker threads under akeys
        self._listings: LRUCache[Path, tuple[tuple[int, int], list[str]]] = LRUCache(
            max_items=_LISTINGS_KEPT
        )

    def _path(self, namespace: Namespace, key: str) -> Path:
        for part in (*namespace, key):
            _check_part(part, (*namespace, key))
        path = self.root.joinpath(*namespace, key)
        root = self.root.resolve()
        if not path.resolve().is_relative_to(root):
            msg = f"refusing archive path {path}: it resolves outside the archive root {root}"
            raise ArchiveAccessError(msg)
        return path

    def _ensure_dirs(self, directory: Path) -> None:
        missing: list[Path] = []
        for candidate in (directory, *directory.parents):
            if candidate.exists():
                break
            missing.append(candidate)
        for d in reversed(missing):
            try:
                d.mkdir(mode=0o700)
            except FileExistsError:
                continue  # created concurrently by another writer
            os.chmod(d, 0o700)  # mkdir's mode is filtered by the umask

    def put(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Write `data` atomically to its file (owner-only permissions)."""
        path = self._path(namespace, key)
        self._ensure_dirs(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(path.parent)

    def get(self, namespace: Namespace, key: str) -> bytes | None:
        """The bytes of the entry's file, or `None` when it does not exist."""
        try:
            return self._path(namespace, key).read_bytes()
        except FileNotFoundError:
            return None

    async def aput(self, namespace: Namespace, key: str, data: bytes) -> None:
        """Async `put` (runs in a worker thread)."""
        await asyncio.to_thread(self.put, namespace, key, data)

    async def aget(self, namespace: Namespace, key: str) -> bytes | None:
        """Async `get` (runs in a worker thread)."""
        return await asyncio.to_thread(self.get, namespace, key)

    def keys(self, namespace: Namespace) -> list[str]:
        """The entry files of the namespace's folder, newest modification first.

        Temporary files of writes in progress (`.tmp-*`), folders, symbolic links and names
        that are not entry names are left out; a missing folder has no keys.
        """
        for part in namespace:
            _check_part(part, namespace)
        directory = self.root.joinpath(*namespace)
        if not directory.resolve().is_relative_to(self.root.resolve()):
            msg = f"refusing archive folder {directory}: it resolves outside the archive root"
            raise ArchiveAccessError(msg)
        try:
            folder = os.stat(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        # Listing stats every file (thousands in a long thread). A folder's mtime moves
        # whenever a file is added, replaced or removed, so a listing is reused while it stays
        # the same; only a folder untouched for `_SETTLED_NS` counts, since mtimes are coarser
        # than a write.
        signature = (folder.st_ino, folder.st_mtime_ns)
        settled = time.time_ns() - folder.st_mtime_ns > _SETTLED_NS
        cached = self._listings.get(directory)
        if settled and cached is not None and cached[0] == signature:
            return list(cached[1])
        written: list[tuple[str, int]] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if not _PATH_PART.fullmatch(entry.name) or entry.name.startswith(".tmp-"):
                        continue
                    try:
                        if entry.is_file(follow_symlinks=False):
                            written.append(
                                (entry.name, entry.stat(follow_symlinks=False).st_mtime_ns)
                            )
                    except FileNotFoundError:  # replaced or removed while listing
                        continue
        except (FileNotFoundError, NotADirectoryError):
            return []
        keys = newest_first(written)
        if settled:
            self._listings.put(directory, (signature, keys))
        return list(keys)

    async def akeys(self, namespace: Namespace) -> list[str]:
        """Async `keys` (runs in a worker thread)."""
        return await asyncio.to_thread(self.keys, namespace)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename durable; not every platform can open a directory, which is fine.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
