"""`python -m benchmarks search_floor`: what a trigram index costs a write, without our code.

Issue 52 asks archiving with the index to cost at most +20% per archived output. This section
measures the floor of any index written in the archiving transaction, in plain SQL on the
same realistic outputs as `benchmarks.search` (about 2 kB each): per output, one transaction
with what it writes, committed with the database's own durability, against the store's item
alone in its own transaction:

* the store's item alone (a `store`-like table: prefix, key, JSON value; what archiving
  without the index writes);
* the item and its lines, one row each, with no text index (what the rows alone cost);
* the item and its lines with the trigram index (`pg_trgm` GIN on PostgreSQL, FTS5
  `trigram` on SQLite): today's layout;
* the item and the whole output as one row with the trigram index (one row per output: a
  trigram shared by many lines of an output is indexed once).

No Python of ours runs in the timed loop but the statements themselves, so each row less
the first is what the database adds. On PostgreSQL it needs `LANGGRAPH_CTX_TEST_POSTGRES_URI`
(a throwaway database is created and dropped); SQLite runs in a file in a temporary folder.
`--quick`: 200 outputs instead of 1,000.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks._progress import progress
from benchmarks._table import print_table
from benchmarks.search import POSTGRES_ENV, _chunks

Write = Callable[[Any, int, str], None]
"""One output's statements on an open connection, inside its transaction."""


def _texts(size: int) -> list[str]:
    return [str(m.content) for batch in _chunks(40, size) for m in batch]


def _item(cur: Any, n: int, text: str, marker: str) -> None:
    cur.execute(
        f"INSERT INTO item (prefix, key, value) VALUES ({marker}, {marker}, {marker})",
        ("thread.message", f"{n:064x}", json.dumps({"data": text})),
    )


LAYOUTS = [
    "item alone",
    "item + lines, no text index",
    "item + lines, trigram",
    "item + whole output, trigram",
]


def _postgres_schema(layout: str) -> list[str]:
    ddl = [
        "CREATE EXTENSION IF NOT EXISTS pg_trgm",
        "CREATE TABLE item (prefix text, key text, value jsonb, PRIMARY KEY (prefix, key))",
    ]
    if layout != "item alone":
        ddl.append(
            "CREATE TABLE lines (entry_id bigint, line_no int, text text,"
            " PRIMARY KEY (entry_id, line_no))"
        )
    if "trigram" in layout:
        ddl.append("CREATE INDEX ON lines USING gin (text gin_trgm_ops)")
    return ddl


def _sqlite_schema(layout: str) -> list[str]:
    ddl = ["CREATE TABLE item (prefix TEXT, key TEXT, value TEXT, PRIMARY KEY (prefix, key))"]
    if layout != "item alone":
        ddl.append("CREATE TABLE lines (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    if "trigram" in layout:
        ddl += [
            "CREATE VIRTUAL TABLE lines_fts USING fts5(text, content='lines',"
            " content_rowid='id', tokenize='trigram case_sensitive 1')",
            "CREATE TRIGGER lines_ai AFTER INSERT ON lines BEGIN"
            " INSERT INTO lines_fts (rowid, text) VALUES (new.id, new.text); END",
        ]
    return ddl


def _postgres_write(layout: str) -> Write:
    def write(cur: Any, n: int, text: str) -> None:
        _item(cur, n, text, "%s")
        if layout.startswith("item + lines"):
            cur.execute(
                "INSERT INTO lines (entry_id, line_no, text) SELECT %s, u.n - 1, u.t"
                " FROM unnest(regexp_split_to_array(%s::text, E'\\n')) WITH ORDINALITY AS u (t, n)",
                (n, text),
            )
        elif layout.startswith("item + whole"):
            cur.execute("INSERT INTO lines (entry_id, line_no, text) VALUES (%s, 0, %s)", (n, text))

    return write


def _sqlite_write(layout: str) -> Write:
    def write(cur: Any, n: int, text: str) -> None:
        _item(cur, n, text, "?")
        if layout.startswith("item + lines"):
            cur.execute(
                "INSERT INTO lines (id, text) SELECT ? + j.key, j.value FROM json_each(?) AS j",
                (n << 32, json.dumps(text.split("\n"))),
            )
        elif layout.startswith("item + whole"):
            cur.execute("INSERT INTO lines (id, text) VALUES (?, ?)", (n << 32, text))

    return write


@contextlib.contextmanager
def _postgres(base: str) -> Iterator[Callable[[str], Any]]:
    """A connection factory on a throwaway database (dropped afterwards)."""
    import psycopg
    from psycopg import sql

    name = f"lgctx_floor_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    opened: list[Any] = []
    try:

        def connect(layout: str) -> Any:
            from psycopg.conninfo import make_conninfo

            conn = psycopg.connect(make_conninfo(base, dbname=name), autocommit=True)
            opened.append(conn)
            conn.execute("DROP TABLE IF EXISTS lines, item")
            for statement in _postgres_schema(layout):
                conn.execute(statement)
            return conn

        yield connect
    finally:
        for conn in opened:
            conn.close()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _measure(
    connect: Callable[[str], Any], write: Callable[[str], Write], texts: list[str], postgres: bool
) -> dict[str, float]:
    """Milliseconds per output of each layout, the layouts interleaved over two rounds."""
    took: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
    for _ in range(2):
        for layout in LAYOUTS:
            conn = connect(layout)
            put = write(layout)
            started = time.perf_counter()
            for n, text in enumerate(texts):
                if postgres:
                    with conn.transaction(), conn.cursor() as cur:
                        put(cur, n, text)
                else:
                    cur = conn.cursor()
                    cur.execute("BEGIN")
                    put(cur, n, text)
                    cur.execute("COMMIT")
            took[layout].append((time.perf_counter() - started) / len(texts) * 1000)
            conn.close()
    return {layout: min(values) for layout, values in took.items()}


def run(args: argparse.Namespace) -> None:
    """Print the floor table: each layout's time per output and its cost over the item alone."""
    size = 200 if args.quick else 1_000
    texts = _texts(size)
    found: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        counter = iter(range(1_000))

        def sqlite_connect(layout: str) -> Any:
            # As LangGraph's SqliteStore opens its file: autocommit, the default rollback
            # journal (no WAL), so each commit waits for the disk as the store's do.
            conn = sqlite3.connect(
                str(Path(folder) / f"floor-{next(counter)}.db"), isolation_level=None
            )
            for statement in _sqlite_schema(layout):
                conn.execute(statement)
            return conn

        progress(f"search_floor: {size:,} outputs into sqlite")
        found["sqlite"] = _measure(sqlite_connect, _sqlite_write, texts, postgres=False)
    base = os.environ.get(POSTGRES_ENV)
    if base:
        progress(f"search_floor: {size:,} outputs into postgres")
        with _postgres(base) as connect:
            found["postgres"] = _measure(connect, _postgres_write, texts, postgres=True)
    rows = []
    for backend, times in found.items():
        alone = times["item alone"]
        for layout in LAYOUTS:
            extra = "-" if layout == "item alone" else f"+{(times[layout] / alone - 1) * 100:.0f}%"
            rows.append([f"{backend}: {layout}", f"{times[layout]:.3f} ms", extra])
    notes = [
        f"{size:,} outputs of about 2 kB (benchmarks.search's), one transaction each, committed"
        " with the database's own durability; the better of two interleaved rounds.",
        "Plain SQL: no Python of langgraph_ctx in the timed loop. Each row less the first is"
        " what the database adds to archiving one output.",
    ]
    if not base:
        notes.append(f"PostgreSQL rows skipped: set {POSTGRES_ENV} to a server's URI.")
    print_table(
        "What an index written with the item costs, in the database alone (issue 52, goal 6)",
        ["per output", "time", "over the item alone"],
        rows,
        notes=notes,
    )
