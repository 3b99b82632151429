"""`langgraph-ctx view --db postgresql://...`: a real agent's thread, read and only read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from langgraph_ctx.cli import main
from tests.reliability.test_handed_files import run_agent
from tests.unit.test_view import unpack


@pytest.mark.postgres
def test_view_of_a_postgres_thread(
    postgres_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import conninfo_to_dict

    thread = f"view-{tmp_path.name}"
    with PostgresSaver.from_conn_string(postgres_uri) as saver:
        saver.setup()
        run_agent(saver, thread, "Oslo")
    parts = conninfo_to_dict(postgres_uri)
    uri = (
        f"postgresql://{parts.get('user', 'postgres')}@{parts.get('host', '127.0.0.1')}:"
        f"{parts.get('port', 5432)}/{parts['dbname']}"
    )

    def rows(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        )

    page = tmp_path / "thread.html"
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        before = rows(conn)
        assert main(["view", "--db", uri, "--thread", thread, "--html", str(page)]) == 0
        assert rows(conn) == before
    assert "2 model calls" in capsys.readouterr().out
    data = unpack(page.read_text(encoding="utf-8"))
    assert len(data["calls"]) == 2
    assert all(sum(call[3]) == call[0] > 0 for call in data["calls"])
