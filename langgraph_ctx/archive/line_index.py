r"""The search index: the lines of archived entries in tables of ours beside a SQL store's.

When the archive lives in LangGraph's `SqliteStore`, `AsyncSqliteStore`, `PostgresStore` or
`AsyncPostgresStore`, each entry's lines are written, as it is archived and in the store
item's own transaction (`put_effect`, `LineIndex.put`: one commit per entry, as without the
index), to two tables in the store's database:

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
import inspect
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar, overload

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langgraph_ctx._effects import BackendPut, Effect, MethodCall, Plan, both
from langgraph_ctx._ids import RefKind
from langgraph_ctx.archive.line_schema import LINES_OF, setup_op
from langgraph_ctx.archive.matching import Query, SearchableEntry, Source, searchable_entry
from langgraph_ctx.archive.sql_store import (
    SqlOp,
    Statement,
    StoreSql,
    put_statements,
    sql_store_kind,
)

__all__ = [
    "Candidates",
    "EntryRows",
    "EntryVersion",
    "LineIndex",
    "RETRY_SECONDS",
    "LineRow",
    "decode_segments",
    "encode_segments",
    "holds",
    "indexed_entry",
    "put_effect",
]

logger = logging.getLogger("langgraph_ctx.archive")

T = TypeVar("T")
P = ParamSpec("P")
Namespace = tuple[str, ...]
Entry = BaseMessage | Sequence[BaseMessage] | str


Candidates = dict[tuple[Namespace, str], dict[int, tuple[str | None, str]]]
"""Candidate lines by entry `(namespace, key)`: `line_no -> (line or None, casefolded line)`,
the line None when not read. Plain dicts and tuples: a common word's thousands of lines leave
no object for the garbage collector to track."""


class LineRow(NamedTuple):
    """One indexed line."""

    namespace: Namespace
    key: str
    line_no: int
    """0-based, as `SearchableEntry` numbers lines."""
    text: str | None
    """The line; None when not read (`candidates` reads the casefolded line alone)."""
    folded: str


class EntryVersion(NamedTuple):
    """What a reader last saw of one namespace's indexed entries, to tell whether it changed.

    Ids only grow (PostgreSQL's identity; SQLite's rowid past the largest row, which can come
    back only once that row is gone): the same count and the same row at the largest id seen
    mean nothing was added or removed since.
    """

    size: int
    """How many entries the namespace had."""
    last_id: int
    """The largest entry id seen (0: none)."""
    last_key: str
    """The key of the entry at `last_id`."""


class EntryRows(NamedTuple):
    """One namespace's indexed entries, or what changed since a version (`LineIndex.entries`)."""

    version: EntryVersion
    """The namespace as these rows leave it."""
    lines: dict[str, int]
    """`key -> n_lines` of every entry (`whole`), or of those added since the version given."""
    whole: bool
    """`lines` are every entry of the namespace (else only those added)."""


_PG_ADD = (  # an entry and its lines, split by the server; none when indexed already
    "WITH e AS (INSERT INTO lgctx_entries (prefix, key, kind, n_lines, segments)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id)"
    " INSERT INTO lgctx_lines (entry_id, line_no, text, folded)"
    " SELECT e.id, u.n - 1, u.t, NULLIF(u.f, u.t) FROM e,"
    " unnest(regexp_split_to_array(?::text, E'\\n'), regexp_split_to_array(?::text, E'\\n'))"
    " WITH ORDINALITY AS u (t, f, n)"
)
"""Two texts, not two arrays of lines: psycopg quotes an array element by element, which
cost more than the statement. `regexp_split_to_array` splits as `str.split("\\n")` does
(`''` is one empty line); no folded text (NULL) leaves every line's `folded` NULL."""
_SQLITE_LINES = (  # an entry's lines from one JSON array of [text, folded] pairs
    "INSERT OR IGNORE INTO lgctx_lines (id, text, folded)"
    " SELECT ? + j.key, j.value ->> 0, j.value ->> 1 FROM json_each(?) AS j"
)
RETRY_SECONDS = 300
"""How long after a failed setup the index is tried again (a database that was down)."""

_INDEXES: weakref.WeakKeyDictionary[BaseStore, LineIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()
_NO_JIT = "SET LOCAL jit = off"
"""PostgreSQL, before a read of the lines: on tables without statistics the planner's estimates
are far above what the read costs, and it would compile the query (JIT) for longer than the read
takes."""
_LINE_NO = {"sqlite": "(l.id & 4294967295)", "postgres": "l.line_no"}
_SQLITE_JOIN = "e.id = l.id >> 32 AND l.id BETWEEN e.id << 32 AND (e.id << 32) + 4294967295"
"""SQLite: a line to its entry, either way round (the planner picks)."""


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


def _json(rows: list[tuple[str, str | None]]) -> str:
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


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


def put_effect(
    backend: object,
    namespace: Namespace,
    key: str,
    data: bytes,
    indexed: tuple[str, RefKind, Entry] | None = None,
) -> Effect:
    """The effect writing `data` under `namespace`/`key` of `backend` for `Archive`.

    With `indexed` (the entry's reference, kind and decoded entry) and a backend that can
    index as it writes (`put_indexed`, e.g. `StoreBackend`), a call of that: the entry's lines
    are written in the item's own transaction when the backend keeps a line index. Otherwise
    a `BackendPut`.
    """
    if indexed is None or not callable(getattr(backend, "put_indexed", None)):
        return BackendPut(backend, namespace, key, data)
    return MethodCall(backend, "put_indexed", (namespace, key, data, indexed))


def indexed_entry(indexed: tuple[str, RefKind, Entry]) -> SearchableEntry | None:
    """The searchable form of an entry being archived (`put_effect`); None if it has none.

    None is logged, never raised: the entry is archived, and search indexes it when it reads
    it (`index_search`).
    """
    try:
        return searchable_entry(*indexed)
    except Exception as exc:
        logger.debug("indexing %s for search failed: %s: %s", indexed[0], type(exc).__name__, exc)
        return None


_Op = Callable[Concatenate["LineIndex", P], SqlOp[T]]
_Sync = Callable[Concatenate["LineIndex", P], T]
_Async = Callable[Concatenate["LineIndex", P], Coroutine[Any, Any, T]]


@overload
def _twins(
    op: _Op[P, T], *, write: bool, doc: str
) -> tuple[_Sync[P, T | None], _Async[P, T | None]]: ...
@overload
def _twins(
    op: _Op[P, T], *, write: bool, doc: str, empty: Callable[[], T]
) -> tuple[_Sync[P, T], _Async[P, T]]: ...
def _twins(
    op: _Op[P, T], *, write: bool, doc: str, empty: Callable[[], T] | None = None
) -> tuple[_Sync[P, T | None], _Async[P, T | None]]:
    """The sync and async `LineIndex` methods running `op` (`_x_op`, named `x` and `ax`).

    Each sets the index up on first use and runs the op (`write`: in a write transaction);
    while the index is unavailable it returns `empty()`, or None without `empty`. Both are
    `both`'s twins of one plan carrying `op`'s parameters, `doc` (the async one: "Async
    `x`.") and the op's result as their return.
    """
    name = op.__name__.removeprefix("_").removesuffix("_op")

    def plan(self: LineIndex, /, *args: P.args, **kwargs: P.kwargs) -> Plan[T | None]:
        result = yield from self._plan_run(lambda: op(self, *args, **kwargs), write=write)
        return empty() if result is None and empty is not None else result

    signature = inspect.signature(op)
    result = str(signature.return_annotation).removeprefix("SqlOp[").removesuffix("]")
    result = result if empty is not None or result == "None" else f"{result} | None"
    plan.__qualname__ = f"LineIndex.{name}"
    plan.__signature__ = signature.replace(return_annotation=f"Plan[{result}]")  # type: ignore[attr-defined]
    plan.__annotations__ = {**op.__annotations__, "return": f"Plan[{result}]"}
    return both(plan, doc=doc, adoc=f"Async `{name}`.", name=name)


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

    def _put_op(
        self, namespace: Namespace, key: str, value: dict[str, Any], entry: SearchableEntry
    ) -> SqlOp[bool]:
        statements = put_statements(self.store, namespace, key, value)
        if statements is None:
            return False
        for statement in statements:  # noqa: UP028  # the driver sends rows: a list can not take them
            yield statement
        # The store's commit is durable (not `relaxed`): the index rows ride in it.
        yield from self._index_op(namespace, key, entry, relaxed=False)
        return True

    put, aput = _twins(
        _put_op,
        write=True,
        empty=bool,
        doc="""Write the store item `value` and index `entry`'s lines, in one transaction.

        The item is written as `store.put(namespace, key, value, index=False)` writes it.
        False when nothing was written (the index unavailable, or the store's statements not
        to be had): the caller then puts the item alone, as it does when this raises.
        """,
    )

    def _add_op(self, namespace: Namespace, key: str, entry: SearchableEntry) -> SqlOp[None]:
        return self._index_op(namespace, key, entry, relaxed=True)

    add, aadd = _twins(
        _add_op,
        write=True,
        doc="Index `entry`, archived under `namespace`/`key` (nothing when already indexed).",
    )

    def _index_op(
        self, namespace: Namespace, key: str, entry: SearchableEntry, *, relaxed: bool
    ) -> SqlOp[None]:
        """An entry's row and its lines' rows, each one statement (none when indexed already).

        `relaxed`: the transaction holds index rows alone, so PostgreSQL need not wait for
        the WAL flush (derived data: a crash may lose the last ones, which search indexes
        when it finds them missing).
        """
        text = _storable(entry.text) if entry.n_lines else None
        folded = None if text is None or entry.folded == entry.text else _storable(entry.folded)
        values = (
            _prefix(namespace),
            key,
            entry.kind,
            entry.n_lines,
            encode_segments(entry.segments),
        )
        if self.dialect == "postgres":
            if relaxed:
                yield Statement("SET LOCAL synchronous_commit = off", fetch=False)
            yield Statement(_PG_ADD, (*values, text, folded), fetch=False)
            return
        texts = [] if text is None else text.split("\n")
        folds = texts if folded is None else folded.split("\n")
        lines = [(t, None if f is t or f == t else f) for t, f in zip(texts, folds, strict=True)]
        inserted = yield Statement(
            "INSERT OR IGNORE INTO lgctx_entries (prefix, key, kind, n_lines, segments)"
            " VALUES (?, ?, ?, ?, ?) RETURNING id",
            values,
        )
        if inserted and lines:  # else indexed before (content-addressed: the same lines)
            # One statement for all the lines: the FTS5 trigger's insert, run once per
            # statement of an `executemany`, flushes FTS5's pending terms each time (a
            # segment per line, then merges), several times the work of one statement.
            yield Statement(_SQLITE_LINES, (int(inserted[0][0]) << 32, _json(lines)))

    def _entries_op(
        self,
        namespaces: Sequence[Namespace],
        since: Sequence[EntryVersion | None] | None = None,
    ) -> SqlOp[dict[Namespace, EntryRows]]:
        versions = list(since) if since is not None else [None] * len(namespaces)
        found = yield from self._entries_read(namespaces, versions)
        stale = [ns for ns, rows in found.items() if rows is None]
        if stale:  # an entry left, or a race: read those namespaces whole
            again = yield from self._entries_read(stale, [None] * len(stale))
            found.update(again)
        return {ns: rows for ns, rows in found.items() if rows is not None}

    entries, aentries = _twins(
        _entries_op,
        write=False,
        doc="""The indexed entries of each of `namespaces`, `key -> n_lines`; None if unavailable.

        With `since` (a version per namespace, None for one not read before), a namespace
        that only grew since its version gives the entries added; one that did not change,
        none; one that lost an entry (or was never read), all of them (`EntryRows.whole`).
        A search that read a thread before thus reads a few rows, not thousands.
        """,
    )

    def _entries_read(
        self, namespaces: Sequence[Namespace], versions: Sequence[EntryVersion | None]
    ) -> SqlOp[dict[Namespace, EntryRows | None]]:
        """Each namespace's count, row at the last id seen and rows past it, in one snapshot.

        None for a namespace whose version no longer holds (an entry left). On PostgreSQL
        the rows past the last id come as one row, their keys, line counts and ids each
        joined in one order (the scan's: sorting them cost more than the read): a first
        read of a long thread is three strings split at C speed, not a row decoded (and a
        tuple left for the garbage collector) per entry. The keys are the archive's
        digests, which hold no comma; lists that do not pair raise, and the search scans.
        """
        joined = self.dialect == "postgres"
        blank = "''" if joined else "0"  # the line-count column's type in each dialect
        parts: list[str] = []
        params: list[Any] = []
        for n, (namespace, version) in enumerate(zip(namespaces, versions, strict=True)):
            prefix = _prefix(namespace)
            parts.append(
                f"SELECT {n}, 0, count(*), {blank}, '', NULL FROM lgctx_entries WHERE prefix = ?"
            )
            params.append(prefix)
            if version is not None and version.last_id:
                parts.append(
                    f"SELECT {n}, 1, id, {blank}, key, NULL FROM lgctx_entries"
                    " WHERE id = ? AND prefix = ?"
                )
                params += [version.last_id, prefix]
            if joined:
                parts.append(
                    f"SELECT {n}, 2, max(id), string_agg(n_lines::text, ','),"
                    " string_agg(key, ','), string_agg(id::text, ',') FROM lgctx_entries"
                    " WHERE prefix = ? AND id > ?"
                )
            else:
                parts.append(
                    f"SELECT {n}, 2, id, n_lines, key, NULL FROM lgctx_entries"
                    " WHERE prefix = ? AND id > ?"
                )
            params += [prefix, version.last_id if version is not None else 0]
        rows = yield Statement(" UNION ALL ".join(parts), params)
        counts: dict[int, int] = {}
        kept: dict[int, str] = {}
        added: dict[int, dict[str, int]] = {n: {} for n in range(len(namespaces))}
        last: dict[int, tuple[int, str]] = {}
        for n, tag, number, n_lines, key, ids in rows:
            if tag == 0:
                counts[n] = int(number)
            elif tag == 1:
                kept[n] = str(key)
            elif joined:
                if number is not None:  # else no row past the last id
                    keys = str(key).split(",")
                    added[n] = dict(zip(keys, map(int, str(n_lines).split(",")), strict=True))
                    at = list(map(int, str(ids).split(","))).index(int(number))
                    last[n] = (int(number), keys[at])
            else:
                added[n][str(key)] = int(n_lines)
                if int(number) > last.get(n, (0, ""))[0]:
                    last[n] = (int(number), str(key))
        out: dict[Namespace, EntryRows | None] = {}
        for n, (namespace, version) in enumerate(zip(namespaces, versions, strict=True)):
            count, new = counts.get(n, 0), added[n]
            if version is None:
                last_id, last_key = last.get(n, (0, ""))
                out[namespace] = EntryRows(EntryVersion(count, last_id, last_key), new, True)
                continue
            held = not version.last_id or kept.get(n) == version.last_key
            if not held or version.size + len(new) != count:
                out[namespace] = None
                continue
            last_id, last_key = last.get(n, (version.last_id, version.last_key))
            out[namespace] = EntryRows(EntryVersion(count, last_id, last_key), new, False)
        return out

    def _unstored_op(self, namespace: Namespace, keys: Sequence[str]) -> SqlOp[list[str]]:
        if not keys:
            return []
        rows = yield Statement(
            "SELECT e.key FROM lgctx_entries AS e LEFT JOIN store AS s ON s.prefix = e.prefix"
            f" AND s.key = e.key WHERE e.prefix = ? AND e.key IN ({_marks(len(keys))})"
            " AND s.key IS NULL",
            [_prefix(namespace), *keys],
        )
        return [str(key) for (key,) in rows]

    unstored, aunstored = _twins(
        _unstored_op,
        write=False,
        empty=list,
        doc="""Which of `keys`, indexed under `namespace`, the store no longer holds.

        Rows left behind by a delete our trigger did not see (dropped by hand, an old copy).
        """,
    )

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

    segments, asegments = _twins(
        _segments_op,
        write=False,
        empty=dict,
        doc="The segments JSON of the entries `keys` (those indexed).",
    )

    def _candidates_op(
        self, namespaces: Sequence[Namespace], query: Query, limit: int, texts: bool = False
    ) -> SqlOp[Candidates]:
        d, by_prefix = self.dialect, {_prefix(ns): ns for ns in namespaces}
        terms, joiner = (query.phrases, " AND ") if query.phrases else (query.words, " OR ")
        line = "coalesce(l.folded, l.text)"
        shown = ", l.text" if texts else ""
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
            # The matching lines first, then each line's entry by primary key (a lateral
            # lookup the planner can not flatten: `OFFSET 0`). Without statistics on fresh
            # tables the planner otherwise joins every entry of the thread with the matching
            # lines, by a hash of all 50,000 entries of a long thread (timings in
            # docs/benchmarks.md).
            yield Statement(_NO_JIT)
            params = [*params[len(by_prefix) :], *by_prefix]
            select = (
                "WITH l AS MATERIALIZED (SELECT l.entry_id, l.line_no, l.text, l.folded"
                f" FROM lgctx_lines AS l WHERE {joiner.join(parts)})"
                f" SELECT e.prefix, e.key, {_LINE_NO[d]}, {line}{shown} FROM l"
                " CROSS JOIN LATERAL (SELECT e.prefix, e.key FROM lgctx_entries AS e"
                " WHERE e.id = l.entry_id OFFSET 0) AS e"
            )
            where = f" WHERE e.prefix IN ({_marks(len(by_prefix))})"
        else:
            select = f"SELECT e.prefix, e.key, {_LINE_NO[d]}, {line}{shown} FROM lgctx_entries AS e"
            where = (
                f" JOIN lgctx_lines AS l ON {_SQLITE_JOIN} WHERE e.prefix IN"
                f" ({_marks(len(by_prefix))}) AND ({joiner.join(parts)})"
            )
        rows = yield Statement(f"{select}{where} LIMIT ?", [*params, limit])
        return _by_entry(rows, by_prefix, texts)

    candidates, acandidates = _twins(
        _candidates_op,
        write=False,
        doc="""The lines of `namespaces` holding every phrase of `query`, or (no phrase) a word.

        At most `limit` lines, in no order (past `limit`, which ones is the database's choice:
        `first_candidates` reads them in a search's order). Words and phrases only. Each line
        casefolded, and with `texts` as written too (a pattern is matched on the line itself).
        """,
    )

    def _first_candidates_op(
        self,
        namespace: Namespace,
        keys: Sequence[str],
        query: Query,
        limit: int,
        texts: bool = False,
    ) -> SqlOp[Candidates]:
        if not keys:
            return {}
        d, prefix = self.dialect, _prefix(namespace)
        terms, joiner = (query.phrases, " AND ") if query.phrases else (query.words, " OR ")
        line = "coalesce(l.folded, l.text)"
        if d == "sqlite":
            parts = [f"instr({line}, ?) > 0" for _ in terms]
            params: list[Any] = list(terms)
            values = ", ".join("(?, ?)" for _ in keys)
        else:
            parts = [f"{line} LIKE ? ESCAPE '\\'" for _ in terms]
            params = [_like(term) for term in terms]
            values = ", ".join("(?, ?::integer)" for _ in keys)
        shown = ", l.text" if texts else ""
        entries = (
            f"WITH w (key, pos) AS (VALUES {values}), e AS MATERIALIZED (SELECT e.id, e.prefix,"
            " e.key, w.pos FROM w JOIN lgctx_entries AS e ON e.prefix = ? AND e.key = w.key)"
        )
        if d == "sqlite":
            lines = f" JOIN lgctx_lines AS l ON {_SQLITE_JOIN} WHERE ({joiner.join(parts)})"
        else:  # each entry's lines by its id (`OFFSET 0`: not flattened into a scan of all)
            lines = (
                " CROSS JOIN LATERAL (SELECT l.line_no, l.text, l.folded FROM lgctx_lines AS l"
                f" WHERE l.entry_id = e.id AND ({joiner.join(parts)}) OFFSET 0) AS l"
            )
            yield Statement(_NO_JIT)
        rows = yield Statement(
            f"{entries} SELECT e.prefix, e.key, {_LINE_NO[d]}, {line}{shown} FROM e{lines}"
            f" ORDER BY e.pos, {_LINE_NO[d]} LIMIT ?",
            [*(v for n, key in enumerate(keys) for v in (key, n)), prefix, *params, limit],
        )
        return _by_entry(rows, {prefix: namespace}, texts)

    first_candidates, afirst_candidates = _twins(
        _first_candidates_op,
        write=False,
        doc="""`candidates` of the entries `keys` of `namespace` alone, the first `limit` in order.

        In the order of `keys`, then by line: when a thread holds more candidates than a
        search ranks, the search asks for its entries newest first, a batch at a time, and
        stops once it has enough. The lines of each entry are read by its id, so the cost
        follows the batch, not how common the terms are in the database.
        """,
    )

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

    lines, alines = _twins(
        _lines_op,
        write=False,
        doc="The indexed lines `(namespace, key, line_no)` named (those that exist).",
    )

    def _forget_op(self, namespace: Namespace, keys: Sequence[str]) -> SqlOp[None]:
        rows = [(_prefix(namespace), key) for key in keys]
        if self.dialect == "sqlite":  # Postgres: the lines go with their entry (CASCADE)
            lines = LINES_OF.format(p="?", k="?")
            yield Statement(lines, [(p, k, p, k) for p, k in rows], many=True)
        yield Statement("DELETE FROM lgctx_entries WHERE prefix = ? AND key = ?", rows, True)

    forget, aforget = _twins(
        _forget_op,
        write=True,
        doc="Drop the rows of `keys` (entries no longer in the archive).",
    )

    # drivers ---------------------------------------------------------------------------

    def _plan_run(self, make: Callable[[], SqlOp[T]], *, write: bool) -> Plan[T | None]:
        if self.available is None:
            yield MethodCall(self, "setup")
        if not self._state:
            return None
        result: T = yield MethodCall(self._sql, "run", (make(),), kwargs={"write": write})
        return result


def _by_entry(
    rows: list[tuple[Any, ...]], by_prefix: dict[str, Namespace], texts: bool
) -> Candidates:
    """`candidates` rows `(prefix, key, line_no, folded[, text])` by entry, in their order."""
    out: Candidates = {}
    for row in rows:
        lines = out.get((by_prefix[row[0]], row[1]))
        if lines is None:
            lines = out[by_prefix[row[0]], row[1]] = {}
        lines[int(row[2])] = (row[4] if texts else None, row[3])
    return out
