"""`langgraph-ctx view --db postgresql://...`: a real agent's thread, read and only read."""

from __future__ import annotations

from pathlib import Path

import pytest

from langgraph_ctx_tools.cli import main
from tests.reliability.test_handed_files import checkpoint_rows, record_postgres_thread, typed_uri
from tests.unit.test_view import unpack


@pytest.mark.postgres
def test_view_of_a_postgres_thread(
    postgres_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    thread = f"view-{tmp_path.name}"
    record_postgres_thread(postgres_uri, thread)
    page = tmp_path / "thread.html"
    argv = ["view", "--db", typed_uri(postgres_uri), "--thread", thread, "--html", str(page)]
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        before = checkpoint_rows(conn)
        assert main(argv) == 0
        assert checkpoint_rows(conn) == before
    assert "2 model calls" in capsys.readouterr().out
    data = unpack(page.read_text(encoding="utf-8"))
    assert len(data["calls"]) == 2
    assert all(sum(call[3]) == call[0] > 0 for call in data["calls"])
