"""The search index's tables: their DDL and migrations, per dialect (see `line_index`).

`setup_op` creates or migrates them, as LangGraph's savers do: a version table
(`lgctx_index_migrations`) records the migrations applied, each a list of idempotent
statements (`IF NOT EXISTS`), run in the caller's one transaction; on PostgreSQL under a
transaction-scoped advisory lock, so several workers setting up at once wait for each other.
A new version is a new tuple at the end of `MIGRATIONS`, never an edit of an old one.
"""

from __future__ import annotations

from langgraph_ctx.archive.sql_store import SqlOp, Statement

__all__ = ["LINES_OF", "LOCK_ID", "MIGRATIONS", "VERSIONS", "setup_op"]

VERSIONS = "CREATE TABLE IF NOT EXISTS lgctx_index_migrations (v INTEGER PRIMARY KEY)"
"""The version table: one row per migration applied."""

_FIRST_LINE = "(SELECT id << 32 FROM lgctx_entries WHERE prefix = {p} AND key = {k})"
LINES_OF = f"DELETE FROM lgctx_lines WHERE id BETWEEN {_FIRST_LINE} AND {_FIRST_LINE} + 4294967295"
"""SQLite: delete an entry's lines, ids `entry id << 32` to `entry id << 32 | 0xFFFFFFFF`
(format `p` and `k` with the prefix and key: `?` placeholders, or `old.` columns)."""

MIGRATIONS: dict[str, tuple[tuple[str, ...], ...]] = {  # dialect -> versions -> statements
    "sqlite": (
        (
            "CREATE TABLE IF NOT EXISTS lgctx_entries (id INTEGER PRIMARY KEY,"
            " prefix TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,"
            " n_lines INTEGER NOT NULL, segments TEXT NOT NULL, UNIQUE (prefix, key))",
            "CREATE TABLE IF NOT EXISTS lgctx_lines (id INTEGER PRIMARY KEY,"
            " text TEXT NOT NULL, folded TEXT)",
            "CREATE VIRTUAL TABLE IF NOT EXISTS lgctx_lines_fts USING fts5(folded,"
            " content='lgctx_lines', content_rowid='id', tokenize='trigram case_sensitive 1')",
            "CREATE TRIGGER IF NOT EXISTS lgctx_lines_ai AFTER INSERT ON lgctx_lines BEGIN"
            " INSERT INTO lgctx_lines_fts (rowid, folded)"
            " VALUES (new.id, coalesce(new.folded, new.text)); END",
            "CREATE TRIGGER IF NOT EXISTS lgctx_lines_ad AFTER DELETE ON lgctx_lines BEGIN"
            " INSERT INTO lgctx_lines_fts (lgctx_lines_fts, rowid, folded)"
            " VALUES ('delete', old.id, coalesce(old.folded, old.text)); END",
            # INSERT OR REPLACE (a put of an existing key) fires no delete trigger unless
            # recursive_triggers is on; either way the put is followed by our insert.
            "CREATE TRIGGER IF NOT EXISTS lgctx_store_ad AFTER DELETE ON store BEGIN "
            + LINES_OF.format(p="old.prefix", k="old.key")
            + "; DELETE FROM lgctx_entries WHERE prefix = old.prefix AND key = old.key; END",
        ),
    ),
    "postgres": (
        (
            "CREATE EXTENSION IF NOT EXISTS pg_trgm",
            "CREATE TABLE IF NOT EXISTS lgctx_entries"
            " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, prefix text NOT NULL,"
            " key text NOT NULL, kind text NOT NULL, n_lines integer NOT NULL,"
            " segments text NOT NULL, UNIQUE (prefix, key), FOREIGN KEY (prefix, key)"
            " REFERENCES store (prefix, key) ON DELETE CASCADE)",
            "CREATE TABLE IF NOT EXISTS lgctx_lines (entry_id bigint NOT NULL"
            " REFERENCES lgctx_entries (id) ON DELETE CASCADE, line_no integer NOT NULL,"
            " text text NOT NULL, folded text, PRIMARY KEY (entry_id, line_no))",
            "CREATE INDEX IF NOT EXISTS lgctx_lines_trgm ON lgctx_lines"
            " USING gin ((coalesce(folded, text)) gin_trgm_ops)",
        ),
    ),
}
"""Each dialect's migrations, in order: version n is `MIGRATIONS[dialect][n]`."""

LOCK_ID = 0x6C67_6374_785F_6978
"""The advisory lock our setup holds on PostgreSQL ("lgctx_ix")."""


def setup_op(dialect: str) -> SqlOp[None]:
    """Create or migrate the index's tables in `dialect` (`sqlite` or `postgres`)."""
    if dialect == "postgres":
        yield Statement("SELECT pg_advisory_xact_lock(?)", (LOCK_ID,))
    yield Statement(VERSIONS)
    rows = yield Statement("SELECT max(v) FROM lgctx_index_migrations")
    done = -1 if not rows or rows[0][0] is None else int(rows[0][0])
    for version, statements in enumerate(MIGRATIONS[dialect]):
        if version <= done:
            continue
        for sql in statements:
            yield Statement(sql)
        yield Statement("INSERT INTO lgctx_index_migrations (v) VALUES (?)", (version,))
