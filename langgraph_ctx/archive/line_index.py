r"""The search index: the lines of archived entries in tables of ours beside a SQL store's.

When the archive lives in LangGraph's `SqliteStore`, `AsyncSqliteStore`, `PostgresStore` or
`AsyncPostgresStore`, each entry's lines are written, as it is archived, to two tables in the
store's database:

- `lgctx_entries(id, prefix, key, kind, n_lines, segments)`: one row per indexed entry, unique
  by the store item's `(prefix, key)`; `segments` is the JSON of its `matching.Source` runs.
- `lgctx_lines`: each line as `matching.searchable_entry` numbers it, and casefolded
  (`str.casefold`; NULL when that changes nothing), under its entry's integer id (SQLite:
  one integer `id = entry id << 32 | line number`; PostgreSQL: `(entry_id, line_no)`), so a
  line costs its text and a few bytes, not the item's 100-character key again.

SQLite adds an FTS5 table (`lgctx_lines_fts`, `tokenize='trigram case_sensitive 1'`, external
content over `lgctx_lines`, kept in sync by triggers) and PostgreSQL a GIN `gin_trgm_ops`
index (`pg_trgm`) on the casefolded line, so the database answers "which lines of this thread
hold these substrings" without reading the entries. Query terms are casefolded as the lines
are and are always bound parameters: an FTS5 term is one quoted string (its quotes doubled),
a `LIKE` pattern has `%`, `_` and `\` escaped.

What leaves the store leaves the index: a SQLite trigger `AFTER DELETE ON store` (a delete,
a TTL sweep) and PostgreSQL foreign keys `ON DELETE CASCADE` remove an item's rows.

`setup()` (run on first use, idempotent) creates and migrates the tables under a version
table (`lgctx_index_migrations`), as LangGraph's savers do: in one `BEGIN IMMEDIATE`
transaction on SQLite, under a transaction-scoped advisory lock on PostgreSQL, so several
workers may set up at once. When that fails (no FTS5, no right to create `pg_trgm`) the
index is unavailable for the process, it says so once in the log, and search scans as it
does for other backends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langgraph_ctx._effects import MethodCall, Plan
from langgraph_ctx._ids import RefKind
from langgraph_ctx.archive._store_keys import SqlOp, Statement, StoreSql, sql_store_kind
from langgraph_ctx.archive.line_schema import LINES_OF, setup_op
from langgraph_ctx.archive.matching import Query, SearchableEntry, Source, searchable_entry

__all__ = [
    "IndexedEntry",
    "LineIndex",
    "RETRY_SECONDS",
    "LineRow",
    "decode_segments",
    "encode_segments",
    "holds",
    "plan_add",
]

logger = logging.getLogger("langgraph_ctx.archive")

T = TypeVar("T")
Namespace = tuple[str, ...]
Entry = BaseMessage | Sequence[BaseMessage] | str


class LineRow(NamedTuple):
    """One indexed line."""

    namespace: Namespace
    key: str
    line_no: int
    """0-based, as `SearchableEntry` numbers lines."""
    text: str | None
    """The line; None when not read (`candidates` reads the casefolded line alone)."""
    folded: str


class IndexedEntry(NamedTuple):
    """What the index knows of an entry besides its lines.

    A tuple: a search makes one per entry of the thread, thousands.
    """

    n_lines: int
    segments: str
    """The JSON of its `(first line, Source)` runs (`decode_segments`); empty until read
    (`segments`: a search reads them only for the entries holding a candidate line)."""
    stored: bool = True
    """Whether the store still holds the item (False: rows left behind, to drop)."""


_PG_ADD = (  # an entry and its lines; none when the entry is indexed already
    "WITH e AS (INSERT INTO lgctx_entries (prefix, key, kind, n_lines, segments)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id)"
    " INSERT INTO lgctx_lines (entry_id, line_no, text, folded)"
    " SELECT e.id, u.n - 1, u.t, u.f FROM e, unnest(?::text[], ?::text[])"
    " WITH ORDINALITY AS u (t, f, n)"
)
RETRY_SECONDS = 300
"""How long after a failed setup the index is tried again (a database that was down)."""

_INDEXES: weakref.WeakKeyDictionary[BaseStore, LineIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()
_LINE_NO = {"sqlite": "(l.id & 4294967295)", "postgres": "l.line_no"}
_JOIN = {  # a line to its entry, either way round (SQLite: the planner picks)
    "sqlite": "e.id = l.id >> 32 AND l.id BETWEEN e.id << 32 AND (e.id << 32) + 4294967295",
    "postgres": "l.entry_id = e.id",
}
_ORDER = {  # the order `keys_by_sql` lists a namespace in, kinds in the order given
    "sqlite": "s.updated_at DESC, s.rowid DESC",
    "postgres": "s.updated_at DESC, s.key ASC",
}


def encode_segments(segments: Iterable[tuple[int, Source]]) -> str:
    """The JSON of an entry's `(first line, Source)` runs."""
    return json.dumps(
        [
            [first, s.type, s.message_id, s.tool_name, s.tool_call_id, s.position, s.count]
            for first, s in segments
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_segments(text: str) -> tuple[tuple[int, Source], ...]:
    """The runs `encode_segments` wrote."""
    return tuple((int(row[0]), Source(*row[1:])) for row in json.loads(text))


def _storable(text: str) -> str:
    """`text` as a database can hold it, the same length.

    PostgreSQL refuses NUL and UTF-8 lone surrogates: each becomes U+FFFD, as a search shows
    them anyway.
    """
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def holds(term: str) -> bool:
    """Whether the index matches `term` as the scan does.

    True when it holds no character the index stores altered (`_storable`), nor U+FFFD, which
    stands for those in stored lines.
    """
    return "\ufffd" not in term and _storable(term) == term


def _prefix(namespace: Namespace) -> str:
    return ".".join(namespace)


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _fts_string(term: str) -> str:
    """An FTS5 string: the term as data, whatever it holds (operators, `*`, quotes)."""
    return '"' + term.replace('"', '""') + '"'


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def plan_add(
    backend: object, namespace: Namespace, key: str, ref: str, kind: RefKind, entry: Entry
) -> Plan[None]:
    """Index an entry `Archive` just wrote to `backend`, if the backend keeps a line index.

    A failure is logged, never raised: the entry is archived, and search indexes it when it
    reads it (`index_search`).
    """
    index = getattr(backend, "line_index", None)
    if not isinstance(index, LineIndex) or index.available is False:
        return
    try:
        yield MethodCall(index, "add", (namespace, key, searchable_entry(ref, kind, entry)))
    except Exception as exc:
        logger.debug("indexing %s for search failed: %s: %s", ref, type(exc).__name__, exc)


class LineIndex:
    """The line index in one SQL store's database (see the module); sync and async.

    Build it with `LineIndex.of(store)`; a `StoreBackend` holds one (`line_index`). Each
    method sets the tables up on first use; a read returns None while the index is
    unavailable (the caller scans), a write then does nothing.

    Args:
        store: A `SqliteStore`, `AsyncSqliteStore`, `PostgresStore` or `AsyncPostgresStore`.

    Raises:
        ValueError: `store` is none of those.
    """

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._sql = StoreSql(store)  # refuses another store
        self.dialect = self._sql.dialect
        self._state: bool | None = None
        self._retry_at = 0.0

    @classmethod
    def of(cls, store: BaseStore) -> LineIndex | None:
        """The index of `store`'s database, one per store; None for a store with no SQL tables."""
        if sql_store_kind(store) is None:
            return None
        with _INDEXES_LOCK:
            index = _INDEXES.get(store)
            if index is None:
                index = _INDEXES[store] = cls(store)
        return index

    @property
    def available(self) -> bool | None:
        """True once set up, None before, False after a failed setup (search scans).

        False turns None again `RETRY_SECONDS` later: the next use tries the setup again.
        """
        if self._state is False and time.monotonic() >= self._retry_at:
            return None
        return self._state

    @available.setter
    def available(self, state: bool | None) -> None:
        self._state = state
        self._retry_at = time.monotonic() + RETRY_SECONDS

    def setup(self) -> bool:
        """Create or migrate the tables now (idempotent); whether the index is available."""
        if self._sql.kind == "sqlite" and not getattr(self.store, "is_setup", True):
            self.store.setup()  # type: ignore[attr-defined]  # our trigger needs `store`
        try:
            self._sql.run(setup_op(self.dialect), write=True)
        except asyncio.InvalidStateError:
            raise  # an async store called from its own loop: not a reason to give up
        except Exception as exc:
            self._unavailable(exc)
        else:
            self.available = True
        return bool(self.available)

    async def asetup(self) -> bool:
        """Async `setup`."""
        if self._sql.kind == "asqlite" and not getattr(self.store, "is_setup", True):
            await self.store.setup()  # type: ignore[attr-defined]
        try:
            await self._sql.arun(setup_op(self.dialect), write=True)
        except Exception as exc:
            self._unavailable(exc)
        else:
            self.available = True
        return bool(self.available)

    def _unavailable(self, exc: Exception) -> None:
        if self._state is not False:
            logger.warning(
                "archive search index unavailable in %s (%s: %s); search scans the archive "
                "instead (needs SQLite FTS5 with the trigram tokenizer, or the right to "
                "CREATE EXTENSION pg_trgm); tried again in %d s",
                type(self.store).__name__,
                type(exc).__name__,
                exc,
                RETRY_SECONDS,
            )
        self.available = False

    # operations: each a generator of statements, run by `StoreSql` -----------------------

    def add(self, namespace: Namespace, key: str, entry: SearchableEntry) -> None:
        """Index `entry`, archived under `namespace`/`key` (nothing when already indexed)."""
        self._run(lambda: self._add_op(namespace, key, entry), write=True)

    async def aadd(self, namespace: Namespace, key: str, entry: SearchableEntry) -> None:
        """Async `add`."""
        await self._arun(lambda: self._add_op(namespace, key, entry), write=True)

    def _add_op(self, namespace: Namespace, key: str, entry: SearchableEntry) -> SqlOp[None]:
        texts = _storable(entry.text).split("\n") if entry.n_lines else []
        folded = texts if entry.folded is entry.text else _storable(entry.folded).split("\n")
        lines = [(t, None if f is t or f == t else f) for t, f in zip(texts, folded, strict=True)]
        values = (
            _prefix(namespace),
            key,
            entry.kind,
            entry.n_lines,
            encode_segments(entry.segments),
        )
        if self.dialect == "postgres":
            # Derived data: a crash may lose the last index writes (never the store's, committed
            # first), and search indexes what it finds missing; so no wait for the WAL flush.
            yield Statement("SET LOCAL synchronous_commit = off")
            yield Statement(_PG_ADD, (*values, [t for t, _ in lines], [f for _, f in lines]))
            return
        inserted = yield Statement(
            "INSERT OR IGNORE INTO lgctx_entries (prefix, key, kind, n_lines, segments)"
            " VALUES (?, ?, ?, ?, ?) RETURNING id",
            values,
        )
        if inserted and lines:  # else indexed before (content-addressed: the same lines)
            base = int(inserted[0][0]) << 32
            yield Statement(
                "INSERT OR IGNORE INTO lgctx_lines (id, text, folded) VALUES (?, ?, ?)",
                [(base + n, t, f) for n, (t, f) in enumerate(lines)],
                many=True,
            )

    def entries(
        self, namespaces: Sequence[Namespace]
    ) -> dict[tuple[Namespace, str], IndexedEntry] | None:
        """The indexed entries of `namespaces`; None while the index is unavailable."""
        return self._run(lambda: self._entries_op(namespaces), write=False)

    async def aentries(
        self, namespaces: Sequence[Namespace]
    ) -> dict[tuple[Namespace, str], IndexedEntry] | None:
        """Async `entries`."""
        return await self._arun(lambda: self._entries_op(namespaces), write=False)

    def _entries_op(
        self, namespaces: Sequence[Namespace]
    ) -> SqlOp[dict[tuple[Namespace, str], IndexedEntry]]:
        by_prefix = {_prefix(ns): ns for ns in namespaces}
        rows = yield Statement(
            "SELECT e.prefix, e.key, e.n_lines, s.key IS NOT NULL"
            " FROM lgctx_entries AS e LEFT JOIN store AS s ON s.prefix = e.prefix"
            f" AND s.key = e.key WHERE e.prefix IN ({_marks(len(by_prefix))})",
            tuple(by_prefix),
        )
        return {(by_prefix[p], k): IndexedEntry(int(n), "", bool(i)) for p, k, n, i in rows}

    def segments(self, keys: Sequence[tuple[Namespace, str]]) -> dict[tuple[Namespace, str], str]:
        """The segments JSON of the entries `keys` (those indexed)."""
        return self._run(lambda: self._segments_op(keys), write=False) or {}

    async def asegments(
        self, keys: Sequence[tuple[Namespace, str]]
    ) -> dict[tuple[Namespace, str], str]:
        """Async `segments`."""
        return await self._arun(lambda: self._segments_op(keys), write=False) or {}

    def _segments_op(
        self, keys: Sequence[tuple[Namespace, str]]
    ) -> SqlOp[dict[tuple[Namespace, str], str]]:
        if not keys:
            return {}
        by_prefix = {_prefix(ns): ns for ns, _ in keys}
        values = ", ".join("(?, ?)" for _ in keys)
        rows = yield Statement(
            f"WITH w (prefix, key) AS (VALUES {values}) SELECT e.prefix, e.key, e.segments"
            " FROM w JOIN lgctx_entries AS e ON e.prefix = w.prefix AND e.key = w.key",
            [v for ns, key in keys for v in (_prefix(ns), key)],
        )
        return {(by_prefix[p], k): str(j) for p, k, j in rows}

    def candidates(
        self, namespaces: Sequence[Namespace], query: Query, limit: int
    ) -> list[LineRow] | None:
        """The lines of `namespaces` holding every phrase of `query`, or (no phrase) a word.

        At most `limit` lines, in the order a search goes: namespaces as given, newest entry
        first, then by line. Words and phrases only (a pattern is for the scan).
        """
        return self._run(lambda: self._candidates_op(namespaces, query, limit), write=False)

    async def acandidates(
        self, namespaces: Sequence[Namespace], query: Query, limit: int
    ) -> list[LineRow] | None:
        """Async `candidates`."""
        return await self._arun(lambda: self._candidates_op(namespaces, query, limit), write=False)

    def _candidates_op(
        self, namespaces: Sequence[Namespace], query: Query, limit: int
    ) -> SqlOp[list[LineRow]]:
        d, by_prefix = self.dialect, {_prefix(ns): ns for ns in namespaces}
        terms, joiner = (query.phrases, " AND ") if query.phrases else (query.words, " OR ")
        line = "coalesce(l.folded, l.text)"
        parts: list[str] = []
        params: list[Any] = list(by_prefix)
        if d == "sqlite":
            indexed = [t for t in terms if len(t) >= 3]  # a trigram index finds 3+ characters
            if indexed:
                parts.append(
                    "l.id IN (SELECT rowid FROM lgctx_lines_fts WHERE lgctx_lines_fts MATCH ?)"
                )
                params.append(joiner.join(_fts_string(t) for t in indexed))
            for term in terms:
                if len(term) < 3:
                    parts.append(f"instr({line}, ?) > 0")
                    params.append(term)
        else:
            for term in terms:
                parts.append(f"{line} LIKE ? ESCAPE '\\'")
                params.append(_like(term))
        if d == "postgres":
            # The matching lines first, then their entries by primary key: the planner, without
            # statistics on fresh tables, otherwise joined every entry of the thread with every
            # matching line (480 ms where this takes 9).
            params = [*params[len(by_prefix) :], *by_prefix]
            select = (
                "WITH l AS MATERIALIZED (SELECT l.entry_id, l.line_no, l.text, l.folded"
                f" FROM lgctx_lines AS l WHERE {joiner.join(parts)})"
                f" SELECT e.prefix, e.key, {_LINE_NO[d]}, {line} FROM lgctx_entries AS e"
            )
            where = f" JOIN l ON {_JOIN[d]} WHERE e.prefix IN ({_marks(len(by_prefix))})"
        else:
            select = f"SELECT e.prefix, e.key, {_LINE_NO[d]}, {line} FROM lgctx_entries AS e"
            where = (
                f" JOIN lgctx_lines AS l ON {_JOIN[d]} WHERE e.prefix IN"
                f" ({_marks(len(by_prefix))}) AND ({joiner.join(parts)})"
            )
        rows = yield Statement(f"{select}{where} LIMIT ?", [*params, limit])
        if len(rows) >= limit:  # more than a search ranks: the first in search order
            order = " ".join(f"WHEN ? THEN {n}" for n in range(len(by_prefix)))
            rows = yield Statement(
                f"{select} JOIN store AS s ON s.prefix = e.prefix AND s.key = e.key{where}"
                f" ORDER BY CASE e.prefix {order} END, {_ORDER[d]}, {_LINE_NO[d]} LIMIT ?",
                [*params, *by_prefix, limit],
            )
        return [LineRow(by_prefix[p], k, int(n), None, f) for p, k, n, f in rows]

    def lines(self, wanted: Sequence[tuple[Namespace, str, int]]) -> list[LineRow] | None:
        """The indexed lines `(namespace, key, line_no)` named (those that exist)."""
        return self._run(lambda: self._lines_op(wanted), write=False)

    async def alines(self, wanted: Sequence[tuple[Namespace, str, int]]) -> list[LineRow] | None:
        """Async `lines`."""
        return await self._arun(lambda: self._lines_op(wanted), write=False)

    def _lines_op(self, wanted: Sequence[tuple[Namespace, str, int]]) -> SqlOp[list[LineRow]]:
        if not wanted:
            return []
        d, by_prefix = self.dialect, {_prefix(ns): ns for ns, _, _ in wanted}
        values = ", ".join("(?, ?, ?)" for _ in wanted)
        params = [v for ns, key, n in wanted for v in (_prefix(ns), key, n)]
        on = {
            "sqlite": "l.id = (e.id << 32) + w.line_no",
            "postgres": "l.entry_id = e.id AND l.line_no = w.line_no::integer",
        }
        rows = yield Statement(
            f"WITH w (prefix, key, line_no) AS (VALUES {values})"
            f" SELECT e.prefix, e.key, {_LINE_NO[d]}, l.text, l.folded FROM w"
            " JOIN lgctx_entries AS e ON e.prefix = w.prefix AND e.key = w.key"
            f" JOIN lgctx_lines AS l ON {on[d]}",
            params,
        )
        return [
            LineRow(by_prefix[p], k, int(n), t, t if f is None else f) for p, k, n, t, f in rows
        ]

    def forget(self, namespace: Namespace, keys: Sequence[str]) -> None:
        """Drop the rows of `keys` (entries no longer in the archive)."""
        self._run(lambda: self._forget_op(namespace, keys), write=True)

    async def aforget(self, namespace: Namespace, keys: Sequence[str]) -> None:
        """Async `forget`."""
        await self._arun(lambda: self._forget_op(namespace, keys), write=True)

    def _forget_op(self, namespace: Namespace, keys: Sequence[str]) -> SqlOp[None]:
        rows = [(_prefix(namespace), key) for key in keys]
        if self.dialect == "sqlite":  # Postgres: the lines go with their entry (CASCADE)
            lines = LINES_OF.format(p="?", k="?")
            yield Statement(lines, [(p, k, p, k) for p, k in rows], many=True)
        yield Statement("DELETE FROM lgctx_entries WHERE prefix = ? AND key = ?", rows, True)

    # drivers ---------------------------------------------------------------------------

    def _run(self, make: Callable[[], SqlOp[T]], *, write: bool) -> T | None:
        if self.available is None:
            self.setup()
        if not self._state:
            return None
        return self._sql.run(make(), write=write)

    async def _arun(self, make: Callable[[], SqlOp[T]], *, write: bool) -> T | None:
        if self.available is None:
            await self.asetup()
        if not self._state:
            return None
        return await self._sql.arun(make(), write=write)
